package testcluster

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"strom/raftmeta/catalog"
	"strom/record"
	"strom/server"
	"strom/tablet/replica"
)

// TestPartitionedLeader cuts a bucket's leader off from the two other
// nodes (3 nodes, RF 3, min ISR 2, log.replica.max-lag-time 2 s), once
// when it is also the coordinator and once when the coordinator is on the
// majority side:
//
//   - the isolated leader acknowledges no acks=-1 write made after the
//     cut, however long it goes on taking them: its followers cannot
//     fetch, so its high watermark stays, and it cannot shrink the ISR,
//     since an ISR change is written by the coordinator through the
//     metadata quorum, which it cannot reach (as the coordinator, it has
//     lost its quorum);
//   - the majority elects a new leader, which takes acks=-1 writes;
//   - healed, the old leader truncates its unacknowledged tail, follows the
//     new one and rejoins the ISR, and every acknowledged row is read back
//     exactly once.
func TestPartitionedLeader(t *testing.T) {
	for _, tc := range []struct {
		name        string
		coordinator bool
	}{
		{"the leader is the coordinator", true},
		{"the coordinator is on the majority side", false},
	} {
		t.Run(tc.name, func(t *testing.T) { testPartitionedLeader(t, tc.coordinator) })
	}
}

func testPartitionedLeader(t *testing.T, onCoordinator bool) {
	const maxLag = 2 * time.Second
	ctx := ctxFor(t, 180*time.Second)
	c := New(t, Options{Nodes: 3, Verbose: os.Getenv("VERBOSE") != "", Configure: func(_ int, cfg *server.Config) {
		cfg.ReplicaMaxLagTime = maxLag
		cfg.ReplicaFetchWaitMaxTime = 100 * time.Millisecond
		cfg.MinInSyncReplicas = 2
	}})
	coord, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := c.Client().InitWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tbl catalog.Table
	tbOf := func(b int32) replica.TableBucket {
		return replica.TableBucket{TableID: tbl.Registration.TableID, Bucket: b}
	}
	// commit writes row id to bucket b as the idempotent writer's next
	// batch there, with acks=-1, on whichever node not cut off leads it,
	// again until it is acknowledged (a batch tried twice is written once).
	seq := map[replica.TableBucket]int32{}
	acked := map[int64]bool{} // of the bucket partitioned
	commit := func(b int32, id int64) {
		tb := tbOf(b)
		batch := batchOf(t, tbl, id, id+1, writer, seq[tb])
		try := func() (err error) {
			err = fmt.Errorf("no node not cut off leads the bucket")
			for _, n := range c.Nodes() {
				if r := replicaOn(n, tb); r != nil && r.IsLeader() && !c.isolated(n) {
					wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					_, err = r.Append(wctx, batch, -1)
					cancel()
					if err == nil {
						return nil
					}
				}
			}
			return err
		}
		for last := try(); last != nil; last = try() {
			select {
			case <-ctx.Done():
				t.Fatalf("row %d of bucket %s not acknowledged by the deadline: %v", id, tb, last)
			case <-time.After(20 * time.Millisecond):
			}
		}
		seq[tb]++
	}
	bucketState := func(n *Node, b int32) catalog.LeaderAndISR {
		got, err := catalog.New(n.Server().Metadata()).Table(tbl.Database, tbl.Name)
		if err != nil {
			t.Fatal(err)
		}
		return got.LeaderISR[b]
	}
	// A table of three buckets, so that each node leads one
	// (TestBalancedLeaders); the bucket led by the coordinator's node, or
	// by another node. A node the gossip wrongly took for dead (the tests
	// share a busy machine) may have moved leaderships: then another table.
	bucket := int32(-1)
	for attempt := 1; bucket < 0; attempt++ {
		if tbl, err = createTable(ctx, coord, "fluss", fmt.Sprintf("partitioned%d", attempt), 3, 3); err != nil {
			t.Fatal(err)
		}
		for b := range int32(3) {
			for id := range int64(20) {
				commit(b, id)
			}
		}
		if coord, err = c.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		waitUntil(ctx, t, "every bucket has three in-sync replicas", func() bool {
			for b := range int32(3) {
				if len(bucketState(coord, b).ISR) != 3 {
					return false
				}
			}
			return true
		})
		for b := range int32(3) {
			if (bucketState(coord, b).Leader == coord.ID) == onCoordinator {
				bucket = b
				break
			}
		}
		if bucket < 0 {
			t.Logf("%s: no bucket led by the right node (coordinator %d); another table", tbl.Name, coord.ID)
		}
	}
	for id := range int64(20) {
		acked[id] = true
	}
	tb, old := tbOf(bucket), bucketState(coord, bucket).Leader
	var majority []int
	for _, n := range c.Nodes() {
		if n.ID != old {
			majority = append(majority, int(n.ID))
		}
	}
	c.Partition([]int{int(old)}, majority)
	t.Cleanup(c.Heal)
	cut := time.Now()
	// The isolated leader goes on taking writes (each times out) until the
	// majority has a new leader and twice max-lag-time has passed, so that
	// its ISR check has run (and failed to reach the coordinator).
	other := c.Node(majority[0])
	isolated := replicaOn(c.Node(int(old)), tb)
	unacked := 0
	for id := int64(1000); ; id++ {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := isolated.Append(wctx, batchOf(t, tbl, id, id+1, record.NoWriterID, record.NoBatchSequence), -1)
		cancel()
		if err == nil {
			t.Errorf("row %d, written %s after the cut, was acknowledged by the isolated leader", id, time.Since(cut).Round(time.Millisecond))
			acked[id] = true
		} else {
			unacked++
		}
		if nl := bucketState(other, bucket).Leader; nl >= 0 && nl != old && time.Since(cut) > 2*maxLag {
			break
		}
	}
	t.Logf("node %d took %d acks=-1 writes while isolated, none acknowledged; node %d leads now",
		old, unacked, bucketState(other, bucket).Leader)
	for id := int64(20); id < 60; id++ {
		commit(bucket, id)
		acked[id] = true
	}

	c.Heal()
	waitUntil(ctx, t, fmt.Sprintf("node %d rejoins the ISR", old), func() bool {
		s := bucketState(other, bucket)
		return s.Leader != old && len(s.ISR) == 3
	})
	waitInSync(ctx, t, c, tb, bucketState(other, bucket).Leader)
	ct, err := c.Client().Table(ctx, tbl.Database, tbl.Name)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, id := range readIDs(ctx, t, ct, bucket) {
		seen[id]++
		if !acked[id] {
			t.Errorf("row %d, never acknowledged, survived", id)
		}
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Errorf("acknowledged row %d read %d times, want once", id, seen[id])
		}
	}
}
