package testcluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"strom/client"
	"strom/raftmeta/catalog"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/tablet/kv"
	"strom/tablet/replica"
)

// newReplicatedKV starts three nodes and creates a one-bucket primary-key
// table (id BIGINT key, v STRING) with replication factor 3.
func newReplicatedKV(t *testing.T, ctx context.Context, name string) (*Cluster, catalog.Table) {
	t.Helper()
	c := New(t, Options{Nodes: 3, Verbose: os.Getenv("VERBOSE") != ""})
	return c, createKVTable(ctx, t, c, name)
}

// createKVTable creates fluss.name, a one-bucket primary-key table (id,
// v) with replication factor 3, and returns it as the coordinator's
// catalog holds it.
func createKVTable(ctx context.Context, t testing.TB, c *Cluster, name string) catalog.Table {
	t.Helper()
	l, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	if _, err := cl.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "fluss", IgnoreIfExists: true}); err != nil {
		t.Fatal(err)
	}
	// IgnoreIfExists: the client retries a call whose answer it lost.
	if _, err := cl.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "fluss", Table: name, IgnoreIfExists: true, Descriptor_: &stromv1.TableDescriptor{
		Schema: &stromv1.Schema{Columns: []*stromv1.Column{
			{Name: "id", Type: "BIGINT NOT NULL"}, {Name: "v", Type: "STRING"},
		}, PrimaryKey: []string{"id"}},
		BucketCount: 1,
		Properties:  map[string]string{"table.replication.factor": "3"},
	}}); err != nil {
		t.Fatal(err)
	}
	return waitFullISR(ctx, t, l, name)
}

// kvCodec encodes and decodes the rows and keys of a table.
type kvCodec struct {
	schema record.Schema
	rows   *record.CompactedRowCodec
	keys   *record.KeyCodec
}

func newKVCodec(t testing.TB, tbl catalog.Table) kvCodec {
	t.Helper()
	rows, err := record.NewCompactedRowCodec(tbl.Schema.Columns)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := record.NewKeyCodec(tbl.Schema.Columns, tbl.Schema.PrimaryKey)
	if err != nil {
		t.Fatal(err)
	}
	return kvCodec{schema: tbl.Schema, rows: rows, keys: keys}
}

// changelog returns the changes of r's log in [from, to) ("+U[0 b0]").
func (k kvCodec) changelog(t *testing.T, r *replica.Replica, from, to int64) []string {
	t.Helper()
	var changes []string
	for off := from; off < to; {
		info, err := r.Log().Read(off, 1<<20, to)
		if err != nil {
			t.Fatal(err)
		}
		for rest := info.Batches; len(rest) > 0; {
			b, next, err := record.NextBatch(rest)
			if err != nil {
				t.Fatal(err)
			}
			rest, off = next, b.NextOffset()
			if b.RecordCount() == 0 {
				continue
			}
			ab, err := record.DecodeArrowBatch(b, k.schema, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range ab.Len() {
				if b.BaseOffset()+int64(i) >= from {
					changes = append(changes, fmt.Sprintf("%s%v", ab.ChangeType(i), []any(ab.Row(i))))
				}
			}
			ab.Release()
		}
	}
	return changes
}

// upsert is a KV batch of writer at seq upserting (id, v).
func (k kvCodec) upsert(t testing.TB, tbl catalog.Table, writer int64, seq int32, id int64, v string) record.KvBatch {
	t.Helper()
	b := record.NewKvBatchBuilder(record.KvBatchHeader{SchemaID: int16(tbl.SchemaID), WriterID: writer, BatchSequence: seq})
	key, err := k.keys.Append(nil, record.Row{id})
	if err != nil {
		t.Fatal(err)
	}
	row, err := k.rows.Append(nil, record.Row{id, v})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(key, row); err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

// lookup returns id's v in kt ("" when absent).
func (k kvCodec) lookup(t *testing.T, kt *kv.Tablet, id int64) string {
	t.Helper()
	key, err := k.keys.Append(nil, record.Row{id})
	if err != nil {
		t.Fatal(err)
	}
	vals, err := kt.Lookup([][]byte{key})
	if err != nil {
		t.Fatal(err)
	}
	if vals[0] == nil {
		return ""
	}
	_, rb, err := record.ParseKvValue(vals[0])
	if err != nil {
		t.Fatal(err)
	}
	row, err := k.rows.Decode(rb)
	if err != nil {
		t.Fatal(err)
	}
	return row[1].(string)
}

// checkFolds waits until every replica of tb has flushed its KV to its
// high watermark, and checks that the KV holds exactly the fold of its
// changelog below it (DESIGN.md §8.4).
func checkFolds(ctx context.Context, t *testing.T, c *Cluster, tb replica.TableBucket) {
	t.Helper()
	for _, n := range c.Nodes() {
		var r *replica.Replica
		waitUntil(ctx, t, fmt.Sprintf("node %d's KV flushed to its high watermark", n.ID), func() bool {
			r = replicaOn(n, tb)
			return r != nil && r.LocalKV().FlushedOffset() == r.Log().HighWatermark()
		})
		if err := r.LocalKV().VerifyFold(); err != nil {
			t.Errorf("node %d: %v", n.ID, err)
		}
	}
}

// TestPrimaryKeyFailover: RF 3 primary-key table, acks=-1 upserts, the
// bucket leader killed. The new leader's lookups return every acknowledged
// upsert at once (its KV is a hot standby: nothing is rebuilt); a retry of
// the writer's last batch is written once; the next upsert of a key yields
// -U/+U against the acknowledged row; and once the killed node is back, on
// every replica the folded changelog equals the KV.
func TestPrimaryKeyFailover(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	c, tbl := newReplicatedKV(t, ctx, "kv_failover")
	tb := bucket0(tbl)
	k := newKVCodec(t, tbl)
	old := tbl.LeaderISR[0].Leader

	ct, err := c.Client().Table(ctx, "fluss", "kv_failover")
	if err != nil {
		t.Fatal(err)
	}
	w, err := ct.NewUpsertWriter(ctx, client.Acks(-1), client.BatchTimeout(time.Millisecond), client.DeliveryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	for round, prefix := range []string{"a", "b"} {
		var fs []*client.Future
		for id := int64(0); id < 100; id++ {
			if round == 1 && id%2 == 1 {
				continue
			}
			want[id] = fmt.Sprintf("%s%d", prefix, id)
			fs = append(fs, w.Upsert(ctx, record.Row{id, want[id]}))
		}
		for i, f := range fs {
			if _, _, err := f.Wait(ctx); err != nil {
				t.Fatalf("upsert %d of round %d: %v", i, round, err)
			}
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// An idempotent writer's batch, acknowledged by the old leader.
	writer, err := c.Client().InitWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	retry := k.upsert(t, tbl, writer, 0, 1, "w1")
	var r *replica.Replica
	waitUntil(ctx, t, "the leader hosts the bucket", func() bool {
		r = replicaOn(c.Node(int(old)), tb)
		return r != nil && r.IsLeader()
	})
	first, err := r.PutKv(ctx, retry, nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	want[1] = "w1"

	c.Kill(int(old))
	var other *Node
	for _, n := range c.Nodes() {
		if n.ID != old {
			other = n
		}
	}
	var nl int32
	waitUntil(ctx, t, "a new leader", func() bool {
		nl = leaderISR(t, other, tbl).Leader
		return nl >= 0 && nl != old
	})
	var nr *replica.Replica
	waitUntil(ctx, t, "the new leader leads", func() bool {
		nr = replicaOn(c.Node(int(nl)), tb)
		return nr != nil && nr.IsLeader()
	})
	kt, err := nr.KV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id, v := range want {
		if got := k.lookup(t, kt, id); got != v {
			t.Fatalf("new leader %d: lookup of %d = %q, want the acknowledged %q", nl, id, got, v)
		}
	}

	// The writer's retry (it did not see the answer) is written once.
	end := nr.Log().LogEndOffset()
	dup, err := nr.PutKv(ctx, retry, nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate || dup.FirstOffset != first.FirstOffset || nr.Log().LogEndOffset() != end {
		t.Fatalf("retry on the new leader: %+v (first write %+v), log end %d → %d", dup, first, end, nr.Log().LogEndOffset())
	}
	// The next upsert of key 0 merges against its acknowledged row.
	info, err := nr.PutKv(ctx, k.upsert(t, tbl, record.NoWriterID, record.NoBatchSequence, 0, "c0"), nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.changelog(t, nr, info.FirstOffset, info.LastOffset+1); !slices.Equal(got, []string{"-U[0 b0]", "+U[0 c0]"}) {
		t.Fatalf("the new leader's changelog of the next upsert: %v", got)
	}
	if got := k.lookup(t, kt, 0); got != "c0" {
		t.Fatalf("lookup of 0 after the acknowledged upsert: %q", got)
	}

	c.Restart(int(old))
	waitInSync(ctx, t, c, tb, nl)
	checkFolds(ctx, t, c, tb)
}

// putKv upserts (id, v) with acks on the bucket's leader among nodes
// (a leader that loses its place is replaced by the next one).
func (k kvCodec) putKv(ctx context.Context, t *testing.T, c *Cluster, tbl catalog.Table, nodes []int32, acks int, id int64, v string) {
	t.Helper()
	var err error
	waitUntil(ctx, t, fmt.Sprintf("upsert %d on a leader of %v", id, nodes), func() bool {
		for _, n := range nodes {
			if r := replicaOn(c.Node(int(n)), bucket0(tbl)); r != nil && r.IsLeader() {
				_, err = r.PutKv(ctx, k.upsert(t, tbl, record.NoWriterID, record.NoBatchSequence, id, v), nil, acks)
				return err == nil
			}
		}
		return false
	})
}

// TestPrimaryKeyDivergentTail: a leader partitioned from the others takes
// acks=1 upserts nobody else has (in its pre-write buffer only); the
// others elect a new leader, which takes acks=-1 upserts of the same keys.
// When the partition heals the old leader truncates its log and KV to the
// point of divergence: none of its unacknowledged rows reach its Pebble,
// which ends equal to the folded changelog, as on every replica.
func TestPrimaryKeyDivergentTail(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	c, tbl := newReplicatedKV(t, ctx, "kv_diverged")
	tb := bucket0(tbl)
	k := newKVCodec(t, tbl)
	old := tbl.LeaderISR[0].Leader
	for id := int64(0); id < 10; id++ {
		k.putKv(ctx, t, c, tbl, []int32{old}, -1, id, fmt.Sprintf("a%d", id))
	}
	var others []int
	var majority []int32
	var other *Node
	for _, n := range c.Nodes() {
		if n.ID != old {
			others = append(others, int(n.ID))
			majority = append(majority, n.ID)
			other = n
		}
	}
	c.Partition([]int{int(old)}, others)
	defer c.Heal()
	for id := int64(0); id < 5; id++ {
		k.putKv(ctx, t, c, tbl, []int32{old}, 1, id, fmt.Sprintf("lost%d", id)) // unacknowledged by the others
	}
	var nl int32
	waitUntil(ctx, t, "a new leader on the majority side", func() bool {
		nl = leaderISR(t, other, tbl).Leader
		return nl >= 0 && nl != old
	})
	for id := int64(3); id < 10; id++ { // acknowledged: they survive any later election
		k.putKv(ctx, t, c, tbl, majority, -1, id, fmt.Sprintf("b%d", id))
	}
	c.Heal()
	waitInSync(ctx, t, c, tb, nl)
	checkFolds(ctx, t, c, tb)
	kt := replicaOn(c.Node(int(old)), tb).LocalKV()
	for id := int64(0); id < 10; id++ {
		want := fmt.Sprintf("a%d", id)
		if id >= 3 {
			want = fmt.Sprintf("b%d", id)
		}
		if got := k.lookup(t, kt, id); got != want {
			t.Errorf("old leader %d's KV: %d = %q, want %q", old, id, got, want)
		}
	}
}
