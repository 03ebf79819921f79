package testcluster

import (
	"bytes"
	"os"
	"testing"
	"time"

	"strom/record"
	"strom/server"
	"strom/tablet/replica"
)

// TestLeaderRepairsACorruptSegment: a bit flips in a sealed segment of the
// leader of a bucket of replication factor 3. The leader's background
// check finds the damaged batch, and the leader rewrites it from an
// in-sync follower's copy (ReadReplicaRange): with no failover, reads of
// the range succeed again, the whole log is the original bytes (nothing
// acknowledged lost), and so is the segment file. Before, the range stayed
// refused (CORRUPT_RECORD) until another replica led.
func TestLeaderRepairsACorruptSegment(t *testing.T) {
	ctx := ctxFor(t, 90*time.Second)
	c := New(t, Options{Nodes: 3, Verbose: os.Getenv("VERBOSE") != "", Configure: func(_ int, cfg *server.Config) {
		cfg.SegmentBytes = 1 << 10 // a few batches a segment
		cfg.SegmentVerifyRate = 1 << 20
	}})
	l, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := createTable(ctx, l, "fluss", "corrupt", 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	tb := bucket0(tbl)
	leader := appendToLeader(ctx, t, c, tbl, 0, 300, 10, -1).ID
	want := waitInSync(ctx, t, c, tb, leader)
	lr := replicaOn(c.Node(int(leader)), tb)
	epoch := leaderISR(t, c.Node(int(leader)), tbl).LeaderEpoch
	var seg string
	for _, s := range lr.Log().Segments() {
		if s.Sealed && s.Size > 0 {
			seg = s.Path
			break
		}
	}
	if seg == "" {
		t.Fatalf("no sealed segment in %+v", lr.Log().Segments())
	}
	orig, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	first, rest, err := record.NextBatch(orig)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := record.NextBatch(rest)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(len(first) + len(second) - 3) // in the second batch's records
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{orig[at] ^ 0x08}, at); err != nil {
		t.Fatal(err)
	}
	f.Close()

	waitUntil(ctx, t, "the leader's check finds the damaged batch and repairs it", func() bool {
		return lr.Log().CorruptBatches() == 1 && lr.Log().RepairedRanges() == 1
	})
	got, _ := logOf(t, lr) // fails the test on a refused range
	if !bytes.Equal(got, want) {
		t.Error("the leader's repaired log differs from what was acknowledged")
	}
	now, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(now, orig) {
		t.Error("the repaired segment file differs from its original bytes")
	}
	if li := leaderISR(t, c.Node(int(leader)), tbl); li.Leader != leader || li.LeaderEpoch != epoch {
		t.Errorf("leader_isr is %+v, want node %d still leading at epoch %d (a repair, not a failover)", li, leader, epoch)
	}
}

// TestReplicaRepairsASegmentDamagedWhileDown: a byte flips in a sealed
// segment of one replica of a bucket of replication factor 3 while its
// node is down (the batch's magic: a bad frame, so the rest of the segment
// cannot be told apart). The node restarts: its log opens with the range
// marked damaged (log.RecoveryInfo.Damaged) rather than failing, the
// replica fetches the range again from the leader, and every replica ends
// with the same log, byte for byte, holding every acknowledged write.
// Before, Open failed with a corrupt segment error and the bucket did not
// open on that node.
func TestReplicaRepairsASegmentDamagedWhileDown(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	c := New(t, Options{Nodes: 3, Verbose: os.Getenv("VERBOSE") != "", Configure: func(_ int, cfg *server.Config) {
		cfg.SegmentBytes = 1 << 10 // a few batches a segment
	}})
	l, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := createTable(ctx, l, "fluss", "damaged_while_down", 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	tb := bucket0(tbl)
	leader := appendToLeader(ctx, t, c, tbl, 0, 300, 10, -1).ID
	want := waitInSync(ctx, t, c, tb, leader)
	victim := int(leader)%3 + 1 // a follower
	var seg string
	for _, s := range replicaOn(c.Node(victim), tb).Log().Segments() {
		if s.Sealed && s.Size > 0 {
			seg = s.Path
			break
		}
	}
	if seg == "" {
		t.Fatal("no sealed segment on the follower")
	}
	c.Stop(victim)
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := record.NextBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(len(first)) + 12 // the second batch's magic
	if int(at) >= len(data) {
		t.Fatalf("segment %s holds one batch", seg)
	}
	data[at] ^= 0x40
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c.Restart(victim)
	var r *replica.Replica
	waitUntil(ctx, t, "the restarted node opens its replica", func() bool {
		r = replicaOn(c.Node(victim), tb)
		return r != nil
	})
	if d := r.Log().RecoveryInfo().Damaged; len(d) != 1 {
		t.Fatalf("the restarted replica's recovery found damaged ranges %v, want one", d)
	}
	waitUntil(ctx, t, "every replica holds the acknowledged log again, byte for byte", func() bool {
		for _, n := range c.Nodes() {
			r := replicaOn(n, tb)
			if r == nil {
				return false
			}
			lg := r.Log()
			if len(lg.Damaged()) > 0 || lg.LogEndOffset() != lg.HighWatermark() {
				return false
			}
			info, err := lg.Read(lg.LogStartOffset(), 1<<30, lg.LogEndOffset())
			if err != nil || !bytes.Equal(info.Batches, want) {
				return false
			}
		}
		return true
	})
}
