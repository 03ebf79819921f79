package coordinator

import (
	"context"
	"errors"
	"fmt"

	"strom/raftmeta"
	"strom/raftmeta/catalog"
)

// ErrInvalidKvSnapshots: a list of retained KV snapshots whose ids do not
// grow, whose log offsets go down, or a snapshot without files.
var ErrInvalidKvSnapshots = errors.New("coordinator: invalid KV snapshots")

// CommitKvSnapshotsRequest is a primary-key bucket leader's new list of
// retained KV snapshots (the one it just took, with the older ones it
// keeps), with the leader and leader epoch it acts as (Fluss's
// CommitKvSnapshot).
type CommitKvSnapshotsRequest struct {
	TableID     int64
	Bucket      int32
	Leader      int32
	LeaderEpoch int32
	Snapshots   []catalog.KvSnapshot
}

// CommitKvSnapshots writes a bucket's retained KV snapshots, fenced like
// CommitRemoteLog: a request from another node than the bucket's leader or
// at another leader epoch is refused (ErrFencedLeaderEpoch), and so is a
// list that is not in order (ErrInvalidKvSnapshots); nothing is written
// then.
func (c *Coordinator) CommitKvSnapshots(ctx context.Context, req CommitKvSnapshotsRequest) error {
	name := fmt.Sprintf("table id %d bucket %d", req.TableID, req.Bucket)
	for i, s := range req.Snapshots {
		if len(s.Files) == 0 || s.LogOffset < 0 || (i > 0 && (s.ID <= req.Snapshots[i-1].ID || s.LogOffset < req.Snapshots[i-1].LogOffset)) {
			return fmt.Errorf("%s: %w: snapshot %d (id %d, log offset %d, %d files) is empty or does not follow the one before",
				name, ErrInvalidKvSnapshots, i, s.ID, s.LogOffset, len(s.Files))
		}
	}
	s := catalog.KvSnapshots{LeaderEpoch: req.LeaderEpoch, Snapshots: req.Snapshots}
	return c.writeAsLeader(ctx, req.TableID, req.Bucket, req.Leader, req.LeaderEpoch, "KV snapshots",
		func() raftmeta.Op { return c.cat.SetKvSnapshotsOp(req.TableID, req.Bucket, s) })
}
