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
	"strom/tablet/log"
)

// metaSnapshotCommitter writes a bucket's retained snapshots straight into
// the metadata, as the coordinator does once it checked the leader (unit
// tests only).
type metaSnapshotCommitter struct{ meta *raftmeta.Node }

func (c metaSnapshotCommitter) CommitKvSnapshots(ctx context.Context, kc KvSnapshotCommit) error {
	op := catalog.New(c.meta).SetKvSnapshotsOp(kc.TB.TableID, kc.TB.Bucket, catalog.KvSnapshots{LeaderEpoch: kc.LeaderEpoch, Snapshots: kc.Snapshots})
	_, err := c.meta.Multi(ctx, 0, op)
	return err
}

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
		Assignment:   &catalog.TableAssignment{Buckets: map[int32][]int32{0: {1}}},
		LeaderISR:    map[int32]catalog.LeaderAndISR{0: {Leader: 1, LeaderEpoch: 3, ISR: []int32{1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Multi(ctx, 0, append([]raftmeta.Op{claim}, ops...)...); err != nil {
		t.Fatal(err)
	}
	return id
}

// runManager is startManager with a stop of its own (idempotent; also run
// at cleanup).
func runManager(t *testing.T, meta *raftmeta.Node, dir string, opts ...func(*Config)) (*Manager, func()) {
	t.Helper()
	lc := log.DefaultConfig()
	lc.NoSync = true
	cfg := Config{NodeID: 1, Dir: dir, Log: lc, RetentionInterval: time.Hour, CheckpointInterval: time.Hour, WriterExpirationInterval: time.Hour, Logger: metatest.Logger(t)}
	for _, o := range opts {
		o(&cfg)
	}
	m := NewManager(cfg, meta)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return m, stop
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
			c.Snapshot = SnapshotConfig{Store: st, Interval: time.Hour, NumRetained: 1, Committer: metaSnapshotCommitter{meta}}
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
