package log

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crashDirEnv makes TestCrashHelper run as the child of TestCrashRecovery,
// appending to the log in that directory until it is killed.
const crashDirEnv = "STROM_LOG_CRASH_DIR"

// crashRecords is the record count of every batch the child writes, so
// that batch j holds offsets [3j, 3j+2].
const crashRecords = 3

// crashSpec is the child's batch number j: deterministic, so the parent
// can check every batch it finds.
func crashSpec(j int64) batchSpec {
	return batchSpec{id: j, records: crashRecords, size: 20 + int(j*37%900), writer: 42, seq: int32(j)}
}

func crashConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.Dir = dir
	cfg.SegmentBytes = 8192
	cfg.IndexIntervalBytes = 512
	cfg.NoSync = true // a killed process loses nothing the kernel has
	return cfg
}

// TestCrashHelper is not a test: it is the child process of
// TestCrashRecovery (the TestHelperProcess pattern).
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("child process of TestCrashRecovery")
	}
	tb, err := Open(crashConfig(dir))
	if err != nil {
		fmt.Printf("error open: %v\n", err)
		os.Exit(2)
	}
	j := tb.LogEndOffset() / crashRecords
	for call := 1; ; call++ {
		// One or two batches per call.
		n := int64(1 + call%2)
		var buf []byte
		for k := range n {
			buf = append(buf, crashSpec(j+k).bytes()...)
		}
		if _, err := tb.AppendAsLeader(buf, 1, time.Now()); err != nil {
			fmt.Printf("error append %d: %v\n", j, err)
			os.Exit(3)
		}
		j += n
		if call%20 == 0 {
			hw := tb.SetHighWatermark(tb.LogEndOffset())
			if err := tb.CheckpointHighWatermark(); err != nil {
				fmt.Printf("error checkpoint: %v\n", err)
				os.Exit(4)
			}
			fmt.Printf("checkpoint %d\n", hw)
		}
		// Acknowledged: the batches are in the kernel's hands.
		fmt.Printf("ack %d\n", j-1)
	}
}

// TestCrashRecovery runs a child that appends in a loop, kills it with
// SIGKILL at a random moment, and checks that the reopened log is a valid
// dense prefix of what the child wrote, holding at least every batch it
// acknowledged, and with the high watermark of its last checkpoint; a few
// rounds, each child continuing the same log.
func TestCrashRecovery(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	acked, checkpointed := int64(-1), int64(0)
	for round := range 4 {
		target := 30 + r.IntN(300)
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill() // if the test fails before it does
		sc := bufio.NewScanner(out)
		acks, killed := 0, false
		var childErr []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "ack "):
				j, err := strconv.ParseInt(line[4:], 10, 64)
				if err != nil {
					t.Fatalf("child said %q", line)
				}
				acked = max(acked, j)
				acks++
				if acks >= target && !killed {
					if err := cmd.Process.Kill(); err != nil { // SIGKILL
						t.Fatal(err)
					}
					killed = true
				}
			case strings.HasPrefix(line, "checkpoint "):
				hw, err := strconv.ParseInt(line[len("checkpoint "):], 10, 64)
				if err != nil {
					t.Fatalf("child said %q", line)
				}
				checkpointed = max(checkpointed, hw)
			case strings.HasPrefix(line, "error"):
				childErr = append(childErr, line)
			}
		}
		cmd.Wait()
		if len(childErr) > 0 || !killed {
			t.Fatalf("round %d: child failed (killed: %v): %v", round, killed, childErr)
		}

		cfg := crashConfig(dir)
		var lc *logCapture
		cfg.Logger, lc = testLogger(t)
		tb, err := Open(cfg)
		if err != nil {
			t.Fatalf("round %d: Open after SIGKILL: %v", round, err)
		}
		ri := tb.RecoveryInfo()
		t.Logf("round %d: killed after %d acks; recovered [%d, %d), %d segments, cut %d bytes", round, acks, ri.LogStartOffset, ri.LogEndOffset, ri.Segments, ri.TruncatedBytes)
		if ri.Clean {
			t.Fatalf("round %d: a killed process left a clean-shutdown marker", round)
		}
		if ri.Truncated && !strings.Contains(lc.String(), "bytes_dropped") {
			t.Fatalf("round %d: cut not logged", round)
		}
		// A dense prefix of the child's batches, with everything acknowledged.
		end := tb.LogEndOffset()
		if end%crashRecords != 0 || end/crashRecords <= acked {
			t.Fatalf("round %d: log end %d; the child acknowledged batch %d", round, end, acked)
		}
		m := &model{}
		for j := range end / crashRecords {
			s := crashSpec(j)
			m.batches = append(m.batches, stored{base: j * crashRecords, last: j*crashRecords + crashRecords - 1, id: j, size: s.size})
		}
		for o := int64(0); o < end; {
			info, err := tb.Read(o, 64<<10, math.MaxInt64)
			if err != nil {
				t.Fatalf("round %d: Read(%d): %v", round, o, err)
			}
			for _, b := range decode(t, info.Batches) {
				want := m.batches[o/crashRecords]
				if b.BaseOffset() != want.base || b.LastOffset() != want.last || string(b.Records()) != string(payload(want.id, want.size)) {
					t.Fatalf("round %d: batch at %d is not the child's batch %d", round, b.BaseOffset(), want.id)
				}
				o = b.NextOffset()
			}
		}
		if err := tb.Verify(); err != nil {
			t.Fatalf("round %d: Verify: %v", round, err)
		}
		// The checkpoint survived: the high watermark is the last one the
		// child reported, or one it wrote just before it was killed (each
		// is the log end of its time, so a batch boundary within the log).
		if hw := tb.HighWatermark(); hw < checkpointed || hw%crashRecords != 0 {
			t.Fatalf("round %d: high watermark %d, the child's last checkpoint was %d (log end %d)", round, hw, checkpointed, end)
		}
		// The writer state came back: the last batch is a duplicate, the
		// next sequence is accepted.
		last := end/crashRecords - 1
		info, err := tb.AppendAsLeader(crashSpec(last).bytes(), 1, time.Now())
		if err != nil || !info.Duplicate || info.FirstOffset != last*crashRecords {
			t.Fatalf("round %d: retry of the last batch: %+v, %v", round, info, err)
		}
		acked = end/crashRecords - 1
		if round%2 == 0 {
			err = tb.Close()
		} else {
			tb.crash()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
