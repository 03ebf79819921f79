package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"strom/client"
	"strom/record"
)

// TestKVEqualsChangelogThroughSIGKILL upserts, updates and deletes rows of
// a primary-key table while the server is SIGKILLed and restarted, then
// checks DESIGN.md's invariant 4 on the real binary: folding each bucket's
// changelog from offset 0 gives exactly the rows a scan returns, every
// lookup agrees, and every acknowledged write is reflected.
func TestKVEqualsChangelogThroughSIGKILL(t *testing.T) {
	bin := buildStrom(t)
	dir := t.TempDir()
	addr, raft := freeAddr(t), freeAddr(t)
	args := []string{"--data-dir", dir, "--listen", addr, "--raft-listen", raft, "--log-format", "json"}
	n := startNode(t, bin, dir, addr, args...)
	strom(t, bin, addr, "db", "create", "e2e")
	strom(t, bin, addr, "table", "create", "e2e.accounts", "--buckets", "2",
		"--schema", "id BIGINT, balance BIGINT, note STRING", "--primary-key", "id")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Table(ctx, "e2e", "accounts")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewUpsertWriter(ctx, client.BatchSize(4<<10), client.BatchTimeout(5*time.Millisecond), client.DeliveryTimeout(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}

	// The writer: random upserts and deletes over 500 keys. Each key's last
	// acknowledged write is remembered: the acknowledged one written last
	// (writes to one key go to one bucket, in order), whatever order their
	// acknowledgements came in (a bucket has several batches in flight).
	const keys = 500
	type write struct {
		i       int // order of writing
		del     bool
		balance int64
	}
	last := map[int64]write{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(3, 4))
		type pending struct {
			f  *client.Future
			id int64
			w  write
		}
		var inflight []pending
		settle := func(all bool) {
			keep := inflight[:0]
			for _, p := range inflight {
				if !all && !isDone(p.f) {
					keep = append(keep, p)
					continue
				}
				if _, _, err := p.f.Wait(ctx); err == nil {
					if prev, ok := last[p.id]; !ok || p.w.i > prev.i {
						last[p.id] = p.w
					}
				} else {
					t.Errorf("write to key %d failed: %v", p.id, err)
				}
			}
			inflight = keep
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				_ = w.Flush(ctx)
				settle(true)
				return
			default:
			}
			id := rng.Int64N(keys)
			wr := write{i: i, del: rng.IntN(5) == 0, balance: int64(i)}
			var f *client.Future
			if wr.del {
				f = w.Delete(ctx, record.Row{id, nil, nil})
			} else {
				f = w.Upsert(ctx, record.Row{id, wr.balance, fmt.Sprintf("write %d", i)})
			}
			inflight = append(inflight, pending{f, id, wr})
			if len(inflight) > 1000 {
				settle(false)
			}
			if i%200 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	crashRestart(t, n, 3, 500*time.Millisecond, func() *node { return startNode(t, bin, dir, addr, args...) })
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-done
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Fold the changelog of every bucket from offset 0.
	folded := map[int64]record.Row{}
	changes := 0
	readAll(ctx, t, tbl, func(r client.ScanRecord) {
		changes++
		id := r.Row[0].(int64)
		switch r.ChangeType {
		case record.Insert, record.UpdateAfter:
			folded[id] = r.Row
		case record.Delete:
			delete(folded, id)
		case record.UpdateBefore:
			if _, ok := folded[id]; !ok {
				t.Fatalf("-U of key %d that the changelog never inserted", id)
			}
		default:
			t.Fatalf("change type %v in a changelog", r.ChangeType)
		}
	})

	// A scan gives exactly the folded rows.
	scanned := map[int64]record.Row{}
	for b := int32(0); b < tbl.Buckets(); b++ {
		rows, err := tbl.Scan(ctx, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			scanned[r[0].(int64)] = r
		}
	}
	if len(scanned) != len(folded) {
		t.Fatalf("scan has %d rows, the folded changelog %d", len(scanned), len(folded))
	}
	for id, r := range folded {
		if !r.Equal(scanned[id]) {
			t.Fatalf("key %d: changelog says %v, scan %v", id, r, scanned[id])
		}
	}
	// Every lookup agrees, and reflects the last acknowledged write.
	l, err := tbl.NewLookuper()
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(0); id < keys; id++ {
		got, err := l.Lookup(ctx, record.Row{id})
		if err != nil {
			t.Fatal(err)
		}
		if want := folded[id]; !got[0].Equal(want) && !(got[0] == nil && want == nil) {
			t.Fatalf("lookup %d = %v, changelog %v", id, got[0], want)
		}
		if wr, ok := last[id]; ok {
			if wr.del && got[0] != nil || !wr.del && (got[0] == nil || got[0][1] != wr.balance) {
				t.Fatalf("key %d: last acknowledged write %+v, lookup %v", id, wr, got[0])
			}
		}
	}
	t.Logf("%d changes folded into %d rows; %d keys with acknowledged writes all agree", changes, len(folded), len(last))
}

func isDone(f *client.Future) bool {
	select {
	case <-f.Done():
		return true
	default:
		return false
	}
}
