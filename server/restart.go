package server

import (
	"context"
	"fmt"
	"sync"

	"connectrpc.com/connect"
)

// nodeStarting has the coordinator take this node out of every ISR and
// leadership (coordinator.NodeStarting) before its first registration of
// this run, after the registration of an earlier run is closed.
//
// The node may have lost power: its tablets then hold only what they
// fsynced, less than the ISRs it was in credit it with (with the default
// flush policy, replication alone protects the rest). A registration is
// all the coordinator sees of liveness, so without this
//
//   - a node back within milliseconds, or while no coordinator was in
//     office, was never seen gone: it led again at the same leader epoch
//     with the shorter log, and its followers, fetching above its log end,
//     cut theirs to it;
//   - a bucket whose whole ISR dropped out at once (the leader powered
//     off, the others' sessions expiring under load) went offline with
//     its last ISR kept, and the powered-off node, back first, was elected
//     from it; the others, holding every acknowledged write, truncated to
//     it (issue 12).
//
// So the node rejoins every bucket as a follower that truncates to its
// leader and catches up before the ISR takes it back. A coordinator of an
// older build has no NodeStarting (connect.CodeUnimplemented): the node
// registers as it did before, with a warning.
func (s *Server) nodeStarting(ctx context.Context) error {
	err := s.coordCalls.NodeStarting(ctx, s.cfg.NodeID)
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		s.lg.Warn("the coordinator's build has no NodeStarting: registering without leaving the ISRs first", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("leave the ISRs before registering: %w", err)
	}
	return nil
}

// incarnationCache is what Server.incarnationOf reads: every node's
// incarnation as the registrations showed it at metadata zxid.
type incarnationCache struct {
	mu     sync.Mutex
	zxid   int64
	read   bool
	byNode map[int32]int64
}

// incarnationOf is replica.Config.Incarnations: node's incarnation as this
// node's metadata shows its registration, 0 when it has none (or one
// from a build without). The registrations are read again only when the
// metadata moved, so a leader's fetch path reads a map.
func (s *Server) incarnationOf(node int32) int64 {
	if s.cat == nil {
		return 0
	}
	c := &s.incarnations
	c.mu.Lock()
	defer c.mu.Unlock()
	if z := s.meta.LastZxid(); !c.read || z != c.zxid {
		servers, err := s.cat.TabletServers()
		if err != nil {
			return 0
		}
		c.byNode = make(map[int32]int64, len(servers))
		for _, ts := range servers {
			c.byNode[ts.ID] = ts.Registration.Incarnation
		}
		c.zxid, c.read = z, true
	}
	return c.byNode[node]
}
