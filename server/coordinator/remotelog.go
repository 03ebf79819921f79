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
	return c.do(ctx, func(t *term) error {
		_, cur, err := c.cat.Bucket(req.TableID, req.Bucket)
		if err != nil {
			return err
		}
		if req.Leader != cur.Leader || req.LeaderEpoch != cur.LeaderEpoch {
			return fmt.Errorf("%s: %w: node %d commits a remote log manifest as leader at epoch %d, the bucket's leader is %d at epoch %d",
				name, ErrFencedLeaderEpoch, req.Leader, req.LeaderEpoch, cur.Leader, cur.LeaderEpoch)
		}
		m := catalog.RemoteLogManifest{LeaderEpoch: req.LeaderEpoch, Segments: req.Segments}
		return c.write(t, []raftmeta.Op{c.cat.SetRemoteLogsOp(req.TableID, req.Bucket, m)})
	})
}
