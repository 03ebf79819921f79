package replica

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"strom/internal/metatest"
	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/remote"
)

// metaCommitter writes a remote log manifest or a bucket's retained KV
// snapshots straight into the metadata, as the coordinator does once it
// checked the leader (unit tests only).
type metaCommitter struct{ meta *raftmeta.Node }

func (c metaCommitter) CommitRemoteLog(ctx context.Context, rc RemoteLogCommit) error {
	op := catalog.New(c.meta).SetRemoteLogsOp(rc.TB.TableID, rc.TB.Bucket, catalog.RemoteLogManifest{LeaderEpoch: rc.LeaderEpoch, Segments: rc.Segments})
	_, err := c.meta.Multi(ctx, 0, op)
	return err
}

func (c metaCommitter) CommitKvSnapshots(ctx context.Context, kc KvSnapshotCommit) error {
	op := catalog.New(c.meta).SetKvSnapshotsOp(kc.TB.TableID, kc.TB.Bucket, catalog.KvSnapshots{LeaderEpoch: kc.LeaderEpoch, Snapshots: kc.Snapshots})
	_, err := c.meta.Multi(ctx, 0, op)
	return err
}

// tieredManager is a single node leading a one-bucket log table (ISR of
// itself: appends commit at once) with 300-byte segments, tiering to a
// file store only when the test calls TierOnce.
func tieredManager(t *testing.T) (*Manager, *raftmeta.Node, remote.Store, *Replica) {
	t.Helper()
	meta := metatest.NewNode(t)
	dir := t.TempDir()
	store, err := remote.OpenFile(filepath.Join(dir, "remote"), remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := startManager(t, meta, filepath.Join(dir, "data"), func(c *Config) {
		c.Log.SegmentBytes = 300
		c.Tier = TierConfig{Store: store, Interval: time.Hour, Committer: metaCommitter{meta}, CacheDir: filepath.Join(dir, "cache"), CacheBytes: 1 << 20}
	})
	id := createTable(t, meta, "t", 1, []int32{1})
	r := leadingReplica(t, m, TableBucket{id, 0})
	// The reconcile that opened the replica records the hosted tables
	// after it (a test tiering or listing before then meets no table).
	waitFor(t, "the table hosted", func() bool { _, err := m.table(id); return err == nil })
	return m, meta, store, r
}

func appendN(t *testing.T, r *Replica, n int) {
	t.Helper()
	for range n {
		if _, err := r.Append(context.Background(), batch(2), 1); err != nil {
			t.Fatal(err)
		}
	}
}

func manifestOf(t testing.TB, m *Manager, r *Replica) catalog.RemoteLogManifest {
	t.Helper()
	man, err := m.cat.RemoteLogs(r.tb.TableID, r.tb.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	return man
}

// remoteKeysOf lists every object under the bucket's remote prefix.
func remoteKeysOf(t *testing.T, m *Manager, store remote.Store, r *Replica) []string {
	t.Helper()
	tbl, err := m.table(r.tb.TableID)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for o, err := range store.List(context.Background(), remoteLogPrefix(tbl, r.tb)) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// readOffsets reads r from offset from to its high watermark as a consumer
// does and returns the base offset of every batch.
func readOffsets(t *testing.T, r *Replica, from int64) []int64 {
	t.Helper()
	var bases []int64
	for off := from; off < r.Log().HighWatermark(); {
		rr, err := r.Read(off, 1<<10)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(rr.Batches) == 0 {
			t.Fatalf("read at %d returned nothing", off)
		}
		for data := rr.Batches; len(data) > 0; {
			b, rest, err := record.NextBatch(data)
			if err != nil {
				t.Fatal(err)
			}
			bases = append(bases, b.BaseOffset())
			data, off = rest, b.NextOffset()
		}
	}
	return bases
}

// A leader whose log starts above the remote log's end (restored from a KV
// snapshot above it) with no follower to copy the range between from never
// rewrites the manifest below its log start nor deletes what it names: the
// segments below stay, served from remote storage; the gap's offsets are a
// retriable remote.ErrUnavailable; nothing above is tiered meanwhile.
func TestTieringKeepsTheRemoteLogBelowAGap(t *testing.T) {
	ctx := context.Background()
	m, _, store, r := tieredManager(t)
	appendN(t, r, 20)
	m.TierOnce(ctx, time.Now())
	before := manifestOf(t, m, r)
	keys := remoteKeysOf(t, m, store, r)
	if len(before.Segments) == 0 {
		t.Fatal("nothing tiered")
	}
	gapEnd := r.Log().LogEndOffset() + 10
	if err := r.Log().TruncateFullyAndStartAt(gapEnd); err != nil {
		t.Fatal(err)
	}
	appendN(t, r, 20)
	if n := len(r.Log().Segments()); n < 3 {
		t.Fatalf("%d local segments above the gap, want at least 3", n)
	}
	m.TierOnce(ctx, time.Now())
	after := manifestOf(t, m, r)
	if !slices.Equal(after.Segments, before.Segments) {
		t.Fatalf("the manifest was %+v, after a round above a gap it is %+v", before.Segments, after.Segments)
	}
	if got := remoteKeysOf(t, m, store, r); !slices.Equal(got, keys) {
		t.Fatalf("remote objects were %q, after the round %q", keys, got)
	}
	if got := r.LogStartOffset(); got != 0 {
		t.Fatalf("log start %d, want 0 (the remote start)", got)
	}
	if rr, err := r.Read(0, 1<<10); err != nil || len(rr.Batches) == 0 {
		t.Fatalf("read at 0 (remote): %d bytes, %v", len(rr.Batches), err)
	}
	if _, err := r.Read(before.EndOffset(), 1<<10); !errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("read in the gap at %d: %v, want remote.ErrUnavailable", before.EndOffset(), err)
	}
}

// A leader whose local segments are cut elsewhere than the remote log's
// (the last remote segment ends inside a local one) tiers the rest of that
// local segment from its own log and continues the manifest: the remote
// segments stay, and every batch reads once and in order from offset 0.
func TestTieringContinuesInsideALocalSegment(t *testing.T) {
	ctx := context.Background()
	m, meta, _, r := tieredManager(t)
	appendN(t, r, 20)
	segs := r.Log().Segments()
	first := segs[0]
	info, err := r.Log().Read(first.BaseOffset, 1, first.NextOffset)
	if err != nil {
		t.Fatal(err)
	}
	mid := record.Batch(info.Batches).NextOffset()
	if mid >= first.NextOffset {
		t.Fatalf("the first segment (%d to %d) holds one batch; the test needs two", first.BaseOffset, first.NextOffset)
	}
	tbl, err := m.table(r.tb.TableID)
	if err != nil {
		t.Fatal(err)
	}
	head, err := m.uploadRange(ctx, r, remoteLogPrefix(tbl, r.tb), 3, 0, mid)
	if err != nil {
		t.Fatal(err)
	}
	if err := (metaCommitter{meta}).CommitRemoteLog(ctx, RemoteLogCommit{TB: r.tb, Leader: 1, LeaderEpoch: 3, Segments: []catalog.RemoteLogSegment{head}}); err != nil {
		t.Fatal(err)
	}
	m.TierOnce(ctx, time.Now())
	after := manifestOf(t, m, r)
	if len(after.Segments) < 3 || after.Segments[0] != head {
		t.Fatalf("the manifest after the round is %+v, want it to start with %+v", after.Segments, head)
	}
	for i := 1; i < len(after.Segments); i++ {
		if after.Segments[i].BaseOffset != after.Segments[i-1].EndOffset {
			t.Fatalf("segment %d ends at %d, the next starts at %d", i-1, after.Segments[i-1].EndOffset, after.Segments[i].BaseOffset)
		}
	}
	if r.Log().LogStartOffset() == 0 {
		t.Fatal("no local segment was deleted after tiering")
	}
	got := readOffsets(t, r, 0)
	want := make([]int64, 20)
	for i := range want {
		want[i] = int64(2 * i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("batches read from 0 start at %v, want %v", got, want)
	}
}
