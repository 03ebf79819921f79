package server

import (
	"context"

	"strom/fluss/listener"
	"strom/raftmeta/catalog"
	"strom/server/coordinator"
)

// flussLake is the Fluss listener's listener.LakeNode: the catalog after a
// Sync for the reads (GET_LAKE_SNAPSHOT on any node), and this node's
// coordinator for the tiering service's writes, which it answers only
// while it is in office (GET_METADATA names it as coordinator_server, where
// the tiering service sends them).
type flussLake struct {
	s   *Server
	cat flussCatalog
}

var _ listener.LakeNode = flussLake{}

func (f flussLake) Table(ctx context.Context, db, name string) (catalog.Table, error) {
	return f.cat.Table(ctx, db, name)
}

func (f flussLake) Tables(ctx context.Context) ([]catalog.Table, error) {
	if err := f.s.meta.Sync(ctx); err != nil {
		return nil, err
	}
	return f.s.cat.AllTables()
}

func (f flussLake) LakeTable(ctx context.Context, tableID int64) (catalog.LakeTable, error) {
	if err := f.s.meta.Sync(ctx); err != nil {
		return catalog.LakeTable{}, err
	}
	return f.s.cat.LakeTable(tableID)
}

func (f flussLake) CoordinatorEpoch() int32 { return f.s.coord.Epoch() }

func (f flussLake) PrepareLakeOffsets(ctx context.Context, tableID int64, table string, offsets map[int32]int64, ignorePrevious bool) (string, error) {
	return f.s.coord.PrepareLakeOffsets(ctx, tableID, table, offsets, ignorePrevious)
}

func (f flussLake) CommitLakeSnapshot(ctx context.Context, c listener.LakeCommit) error {
	return f.s.coord.CommitLakeSnapshot(ctx, coordinator.CommitLakeSnapshotRequest{
		TableID: c.TableID, SnapshotID: c.SnapshotID,
		TieredPath: c.TieredPath, ReadablePath: c.ReadablePath, EarliestToKeep: c.EarliestToKeep,
	})
}
