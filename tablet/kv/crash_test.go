package kv

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"strom/record"
)

const crashEnv = "STROM_KV_CRASH_DIR"

// crashTable is the table the crash test writes: default merge engine with
// partial updates and deletes.
func crashTable(t testing.TB) record.TableDescriptor { return testTable(t, testSchema(), nil) }

// TestCrashHelperProcess is the child of TestCrashRecovery: it writes
// forever into the tablet in $STROM_KV_CRASH_DIR until it is killed.
func TestCrashHelperProcess(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("the child process of TestCrashRecovery")
	}
	disableWAL, _ := strconv.ParseBool(os.Getenv(crashEnv + "_NOWAL"))
	f := newFixtureIn(t, dir, slog.New(slog.DiscardHandler), crashTable(t), func(c *Config) { c.DisableWAL = disableWAL })
	seed, _ := strconv.ParseUint(os.Getenv(crashEnv+"_SEED"), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()
	for i := 0; ; i++ {
		ops := make([]op, 1+rng.IntN(20))
		for j := range ops {
			id := int32(rng.IntN(200))
			if rng.IntN(5) == 0 {
				ops[j] = del(id, nil, nil, nil, nil)
			} else {
				ops[j] = up(id, fmt.Sprintf("name-%d-%d", i, j), int64(rng.IntN(1000)), nil, rng.IntN(2) == 0)
			}
		}
		var target []int
		if rng.IntN(4) == 0 {
			target = []int{0, 2}
		}
		if _, err := f.kv.PutKv(ctx, f.batch(ops...), target); err != nil {
			t.Fatalf("PutKv: %v", err)
		}
		// Commit all, part or none of the uncommitted tail (the high
		// watermark may fall inside a batch), and say so before the flush.
		if hw, end := f.log.HighWatermark(), f.log.LogEndOffset(); rng.IntN(3) > 0 {
			if rng.IntN(2) == 0 {
				end = hw + rng.Int64N(end-hw+1)
			}
			hw = f.log.SetHighWatermark(end)
			fmt.Printf("commit %d\n", hw)
			if err := f.kv.FlushTo(hw); err != nil {
				t.Fatalf("FlushTo: %v", err)
			}
		}
		if i%7 == 0 {
			hw := f.log.HighWatermark()
			if err := f.log.CheckpointHighWatermark(); err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
			fmt.Printf("checkpoint %d\n", hw)
		}
		if i == 10 {
			fmt.Println("writing") // the parent may kill from now on
		}
	}
}

// TestCrashRecovery re-executes the test binary as a writer, SIGKILLs it at
// a random moment, reopens the log and the KV tablet, and checks the
// invariant (the fold of the changelog up to the recovered high watermark
// equals the KV), several times over the same directory, with Pebble's own
// WAL on and off.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	for _, noWAL := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableWAL=%v", noWAL), func(t *testing.T) {
			dir := t.TempDir()
			var committed, checkpointed int64 // over all rounds: the log persists
			for round := range 4 {
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), crashEnv+"="+dir, crashEnv+"_NOWAL="+strconv.FormatBool(noWAL),
					crashEnv+"_SEED="+strconv.Itoa(round))
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				// The child's reports: every high watermark it set (before
				// flushing the KV to it) and every one it checkpointed.
				reports := make(chan [2]int64, 1)
				started := make(chan bool, 1)
				go func() {
					var committed, checkpointed int64
					sc := bufio.NewScanner(out)
					for sc.Scan() {
						line := sc.Text()
						if line == "writing" {
							started <- true
						} else if v, ok := strings.CutPrefix(line, "commit "); ok {
							n, _ := strconv.ParseInt(v, 10, 64)
							committed = max(committed, n)
						} else if v, ok := strings.CutPrefix(line, "checkpoint "); ok {
							n, _ := strconv.ParseInt(v, 10, 64)
							checkpointed = max(checkpointed, n)
						}
					}
					close(started)
					reports <- [2]int64{committed, checkpointed}
				}()
				if !<-started {
					cmd.Wait()
					t.Fatalf("round %d: the child exited before writing", round)
				}
				// A random moment mid-stream; nothing is waited for.
				time.Sleep(time.Duration(10+rand.IntN(150)) * time.Millisecond)
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				cmd.Wait()
				r := <-reports
				committed, checkpointed = max(committed, r[0]), max(checkpointed, r[1])

				f := newFixtureIn(t, dir, testLogger(t), crashTable(t), func(c *Config) { c.DisableWAL = noWAL })
				st, hw := f.kv.Stats(), f.log.HighWatermark()
				t.Logf("round %d: log end %d, hw %d, kv %+v; the child committed up to %d, checkpointed %d", round, f.log.LogEndOffset(), hw, st, committed, checkpointed)
				// Pebble holds only committed rows, so recovery cannot find
				// (nor raise the high watermark to) a flushed offset beyond
				// what the child committed; and the checkpoint survived.
				if st.FlushedOffset > committed || hw > committed {
					t.Fatalf("round %d: flushed offset %d, high watermark %d; the child committed only up to %d", round, st.FlushedOffset, hw, committed)
				}
				if hw < checkpointed {
					t.Fatalf("round %d: high watermark %d below the child's checkpoint %d", round, hw, checkpointed)
				}
				f.checkInvariant()
				f.commit() // the uncommitted tail, replayed into the buffer, commits
				f.checkInvariant()
				f.close()
			}
		})
	}
}
