package server

import (
	"context"
	"fmt"

	"strom/fluss/listener"
	"strom/raftmeta/catalog"
	"strom/tablet/replica"
)

// flussSmall is the Fluss listener's listener.SmallNode (GET_TABLE_STATS,
// GET_LATEST_KV_SNAPSHOTS), over the TabletService handler's table cache,
// leader check and KV snapshots.
type flussSmall struct {
	h   *tabletHandler
	cat flussCatalog
}

var _ listener.SmallNode = flussSmall{}

func (f flussSmall) TableByID(id int64) (catalog.Table, error) { return f.h.s.tables.getByID(id) }

func (f flussSmall) Table(ctx context.Context, db, name string) (catalog.Table, error) {
	return f.cat.Table(ctx, db, name)
}

// rowCountPage is how many rows RowCount reads from a KV snapshot at a
// time: the memory one count holds, whatever the bucket's size.
const rowCountPage = 4096

// RowCount counts a primary-key bucket's rows in a consistent view of its
// KV (kv.Snapshot: the committed rows, every acknowledged write included),
// a page at a time, so its cost is one pass over the bucket's rows and its
// memory one page; a log bucket's is its high watermark minus its log start.
func (f flussSmall) RowCount(ctx context.Context, t catalog.Table, bucket int32) (int64, error) {
	if !t.Schema.HasPrimaryKey() {
		r, err := f.h.replica(t, bucket)
		if err != nil {
			return 0, err
		}
		if !r.IsLeader() {
			return 0, fmt.Errorf("bucket %d of %s.%s: %w", bucket, t.Database, t.Name, replica.ErrNotLeader)
		}
		return r.Log().HighWatermark() - r.LogStartOffset(), nil
	}
	snap, err := f.h.snapshot(ctx, t, bucket)
	if err != nil {
		return 0, err
	}
	defer snap.Close()
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		page, err := snap.Next(rowCountPage, 1<<20)
		if err != nil {
			return 0, err
		}
		if len(page) == 0 {
			return n, nil
		}
		n += int64(len(page))
	}
}

func (f flussSmall) ChangelogStart(t catalog.Table, bucket int32) (int64, bool, error) {
	tb := replica.TableBucket{TableID: t.Registration.TableID, Bucket: bucket}
	if r, err := f.h.s.replicas.Replica(tb); err == nil {
		return r.LogStartOffset(), true, nil
	}
	man, err := f.h.s.cat.RemoteLogs(tb.TableID, bucket)
	if err != nil {
		return 0, false, err
	}
	if len(man.Segments) > 0 {
		return man.StartOffset(), true, nil
	}
	return 0, false, nil
}
