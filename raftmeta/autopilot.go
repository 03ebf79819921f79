package raftmeta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// Peer is a node as the cluster's gossip sees it: what bootstrap and
// autopilot need to know of it.
type Peer struct {
	// ID is the node's Raft server id; Addr its Raft address.
	ID, Addr string
	// Alive is false once gossip has declared the node dead or it left.
	Alive bool
	// Since is when Alive last changed.
	Since time.Time
	// HasState: the node holds Raft state (bootstrapped or joined).
	HasState bool
}

// AutopilotConfig configures what the leader does to the Raft configuration
// as nodes come and go (Consul's autopilot). Autopilot runs only with Peers
// set.
type AutopilotConfig struct {
	// Peers returns the gossip's view of the nodes, this one included. It
	// must be safe for concurrent use and not block.
	Peers func() []Peer
	// Voters is how many servers should vote (raft.voters). Never an even
	// count that adds no fault tolerance: with 4 eligible servers and
	// Voters 5, 3 vote. Default 3.
	Voters int
	// StabilizationTime is how long a non-voter must have been alive before
	// it is promoted (Consul's ServerStabilizationTime). Default 10s.
	StabilizationTime time.Duration
	// DeadVoterGrace is how long a voter may be dead before a live
	// non-voter takes its place (it is demoted). Default 30s.
	DeadVoterGrace time.Duration
	// DeadNodeCleanup is how long a server may be dead before it is
	// removed from the configuration (Consul's reconnect_timeout).
	// Default 72h.
	DeadNodeCleanup time.Duration
	// Interval is how often the leader reconciles. Default 250ms.
	Interval time.Duration
}

func (c AutopilotConfig) withDefaults() AutopilotConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Voters <= 0 {
		c.Voters = 3
	}
	def(&c.StabilizationTime, 10*time.Second)
	def(&c.DeadVoterGrace, 30*time.Second)
	def(&c.DeadNodeCleanup, 72*time.Hour)
	def(&c.Interval, 250*time.Millisecond)
	return c
}

// changeKind is one change autopilot makes to the configuration.
type changeKind int

const (
	addNonvoter changeKind = iota + 1 // a live node not in the configuration
	promote                           // a stable non-voter becomes a voter
	demote                            // a voter dead past the grace, after its replacement is promoted
	remove                            // a server dead past the cleanup
)

func (k changeKind) String() string {
	return [...]string{"", "add non-voter", "promote", "demote", "remove"}[k]
}

type change struct {
	kind     changeKind
	id, addr string
}

// plan decides the changes that bring servers in line with peers at now
// (pure, for tests). missing holds, per server id with no peer, when the
// leader first saw it so; plan updates it. self is never demoted or
// removed.
func plan(c AutopilotConfig, self string, servers []Server, peers []Peer, missing map[string]time.Time, now time.Time) []change {
	byID := make(map[string]Peer, len(peers))
	for _, p := range peers {
		byID[p.ID] = p
	}
	inConf := make(map[string]bool, len(servers))
	// deadFor is how long a server has been dead (0: alive).
	deadFor := func(id string) time.Duration {
		if id == self {
			return 0
		}
		p, ok := byID[id]
		switch {
		case !ok:
			return now.Sub(missing[id])
		case !p.Alive:
			return now.Sub(p.Since)
		}
		return 0
	}
	var out []change
	var voters, deadVoters, eligible []string
	for _, s := range servers {
		inConf[s.ID] = true
		if _, ok := byID[s.ID]; ok {
			delete(missing, s.ID)
		} else if _, seen := missing[s.ID]; !seen {
			missing[s.ID] = now
		}
		dead := deadFor(s.ID)
		p := byID[s.ID]
		switch {
		case dead >= c.DeadNodeCleanup:
			out = append(out, change{remove, s.ID, s.Address})
			continue
		case s.Voter && dead >= c.DeadVoterGrace:
			deadVoters = append(deadVoters, s.ID)
		case !s.Voter && dead == 0 && now.Sub(p.Since) >= c.StabilizationTime:
			eligible = append(eligible, s.ID)
		}
		if s.Voter {
			voters = append(voters, s.ID)
		}
		if dead == 0 && p.Addr != "" && p.Addr != s.Address {
			// The node came back on another address: re-add keeps the
			// suffrage and updates the address.
			k := addNonvoter
			if s.Voter {
				k = promote
			}
			out = append(out, change{k, s.ID, p.Addr})
		}
	}
	for id := range missing {
		if !inConf[id] {
			delete(missing, id)
		}
	}
	for _, p := range peers {
		if p.Alive && !inConf[p.ID] && p.Addr != "" {
			out = append(out, change{addNonvoter, p.ID, p.Addr})
		}
	}
	slices.Sort(eligible)
	addrOf := func(id string) string {
		for _, s := range servers {
			if s.ID == id {
				return s.Address
			}
		}
		return ""
	}
	// A dead voter's replacement is promoted before it is demoted, so the
	// count of live voters never drops on the way.
	for _, id := range deadVoters {
		if len(eligible) == 0 {
			break // no replacement: it keeps its vote
		}
		out = append(out, change{promote, eligible[0], addrOf(eligible[0])}, change{demote, id, addrOf(id)})
		eligible = eligible[1:]
	}
	cur := len(voters)
	want := min(c.Voters, cur+len(eligible))
	if want > 1 && want%2 == 0 {
		want-- // an even count tolerates no more failures than one less
	}
	for ; cur < want; cur++ {
		out = append(out, change{promote, eligible[0], addrOf(eligible[0])})
		eligible = eligible[1:]
	}
	return out
}

// autopilot runs on the leader until ctx ends: every Interval it applies
// plan's changes, one at a time, each waiting for its commit.
func (n *Node) autopilot(ctx context.Context) {
	c := n.cfg.Autopilot.withDefaults()
	missing := make(map[string]time.Time)
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		servers, err := n.Servers()
		if err != nil {
			continue
		}
		for _, ch := range plan(c, n.cfg.NodeID, servers, c.Peers(), missing, time.Now()) {
			if err := n.applyChange(ctx, ch); err != nil {
				if ctx.Err() == nil && !errors.Is(err, ErrNotLeader) {
					n.lg.Warn("autopilot change failed", "change", ch.kind.String(), "server", ch.id, "err", err)
				}
				break
			}
			n.lg.Info("autopilot: "+ch.kind.String(), "server", ch.id, "addr", ch.addr)
		}
	}
}

func (n *Node) applyChange(ctx context.Context, ch change) error {
	ctx, cancel := context.WithTimeout(ctx, leaderProposeTimeout)
	defer cancel()
	switch ch.kind {
	case addNonvoter:
		return n.AddNonvoter(ctx, ch.id, ch.addr)
	case promote:
		return n.AddVoter(ctx, ch.id, ch.addr)
	case demote:
		if !n.IsLeader() {
			return n.notLeaderErr(nil)
		}
		return n.mapRaftErr(n.raft.DemoteVoter(raft.ServerID(ch.id), 0, raftTimeout(ctx)).Error())
	case remove:
		return n.RemoveServer(ctx, ch.id)
	}
	return fmt.Errorf("raftmeta: unknown autopilot change %d", ch.kind)
}
