package testcluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"strom/raftmeta/catalog"
	"strom/record"
	"strom/server"
)

// TestStaleLeaderReadsSurvive replays the faults of robustness seed 2615
// (partition) in process, with the robustness harness's settings (session
// 3 s, max lag 4 s, min ISR 2), while two clients (never cut) write
// acks=-1 rows to whichever replica leads in its own view and a third
// reads every replica's committed tail:
//
//   - a follower is cut off until it leaves the ISR, and healed; the
//     moment it has caught up (its leader asks to take it back in), the
//     leader, also the metadata leader, is cut off from both other nodes;
//   - the cut is healed 7 s later, after the majority moved the bucket, or
//     as soon as the majority has a coordinator in office, before it moved
//     the bucket (the old leader's session then expires after the heal,
//     while its followers, still at its epoch, fetch from it again);
//   - then the bucket's next leader is cut off for 7 s in turn.
//
// Every offset any replica served below its high watermark must hold, in
// the end, the row it was read with, and every acknowledged row must be at
// the offset it was acknowledged at (tablet/replica DESIGN.md, "Acks on a
// deposed leader").
func TestStaleLeaderReadsSurvive(t *testing.T) {
	for _, tc := range []struct {
		name string
		// beforeElection heals the first cut once the majority has a
		// metadata leader in office, before it moved the bucket: the old
		// leader's session then expires after the heal, while its
		// followers, still at its epoch, fetch from it again.
		beforeElection bool
	}{
		{"healed after the election", false},
		{"healed before the election", true},
	} {
		t.Run(tc.name, func(t *testing.T) { testStaleLeaderReadsSurvive(t, tc.beforeElection) })
	}
}

func testStaleLeaderReadsSurvive(t *testing.T, beforeElection bool) {
	ctx := ctxFor(t, 180*time.Second)
	c := New(t, Options{Nodes: 3, Verbose: os.Getenv("VERBOSE") != "", Configure: func(_ int, cfg *server.Config) {
		cfg.ReplicaMaxLagTime = 4 * time.Second
		cfg.MinInSyncReplicas = 2
	}})
	var tbl catalog.Table
	var old int32
	for attempt := 1; ; attempt++ {
		l, err := c.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tbl, err = createTable(ctx, l, "fluss", fmt.Sprintf("stale_leader%d", attempt), 1, 3); err != nil {
			t.Fatal(err)
		}
		if old = tbl.LeaderISR[0].Leader; old == l.ID {
			break
		}
	}
	tb := bucket0(tbl)

	var mu sync.Mutex
	var problems []string
	acked := map[int64]int64{}   // row id → offset acknowledged at
	read := map[int64][2]int64{} // offset → row id read there, node
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	idsOf := func(batches []byte) map[int64]int64 {
		out := map[int64]int64{}
		for rest := batches; len(rest) > 0; {
			b, next, err := record.NextBatch(rest)
			if err != nil {
				fail("decode a batch: %v", err)
				return out
			}
			rest = next
			if b.RecordCount() == 0 {
				continue
			}
			ab, err := record.DecodeArrowBatch(b, tbl.Schema, nil)
			if err != nil {
				fail("decode a batch: %v", err)
				return out
			}
			for i := range ab.Len() {
				out[b.BaseOffset()+int64(i)] = ab.Row(i)[0].(int64)
			}
			ab.Release()
		}
		return out
	}

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Writers: each row to whichever node's replica leads in its own view,
	// acks=-1, as a client that refreshes its metadata would.
	for w := range int64(2) {
		wg.Go(func() {
			for id := w * 1_000_000; wctx.Err() == nil; id++ {
				batch := batchOf(t, tbl, id, id+1, record.NoWriterID, record.NoBatchSequence)
				for _, n := range c.Nodes() {
					r := replicaOn(n, tb)
					if r == nil || !r.IsLeader() {
						continue
					}
					actx, cancel := context.WithTimeout(wctx, time.Second)
					info, err := r.Append(actx, batch, -1)
					cancel()
					if err == nil {
						mu.Lock()
						acked[id] = info.FirstOffset
						mu.Unlock()
					}
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	// Readers: every replica's committed tail, as consumers of any node.
	wg.Go(func() {
		for wctx.Err() == nil {
			for _, n := range c.Nodes() {
				r := replicaOn(n, tb)
				if r == nil {
					continue
				}
				hw := r.Log().HighWatermark()
				from := max(hw-20, r.Log().LogStartOffset())
				res, err := r.Read(from, 1<<20)
				if err != nil {
					continue
				}
				for off, id := range idsOf(res.Batches) {
					if off >= res.HighWatermark {
						fail("node %d served offset %d at or above its high watermark %d", n.ID, off, res.HighWatermark)
					}
					mu.Lock()
					if prev, ok := read[off]; !ok {
						read[off] = [2]int64{id, int64(n.ID)}
					} else if prev[0] != id {
						problems = append(problems, fmt.Sprintf("offset %d read as row %d on node %d and as row %d on node %d",
							off, prev[0], prev[1], id, n.ID))
					}
					mu.Unlock()
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	})

	cutOff := func(id int32, hold time.Duration, early bool) {
		var others []int
		for _, n := range c.Nodes() {
			if n.ID != id {
				others = append(others, int(n.ID))
			}
		}
		c.Partition([]int{int(id)}, others)
		start := time.Now()
		if early {
			waitUntil(ctx, t, fmt.Sprintf("a coordinator other than node %d is in office", id), func() bool {
				l := c.Leader()
				return l != nil && l.ID != id
			})
		} else {
			waitUntil(ctx, t, fmt.Sprintf("the majority elects a leader other than node %d", id), func() bool {
				nl := leaderISR(t, c.Node(others[0]), tbl).Leader
				return nl >= 0 && nl != id && time.Since(start) > hold
			})
		}
		t.Logf("node %d cut off for %s; bucket on node %d: %+v", id, time.Since(start).Round(time.Millisecond), others[0], leaderISR(t, c.Node(others[0]), tbl))
		c.Heal()
	}
	time.Sleep(time.Second)
	// A follower cut off past max-lag-time leaves the ISR; the leader is
	// cut off the moment the follower, healed, has caught up with it, so
	// that its ask to take the follower back in is in flight.
	joiner := old%3 + 1
	c.Partition([]int{int(joiner)}, []int{int(old), int(6 - old - joiner)})
	waitUntil(ctx, t, fmt.Sprintf("node %d leaves the ISR", joiner), func() bool {
		return !slices.Contains(leaderISR(t, c.Node(int(old)), tbl).ISR, joiner)
	})
	c.Heal()
	lr, jr := replicaOn(c.Node(int(old)), tb), replicaOn(c.Node(int(joiner)), tb)
	for jr.Log().LogEndOffset() < lr.Log().HighWatermark() && ctx.Err() == nil {
		time.Sleep(100 * time.Microsecond)
	}
	cutOff(old, 7*time.Second, beforeElection)
	t.Logf("healed; the bucket on node %d (cut off): %+v, on node %d: %+v",
		old, leaderISR(t, c.Node(int(old)), tbl), joiner, leaderISR(t, c.Node(int(joiner)), tbl))
	time.Sleep(3 * time.Second)
	var second int32
	waitUntil(ctx, t, "the bucket has a leader", func() bool {
		second = leaderISR(t, c.Node(int(joiner)), tbl).Leader
		return second >= 0
	})
	cutOff(second, 7*time.Second, false)
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()

	var leader int32
	waitUntil(ctx, t, "the bucket has a leader and a full ISR", func() bool {
		l := leaderISR(t, c.Node(1), tbl)
		leader = l.Leader
		return leader >= 0 && len(l.ISR) == 3
	})
	final := idsOf(waitInSync(ctx, t, c, tb, leader))
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	rewritten := 0
	for off, got := range read {
		if id, ok := final[off]; !ok || id != got[0] {
			if rewritten++; rewritten <= 10 {
				t.Errorf("offset %d was read below the high watermark as row %d on node %d; the log holds %d there now (present: %v)", off, got[0], got[1], id, ok)
			}
		}
	}
	lost := 0
	for id, off := range acked {
		if final[off] != id {
			if lost++; lost <= 10 {
				t.Errorf("row %d acknowledged at offset %d; the log holds row %d there now", id, off, final[off])
			}
		}
	}
	t.Logf("%d rows acknowledged, %d offsets read, %d rewritten, %d acknowledged lost; final log %d offsets, leader %d",
		len(acked), len(read), rewritten, lost, len(final), leader)
}
