package catalog

import (
	"errors"

	"strom/raftmeta"
)

// RemoteLogManifest is stored at .../buckets/<b>/remote_logs: the bucket's
// log segments in remote storage (issue 14's log tiering), oldest first and
// contiguous (each segment's base offset is the previous one's end). Only
// segments named here are part of the log; any other object under the
// bucket's remote prefix is an orphan.
type RemoteLogManifest struct {
	Version int `json:"version"`
	// LeaderEpoch is the leader epoch of the leader that wrote it.
	LeaderEpoch int32              `json:"leader_epoch"`
	Segments    []RemoteLogSegment `json:"segments"`
}

// RemoteLogSegment is one tiered segment: the objects
// <prefix>/<id>/<base offset>.{log,index,timeindex}.
type RemoteLogSegment struct {
	ID           string `json:"id"`
	BaseOffset   int64  `json:"base_offset"`
	EndOffset    int64  `json:"end_offset"` // the offset after its last batch
	SizeBytes    int64  `json:"size_bytes"` // of the .log object
	MaxTimestamp int64  `json:"max_timestamp"`
}

// StartOffset is the first remote offset, EndOffset the offset after the
// last; both are 0 for an empty manifest.
func (m RemoteLogManifest) StartOffset() int64 {
	if len(m.Segments) == 0 {
		return 0
	}
	return m.Segments[0].BaseOffset
}

// EndOffset is the offset after the last remote segment (0 when empty).
func (m RemoteLogManifest) EndOffset() int64 {
	if len(m.Segments) == 0 {
		return 0
	}
	return m.Segments[len(m.Segments)-1].EndOffset
}

func remoteLogsPath(tableID int64, bucket int32) string {
	return bucketPath(tableID, bucket) + "/remote_logs"
}

// RemoteLogs returns a bucket's remote log manifest; a bucket that has none
// yet has an empty one.
func (c *Catalog) RemoteLogs(tableID int64, bucket int32) (RemoteLogManifest, error) {
	var m RemoteLogManifest
	path := remoteLogsPath(tableID, bucket)
	data, _, err := c.tree.Get(path)
	if errors.Is(err, raftmeta.ErrNoNode) {
		return m, nil
	}
	if err != nil {
		return m, err
	}
	return m, decode(path, data, &m)
}

// SetRemoteLogsOp writes a bucket's remote log manifest, creating the znode
// the first time.
func (c *Catalog) SetRemoteLogsOp(tableID int64, bucket int32, m RemoteLogManifest) raftmeta.Op {
	m.Version = 1
	path := remoteLogsPath(tableID, bucket)
	if c.exists(path) {
		return raftmeta.SetDataOp(path, marshal(m), -1)
	}
	return raftmeta.CreateOp(path, marshal(m), raftmeta.Persistent)
}
