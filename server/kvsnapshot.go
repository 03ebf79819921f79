package server

import (
	"context"

	"connectrpc.com/connect"

	"strom/raftmeta/catalog"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/server/coordinator"
	"strom/tablet/replica"
)

// KV snapshots (issue 14 item 3): the coordinator's side of
// CommitKvSnapshot, and the leaders' calls to it.

func (h *coordinatorInternalHandler) CommitKvSnapshot(ctx context.Context, req *connect.Request[stromv1.CommitKvSnapshotRequest]) (*connect.Response[stromv1.CommitKvSnapshotResponse], error) {
	m := req.Msg
	err := h.s.coord.CommitKvSnapshots(ctx, coordinator.CommitKvSnapshotsRequest{
		TableID: m.TableId, Bucket: m.Bucket, Leader: m.LeaderId, LeaderEpoch: m.LeaderEpoch, Snapshots: kvSnapshotsFromProto(m.Snapshots),
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.CommitKvSnapshotResponse{}), nil
}

// CommitKvSnapshots is replica.KvSnapshotCommitter, by the same way as
// AdjustISR.
func (c *isrChanger) CommitKvSnapshots(ctx context.Context, ch replica.KvSnapshotCommit) error {
	if c.s.coord.Epoch() != 0 {
		return c.s.coord.CommitKvSnapshots(ctx, coordinator.CommitKvSnapshotsRequest{
			TableID: ch.TB.TableID, Bucket: ch.TB.Bucket, Leader: ch.Leader, LeaderEpoch: ch.LeaderEpoch, Snapshots: ch.Snapshots,
		})
	}
	return c.call(func(client stromv1connect.CoordinatorInternalServiceClient) error {
		_, err := client.CommitKvSnapshot(ctx, connect.NewRequest(&stromv1.CommitKvSnapshotRequest{
			TableId: ch.TB.TableID, Bucket: ch.TB.Bucket, LeaderId: ch.Leader, LeaderEpoch: ch.LeaderEpoch, Snapshots: kvSnapshotsToProto(ch.Snapshots),
		}))
		return err
	})
}

func kvSnapshotsToProto(ss []catalog.KvSnapshot) []*stromv1.KvSnapshot {
	out := make([]*stromv1.KvSnapshot, len(ss))
	for i, s := range ss {
		p := &stromv1.KvSnapshot{Id: s.ID, LogOffset: s.LogOffset, CreatedAt: s.CreatedAt, LeaderId: s.Leader, LeaderEpoch: s.LeaderEpoch}
		for _, f := range s.Files {
			p.Files = append(p.Files, &stromv1.KvSnapshotFile{Name: f.Name, Key: f.Key, Size: f.Size})
		}
		out[i] = p
	}
	return out
}

func kvSnapshotsFromProto(ps []*stromv1.KvSnapshot) []catalog.KvSnapshot {
	out := make([]catalog.KvSnapshot, len(ps))
	for i, p := range ps {
		s := catalog.KvSnapshot{ID: p.Id, LogOffset: p.LogOffset, CreatedAt: p.CreatedAt, Leader: p.LeaderId, LeaderEpoch: p.LeaderEpoch}
		for _, f := range p.Files {
			s.Files = append(s.Files, catalog.KvSnapshotFile{Name: f.Name, Key: f.Key, Size: f.Size})
		}
		out[i] = s
	}
	return out
}
