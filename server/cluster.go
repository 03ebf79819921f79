package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"strom/raftmeta"
	"strom/raftmeta/membership"
)

// roles are what every Strom node is: a metadata replica and a tablet
// server.
var roles = []string{"metadata", "tablet"}

// startMembership starts gossip on gossip.listen, joining cluster.join.
// When the node is not clustering, a gossip address that cannot be bound
// is logged and the node runs without gossip (a single node needs none),
// so `strom server` never fails for port 9125.
func (s *Server) startMembership(secret []byte) error {
	cfg := s.cfg
	m, err := membership.Start(membership.Config{
		Self: membership.Meta{
			ID: cfg.NodeID, API: s.apiAddr, Raft: s.meta.Addr(), Rack: cfg.Rack, Version: Version,
			ClusterID: s.knownClusterID(), Roles: roles, HasState: s.meta.HasState(),
		},
		BindAddr:      cfg.GossipListen,
		AdvertiseAddr: advertisedIfSet(cfg.GossipListen, cfg.GossipAdvertise),
		Join:          cfg.Join,
		SourceIP:      cfg.SourceIP,
		SecretKey:     secret,
		SecretKeyName: "cluster.secret",
		OnEvent:       s.onMemberEvent,
		Timings:       cfg.GossipTimings,
		Logger:        s.lg,
	})
	if err != nil {
		if cfg.clustering() {
			return fmt.Errorf("gossip.listen (--gossip-listen): %w", err)
		}
		s.lg.Warn("gossip not started; this single node cannot be joined by others until it is (free the port, or set gossip.listen)",
			"gossip_listen", cfg.GossipListen, "err", err)
		return nil
	}
	s.members.Store(m)
	s.failures = make(chan struct{}, 1)
	return nil
}

// advertisedIfSet is advertised(addr, override) when override is set, ""
// otherwise (membership derives it from the bound address, port 0 too).
func advertisedIfSet(addr, override string) string {
	if override == "" {
		return ""
	}
	return advertised(addr, override)
}

// knownClusterID is the cluster id the node has joined, "" for a fresh node
// that has not yet (it then accepts any cluster's gossip).
func (s *Server) knownClusterID() string {
	if s.id.fresh {
		return ""
	}
	return s.id.ClusterID
}

// peers is the gossip's view for the metadata group's bootstrap and
// autopilot; without gossip, this node alone.
func (s *Server) peers() []raftmeta.Peer {
	m := s.members.Load()
	if m == nil {
		return []raftmeta.Peer{{ID: strconv.Itoa(int(s.cfg.NodeID)), Addr: s.meta.Addr(), Alive: true, HasState: s.meta.HasState()}}
	}
	var out []raftmeta.Peer
	for _, mb := range m.Members() {
		out = append(out, raftmeta.Peer{ID: strconv.Itoa(int(mb.ID)), Addr: mb.Raft, Alive: mb.Alive, Since: mb.Since, HasState: mb.HasState})
	}
	return out
}

// joinMetadataGroup returns once this node is in the metadata group and,
// with cluster.join, has joined the gossip of one listed node: at once
// after a restart of a single node; else it bootstraps a group with
// cluster.bootstrap-expect nodes, or waits for the leader to add it
// (raftmeta.BootstrapExpect). Listed nodes of another cluster (another
// cluster id) end the wait with an error naming both ids.
func (s *Server) joinMetadataGroup(ctx context.Context) error {
	m := s.members.Load()
	if m == nil || len(s.cfg.Join) == 0 {
		return s.bootstrap(ctx, nil)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-m.Refused():
			cancel()
		case <-ctx.Done():
		}
	}()
	err := s.bootstrap(ctx, m.Joined())
	if err == nil {
		select {
		case <-m.Joined():
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if jerr := m.JoinError(); jerr != nil {
		return fmt.Errorf("cluster.join (--join): %w", jerr)
	}
	return err
}

// bootstrap is raftmeta.BootstrapExpect, then gossips that the node has
// state.
func (s *Server) bootstrap(ctx context.Context, joined <-chan struct{}) error {
	if err := s.meta.BootstrapExpect(ctx, s.cfg.BootstrapExpect, joined, s.peers); err != nil {
		return err
	}
	if m := s.members.Load(); m != nil {
		if err := m.Update(time.Second, func(me *membership.Meta) { me.HasState = true }); err != nil {
			s.lg.Warn("could not gossip that this node has metadata state", "err", err)
		}
	}
	return nil
}

// adoptClusterID records the metadata group's cluster id as this fresh
// node's (node.json) and gossips it, after which gossip refuses any other
// cluster.
func (s *Server) adoptClusterID(clusterID string) error {
	if s.cfg.ClusterID != "" && clusterID != s.cfg.ClusterID {
		return fmt.Errorf("%w: the metadata group is cluster %s, but cluster.id is %s", ErrIdentityMismatch, clusterID, s.cfg.ClusterID)
	}
	id := s.id
	id.ClusterID, id.fresh = clusterID, false
	if err := saveIdentity(s.cfg.DataDir, id); err != nil {
		return fmt.Errorf("record the cluster id in %s: %w", s.cfg.DataDir, err)
	}
	s.id = id
	s.lg.Info("joined cluster", "cluster_id", clusterID)
	if m := s.members.Load(); m != nil {
		if err := m.Update(time.Second, func(me *membership.Meta) { me.ClusterID = clusterID }); err != nil {
			s.lg.Warn("could not gossip the cluster id", "err", err)
		}
	}
	return nil
}

// onMemberEvent is membership's OnEvent (it must not block): a node
// declared dead wakes expireFailed.
func (s *Server) onMemberEvent(e membership.Event) {
	if e.Kind != membership.EventFail {
		return
	}
	select {
	case s.failures <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// leaderCheckInterval is how often expireFailed looks whether this node
// has become the Raft leader.
const leaderCheckInterval = 250 * time.Millisecond

// expireFailed runs until ctx ends. On the Raft leader, nodes gossip has
// declared dead have their registration sessions closed at once, so the
// coordinator's failover does not wait for session.timeout: when gossip
// declares one, and when this node becomes leader (the old leader may be
// the node that died, declared while this node was a follower). Gossip
// declares a node dead only after its suspicion timeout, during which the
// node could refute; and should it still be alive, its heartbeat loop sees
// its registration gone and registers again.
//
// A node that gossip held dead before this node took office is expired
// only once this node has led for the gossip's failure-detection time
// (deadToExpire): its view may be stale (memberlist had not merged the
// node's refutation or rejoin here yet), and a live node's registration
// closed takes it out of every ISR and leadership. Kafka's controller
// likewise waits one session timeout for broker heartbeats after a
// failover.
func (s *Server) expireFailed(ctx context.Context) {
	t := time.NewTicker(leaderCheckInterval)
	defer t.Stop()
	wasLeader := false
	var office time.Time  // when this node last became leader
	var recheck time.Time // when a node held dead at office start may be expired; zero: none waits
	for {
		failed := false
		select {
		case <-ctx.Done():
			return
		case <-s.failures:
			failed = true
		case <-t.C:
		}
		leader := s.meta.IsLeader()
		now := time.Now()
		if leader && !wasLeader {
			office = now
		}
		due := !recheck.IsZero() && !now.Before(recheck)
		if leader && (failed || !wasLeader || due) {
			recheck = s.expireDead(ctx, office, now)
		}
		if !leader {
			recheck = time.Time{}
		}
		wasLeader = leader
	}
}

// expireDead closes the registration session of every node gossip holds
// dead that deadToExpire allows, this node having taken office at office,
// and returns when the others may be (zero: none waits).
func (s *Server) expireDead(ctx context.Context, office, now time.Time) time.Time {
	m := s.members.Load()
	members := m.Members()
	dead, recheck := deadToExpire(members, s.cfg.NodeID, office, now, s.cfg.GossipTimings.DetectionTime(len(members)))
	for _, id := range dead {
		owner, err := s.cat.TabletServerOwner(id)
		if err != nil || owner == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.SessionTimeout)
		err = s.meta.CloseSession(cctx, owner)
		cancel()
		if err != nil && !errors.Is(err, raftmeta.ErrSessionExpired) {
			s.lg.Warn("could not expire the registration of a dead node; its session will time out", "dead_node", id, "err", err)
			continue
		}
		s.lg.Info("expired the registration of a node gossip declared dead", "dead_node", id, "session", fmt.Sprintf("%#x", owner))
	}
	return recheck
}

// deadToExpire returns the members other than self that gossip holds dead
// and that a Raft leader in office since office may expire at now: those
// declared dead while it was in office (fresh news: gossip took its
// failure-detection time to declare them), and, once it has led for grace
// (the failure-detection time), the others too. A member this node's view
// held dead before it took office may be alive, its refutation not merged
// here yet: it gets grace from the office start to show up alive. recheck
// is when the ones left waiting may be expired (zero: none waits).
func deadToExpire(members []membership.Member, self int32, office, now time.Time, grace time.Duration) (dead []int32, recheck time.Time) {
	for _, mb := range members {
		if mb.Alive || mb.ID == self {
			continue
		}
		if mb.Since.After(office) || now.Sub(office) >= grace {
			dead = append(dead, mb.ID)
			continue
		}
		recheck = office.Add(grace)
	}
	return dead, recheck
}

// Members returns every node the gossip has seen, alive or not, this one
// included, ordered by id; without gossip, this node alone.
func (s *Server) Members() []membership.Member {
	if m := s.members.Load(); m != nil {
		return m.Members()
	}
	return []membership.Member{{Meta: membership.Meta{
		ID: s.cfg.NodeID, API: s.apiAddr, Raft: s.meta.Addr(), Rack: s.cfg.Rack, Version: Version,
		ClusterID: s.knownClusterID(), Roles: roles, HasState: s.meta.HasState(),
	}, Alive: true}}
}

// gossipAPIAddr returns the API address gossip knows for a node, "" when
// none.
func (s *Server) gossipAPIAddr(nodeID string) string {
	m := s.members.Load()
	if m == nil {
		return ""
	}
	id, err := strconv.ParseInt(nodeID, 10, 32)
	if err != nil {
		return ""
	}
	if mb, ok := m.Member(int32(id)); ok && mb.Alive {
		return mb.API
	}
	return ""
}
