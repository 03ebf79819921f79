package coordinator

import (
	"context"
	"errors"
	"fmt"

	"strom/raftmeta"
	"strom/raftmeta/catalog"
)

// ErrInvalidManifest: a remote log manifest whose segments are not
// contiguous and ordered, or empty ones.
var ErrInvalidManifest = errors.New("coordinator: invalid remote log manifest")

// CommitRemoteLogRequest is a bucket leader's new remote log manifest (the
// segments it tiered, less those TTL removed), with the leader and leader
// epoch it acts as (Fluss's CommitRemoteLogManifest).
type CommitRemoteLogRequest struct {
	TableID     int64
	Bucket      int32
	Leader      int32
	LeaderEpoch int32
	Segments    []catalog.RemoteLogSegment
}

// CommitRemoteLog writes a bucket's remote log manifest, fenced by the
// coordinator epoch. It refuses, writing nothing, a request from another
// node than the bucket's leader or at another leader epoch
// (ErrFencedLeaderEpoch: an old leader cannot overwrite what its successor
// committed) and segments that are not contiguous (ErrInvalidManifest).
func (c *Coordinator) CommitRemoteLog(ctx context.Context, req CommitRemoteLogRequest) error {
	name := fmt.Sprintf("table id %d bucket %d", req.TableID, req.Bucket)
	for i, s := range req.Segments {
		if s.ID == "" || s.EndOffset <= s.BaseOffset || (i > 0 && s.BaseOffset != req.Segments[i-1].EndOffset) {
			return fmt.Errorf("%s: %w: segment %d (%q, offsets %d to %d) is empty or does not follow the one before",
				name, ErrInvalidManifest, i, s.ID, s.BaseOffset, s.EndOffset)
		}
	}
	m := catalog.RemoteLogManifest{LeaderEpoch: req.LeaderEpoch, Segments: req.Segments}
	return c.writeAsLeader(ctx, req.TableID, req.Bucket, req.Leader, req.LeaderEpoch, "a remote log manifest",
		func() raftmeta.Op { return c.cat.SetRemoteLogsOp(req.TableID, req.Bucket, m) })
}

// writeAsLeader writes op's znode for a bucket's leader: unless leader and
// epoch are the bucket's current leader and leader epoch, nothing is
// written and the error is ErrFencedLeaderEpoch (an old leader cannot
// overwrite what its successor committed). what names the write in it.
func (c *Coordinator) writeAsLeader(ctx context.Context, tableID int64, bucket, leader, epoch int32, what string, op func() raftmeta.Op) error {
	return c.do(ctx, func(t *term) error {
		_, cur, err := c.cat.Bucket(tableID, bucket)
		if err != nil {
			return err
		}
		if leader != cur.Leader || epoch != cur.LeaderEpoch {
			return fmt.Errorf("table id %d bucket %d: %w: node %d commits %s as leader at epoch %d, the bucket's leader is %d at epoch %d",
				tableID, bucket, ErrFencedLeaderEpoch, leader, what, epoch, cur.Leader, cur.LeaderEpoch)
		}
		return c.write(t, []raftmeta.Op{op()})
	})
}
