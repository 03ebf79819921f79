package catalog

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"time"

	"strom/raftmeta"
)

// remoteDeletionsPath holds a znode per dropped table whose remote objects
// are still to be deleted.
const remoteDeletionsPath = Root + "/remote_deletions"

// RemoteDeletion is stored at /strom/remote_deletions/<table id>: a
// dropped table whose objects in remote storage (its tiered log segments,
// manifests' segments and KV snapshots, under RemoteLogPrefix and
// RemoteKVPrefix) are still to be deleted. It is written in the same
// operation as the drop and removed once they are gone, so a crash in the
// middle of the deletion leaves it for the next coordinator to finish.
type RemoteDeletion struct {
	Version  int    `json:"version"`
	Database string `json:"database"`
	Table    string `json:"table"`
	TableID  int64  `json:"table_id"`
	// DroppedAt is when the drop was written (ms since the epoch).
	DroppedAt int64 `json:"dropped_at"`
}

func remoteDeletionPath(tableID int64) string {
	return remoteDeletionsPath + "/" + strconv.FormatInt(tableID, 10)
}

// AppendRemoteDeletions appends the creation of a RemoteDeletion for each
// of db's tables (by name), as of now, to ops that drop them.
func (c *Catalog) AppendRemoteDeletions(ops []raftmeta.Op, db string, tables []string, now time.Time) ([]raftmeta.Op, error) {
	if len(tables) > 0 && !c.exists(remoteDeletionsPath) {
		ops = append(ops, raftmeta.CreateOp(remoteDeletionsPath, nil, raftmeta.Persistent))
	}
	for _, name := range tables {
		t, err := c.Table(db, name)
		if err != nil {
			return nil, err
		}
		d := RemoteDeletion{Version: 1, Database: db, Table: name, TableID: t.Registration.TableID, DroppedAt: now.UnixMilli()}
		ops = append(ops, raftmeta.CreateOp(remoteDeletionPath(d.TableID), marshal(d), raftmeta.Persistent))
	}
	return ops, nil
}

// RemoteDeletions returns the dropped tables whose remote objects are
// still to be deleted, in table id order.
func (c *Catalog) RemoteDeletions() ([]RemoteDeletion, error) {
	children, _, err := c.tree.Children(remoteDeletionsPath)
	if errors.Is(err, raftmeta.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []RemoteDeletion
	for _, child := range children {
		path := remoteDeletionsPath + "/" + child
		data, _, err := c.tree.Get(path)
		if errors.Is(err, raftmeta.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var d RemoteDeletion
		if err := decode(path, data, &d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b RemoteDeletion) int { return cmp.Compare(a.TableID, b.TableID) })
	return out, nil
}

// RemoteDeletionDoneOps removes table id's RemoteDeletion, if it is there.
func (c *Catalog) RemoteDeletionDoneOps(tableID int64) []raftmeta.Op {
	if !c.exists(remoteDeletionPath(tableID)) {
		return nil
	}
	return []raftmeta.Op{raftmeta.DeleteOp(remoteDeletionPath(tableID), -1)}
}
