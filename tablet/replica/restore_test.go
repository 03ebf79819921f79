package replica

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"strom/internal/metatest"
	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/remote"
)

// blockingStore holds every Get until release is closed; got is closed at
// the first.
type blockingStore struct {
	remote.Store
	once    sync.Once
	got     chan struct{}
	release chan struct{}
}

func (s *blockingStore) Get(ctx context.Context, key string, rng remote.Range) (io.ReadCloser, error) {
	s.once.Do(func() { close(s.got) })
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.Get(ctx, key, rng)
}

// createKVTableMeta registers a one-bucket primary-key table (id INT, name
// STRING) on node 1 alone.
func createKVTableMeta(t *testing.T, meta *raftmeta.Node, name string) int64 {
	t.Helper()
	return createKVTableOn(t, meta, name, []int32{1}, []int32{1})
}

// createKVTableOn registers a one-bucket primary-key table (id INT, name
// STRING) on replicas, led by node 1 with ISR isr.
func createKVTableOn(t *testing.T, meta *raftmeta.Node, name string, replicas, isr []int32) int64 {
	t.Helper()
	cat := catalog.New(meta)
	ctx := context.Background()
	id, claim, err := cat.NextTableID()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := cat.CreateTableOps(catalog.NewTable{
		Database: "db", Name: name,
		Schema: record.Schema{Columns: []record.Column{
			{Name: "id", Type: record.DataType{Root: record.Int}},
			{Name: "name", Type: record.DataType{Root: record.String, Nullable: true}},
		}, PrimaryKey: []string{"id"}},
		Registration: catalog.TableRegistration{TableID: id, BucketCount: 1},
		Assignment:   &catalog.TableAssignment{Buckets: map[int32][]int32{0: replicas}},
		LeaderISR:    map[int32]catalog.LeaderAndISR{0: {Leader: 1, LeaderEpoch: 3, ISR: isr}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Multi(ctx, 0, append([]raftmeta.Op{claim}, ops...)...); err != nil {
		t.Fatal(err)
	}
	return id
}

// A node whose KV directory of a primary-key bucket is lost (over a
// trimmed changelog: kv.ErrAheadOfLog) restores it from the latest
// snapshot in the background: while the download is held, the bucket
// answers ErrRestoring (retriable, an ErrUnknownBucket) and the node's
// other replicas are reconciled and serve (a table created meanwhile
// becomes leader and takes appends); once it ends the bucket leads again
// with every row.
func TestRestoreDoesNotHoldUpOtherReplicas(t *testing.T) {
	ctx := context.Background()
	meta := metatest.NewNode(t)
	dir := t.TempDir()
	createTable(t, meta, "bootstrap", 1, []int32{1}) // the cluster and database
	kvID := createKVTableMeta(t, meta, "kv")
	tb := TableBucket{kvID, 0}
	fstore, err := remote.OpenFile(filepath.Join(dir, "remote"), remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snapshots := func(st remote.Store) func(*Config) {
		return func(c *Config) {
			c.Log.SegmentBytes = 1 << 10
			c.Snapshot = SnapshotConfig{Store: st, Interval: time.Hour, NumRetained: 1, Committer: metaCommitter{meta}}
		}
	}
	data := filepath.Join(dir, "data")
	m, stop := runManager(t, meta, data, snapshots(fstore))
	r := leadingReplica(t, m, tb)
	kr := &kvReplica{Replica: r, t: t}
	kr.rows, _ = record.NewCompactedRowCodec([]record.Column{{Name: "id", Type: record.DataType{Root: record.Int}}, {Name: "name", Type: record.DataType{Root: record.String, Nullable: true}}})
	kr.keys, _ = record.NewKeyCodec([]record.Column{{Name: "id", Type: record.DataType{Root: record.Int}}, {Name: "name", Type: record.DataType{Root: record.String, Nullable: true}}}, []string{"id"})
	for i := range 20 {
		if _, err := r.PutKv(ctx, kr.upsert(int32(i), int32(i), "v"+strconv.Itoa(i)), nil, 1); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the KV flushed to the high watermark", func() bool { return r.kv.FlushedOffset() == r.log.HighWatermark() })
	m.SnapshotOnce(ctx, time.Now())
	snaps, err := m.cat.KvSnapshots(tb.TableID, tb.Bucket)
	if err != nil || len(snaps.Snapshots) != 1 {
		t.Fatalf("snapshots %+v, %v; want one", snaps, err)
	}
	if r.log.LogStartOffset() == 0 {
		t.Fatal("the changelog was not trimmed below the snapshot")
	}
	hw := r.log.HighWatermark()
	stop()
	if err := os.RemoveAll(filepath.Join(m.dir(tb), "kv")); err != nil {
		t.Fatal(err)
	}

	bs := &blockingStore{Store: fstore, got: make(chan struct{}), release: make(chan struct{})}
	m, _ = runManager(t, meta, data, snapshots(bs))
	var released sync.Once
	release := func() { released.Do(func() { close(bs.release) }) }
	t.Cleanup(release) // before the manager stops
	select {
	case <-bs.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no restore started")
	}
	other := TableBucket{createTable(t, meta, "other", 1, []int32{1}), 0}
	lr := leadingReplica(t, m, other)
	if _, err := lr.Append(ctx, batch(2), 1); err != nil {
		t.Fatalf("append to another bucket during the restore: %v", err)
	}
	if _, err := m.Replica(tb); !errors.Is(err, ErrRestoring) || !errors.Is(err, ErrUnknownBucket) {
		t.Fatalf("the bucket during its restore: %v, want ErrRestoring", err)
	}

	release()
	r = leadingReplica(t, m, tb)
	if got := r.log.HighWatermark(); got != hw {
		t.Fatalf("high watermark %d after the restore, want %d", got, hw)
	}
	kt, err := r.KV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		key, _ := kr.keys.AppendRow(nil, record.Row{int32(i), "v" + strconv.Itoa(i)})
		vals, err := kt.Lookup([][]byte{key})
		if err != nil || len(vals) != 1 || vals[0] == nil {
			t.Fatalf("lookup %d after the restore: %v, %v", i, vals, err)
		}
	}
}

// A follower behind its leader's log start restores the latest KV snapshot
// in the background: while its download is held, another bucket that the
// same fetcher follows from the same leader keeps replicating; once the
// download ends the follower catches up with every row. Before, the
// restore ran on the fetcher's goroutine and the other bucket stalled for
// the whole download.
func TestFollowerRestoreDoesNotStallItsFetcher(t *testing.T) {
	ctx := context.Background()
	meta := metatest.NewNode(t)
	dir := t.TempDir()
	logID := createTable(t, meta, "log", 1, []int32{1, 2})
	kvID := createKVTableOn(t, meta, "kv", []int32{1, 2}, []int32{1}) // node 2 joins later
	logTB, kvTB := TableBucket{logID, 0}, TableBucket{kvID, 0}
	fstore, err := remote.OpenFile(filepath.Join(dir, "remote"), remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snapshots := func(node int32, st remote.Store) func(*Config) {
		return func(c *Config) {
			c.NodeID = node
			c.Log.SegmentBytes = 1 << 10
			c.Snapshot = SnapshotConfig{Store: st, Interval: time.Hour, NumRetained: 1, Committer: metaCommitter{meta}}
		}
	}
	m1 := startManager(t, meta, filepath.Join(dir, "1"), snapshots(1, fstore))
	kl, ll := leadingReplica(t, m1, kvTB), leadingReplica(t, m1, logTB)
	kr := &kvReplica{Replica: kl, t: t}
	cols := []record.Column{{Name: "id", Type: record.DataType{Root: record.Int}}, {Name: "name", Type: record.DataType{Root: record.String, Nullable: true}}}
	kr.rows, _ = record.NewCompactedRowCodec(cols)
	kr.keys, _ = record.NewKeyCodec(cols, []string{"id"})
	for i := range 20 {
		if _, err := kl.PutKv(ctx, kr.upsert(int32(i), int32(i), "v"+strconv.Itoa(i)), nil, 1); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the KV flushed to the high watermark", func() bool { return kl.kv.FlushedOffset() == kl.log.HighWatermark() })
	m1.SnapshotOnce(ctx, time.Now())
	if kl.log.LogStartOffset() == 0 {
		t.Fatal("the changelog was not trimmed below the snapshot")
	}

	peer := &fakePeer{leaders: map[TableBucket]*Replica{kvTB: kl, logTB: ll}, fetches: map[TableBucket]int{}}
	bs := &blockingStore{Store: fstore, got: make(chan struct{}), release: make(chan struct{})}
	var released sync.Once
	release := func() { released.Do(func() { close(bs.release) }) }
	m2 := startManager(t, meta, filepath.Join(dir, "2"), snapshots(2, bs), func(c *Config) {
		c.Fetch = FetchConfig{Peer: peer, MaxBytes: 1 << 20, MaxBytesForBucket: 1 << 20, MaxWait: 10 * time.Millisecond, Backoff: 10 * time.Millisecond}
	})
	t.Cleanup(release) // before the managers stop
	select {
	case <-bs.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no follower restore started")
	}
	if _, err := ll.Append(ctx, batch(3), 1); err != nil {
		t.Fatal(err)
	}
	end := ll.log.LogEndOffset()
	waitFor(t, "the log bucket replicated during the other bucket's restore", func() bool {
		r, err := m2.Replica(logTB)
		return err == nil && r.log.LogEndOffset() == end
	})

	release()
	kf, err := m2.Replica(kvTB)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the restored follower caught up", func() bool {
		return kf.log.LogEndOffset() == kl.log.LogEndOffset() && kf.kv.FlushedOffset() == kl.log.HighWatermark()
	})
	for i := range 20 {
		key, _ := kr.keys.AppendRow(nil, record.Row{int32(i), "v" + strconv.Itoa(i)})
		vals, err := kf.kv.Lookup([][]byte{key})
		if err != nil || len(vals) != 1 || vals[0] == nil {
			t.Fatalf("lookup %d on the restored follower: %v, %v", i, vals, err)
		}
	}
}
