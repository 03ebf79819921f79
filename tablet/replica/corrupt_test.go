package replica

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"strom/internal/metatest"
	"strom/record"
	"strom/tablet/log"
)

// TestFollowerRefetchesACorruptRange: a bit flips in a sealed segment of
// a follower; the background check (log.VerifyStep) finds the damaged
// batch and reads refuse it. The follower cuts its log at the batch and
// fetches the rest again from the leader: its log ends byte for byte the
// leader's, every offset reads again, and the repair is counted. Before,
// the range stayed refused on the follower for good.
func TestFollowerRefetchesACorruptRange(t *testing.T) {
	tb := TableBucket{TableID: 1}
	leader, _ := openSegmentedReplica(t, tb, 1)
	follower, dir := openSegmentedReplica(t, tb, 2)
	for range 20 {
		if _, err := leader.Append(context.Background(), batch(3), 1); err != nil {
			t.Fatal(err)
		}
	}
	peer := &fakePeer{leaders: map[TableBucket]*Replica{tb: leader}, fetches: map[TableBucket]int{}}
	m := NewManager(Config{NodeID: 2, Logger: metatest.Logger(t), Fetch: FetchConfig{
		Peer: peer, MaxBytes: 1 << 20, MaxBytesForBucket: 1 << 20, MaxWait: 10 * time.Millisecond, Backoff: 10 * time.Millisecond,
	}}, nil)
	m.mu.replicas[tb] = follower
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: not by the deadline", what)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	f := m.startFetcher(ctx, 1)
	defer f.stop()
	f.set(map[TableBucket]*Replica{tb: follower})
	end := leader.log.LogEndOffset()
	waitFor("the follower has the leader's log", func() bool { return follower.log.LogEndOffset() == end })
	if len(follower.log.Segments()) < 3 {
		t.Fatalf("%d segments, want sealed ones", len(follower.log.Segments()))
	}

	flipSecondBatch(t, dir)
	if _, err := follower.log.VerifyStep(1 << 20); err != nil {
		t.Fatal(err)
	}
	if n := follower.log.CorruptBatches(); n != 1 {
		t.Fatalf("the check found %d damaged batches, want 1", n)
	}

	waitFor("the follower reads every offset again", func() bool {
		for o := int64(0); o < end; {
			info, err := follower.log.Read(o, 1<<20, end)
			if errors.Is(err, log.ErrCorruptRecord) || err == nil && len(info.Batches) == 0 {
				return false
			}
			if err != nil {
				t.Fatal(err)
			}
			for b, rest, _ := record.NextBatch(info.Batches); len(b) > 0; b, rest, _ = record.NextBatch(rest) {
				o = b.NextOffset()
			}
		}
		return true
	})
	lb, err := leader.log.Read(0, 1<<20, end)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := follower.log.Read(0, 1<<20, end)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(lb.Batches, fb.Batches) {
		t.Error("the follower's repaired log differs from the leader's")
	}
	if n := follower.State().CorruptRefetched; n != 1 {
		t.Errorf("State().CorruptRefetched = %d, want 1", n)
	}
}

// TestLeaderRepairsACorruptRangeFromAFollower: a bit flips in a sealed
// segment of a bucket's leader; the background check finds it and reads
// refuse the range. The leader asks its in-sync follower for its copy
// (ReadReplicaRange, Manager.ReadRange there) and rewrites the range in
// place: reads serve the original bytes again. A follower that cannot
// answer (a node that predates the call) leaves the range refused, and it
// is not asked again before repairBackoff. Before, a leader's damaged range
// stayed refused until a failover. Each call to a follower is bounded by
// repairTimeout.
func TestLeaderRepairsACorruptRangeFromAFollower(t *testing.T) {
	tb := TableBucket{TableID: 1}
	leader, dir := openSegmentedReplica(t, tb, 1)
	follower, _ := openSegmentedReplica(t, tb, 2)
	for range 20 {
		if _, err := leader.Append(context.Background(), batch(3), 1); err != nil {
			t.Fatal(err)
		}
	}
	fetch := &fakePeer{leaders: map[TableBucket]*Replica{tb: leader}, fetches: map[TableBucket]int{}}
	m2 := NewManager(Config{NodeID: 2, Logger: metatest.Logger(t), Fetch: FetchConfig{
		Peer: fetch, MaxBytes: 1 << 20, MaxBytesForBucket: 1 << 20, MaxWait: 10 * time.Millisecond, Backoff: 10 * time.Millisecond,
	}}, nil)
	m2.mu.replicas[tb] = follower
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := m2.startFetcher(ctx, 1)
	defer f.stop()
	f.set(map[TableBucket]*Replica{tb: follower})
	end := leader.log.LogEndOffset()
	for follower.log.HighWatermark() != end {
		select {
		case <-ctx.Done():
			t.Fatal("the follower has not caught up by the deadline")
		case <-time.After(5 * time.Millisecond):
		}
	}
	orig, err := leader.log.Read(0, 1<<20, end)
	if err != nil {
		t.Fatal(err)
	}

	second := flipSecondBatch(t, dir)
	if _, err := leader.log.VerifyStep(1 << 20); err != nil {
		t.Fatal(err)
	}
	from := second.BaseOffset()
	if _, err := leader.log.Read(from, 1<<20, end); !errors.Is(err, log.ErrCorruptRecord) {
		t.Fatalf("after the check, Read(%d) = %v, want ErrCorruptRecord", from, err)
	}

	asked := 0
	peer := &fakePeer{} // first as a node without ReadReplicaRange
	m1 := NewManager(Config{NodeID: 1, Logger: metatest.Logger(t), Fetch: FetchConfig{Peer: peer, MaxBytesForBucket: 100}}, nil)
	now := time.Now()
	m1.repairAsLeader(ctx, leader, now)
	if _, err := leader.log.Read(from, 1<<20, end); !errors.Is(err, log.ErrCorruptRecord) {
		t.Fatalf("with no follower answering, Read(%d) = %v, want ErrCorruptRecord", from, err)
	}
	peer.ranges = func(actx context.Context, node int32, req RangeRequest) ([]byte, error) {
		asked++
		if node != 2 {
			t.Errorf("asked node %d, want the follower, 2", node)
		}
		// A follower that does not answer holds the check up no longer
		// than repairTimeout (ctx here has 30 s).
		if dl, ok := actx.Deadline(); !ok || time.Until(dl) > repairTimeout {
			t.Errorf("the call's deadline is %v away, want at most repairTimeout (%v)", time.Until(dl), repairTimeout)
		}
		return m2.ReadRange(req, 1<<20)
	}
	m1.repairAsLeader(ctx, leader, now.Add(repairBackoff/2))
	if asked != 0 {
		t.Fatalf("asked %d times within repairBackoff of a failed repair", asked)
	}
	m1.repairAsLeader(ctx, leader, now.Add(repairBackoff+time.Second))
	if asked == 0 {
		t.Fatal("the follower was not asked after repairBackoff")
	}
	got, err := leader.log.Read(0, 1<<20, end)
	if err != nil {
		t.Fatalf("after the repair: %v", err)
	}
	if !bytes.Equal(got.Batches, orig.Batches) {
		t.Error("the repaired log differs from the original")
	}
	if n := leader.State().CorruptRepaired; n != 1 {
		t.Errorf("State().CorruptRepaired = %d, want 1", n)
	}

	// The follower refuses an asker that is not its leader at its epoch.
	for _, req := range []RangeRequest{
		{TB: tb, Leader: 3, LeaderEpoch: 1, Offset: 0, EndOffset: end, MaxBytes: 100},
		{TB: tb, Leader: 1, LeaderEpoch: 2, Offset: 0, EndOffset: end, MaxBytes: 100},
		{TB: tb, Leader: 1, LeaderEpoch: 0, Offset: 0, EndOffset: end, MaxBytes: 100},
	} {
		if b, err := m2.ReadRange(req, 1<<20); err == nil {
			t.Errorf("ReadRange(%+v) = %d bytes, want an error", req, len(b))
		}
	}
}

// openSegmentedReplica opens a log replica of tb on node (segments of a few
// batches) that follows node 1 at epoch 1 with ISR {1, 2}, and returns it
// with its log directory.
func openSegmentedReplica(t *testing.T, tb TableBucket, node int32) (*Replica, string) {
	t.Helper()
	lc := log.DefaultConfig()
	lc.Dir, lc.NoSync, lc.Logger = filepath.Join(t.TempDir(), "log"), true, metatest.Logger(t)
	lc.SegmentBytes = 400 // a few batches a segment
	lt, err := log.Open(lc)
	if err != nil {
		t.Fatal(err)
	}
	r := newReplica(tb, node, lt, nil, lc.Logger, new(broadcast))
	t.Cleanup(func() { _ = r.close() })
	if err := r.setLeaderAndISR(1, 1, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	return r, lc.Dir
}

// flipSecondBatch flips a bit in the records of the second batch of the
// first segment in the log directory dir, and returns that batch as it was.
func flipSecondBatch(t *testing.T, dir string) record.Batch {
	t.Helper()
	seg := filepath.Join(dir, "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	first, rest, err := record.NextBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := record.NextBatch(rest)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(len(first) + len(second) - 2)
	fh, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteAt([]byte{data[at] ^ 0x10}, at); err != nil {
		t.Fatal(err)
	}
	return second
}
