package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/client"
	"strom/raftmeta/catalog"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/tablet/replica"
)

// bucket0 is bucket 0 of table t.
func bucket0(t catalog.Table) replica.TableBucket {
	return replica.TableBucket{TableID: t.Registration.TableID, Bucket: 0}
}

// replicaOn is node n's replica of tb, nil while it has none (or is down).
func replicaOn(n *Node, tb replica.TableBucket) *replica.Replica {
	srv := n.Server()
	if srv == nil {
		return nil
	}
	r, err := srv.Replicas().Replica(tb)
	if err != nil {
		return nil
	}
	return r
}

// logOf is every stored batch of a replica, back to back, and its high
// watermark.
func logOf(t *testing.T, r *replica.Replica) ([]byte, int64) {
	t.Helper()
	l := r.Log()
	hw, start, end := l.HighWatermark(), l.LogStartOffset(), l.LogEndOffset()
	if start == end {
		return nil, hw
	}
	info, err := l.Read(start, 1<<30, end)
	if err != nil {
		t.Fatal(err)
	}
	return info.Batches, hw
}

// leaderISR is bucket 0's leader_isr as node n's metadata holds it.
func leaderISR(t *testing.T, n *Node, tbl catalog.Table) catalog.LeaderAndISR {
	t.Helper()
	got, err := catalog.New(n.Server().Metadata()).Table(tbl.Database, tbl.Name)
	if err != nil {
		t.Fatal(err)
	}
	return got.LeaderISR[0]
}

// waitUntil polls cond until it holds, failing the test when ctx ends.
func waitUntil(ctx context.Context, t testing.TB, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitInSync waits until every running replica of tb holds the same log
// as the leader's, with the same high watermark, the leader's log end.
func waitInSync(ctx context.Context, t *testing.T, c *Cluster, tb replica.TableBucket, leader int32) []byte {
	t.Helper()
	var want []byte
	waitUntil(ctx, t, fmt.Sprintf("every replica of %s equals node %d's", tb, leader), func() bool {
		l := replicaOn(c.Node(int(leader)), tb)
		if l == nil {
			return false
		}
		lb, lhw := logOf(t, l)
		if lhw != l.Log().LogEndOffset() {
			return false
		}
		for _, n := range c.Nodes() {
			r := replicaOn(n, tb)
			if n.Server() == nil {
				continue
			}
			if r == nil {
				return false
			}
			if b, hw := logOf(t, r); hw != lhw || !bytes.Equal(b, lb) {
				return false
			}
		}
		want = lb
		return true
	})
	return want
}

// batchOf builds a log batch of the table (columns id, v) with rows ids
// from..to-1, written by writer (record.NoWriterID: none) as sequence seq.
func batchOf(t *testing.T, tbl catalog.Table, from, to int64, writer int64, seq int32) []byte {
	t.Helper()
	b, err := record.NewArrowBuilder(tbl.Schema, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	for id := from; id < to; id++ {
		if err := b.Append(record.Row{id, fmt.Sprintf("v%d", id)}, record.AppendOnly); err != nil {
			t.Fatal(err)
		}
	}
	buf, _, err := b.Build(nil, record.BatchHeader{SchemaID: int16(tbl.SchemaID), AppendOnly: true, WriterID: writer, BatchSequence: seq},
		record.DefaultArrowCompression)
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

// newReplicated starts three nodes, creates a one-bucket table with
// replication factor 3 and waits until its three replicas are in the ISR.
func newReplicated(t *testing.T, ctx context.Context, name string) (*Cluster, catalog.Table) {
	t.Helper()
	c := New(t, Options{Nodes: 3, Verbose: os.Getenv("VERBOSE") != ""})
	l, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := createTable(ctx, l, "fluss", name, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Assignment.Buckets[0]); n != 3 {
		t.Fatalf("replicas %v, want three", tbl.Assignment.Buckets[0])
	}
	return c, waitFullISR(ctx, t, l, name)
}

// waitFullISR waits until bucket 0 of table fluss.name has three replicas
// in its ISR, as l's metadata shows it, and returns the table. Every
// replica starts in the ISR, but under load a node's session may expire at
// once (it leaves the ISR, and rejoins once caught up).
func waitFullISR(ctx context.Context, t testing.TB, l *Node, name string) catalog.Table {
	t.Helper()
	var tbl catalog.Table
	waitUntil(ctx, t, "three replicas in the ISR", func() bool {
		if err := l.Server().Metadata().Sync(ctx); err != nil {
			t.Fatal(err)
		}
		var err error
		if tbl, err = catalog.New(l.Server().Metadata()).Table("fluss", name); err != nil {
			t.Fatal(err)
		}
		return len(tbl.LeaderISR[0].ISR) == 3
	})
	return tbl
}

// leading waits until node leader leads bucket 0 of tbl and returns its
// replica.
func leading(ctx context.Context, t *testing.T, c *Cluster, tbl catalog.Table, leader int32) *replica.Replica {
	t.Helper()
	var r *replica.Replica
	waitUntil(ctx, t, fmt.Sprintf("node %d leads the bucket", leader), func() bool {
		r = replicaOn(c.Node(int(leader)), bucket0(tbl))
		return r != nil && r.IsLeader()
	})
	return r
}

// newLeader waits until node n's metadata names a leader of bucket 0 of
// tbl other than old, and returns it.
func newLeader(ctx context.Context, t *testing.T, n *Node, tbl catalog.Table, old int32) int32 {
	t.Helper()
	var nl int32
	waitUntil(ctx, t, "a new leader", func() bool {
		nl = leaderISR(t, n, tbl).Leader
		return nl >= 0 && nl != old
	})
	return nl
}

// another is a node other than id.
func another(c *Cluster, id int32) *Node {
	for _, n := range c.Nodes() {
		if n.ID != id {
			return n
		}
	}
	return nil
}

// appendAcks appends rows from..to-1, ten a batch, with acks on node
// leader, once it leads bucket 0 of tbl, failing the test on any error:
// for a test that wants that node to take them (one cut off, which the
// others no longer take for the leader). appendToLeader follows the
// leader instead.
func appendAcks(ctx context.Context, t *testing.T, c *Cluster, tbl catalog.Table, leader int32, from, to int64, acks int) {
	t.Helper()
	r := leading(ctx, t, c, tbl, leader)
	for id := from; id < to; id += 10 {
		if _, err := r.Append(ctx, batchOf(t, tbl, id, min(id+10, to), record.NoWriterID, record.NoBatchSequence), acks); err != nil {
			t.Fatalf("append rows %d..: %v", id, err)
		}
	}
}

// appendToLeader appends rows from..to-1, perBatch a batch, with acks, on
// bucket 0 of tbl's current leader, and returns the node that took the
// last batch. The leader is found anew for every try among the running
// nodes not cut off, and a try refused because the node does not lead the
// bucket (yet, or any longer: replica.ErrNotLeader, ErrUnknownBucket,
// ErrClosed) or has too few in-sync replicas (ErrNotEnoughReplicas; a
// try waits up to appendTryTimeout for its acks) is made again, until ctx
// ends. The batches are an idempotent writer's, so that a batch a leader
// appended before it failed, tried again, is written once.
//
// Leadership moves under a test that did not ask for it when a busy
// machine delays a node's gossip or session heartbeats: before, the
// helpers appended to the leader the table was created with and failed.
func appendToLeader(ctx context.Context, t *testing.T, c *Cluster, tbl catalog.Table, from, to, perBatch int64, acks int) *Node {
	t.Helper()
	writer := initWriter(ctx, t, c)
	tb := bucket0(tbl)
	var n *Node
	var err error
	seq := int32(0)
	for id := from; id < to; id += perBatch {
		batch := batchOf(t, tbl, id, min(id+perBatch, to), writer, seq)
		for try := 1; ; try++ {
			var r *replica.Replica
			if n, r = leaderOf(c, tb); r != nil {
				tctx, cancel := context.WithTimeout(ctx, appendTryTimeout)
				_, err = r.Append(tctx, batch, acks)
				cancel()
				if err == nil {
					break
				}
				if !retriableAppend(err) {
					t.Fatalf("append rows %d.. on node %d: %v", id, n.ID, err)
				}
				t.Logf("append rows %d.. on node %d (try %d): %v; again", id, n.ID, try, err)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("append rows %d..: no leader took them (last error: %v): %v", id, err, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
		seq++
	}
	return n
}

// initWriter allocates an idempotent writer id through the running nodes
// not cut off (a client keeps asking a seed it reaches, and a node cut off
// cannot reach the coordinator), again until ctx ends: the metadata may
// be electing a leader.
func initWriter(ctx context.Context, t *testing.T, c *Cluster) int64 {
	t.Helper()
	var apis []string
	for _, n := range c.Nodes() {
		if n.Server() != nil && !c.isolated(n) {
			apis = append(apis, n.API)
		}
	}
	cl, err := client.New(strings.Join(apis, ","))
	if err != nil {
		t.Fatal(err)
	}
	for {
		writer, err := cl.InitWriter(ctx)
		if err == nil {
			return writer
		}
		t.Logf("init a writer through %v: %v; again", apis, err)
		select {
		case <-ctx.Done():
			t.Fatalf("init a writer: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// appendTryTimeout is how long one try of appendToLeader waits for its
// acks.
const appendTryTimeout = 10 * time.Second

// leaderOf is a running node not cut off that leads tb, and its replica,
// or nil, nil.
func leaderOf(c *Cluster, tb replica.TableBucket) (*Node, *replica.Replica) {
	for _, n := range c.Nodes() {
		if r := replicaOn(n, tb); r != nil && r.IsLeader() && !c.isolated(n) {
			return n, r
		}
	}
	return nil, nil
}

// retriableAppend reports whether an append failed for a reason another
// try, on the leader found anew, may not meet.
func retriableAppend(err error) bool {
	for _, e := range []error{replica.ErrNotLeader, replica.ErrNotEnoughReplicas, replica.ErrUnknownBucket, replica.ErrClosed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// TestReplicatedAcksAll: with replication factor 3, acks=-1 writes commit
// (before followers fetched, the high watermark of a bucket with three
// in-sync replicas never moved and every such write timed out), every
// replica's log ends up byte for byte the leader's with the same high
// watermark, and a consumer reads every row.
func TestReplicatedAcksAll(t *testing.T) {
	ctx := ctxFor(t, 90*time.Second)
	c, tbl := newReplicated(t, ctx, "replicated")
	leader := tbl.LeaderISR[0].Leader

	// Through the client, as an application writes.
	cl := c.Client()
	ct, err := cl.Table(ctx, "fluss", "replicated")
	if err != nil {
		t.Fatal(err)
	}
	w, err := ct.NewAppendWriter(ctx, client.Acks(-1), client.BatchTimeout(time.Millisecond), client.DeliveryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var fs []*client.Future
	const rows = 300
	for id := int64(0); id < rows; id++ {
		fs = append(fs, w.Append(ctx, record.Row{id, fmt.Sprintf("v%d", id)}))
	}
	for i, f := range fs {
		if _, _, err := f.Wait(ctx); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitInSync(ctx, t, c, bucket0(tbl), leader)

	seen := map[int64]bool{}
	for _, id := range readIDs(ctx, t, ct, 0) {
		seen[id] = true
	}
	if len(seen) != rows {
		t.Errorf("a consumer read %d distinct rows, want %d", len(seen), rows)
	}
}

// readIDs reads a bucket of a table (columns id, v) through a consumer,
// from the start to its latest offset, and returns the ids in order.
func readIDs(ctx context.Context, t *testing.T, ct *client.Table, bucket int32) []int64 {
	t.Helper()
	sc, err := ct.NewLogScanner(client.MaxWait(100 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Subscribe(ctx, bucket, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	end, err := ct.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for sc.Position()[bucket] < end[bucket] {
		f, err := sc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Errors(); err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Records() {
			ids = append(ids, r.Row[0].(int64))
		}
		f.Release()
	}
	return ids
}

// TestCutOffFollowerHoldsTheHighWatermark: a follower in the ISR that
// cannot reach the leader holds the high watermark at its log end (until
// it leaves the ISR); once it can again, it catches up and the high
// watermark reaches the log end.
func TestCutOffFollowerHoldsTheHighWatermark(t *testing.T) {
	ctx := ctxFor(t, 90*time.Second)
	c, tbl := newReplicated(t, ctx, "cutoff")
	tb := bucket0(tbl)
	leader := appendToLeader(ctx, t, c, tbl, 0, 20, 10, -1).ID
	// Both followers in the leader's ISR (a node a busy machine took for
	// dead for a moment rejoins it once caught up).
	lr := replicaOn(c.Node(int(leader)), tb)
	waitUntil(ctx, t, "three replicas in the leader's ISR", func() bool { return len(lr.ISR()) == 3 })
	var cut, other int32
	for _, id := range lr.ISR() {
		if id != leader {
			if cut == 0 {
				cut = id
			} else {
				other = id
			}
		}
	}
	c.Partition([]int{int(leader)}, []int{int(cut)})
	defer c.Heal()
	appendAcks(ctx, t, c, tbl, leader, 20, 40, 1)
	l := replicaOn(c.Node(int(leader)), tb)
	end := l.Log().LogEndOffset()
	waitUntil(ctx, t, "the reachable follower has every batch", func() bool {
		r := replicaOn(c.Node(int(other)), tb)
		return r != nil && r.Log().LogEndOffset() == end
	})
	// The leader has the reachable follower's fetch at its log end, so
	// only the cut-off follower holds the high watermark.
	waitUntil(ctx, t, "the leader answered the reachable follower's fetch at the log end", func() bool {
		r := replicaOn(c.Node(int(other)), tb)
		return r.Log().HighWatermark() == l.Log().HighWatermark()
	})
	if hw := l.Log().HighWatermark(); hw >= end {
		t.Fatalf("high watermark %d with follower %d cut off, want below the log end %d", hw, cut, end)
	}
	c.Heal()
	waitInSync(ctx, t, c, tb, leader)
}

// TestKilledLeaderLosesNoAcknowledgedWrite: after the leader is killed, the
// new leader (from the ISR) holds every batch acknowledged with acks=-1;
// the old leader, restarted, follows it and ends with its log.
func TestKilledLeaderLosesNoAcknowledgedWrite(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	c, tbl := newReplicated(t, ctx, "killed")
	tb := bucket0(tbl)
	old := appendToLeader(ctx, t, c, tbl, 0, 50, 10, -1).ID
	acked, _ := logOf(t, replicaOn(c.Node(int(old)), tb))
	c.Kill(int(old))
	nl := newLeader(ctx, t, another(c, old), tbl, old)
	r := leading(ctx, t, c, tbl, nl)
	if got, _ := logOf(t, r); !bytes.HasPrefix(got, acked) {
		t.Fatalf("new leader %d's log (%d bytes) does not begin with the %d acknowledged bytes", nl, len(got), len(acked))
	}
	nl = appendToLeader(ctx, t, c, tbl, 50, 60, 10, 1).ID
	c.Restart(int(old))
	waitInSync(ctx, t, c, tb, nl)
}

// TestOldLeaderTruncatesItsDivergentTail: a leader partitioned from the
// others takes acks=1 writes that nobody else has; the others elect a new
// leader, which takes other writes at the same offsets (acks=-1: with
// acks=1 a leadership change on a loaded machine may lawfully lose them,
// and the count below would not hold). When the partition heals, the old
// leader truncates to the point of divergence (its own epoch's end in the
// new leader's log) and ends with the new leader's log.
func TestOldLeaderTruncatesItsDivergentTail(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	c, tbl := newReplicated(t, ctx, "diverged")
	tb := bucket0(tbl)
	old := appendToLeader(ctx, t, c, tbl, 0, 30, 10, -1).ID
	var others []int
	for _, n := range c.Nodes() {
		if n.ID != old {
			others = append(others, int(n.ID))
		}
	}
	c.Partition([]int{int(old)}, others)
	defer c.Heal()
	appendAcks(ctx, t, c, tbl, old, 1000, 1050, 1) // unacknowledged by the others
	oldEnd := replicaOn(c.Node(int(old)), tb).Log().LogEndOffset()
	newLeader(ctx, t, another(c, old), tbl, old)
	nl := appendToLeader(ctx, t, c, tbl, 30, 100, 10, -1).ID
	if end := replicaOn(c.Node(int(nl)), tb).Log().LogEndOffset(); end <= oldEnd {
		t.Fatalf("new leader's log ends at %d, want past the old leader's %d so that the logs differ at the same offsets", end, oldEnd)
	}
	c.Heal()
	got := waitInSync(ctx, t, c, tb, nl)
	// None of the old leader's rows 1000..1049 survive anywhere.
	cl := c.Client()
	ct, err := cl.Table(ctx, "fluss", "diverged")
	if err != nil {
		t.Fatal(err)
	}
	ids := readIDs(ctx, t, ct, 0)
	for _, id := range ids {
		if id >= 1000 {
			t.Errorf("row %d of the old leader's divergent tail survived", id)
		}
	}
	if len(ids) != 100 {
		t.Errorf("read %d rows, want 100 (log %d bytes)", len(ids), len(got))
	}
}

// TestIdempotentRetryAfterLeaderChange: a writer's batch acknowledged by
// the old leader and sent again to the new one (the writer did not see the
// answer) is written once: the followers rebuilt the writer state from the
// batches they fetched.
func TestIdempotentRetryAfterLeaderChange(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	c, tbl := newReplicated(t, ctx, "idempotent")
	old := tbl.LeaderISR[0].Leader
	cl := c.Client()
	writer, err := cl.InitWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	batches := [][]byte{batchOf(t, tbl, 0, 5, writer, 0), batchOf(t, tbl, 5, 10, writer, 1)}
	r := leading(ctx, t, c, tbl, old)
	var first []int64
	for _, b := range batches {
		info, err := r.Append(ctx, b, -1)
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, info.FirstOffset)
	}
	c.Kill(int(old))
	nr := leading(ctx, t, c, tbl, newLeader(ctx, t, another(c, old), tbl, old))
	end := nr.Log().LogEndOffset()
	for i, b := range batches {
		info, err := nr.Append(ctx, b, 1)
		if err != nil {
			t.Fatalf("retry of batch %d on the new leader: %v", i, err)
		}
		if info.FirstOffset != first[i] {
			t.Errorf("retry of batch %d got offset %d, want its original %d", i, info.FirstOffset, first[i])
		}
	}
	if got := nr.Log().LogEndOffset(); got != end {
		t.Errorf("log end %d after the retries, want %d: a retried batch was written again", got, end)
	}
}

// TestAppendToLeaderFollowsTheLeader: appendToLeader, called right after
// the bucket's leader was killed (its replicas not told yet), appends
// every row once, on the leader elected next. Before, the helpers appended
// on the leader the table was created with, and a test whose leadership a
// busy machine had moved failed (with appendAcks in its place this test
// fails: the killed node never leads again).
func TestAppendToLeaderFollowsTheLeader(t *testing.T) {
	ctx := ctxFor(t, 90*time.Second)
	c, tbl := newReplicated(t, ctx, "follow")
	old := appendToLeader(ctx, t, c, tbl, 0, 10, 10, -1).ID
	c.Kill(int(old))
	nl := appendToLeader(ctx, t, c, tbl, 10, 50, 5, -1)
	if nl.ID == old {
		t.Fatalf("node %d, killed, took the rows", old)
	}
	waitInSync(ctx, t, c, bucket0(tbl), nl.ID)
	ct, err := c.Client().Table(ctx, "fluss", "follow")
	if err != nil {
		t.Fatal(err)
	}
	ids := readIDs(ctx, t, ct, 0)
	if len(ids) != 50 {
		t.Fatalf("read %d rows, want 50: %v", len(ids), ids)
	}
	for i, id := range ids {
		if id != int64(i) {
			t.Fatalf("row %d has id %d: %v", i, id, ids)
		}
	}
}
