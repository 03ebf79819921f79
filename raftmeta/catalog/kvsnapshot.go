package catalog

import (
	"errors"

	"strom/raftmeta"
)

// KvSnapshots is stored at .../buckets/<b>/kv_snapshots: the retained
// snapshots of a primary-key bucket's KV in remote storage (issue 14's KV
// snapshots; Fluss's completed snapshots), oldest first. Only files named
// here are part of a snapshot; any other object under the bucket's remote
// KV prefix is an orphan.
type KvSnapshots struct {
	Version int `json:"version"`
	// LeaderEpoch is the leader epoch of the leader that wrote it.
	LeaderEpoch int32        `json:"leader_epoch"`
	Snapshots   []KvSnapshot `json:"snapshots"`
}

// KvSnapshot is one Pebble checkpoint of a bucket's KV.
type KvSnapshot struct {
	// ID grows by one with each snapshot of the bucket.
	ID int64 `json:"id"`
	// LogOffset is the changelog offset the snapshot holds every change
	// below: a replica restored from it replays the log from there.
	LogOffset int64 `json:"log_offset"`
	// CreatedAt is when it was taken, in Unix milliseconds.
	CreatedAt int64 `json:"created_at"`
	// Leader and LeaderEpoch are the replica that took it.
	Leader      int32            `json:"leader"`
	LeaderEpoch int32            `json:"leader_epoch"`
	Files       []KvSnapshotFile `json:"files"`
}

// KvSnapshotFile is one file of a snapshot: Name in the Pebble directory,
// at Key under the bucket's remote KV prefix (an SST's key may be shared
// with other snapshots).
type KvSnapshotFile struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

// Latest is the newest snapshot; ok is false when there is none.
func (s KvSnapshots) Latest() (KvSnapshot, bool) {
	if len(s.Snapshots) == 0 {
		return KvSnapshot{}, false
	}
	return s.Snapshots[len(s.Snapshots)-1], true
}

// Size is the sum of its files' sizes.
func (s KvSnapshot) Size() int64 {
	var n int64
	for _, f := range s.Files {
		n += f.Size
	}
	return n
}

func kvSnapshotsPath(tableID int64, bucket int32) string {
	return bucketPath(tableID, bucket) + "/kv_snapshots"
}

// KvSnapshots returns a bucket's retained KV snapshots; a bucket that has
// none yet has an empty list.
func (c *Catalog) KvSnapshots(tableID int64, bucket int32) (KvSnapshots, error) {
	var s KvSnapshots
	path := kvSnapshotsPath(tableID, bucket)
	data, _, err := c.tree.Get(path)
	if errors.Is(err, raftmeta.ErrNoNode) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	return s, decode(path, data, &s)
}

// SetKvSnapshotsOp writes a bucket's retained KV snapshots, creating the
// znode the first time.
func (c *Catalog) SetKvSnapshotsOp(tableID int64, bucket int32, s KvSnapshots) raftmeta.Op {
	s.Version = 1
	path := kvSnapshotsPath(tableID, bucket)
	if c.exists(path) {
		return raftmeta.SetDataOp(path, marshal(s), -1)
	}
	return raftmeta.CreateOp(path, marshal(s), raftmeta.Persistent)
}
