package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"strom/raftmeta/catalog"
	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/server/coordinator"
	"strom/tablet/replica"
)

// coordinatorInternalHandler serves CoordinatorInternalService: what
// tablet servers ask of the coordinator's node.
type coordinatorInternalHandler struct{ s *Server }

func (h *coordinatorInternalHandler) AdjustIsr(ctx context.Context, req *connect.Request[stromv1.AdjustIsrRequest]) (*connect.Response[stromv1.AdjustIsrResponse], error) {
	lisr, err := h.s.coord.AdjustISR(ctx, adjustISRRequestOf(req.Msg))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.AdjustIsrResponse{BucketEpoch: lisr.BucketEpoch}), nil
}

func (h *coordinatorInternalHandler) CommitRemoteLogManifest(ctx context.Context, req *connect.Request[stromv1.CommitRemoteLogManifestRequest]) (*connect.Response[stromv1.CommitRemoteLogManifestResponse], error) {
	m := req.Msg
	segs := make([]catalog.RemoteLogSegment, len(m.Segments))
	for i, s := range m.Segments {
		segs[i] = catalog.RemoteLogSegment{ID: s.Id, BaseOffset: s.BaseOffset, EndOffset: s.EndOffset, SizeBytes: s.SizeBytes, MaxTimestamp: s.MaxTimestamp}
	}
	err := h.s.coord.CommitRemoteLog(ctx, coordinator.CommitRemoteLogRequest{
		TableID: m.TableId, Bucket: m.Bucket, Leader: m.LeaderId, LeaderEpoch: m.LeaderEpoch, Segments: segs,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.CommitRemoteLogManifestResponse{}), nil
}

func (h *coordinatorInternalHandler) NodeStarting(ctx context.Context, req *connect.Request[stromv1.NodeStartingRequest]) (*connect.Response[stromv1.NodeStartingResponse], error) {
	if err := h.s.coord.NodeStarting(ctx, req.Msg.NodeId); err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.NodeStartingResponse{}), nil
}

// isrChanger is replica.ISRChanger and replica.RemoteLogCommitter: the coordinator itself when this node
// is in office, else a call signed with the cluster secret to the
// coordinator's node (/strom/coordinators/active). Safe for concurrent use.
type isrChanger struct {
	s       *Server
	clients *peerClients[stromv1connect.CoordinatorInternalServiceClient]
}

func newISRChanger(s *Server) *isrChanger {
	return &isrChanger{s: s, clients: newPeerClients(s.signedClient(4), stromv1connect.NewCoordinatorInternalServiceClient)}
}

func (c *isrChanger) AdjustISR(ctx context.Context, ch replica.ISRChange) error {
	req := coordinator.AdjustISRRequest{
		TableID: ch.TB.TableID, Bucket: ch.TB.Bucket, Leader: ch.Leader, LeaderEpoch: ch.LeaderEpoch, BucketEpoch: ch.BucketEpoch, ISR: ch.ISR,
		Incarnations: ch.Incarnations,
	}
	if c.s.coord.Epoch() != 0 {
		_, err := c.s.coord.AdjustISR(ctx, req)
		return isrChangeError(err)
	}
	return isrChangeError(c.call(func(client stromv1connect.CoordinatorInternalServiceClient) error {
		_, err := client.AdjustIsr(ctx, connect.NewRequest(adjustISRMessage(req)))
		return err
	}))
}

// adjustISRMessage is req on the wire; adjustISRRequestOf reads it back.
func adjustISRMessage(req coordinator.AdjustISRRequest) *stromv1.AdjustIsrRequest {
	return &stromv1.AdjustIsrRequest{
		TableId: req.TableID, Bucket: req.Bucket, LeaderId: req.Leader, LeaderEpoch: req.LeaderEpoch, BucketEpoch: req.BucketEpoch, Isr: req.ISR,
		Incarnations: req.Incarnations,
	}
}

// adjustISRRequestOf is the request m carries. A leader of a build before
// incarnations sends none: its joiners are checked for liveness only
// (coordinator.AdjustISRRequest.Incarnations).
func adjustISRRequestOf(m *stromv1.AdjustIsrRequest) coordinator.AdjustISRRequest {
	return coordinator.AdjustISRRequest{
		TableID: m.TableId, Bucket: m.Bucket, Leader: m.LeaderId, LeaderEpoch: m.LeaderEpoch, BucketEpoch: m.BucketEpoch, ISR: m.Isr,
		Incarnations: m.Incarnations,
	}
}

// isrChangeError marks the coordinator's answers that prove an ISR change
// was not written as replica.ErrISRChangeRefused: an ineligible replica is
// checked after the bucket epoch (a stale epoch is not such proof, nor is
// a failed call).
func isrChangeError(err error) error {
	if errors.Is(err, coordinator.ErrIneligibleReplica) {
		return fmt.Errorf("%w: %w", replica.ErrISRChangeRefused, err)
	}
	return err
}

// CommitRemoteLog is replica.RemoteLogCommitter, by the same way as
// AdjustISR.
func (c *isrChanger) CommitRemoteLog(ctx context.Context, ch replica.RemoteLogCommit) error {
	if c.s.coord.Epoch() != 0 {
		return c.s.coord.CommitRemoteLog(ctx, coordinator.CommitRemoteLogRequest{
			TableID: ch.TB.TableID, Bucket: ch.TB.Bucket, Leader: ch.Leader, LeaderEpoch: ch.LeaderEpoch, Segments: ch.Segments,
		})
	}
	segs := make([]*stromv1.RemoteLogSegment, len(ch.Segments))
	for i, s := range ch.Segments {
		segs[i] = &stromv1.RemoteLogSegment{Id: s.ID, BaseOffset: s.BaseOffset, EndOffset: s.EndOffset, SizeBytes: s.SizeBytes, MaxTimestamp: s.MaxTimestamp}
	}
	return c.call(func(client stromv1connect.CoordinatorInternalServiceClient) error {
		_, err := client.CommitRemoteLogManifest(ctx, connect.NewRequest(&stromv1.CommitRemoteLogManifestRequest{
			TableId: ch.TB.TableID, Bucket: ch.TB.Bucket, LeaderId: ch.Leader, LeaderEpoch: ch.LeaderEpoch, Segments: segs,
		}))
		return err
	})
}

// call runs fn with a client of the coordinator's node.
func (c *isrChanger) call(fn func(stromv1connect.CoordinatorInternalServiceClient) error) error {
	id, addr, why := c.s.coordinatorElsewhere()
	if addr == "" {
		return fmt.Errorf("%w (no other coordinator is known: %s)", coordinator.ErrNotCoordinator, why)
	}
	if err := fn(c.clients.at(addr)); err != nil {
		return fmt.Errorf("coordinator node %s at %s: %w", id, addr, rpc.RemoteErrorOf(err))
	}
	return nil
}

// NodeStarting asks the coordinator, by the same way as AdjustISR, to take
// this node out of every ISR and leadership before it registers
// (restart.go).
func (c *isrChanger) NodeStarting(ctx context.Context, node int32) error {
	if c.s.coord.Epoch() != 0 {
		return c.s.coord.NodeStarting(ctx, node)
	}
	return c.call(func(client stromv1connect.CoordinatorInternalServiceClient) error {
		_, err := client.NodeStarting(ctx, connect.NewRequest(&stromv1.NodeStartingRequest{NodeId: node}))
		return err
	})
}
