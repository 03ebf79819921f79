package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// TestProduceThroughSIGKILL produces with acks=-1 while the server is
// SIGKILLed and restarted several times, then reads everything back: every
// acknowledged row is there exactly once, and each bucket's offsets are
// dense from 0.
func TestProduceThroughSIGKILL(t *testing.T) {
	bin := buildStrom(t)
	dir := t.TempDir()
	addr, raft := freeAddr(t), freeAddr(t)
	args := []string{"--data-dir", dir, "--listen", addr, "--raft-listen", raft, "--log-format", "json",
		"--config", writeConfig(t, "log.segment.file-size: 64kb\n")}
	n := startNode(t, bin, dir, addr, args...)
	strom(t, bin, addr, "db", "create", "e2e")
	strom(t, bin, addr, "table", "create", "e2e.events", "--buckets", "3",
		"--schema", "id BIGINT NOT NULL, payload STRING", "--option", "table.log.arrow.compression.type=LZ4_FRAME")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Table(ctx, "e2e", "events")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewAppendWriter(ctx, client.Acks(-1), client.BatchSize(8<<10), client.BatchTimeout(5*time.Millisecond),
		client.DeliveryTimeout(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}

	// Producer: rows with ids 0, 1, 2, ...; remember which were acknowledged.
	var (
		mu    sync.Mutex
		acked = map[int64]bool{}
		sent  int64
		stop  = make(chan struct{})
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		var pending []*client.Future
		var ids []int64
		failures := map[string]int{}
		defer func() { t.Logf("failed appends by error: %v", failures) }()
		for id := int64(0); ; id++ {
			select {
			case <-stop:
				_ = w.Flush(ctx)
				for i, f := range pending {
					if _, _, err := f.Wait(ctx); err == nil {
						mu.Lock()
						acked[ids[i]] = true
						mu.Unlock()
					} else {
						failures[err.Error()]++
					}
				}
				mu.Lock()
				sent = id
				mu.Unlock()
				return
			default:
			}
			pending = append(pending, w.Append(ctx, record.Row{id, fmt.Sprintf("payload-%d-%s", id, "xxxxxxxxxxxxxxxxxxxxxxxx")}))
			ids = append(ids, id)
			// Harvest finished futures so memory stays bounded.
			if len(pending) > 2000 {
				keep := pending[:0]
				keepIDs := ids[:0]
				for i, f := range pending {
					select {
					case <-f.Done():
						if f.Err() == nil {
							mu.Lock()
							acked[ids[i]] = true
							mu.Unlock()
						} else {
							failures[f.Err().Error()]++
						}
					default:
						keep = append(keep, f)
						keepIDs = append(keepIDs, ids[i])
					}
				}
				pending, ids = keep, keepIDs
			}
			if id%500 == 0 {
				time.Sleep(time.Millisecond) // let the writer breathe; keeps row counts modest
			}
		}
	}()

	// Kill and restart the server three times while the producer runs.
	crashRestart(t, n, 3, 700*time.Millisecond, func() *node { return startNode(t, bin, dir, addr, args...) })
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	if err := w.Close(ctx); err != nil {
		t.Logf("writer close: %v", err)
	}
	mu.Lock()
	t.Logf("sent %d rows, %d acknowledged", sent, len(acked))
	if len(acked) == 0 {
		t.Fatal("no row was acknowledged")
	}
	mu.Unlock()

	// Read everything back.
	seen := map[int64]int{}
	nextOffset := map[int32]int64{}
	readAll(ctx, t, tbl, func(r client.ScanRecord) {
		if r.Offset != nextOffset[r.Bucket] {
			t.Fatalf("bucket %d: offset %d after %d: offsets are not dense", r.Bucket, r.Offset, nextOffset[r.Bucket]-1)
		}
		nextOffset[r.Bucket]++
		seen[r.Row[0].(int64)]++
	})
	for id, k := range seen {
		if k != 1 {
			t.Errorf("row %d read %d times", id, k)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	lost := 0
	for id := range acked {
		if seen[id] != 1 {
			lost++
			if lost < 10 {
				t.Errorf("acknowledged row %d read %d times", id, seen[id])
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d acknowledged rows lost", lost)
	}
	t.Logf("read back %d rows; all %d acknowledged rows exactly once", len(seen), len(acked))
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := t.TempDir() + "/strom.yaml"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// crashRestart SIGKILLs the node rounds times at random moments (waiting
// 300ms plus up to jitter between kills) and restarts it each time; it
// returns the node that runs at the end.
func crashRestart(t *testing.T, n *node, rounds int, jitter time.Duration, restart func() *node) *node {
	t.Helper()
	for i := 0; i < rounds; i++ {
		time.Sleep(300*time.Millisecond + time.Duration(rand.Int64N(int64(jitter))))
		if err := n.kill(syscall.SIGKILL); err == nil {
			t.Fatal("SIGKILL: want a non-zero exit")
		}
		n = restart()
	}
	return n
}

// readAll reads every bucket of tbl from its earliest offset to its current
// end and hands each record to fn, in offset order per bucket.
func readAll(ctx context.Context, t *testing.T, tbl *client.Table, fn func(client.ScanRecord)) {
	t.Helper()
	sc, err := tbl.NewLogScanner(client.MaxWait(100 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	end, err := tbl.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for b := int32(0); b < tbl.Buckets(); b++ {
		if err := sc.Subscribe(ctx, b, client.Earliest()); err != nil {
			t.Fatal(err)
		}
	}
	for {
		done := true
		for b, o := range sc.Position() {
			done = done && o >= end[b]
		}
		if done {
			return
		}
		fs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Errors(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			fn(r)
		}
		fs.Release()
	}
}
