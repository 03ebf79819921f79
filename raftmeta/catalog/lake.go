package catalog

import (
	"errors"
	"fmt"

	"strom/raftmeta"
)

// LakeTable is stored at /strom/tabletservers/tables/<id>/lake: what the lake
// tiering service (Fluss's tiering job, through the Fluss listener) has
// told the coordinator about a table's copy in the lake: the bucket offsets
// it prepared and the lake snapshots it committed. Fluss keeps the same in
// ZooKeeper (LakeTable, version 2) with the offsets in files under
// remote.data.dir; Strom keeps the offsets in the znode itself, so they are
// replicated and survive a restart with the rest of the catalog, and are
// dropped with the table.
type LakeTable struct {
	Version int `json:"version"`
	// Prepared are offsets a PREPARE_LAKE_TABLE_SNAPSHOT named that no
	// retained snapshot holds yet, oldest first, at most MaxPreparedLakeOffsets.
	Prepared []LakeOffsets `json:"prepared,omitempty"`
	// Snapshots are the retained lake snapshots, in commit order.
	Snapshots []LakeSnapshot `json:"snapshots,omitempty"`
}

// MaxPreparedLakeOffsets bounds LakeTable.Prepared: a tiering round prepares
// one to three sets of offsets and commits them at once, so older ones
// belong to rounds that failed before their commit.
const MaxPreparedLakeOffsets = 16

// LakeOffsets are the log end offsets of a table's buckets that a lake
// snapshot holds every record below, named by Path (the opaque
// lake_table_offsets_path the tiering service stores in the lake snapshot
// and hands back on commit).
type LakeOffsets struct {
	Path    string          `json:"path"`
	Offsets map[int32]int64 `json:"offsets"`
}

// LakeSnapshot is one lake snapshot committed by the tiering service.
type LakeSnapshot struct {
	// ID is the lake's snapshot id (Paimon's).
	ID int64 `json:"id"`
	// Tiered are the offsets tiered into it.
	Tiered LakeOffsets `json:"tiered"`
	// Readable, when set, are the offsets a reader of the snapshot sees
	// (for lakes whose latest snapshot is not readable at once, such as
	// Paimon's deletion vectors); nil when the snapshot is not readable
	// by itself.
	Readable *LakeOffsets `json:"readable,omitempty"`
	// CommittedAt is when the coordinator stored it, in Unix milliseconds.
	CommittedAt int64 `json:"committed_at"`
}

// Latest is the last committed snapshot; ok is false when there is none.
func (l LakeTable) Latest() (LakeSnapshot, bool) {
	if len(l.Snapshots) == 0 {
		return LakeSnapshot{}, false
	}
	return l.Snapshots[len(l.Snapshots)-1], true
}

// Snapshot is the retained snapshot with the given id.
func (l LakeTable) Snapshot(id int64) (LakeSnapshot, bool) {
	for i := len(l.Snapshots) - 1; i >= 0; i-- {
		if l.Snapshots[i].ID == id {
			return l.Snapshots[i], true
		}
	}
	return LakeSnapshot{}, false
}

// LatestReadable is the last snapshot with readable offsets, and those.
func (l LakeTable) LatestReadable() (LakeSnapshot, bool) {
	for i := len(l.Snapshots) - 1; i >= 0; i-- {
		if l.Snapshots[i].Readable != nil {
			return l.Snapshots[i], true
		}
	}
	return LakeSnapshot{}, false
}

// Offsets finds the offsets named path among the prepared ones and those of
// the retained snapshots.
func (l LakeTable) Offsets(path string) (LakeOffsets, bool) {
	for i := len(l.Prepared) - 1; i >= 0; i-- {
		if l.Prepared[i].Path == path {
			return l.Prepared[i], true
		}
	}
	for i := len(l.Snapshots) - 1; i >= 0; i-- {
		s := l.Snapshots[i]
		if s.Tiered.Path == path {
			return s.Tiered, true
		}
		if s.Readable != nil && s.Readable.Path == path {
			return *s.Readable, true
		}
	}
	return LakeOffsets{}, false
}

func lakeTablePath(tableID int64) string { return assignmentPath(tableID) + "/lake" }

// LakeTable returns what is stored of a table's lake copy; a table never
// tiered has an empty one. An error wrapping ErrTableNotExist when the
// table has no assignment (dropped, or never created).
func (c *Catalog) LakeTable(tableID int64) (LakeTable, error) {
	var l LakeTable
	if !c.exists(assignmentPath(tableID)) {
		return l, fmt.Errorf("table id %d: %w", tableID, ErrTableNotExist)
	}
	path := lakeTablePath(tableID)
	data, _, err := c.tree.Get(path)
	if errors.Is(err, raftmeta.ErrNoNode) {
		return l, nil
	}
	if err != nil {
		return l, err
	}
	return l, decode(path, data, &l)
}

// SetLakeTableOp writes a table's lake record, creating the znode the
// first time.
func (c *Catalog) SetLakeTableOp(tableID int64, l LakeTable) raftmeta.Op {
	l.Version = 1
	path := lakeTablePath(tableID)
	if c.exists(path) {
		return raftmeta.SetDataOp(path, marshal(l), -1)
	}
	return raftmeta.CreateOp(path, marshal(l), raftmeta.Persistent)
}
