package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"strom/raftmeta"
	"strom/server/coordinator"
)

// controlledShutdown moves leadership away from this node before it stops
// serving (Kafka's and Fluss's controlled shutdown), with no RPC of its own:
//
//  1. it stops the heartbeat loop, which would otherwise register the node
//     again;
//  2. as the metadata leader it hands Raft leadership, and so the
//     coordinator, to another voter;
//  3. it closes its metadata session: its registration disappears at once,
//     and the coordinator elects other leaders from the ISR for the buckets
//     it led, as for a dead node;
//  4. it waits, in its local metadata replica, until no bucket with another
//     live in-sync replica names it as leader (coordinator.WaitLeadershipMoved).
//     A bucket whose ISR is this node alone is not waited for: it goes
//     offline until the node is back.
//
// Steps 2 to 4 are skipped when the gossip sees no majority of the
// metadata voters alive: nothing could commit. The API serves throughout,
// answering NOT_LEADER_OR_FOLLOWER for the buckets that moved. ctx
// (shutdown.timeout) bounds it; what it cannot do in time is logged, and
// the stop goes on.
func (s *Server) controlledShutdown(ctx context.Context) {
	if s.heartbeatStop != nil {
		s.heartbeatStop()
		<-s.heartbeatDone
	}
	if s.meta == nil {
		return
	}
	if !s.quorumAlive() {
		// Nothing can commit: no session close, no election. The node
		// stops at once rather than wait out shutdown.timeout (the last
		// node of a cluster stopped one node at a time).
		s.lg.Info("controlled shutdown skipped: the gossip sees no majority of the metadata voters alive")
		return
	}
	if err := s.transferMetadataLeadership(); err != nil {
		s.lg.Warn("controlled shutdown: metadata leadership stays here; this node's coordinator moves the bucket leaders", "err", err)
	}
	id := s.session.Swap(0)
	if id == 0 {
		return // never registered
	}
	if err := s.closeSession(ctx, id); err != nil {
		s.lg.Warn("controlled shutdown: could not close the metadata session; it will expire, and the coordinator move leaders then", "err", err)
		return
	}
	if err := coordinator.WaitLeadershipMoved(ctx, s.meta, s.cfg.NodeID); err != nil {
		s.lg.Warn("controlled shutdown: stopping with buckets still led here (shutdown.timeout)", "err", err)
		return
	}
	s.lg.Info("controlled shutdown: bucket leadership moved to other nodes")
}

// transferMetadataLeadership hands Raft leadership to another voter when
// this node leads the metadata group and has one.
func (s *Server) transferMetadataLeadership() error {
	if !s.meta.IsLeader() {
		return nil
	}
	servers, err := s.meta.Servers()
	if err != nil {
		return err
	}
	others := 0
	for _, srv := range servers {
		if srv.Voter && !srv.Leader {
			others++
		}
	}
	if others == 0 {
		return nil // a single voter: nobody to hand it to
	}
	if err := s.meta.Raft().LeadershipTransfer().Error(); err != nil {
		return fmt.Errorf("raft leadership transfer: %w", err)
	}
	s.lg.Info("controlled shutdown: metadata leadership handed to another voter")
	return nil
}

// leaderlessGiveUp is how long closing the session may go on without a
// metadata leader known before the stop gives up on it: the rest of the
// metadata group is down (the last node of a cluster being stopped), so no
// one is there to move leadership to.
const leaderlessGiveUp = 5 * time.Second

// closeSession closes the node's metadata session, trying again while the
// metadata leadership is changing (as just after a transfer).
func (s *Server) closeSession(ctx context.Context, id int64) error {
	for {
		actx, cancel := context.WithTimeout(ctx, leaderlessGiveUp)
		err := s.meta.CloseSession(actx, id)
		timedOut := actx.Err() != nil
		cancel()
		switch {
		case err == nil, errors.Is(err, raftmeta.ErrSessionExpired):
			return nil // closed, perhaps by an earlier try that lost its answer
		case !errors.Is(err, raftmeta.ErrNotLeader):
			return err
		case timedOut && ctx.Err() == nil && s.MetadataLeader() == 0:
			return fmt.Errorf("no metadata leader for %v (no quorum: are the other voters down?): %w", leaderlessGiveUp, err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// quorumAlive reports whether the gossip sees a majority of the metadata
// group's voters alive, this node included. When the configuration cannot
// be read it reports true: the controlled shutdown then tries.
func (s *Server) quorumAlive() bool {
	servers, err := s.meta.Servers()
	if err != nil {
		return true
	}
	alive := map[string]bool{strconv.Itoa(int(s.cfg.NodeID)): true}
	for _, m := range s.Members() {
		if m.Alive {
			alive[strconv.Itoa(int(m.ID))] = true
		}
	}
	voters, up := 0, 0
	for _, sv := range servers {
		if sv.Voter {
			voters++
			if alive[sv.ID] {
				up++
			}
		}
	}
	return up > voters/2
}
