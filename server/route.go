package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"strom/raftmeta/catalog"
	"strom/rpc"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/server/coordinator"
	"strom/tablet/replica"
)

// notLeader is the error for a data call on a bucket that node leader
// leads (-1: none known), with the leader's API address as its
// registration gives it.
func (s *Server) notLeader(tb replica.TableBucket, leader int32) error {
	h := &rpc.LeaderHint{Err: fmt.Errorf("bucket %s: %w", tb, replica.ErrNotLeader), Leader: leader}
	if leader >= 0 {
		h.Address = s.apiAddrOf(strconv.Itoa(int(leader)))
	}
	return h
}

// proxiedHeader marks a call a node sent on to the coordinator, with the
// sender's node id: the coordinator's node serves it itself, whatever it
// thinks of its own role, so a call is proxied once at most.
const proxiedHeader = "Strom-Proxied-By"

// coordinatorProxy sends admin writes (and InitWriter) on to the
// coordinator's node, so that any node serves them. Its methods are safe
// for concurrent use.
type coordinatorProxy struct {
	s    *Server
	http *http.Client
	// coordinator names the coordinator's node when it is another one
	// (Server.otherCoordinator; tests fake it).
	coordinator func() (id, addr string)

	mu struct {
		sync.Mutex
		to *coordinatorClients // for the last coordinator address seen
	}
}

// coordinatorClients call one coordinator's node.
type coordinatorClients struct {
	id, addr string // node id and API address
	admin    stromv1connect.AdminServiceClient
	tablet   stromv1connect.TabletServiceClient
}

func newCoordinatorProxy(s *Server) *coordinatorProxy {
	t := &http.Transport{
		DialContext:         s.peerDialer().DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	return &coordinatorProxy{s: s, http: &http.Client{Transport: t}, coordinator: s.otherCoordinator}
}

// target returns the clients of the coordinator's node when a call with
// header h is to be sent there: another node is the coordinator, and the
// call was not proxied already. Otherwise nil: the call is served here,
// and the coordinator, if not in office, answers NOT_COORDINATOR
// (retriable).
func (p *coordinatorProxy) target(h http.Header) *coordinatorClients {
	if h.Get(proxiedHeader) != "" {
		return nil
	}
	id, addr := p.coordinator()
	if addr == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.mu.to; c == nil || c.id != id || c.addr != addr {
		base := "http://" + addr
		p.mu.to = &coordinatorClients{
			id: id, addr: addr,
			admin:  stromv1connect.NewAdminServiceClient(p.http, base),
			tablet: stromv1connect.NewTabletServiceClient(p.http, base),
		}
	}
	return p.mu.to
}

// otherCoordinator returns the node id and API address of the coordinator
// when it is another node, as /strom/coordinators/active names it; "", ""
// when this node is in office, or no other coordinator is known.
func (s *Server) otherCoordinator() (id, addr string) {
	id, addr, _ = s.coordinatorElsewhere()
	return id, addr
}

// coordinatorElsewhere is otherCoordinator with, when it finds none, why
// (for errors and logs: a node whose metadata stays stale shows it here).
func (s *Server) coordinatorElsewhere() (id, addr, why string) {
	if e := s.coord.Epoch(); e != 0 {
		return "", "", fmt.Sprintf("this node is in office at epoch %d", e)
	}
	active, epoch, _, err := s.cat.Coordinator()
	switch {
	case err != nil:
		return "", "", fmt.Sprintf("reading the coordinator from the metadata: %v", err)
	case active.ID == "":
		return "", "", fmt.Sprintf("the metadata here (applied to zxid %d) names no coordinator", s.meta.LastZxid())
	case active.ID == strconv.Itoa(int(s.cfg.NodeID)):
		return "", "", fmt.Sprintf("the metadata here (applied to zxid %d) names this node at epoch %d, which is not in office",
			s.meta.LastZxid(), epoch)
	}
	addr = listenerAddress(active.Listeners)
	switch addr {
	case "":
		return "", "", fmt.Sprintf("coordinator node %s (epoch %d) has no %s listener in the metadata", active.ID, epoch, catalog.ListenerName)
	case s.apiAddr:
		return "", "", fmt.Sprintf("coordinator node %s (epoch %d) has this node's address %s", active.ID, epoch, addr)
	}
	return active.ID, addr, ""
}

// proxy serves req on the coordinator's node with send, or here with local
// when target says so. The caller's deadline goes with the call (connect
// sends the context's); an answer of the coordinator's node comes back as
// it is, and a failure to reach it is NOT_COORDINATOR (retriable).
func proxy[C, Req, Resp any](ctx context.Context, p *coordinatorProxy, req *connect.Request[Req],
	local func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error),
	client func(*coordinatorClients) C,
	send func(C, context.Context, *connect.Request[Req]) (*connect.Response[Resp], error),
) (*connect.Response[Resp], error) {
	c := p.target(req.Header())
	if c == nil {
		return local(ctx, req)
	}
	out := connect.NewRequest(req.Msg)
	out.Header().Set(proxiedHeader, strconv.Itoa(int(p.s.cfg.NodeID)))
	if a := req.Header().Get("Authorization"); a != "" {
		out.Header().Set("Authorization", a)
	}
	resp, err := send(client(c), ctx, out)
	if err == nil {
		return connect.NewResponse(resp.Msg), nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if ce, ok := errors.AsType[*connect.Error](err); ok && len(ce.Details()) > 0 {
		return nil, err // the coordinator's node answered: mapped already
	}
	return nil, fmt.Errorf("%w: cannot reach the coordinator, node %s at %s: %v", coordinator.ErrNotCoordinator, c.id, c.addr, err)
}

func adminOf(c *coordinatorClients) stromv1connect.AdminServiceClient   { return c.admin }
func tabletOf(c *coordinatorClients) stromv1connect.TabletServiceClient { return c.tablet }

// apiAddress is the API address a node registered.
func apiAddress(reg catalog.TabletServerRegistration) string { return listenerAddress(reg.Listeners) }

// listenerAddress is the address of the API listener in a listeners string.
func listenerAddress(listeners string) string { return namedListener(listeners, catalog.ListenerName) }
