package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"connectrpc.com/connect"

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
	m := req.Msg
	lisr, err := h.s.coord.AdjustISR(ctx, coordinator.AdjustISRRequest{
		TableID: m.TableId, Bucket: m.Bucket, Leader: m.LeaderId, LeaderEpoch: m.LeaderEpoch, BucketEpoch: m.BucketEpoch, ISR: m.Isr,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.AdjustIsrResponse{BucketEpoch: lisr.BucketEpoch}), nil
}

// isrChanger is replica.ISRChanger: the coordinator itself when this node
// is in office, else a call signed with the cluster secret to the
// coordinator's node (/strom/coordinators/active). Safe for concurrent use.
type isrChanger struct {
	s    *Server
	http *http.Client

	mu      sync.Mutex
	clients map[string]stromv1connect.CoordinatorInternalServiceClient // by address
}

func newISRChanger(s *Server) *isrChanger {
	return &isrChanger{s: s, http: s.signedClient(4), clients: map[string]stromv1connect.CoordinatorInternalServiceClient{}}
}

func (c *isrChanger) AdjustISR(ctx context.Context, ch replica.ISRChange) error {
	req := coordinator.AdjustISRRequest{
		TableID: ch.TB.TableID, Bucket: ch.TB.Bucket, Leader: ch.Leader, LeaderEpoch: ch.LeaderEpoch, BucketEpoch: ch.BucketEpoch, ISR: ch.ISR,
	}
	if c.s.coord.Epoch() != 0 {
		_, err := c.s.coord.AdjustISR(ctx, req)
		return err
	}
	id, addr := c.s.otherCoordinator()
	if addr == "" {
		return fmt.Errorf("%w (no coordinator is known)", coordinator.ErrNotCoordinator)
	}
	c.mu.Lock()
	client, ok := c.clients[addr]
	if !ok {
		client = stromv1connect.NewCoordinatorInternalServiceClient(c.http, "http://"+addr, connect.WithCodec(rpc.Codec{}))
		c.clients[addr] = client
	}
	c.mu.Unlock()
	_, err := client.AdjustIsr(ctx, connect.NewRequest(&stromv1.AdjustIsrRequest{
		TableId: req.TableID, Bucket: req.Bucket, LeaderId: req.Leader, LeaderEpoch: req.LeaderEpoch, BucketEpoch: req.BucketEpoch, Isr: req.ISR,
	}))
	if err != nil {
		return fmt.Errorf("coordinator node %s at %s: %w", id, addr, rpc.RemoteErrorOf(err))
	}
	return nil
}
