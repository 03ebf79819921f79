package replica

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A fetch a follower sent before it restarted, answered late (a long poll
// the leader still held, a request delayed in the network), names a log
// end the restarted node may no longer have: after a power cut it comes
// back with only what it fsynced. Once the metadata shows the node's new
// run (its incarnation), such a fetch is not recorded: it neither takes
// the node back into the ISR nor moves the high watermark, and the state
// its earlier run left counts for nothing (Kafka's KIP-903, issue 12).
func TestFetchOfAnEarlierRunDoesNotCount(t *testing.T) {
	r := openLogReplica(t, 1)
	var current atomic.Int64 // node 2's incarnation as the metadata shows it
	current.Store(100)
	r.incarnations = func(node int32) int64 {
		if node == 2 {
			return current.Load()
		}
		return 0
	}
	if err := r.setLeaderAndISR(1, 1, []int32{1}); err != nil {
		t.Fatal(err)
	}
	r.setBucketEpoch(3)
	for range 10 {
		if _, err := r.Append(context.Background(), batch(1), 1); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(incarnation, offset int64) {
		t.Helper()
		if res := r.fetchAsLeader(2, incarnation, BucketFetch{TB: r.tb, LeaderEpoch: 1, FetchOffset: offset}, 0, time.Now(), nil); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	joins := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		c, ok := r.isrProposalLocked(time.Now(), time.Minute)
		return ok && len(c.ISR) == 2
	}
	// Run 100 caught up: it may join.
	fetch(100, 10)
	if !joins() {
		t.Fatal("a follower at the log end, of the run the metadata shows, may not join the ISR")
	}
	// Node 2 lost power and is starting again as run 200, which fsynced
	// only 4 records: its earlier run's state no longer counts.
	current.Store(200)
	if joins() {
		t.Fatal("the state of node 2's earlier run takes it into the ISR")
	}
	fetch(100, 10) // the earlier run's fetch, late
	if joins() {
		t.Fatal("a late fetch of node 2's earlier run takes it into the ISR")
	}
	fetch(200, 4)
	fetch(100, 10) // and another one, after the new run's first
	if st := r.State().Followers[2]; st.LogEnd != 4 || st.Incarnation != 200 {
		t.Fatalf("node 2's state %+v; want log end 4 of run 200", st)
	}
	if joins() {
		t.Fatal("node 2, 6 records behind, joins the ISR")
	}
	// In the ISR (the coordinator took run 200 in at some point), the
	// state of an earlier run does not move the high watermark either.
	if err := r.setLeaderAndISR(1, 1, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	r.setBucketEpoch(4)
	r.mu.Lock()
	r.mu.followers[2] = FollowerState{LogEnd: 15, CaughtUpAt: time.Now(), Incarnation: 100}
	r.mu.Unlock()
	for range 5 { // acks=1: committed once node 2 holds them
		if _, err := r.Append(context.Background(), batch(1), 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.log.HighWatermark(); got != 10 {
		t.Fatalf("the high watermark moved from 10 to %d on the state of node 2's earlier run", got)
	}
	fetch(100, 15)
	if got := r.log.HighWatermark(); got != 10 {
		t.Fatalf("the high watermark moved from 10 to %d on a late fetch of node 2's earlier run", got)
	}
	fetch(200, 15)
	if got := r.log.HighWatermark(); got != 15 {
		t.Fatalf("high watermark %d after run 200 fetched at the log end; want 15", got)
	}
}

// A leader whose metadata lags may still show a follower's earlier run, or
// no run at all, and count that run's late fetches: its ISR change names
// the run each joiner's fetches came from, so that the coordinator, which
// knows the node's current registration, can refuse it (KIP-903's broker
// epochs in AlterPartition).
func TestISRChangeNamesTheJoinersRun(t *testing.T) {
	r := openLogReplica(t, 1)
	r.incarnations = func(int32) int64 { return 0 } // the metadata shows no run
	if err := r.setLeaderAndISR(1, 1, []int32{1}); err != nil {
		t.Fatal(err)
	}
	r.setBucketEpoch(3)
	for range 4 {
		if _, err := r.Append(context.Background(), batch(1), 1); err != nil {
			t.Fatal(err)
		}
	}
	for node, incarnation := range map[int32]int64{2: 100, 3: 0} { // node 3 sends none (an older build)
		if res := r.fetchAsLeader(node, incarnation, BucketFetch{TB: r.tb, LeaderEpoch: 1, FetchOffset: 4}, 0, time.Now(), nil); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	r.mu.Lock()
	c, ok := r.isrProposalLocked(time.Now(), time.Minute)
	r.mu.Unlock()
	if !ok || len(c.ISR) != 3 {
		t.Fatalf("proposal %+v, %v; want nodes 2 and 3 to join", c, ok)
	}
	if len(c.Incarnations) != 1 || c.Incarnations[2] != 100 {
		t.Fatalf("the change names the runs %v; want node 2's run 100 (and none for node 3)", c.Incarnations)
	}
}
