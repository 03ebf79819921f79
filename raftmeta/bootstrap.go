package raftmeta

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// HasState reports whether this node holds Raft state: it has bootstrapped
// a group, or a leader has replicated to it. Such a node never bootstraps.
func (n *Node) HasState() bool { return n.raft.LastIndex() > 0 }

// BootstrapCluster makes servers, all voters, the first configuration of a
// new group. Each of them may call it with the same list (hashicorp/raft
// accepts identical bootstraps, as Consul does), so no one node is needed
// for the cluster to form. It fails on a node that has state.
func (n *Node) BootstrapCluster(servers []Peer) error {
	conf := raft.Configuration{}
	for _, p := range servers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
	}
	if err := n.raft.BootstrapCluster(conf).Error(); err != nil {
		return fmt.Errorf("raftmeta: bootstrap: %w", err)
	}
	n.lg.Info("bootstrapped cluster", "servers", len(servers))
	return nil
}

// bootstrapPoll is how often BootstrapExpect looks at the peers again.
const bootstrapPoll = 50 * time.Millisecond

// BootstrapExpect returns once this node holds Raft state (Consul's
// bootstrap_expect). A node with state returns at once: a restart never
// bootstraps. Otherwise it polls peers (this node included, ordered the
// same way on every node) until one of:
//
//   - a leader has added this node (it has state);
//   - once joined is closed (nil: at once), expect alive peers without
//     state are visible, and none with state: the first expect of them
//     bootstrap a group of themselves, each with the same configuration
//     (a node not among them waits to be added);
//   - an alive peer has state: a group exists, and this node waits for its
//     leader to add it (autopilot does).
//
// ctx bounds the wait.
func (n *Node) BootstrapExpect(ctx context.Context, expect int, joined <-chan struct{}, peers func() []Peer) error {
	t := time.NewTicker(bootstrapPoll)
	defer t.Stop()
	lastLog := time.Now()
	for !n.HasState() {
		if fresh, ok := n.bootstrapSet(expect, joined, peers()); ok {
			return n.BootstrapCluster(fresh)
		} else if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			n.lg.Info("waiting for the metadata group: for cluster.bootstrap-expect nodes without state, or to be added by a leader",
				"bootstrap_expect", expect, "fresh_nodes_seen", len(fresh))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raftmeta: waiting to bootstrap or be added to the metadata group: %w", ctx.Err())
		case <-n.stop:
			return ErrStopped
		case <-t.C:
		}
	}
	return nil
}

// bootstrapSet returns the alive peers without state and whether this node
// should bootstrap a group of the first expect of them now.
func (n *Node) bootstrapSet(expect int, joined <-chan struct{}, peers []Peer) ([]Peer, bool) {
	var fresh []Peer
	for _, p := range peers {
		if !p.Alive {
			continue
		}
		if p.HasState && p.ID != n.cfg.NodeID {
			return nil, false // a group exists: wait to be added
		}
		fresh = append(fresh, p)
	}
	if joined != nil {
		select {
		case <-joined:
		default:
			return fresh, false
		}
	}
	if len(fresh) < expect {
		return fresh, false
	}
	fresh = fresh[:expect]
	for _, p := range fresh {
		if p.ID == n.cfg.NodeID {
			return fresh, true
		}
	}
	return fresh, false
}
