package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"

	"strom/raftmeta"
	"strom/raftmeta/catalog"
)

// ErrInvalidLakeOffsets: bucket offsets for a lake snapshot that name a
// bucket the table does not have, or a negative offset.
var ErrInvalidLakeOffsets = errors.New("coordinator: invalid lake offsets")

// ErrLakeOffsetsNotFound: a lake commit names offsets (by path) that no
// PrepareLakeOffsets answered, or that are no longer kept.
var ErrLakeOffsetsNotFound = errors.New("coordinator: lake offsets not found")

// PrepareLakeOffsets stores the bucket log end offsets a tiering round
// wrote into the lake (Fluss's PREPARE_LAKE_TABLE_SNAPSHOT) and returns the
// path that names them, which the tiering service stores in the lake
// snapshot and hands to CommitLakeSnapshot. Unless ignorePrevious, the
// offsets are merged over those of the latest committed snapshot (a round
// names only the buckets it read), as Fluss merges them. table names the
// table in the path, as Fluss's {db}/{table}-{id}.
func (c *Coordinator) PrepareLakeOffsets(ctx context.Context, tableID int64, table string, offsets map[int32]int64, ignorePrevious bool) (string, error) {
	var path string
	err := c.do(ctx, func(t *term) error {
		buckets, err := c.bucketCount(tableID)
		if err != nil {
			return err
		}
		for b, o := range offsets {
			if b < 0 || b >= buckets || o < 0 {
				return fmt.Errorf("table id %d: %w: bucket %d offset %d (the table has buckets 0..%d)", tableID, ErrInvalidLakeOffsets, b, o, buckets-1)
			}
		}
		l, err := c.cat.LakeTable(tableID)
		if err != nil {
			return err
		}
		merged := map[int32]int64{}
		if latest, ok := l.Latest(); ok && !ignorePrevious {
			maps.Copy(merged, latest.Tiered.Offsets)
		}
		maps.Copy(merged, offsets)
		var id [16]byte
		_, _ = rand.Read(id[:])
		path = fmt.Sprintf("strom:/lake/%s-%d/metadata/%s.offsets", table, tableID, hex.EncodeToString(id[:]))
		l.Prepared = append(l.Prepared, catalog.LakeOffsets{Path: path, Offsets: merged})
		if n := len(l.Prepared) - catalog.MaxPreparedLakeOffsets; n > 0 {
			l.Prepared = l.Prepared[n:]
		}
		return c.write(t, []raftmeta.Op{c.cat.SetLakeTableOp(tableID, l)})
	})
	return path, err
}

// CommitLakeSnapshotRequest is a lake snapshot the tiering service
// committed to the lake (Fluss's PbLakeTableSnapshotMetadata).
type CommitLakeSnapshotRequest struct {
	TableID    int64
	SnapshotID int64
	// TieredPath names the offsets tiered into the snapshot; ReadablePath,
	// when not empty, the offsets a reader of it sees.
	TieredPath, ReadablePath string
	// EarliestToKeep is Fluss's retention: nil keeps only this snapshot;
	// the id of a retained snapshot keeps it and every later one; any other
	// id (Fluss's -1, keep all) keeps them all.
	EarliestToKeep *int64
}

// CommitLakeSnapshot registers a committed lake snapshot (Fluss's
// COMMIT_LAKE_TABLE_SNAPSHOT), after which GET_LAKE_SNAPSHOT answers it.
// The paths must be ones PrepareLakeOffsets answered (or that a retained
// snapshot holds: the tiering service re-commits a snapshot the coordinator
// missed with its old path), else ErrLakeOffsetsNotFound and nothing is
// written.
func (c *Coordinator) CommitLakeSnapshot(ctx context.Context, req CommitLakeSnapshotRequest) error {
	return c.do(ctx, func(t *term) error {
		l, err := c.cat.LakeTable(req.TableID)
		if err != nil {
			return err
		}
		s := catalog.LakeSnapshot{ID: req.SnapshotID, CommittedAt: c.cfg.Now().UnixMilli()}
		tiered, ok := l.Offsets(req.TieredPath)
		if !ok {
			return fmt.Errorf("table id %d snapshot %d: %w: tiered offsets %q", req.TableID, req.SnapshotID, ErrLakeOffsetsNotFound, req.TieredPath)
		}
		s.Tiered = tiered
		if req.ReadablePath != "" {
			readable, ok := l.Offsets(req.ReadablePath)
			if !ok {
				return fmt.Errorf("table id %d snapshot %d: %w: readable offsets %q", req.TableID, req.SnapshotID, ErrLakeOffsetsNotFound, req.ReadablePath)
			}
			s.Readable = &readable
		}
		l.Snapshots = retainLakeSnapshots(l.Snapshots, s, req.EarliestToKeep)
		var prepared []catalog.LakeOffsets
		for _, p := range l.Prepared {
			if p.Path != req.TieredPath && p.Path != req.ReadablePath {
				prepared = append(prepared, p)
			}
		}
		l.Prepared = prepared
		return c.write(t, []raftmeta.Op{c.cat.SetLakeTableOp(req.TableID, l)})
	})
}

// retainLakeSnapshots appends s to prev under Fluss's retention
// (LakeTableHelper.determineSnapshotsToKeepAndDiscard): no boundary keeps s
// alone; a boundary found by position keeps from it on; a boundary not
// found keeps everything.
func retainLakeSnapshots(prev []catalog.LakeSnapshot, s catalog.LakeSnapshot, earliest *int64) []catalog.LakeSnapshot {
	if earliest == nil || len(prev) == 0 {
		return []catalog.LakeSnapshot{s}
	}
	for i, p := range prev {
		if p.ID == *earliest {
			return append(append([]catalog.LakeSnapshot(nil), prev[i:]...), s)
		}
	}
	return append(append([]catalog.LakeSnapshot(nil), prev...), s)
}

// bucketCount is the number of buckets of the table with the given id.
func (c *Coordinator) bucketCount(tableID int64) (int32, error) {
	tables, err := c.cat.AllTables()
	if err != nil {
		return 0, err
	}
	for _, t := range tables {
		if t.Registration.TableID == tableID {
			if len(t.Registration.PartitionKeys) > 0 {
				return 0, fmt.Errorf("table id %d: lake tiering of partitioned tables is not served yet", tableID)
			}
			return t.Registration.BucketCount, nil
		}
	}
	return 0, fmt.Errorf("table id %d: %w", tableID, catalog.ErrTableNotExist)
}
