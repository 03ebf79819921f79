package replica

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"strom/internal/metatest"
	"strom/tablet/log"
)

// openLogReplica opens a log table's replica on node, on a real log tablet.
func openLogReplica(t *testing.T, node int32) *Replica {
	t.Helper()
	lc := log.DefaultConfig()
	lc.Dir, lc.NoSync, lc.Logger = filepath.Join(t.TempDir(), "log"), true, metatest.Logger(t)
	lt, err := log.Open(lc)
	if err != nil {
		t.Fatal(err)
	}
	r := newReplica(TableBucket{TableID: 1}, node, lt, nil, lc.Logger, new(broadcast))
	t.Cleanup(func() { _ = r.close() })
	return r
}

// appendAtEpochs appends to r's log, for each {epoch, n}, n one-record
// batches as leader of that epoch.
func appendAtEpochs(t *testing.T, r *Replica, spec ...[2]int) {
	t.Helper()
	for _, s := range spec {
		epoch := int32(s[0])
		if err := r.log.AssignEpoch(epoch, r.log.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		for range s[1] {
			if _, err := r.log.AppendAsLeader(batch(1), epoch, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func logBytes(t *testing.T, r *Replica) []byte {
	t.Helper()
	info, err := r.log.Read(r.log.LogStartOffset(), 1<<20, r.log.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	return info.Batches
}

// TestTruncationFindsTheDivergencePoint: a follower whose last epoch (3)
// the new leader never saw asks again about its own epoch before it
// (KIP-279) and cuts where epoch 1 ends in both logs, not where the
// leader's epoch 2 ends (that would keep offsets 10..14 of epoch 3, which
// the leader holds at epoch 2), nor at its high watermark. Then it fetches
// the leader's log and ends equal to it.
func TestTruncationFindsTheDivergencePoint(t *testing.T) {
	leader, follower := openLogReplica(t, 1), openLogReplica(t, 2)
	appendAtEpochs(t, leader, [2]int{1, 10}, [2]int{2, 5}, [2]int{4, 5}) // e1 [0,10) e2 [10,15) e4 [15,20)
	// The follower holds the leader's epoch 1, then 8 batches of its own
	// epoch 3: e1 [0,10) e3 [10,18).
	first, err := leader.log.Read(0, 1<<20, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.log.AppendAsFollower(first.Batches); err != nil {
		t.Fatal(err)
	}
	appendAtEpochs(t, follower, [2]int{3, 8})
	if err := follower.setLeaderAndISR(1, 4, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	var asked []int32
	ask := func(_ context.Context, epoch int32) (int32, int64, error) {
		asked = append(asked, epoch)
		e, end := leader.log.EndOffsetForEpoch(epoch)
		return e, end, nil
	}
	if err := follower.truncateToLeader(context.Background(), 1, 4, ask); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asked, []int32{3, 1}) {
		t.Errorf("asked the leader about epochs %v, want [3 1]", asked)
	}
	if end := follower.log.LogEndOffset(); end != 10 {
		t.Fatalf("follower truncated to %d, want 10 (the end of epoch 1 in both logs)", end)
	}
	st, ok := follower.following(1)
	if !ok || !st.truncated || st.fetch.FetchOffset != 10 {
		t.Fatalf("following: %+v %v, want truncated, fetching from 10", st, ok)
	}

	// The leader serves the fetch from 10, below its log end; the follower
	// appends it and learns the high watermark.
	if err := leader.setLeaderAndISR(1, 5, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	res := leader.fetchAsLeader(2, 0, BucketFetch{TB: leader.tb, LeaderEpoch: 5, FetchOffset: 10}, 1<<20, time.Now(), nil)
	if res.Err != nil || len(res.Batches) == 0 {
		t.Fatalf("fetch: %+v", res)
	}
	if err := follower.setLeaderAndISR(1, 5, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := follower.appendFetched(1, 5, res); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(logBytes(t, follower), logBytes(t, leader)) {
		t.Fatal("the follower's log differs from the leader's after the fetch")
	}
	// The follower's next fetch, at the log end, moves the leader's high
	// watermark there, and the follower learns it from the answer.
	res = leader.fetchAsLeader(2, 0, BucketFetch{TB: leader.tb, LeaderEpoch: 5, FetchOffset: 20}, 1<<20, time.Now(), nil)
	if res.Err != nil || res.HighWatermark != 20 {
		t.Fatalf("second fetch: %+v, want the high watermark at 20", res)
	}
	if err := follower.appendFetched(1, 5, res); err != nil {
		t.Fatal(err)
	}
	if hw := follower.log.HighWatermark(); hw != 20 {
		t.Errorf("follower's high watermark %d, want 20", hw)
	}
	// A fetch at a stale epoch is fenced; one past the log end is out of
	// range.
	if res := leader.fetchAsLeader(2, 0, BucketFetch{TB: leader.tb, LeaderEpoch: 4, FetchOffset: 20}, 1<<20, time.Now(), nil); !errors.Is(res.Err, log.ErrFencedLeaderEpoch) {
		t.Errorf("fetch at epoch 4: %v, want ErrFencedLeaderEpoch", res.Err)
	}
	if res := leader.fetchAsLeader(2, 0, BucketFetch{TB: leader.tb, LeaderEpoch: 5, FetchOffset: 21}, 1<<20, time.Now(), nil); !errors.Is(res.Err, log.ErrOffsetOutOfRange) {
		t.Errorf("fetch at 21: %v, want ErrOffsetOutOfRange", res.Err)
	}
}
