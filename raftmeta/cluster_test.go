package raftmeta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testCluster runs nodes in one process on raft's in-memory transport, with
// stores that survive a node's restart.
type testCluster struct {
	t      *testing.T
	cfgs   []Config
	addrs  []raft.ServerAddress
	trans  []*raft.InmemTransport
	stores []*raft.InmemStore
	snaps  []*raft.InmemSnapshotStore
	nodes  []*Node // nil while stopped
	cut    map[[2]int]bool
}

func newTestCluster(t *testing.T, size int) *testCluster {
	return newTestClusterWith(t, size, nil)
}

// newTestClusterWith lets configure adjust each node's Config first.
func newTestClusterWith(t *testing.T, size int, configure func(i int, cfg *Config)) *testCluster {
	c := &testCluster{t: t, cut: make(map[[2]int]bool)}
	for i := range size {
		cfg := fastTimings(DefaultConfig())
		cfg.NodeID = fmt.Sprintf("n%d", i)
		cfg.Logger = testLogger(t, cfg.NodeID)
		cfg.Bootstrap = i == 0
		// Small thresholds so that snapshots are taken and installed.
		cfg.SnapshotThreshold = 32
		cfg.SnapshotInterval = 50 * time.Millisecond
		cfg.TrailingLogs = 8
		if configure != nil {
			configure(i, &cfg)
		}
		addr, tr := raft.NewInmemTransport("")
		c.cfgs = append(c.cfgs, cfg)
		c.addrs = append(c.addrs, addr)
		c.trans = append(c.trans, tr)
		c.stores = append(c.stores, raft.NewInmemStore())
		c.snaps = append(c.snaps, raft.NewInmemSnapshotStore())
		c.nodes = append(c.nodes, nil)
	}
	c.connectAll()
	for i := range size {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	ctx := testCtx(t, 20*time.Second)
	if err := c.nodes[0].WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < size; i++ {
		if err := c.nodes[0].AddVoter(ctx, c.cfgs[i].NodeID, string(c.addrs[i])); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.nodes {
		if err := n.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	servers, err := c.nodes[0].Servers()
	if err != nil || len(servers) != size {
		t.Fatalf("servers = %+v, %v", servers, err)
	}
	return c
}

func (c *testCluster) start(i int) {
	n, err := OpenWith(c.cfgs[i], c.trans[i], c.stores[i], c.stores[i], c.snaps[i])
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[i] = n
}

func (c *testCluster) stop(i int) {
	if c.nodes[i] == nil {
		return
	}
	if err := c.nodes[i].Close(); err != nil {
		c.t.Errorf("close n%d: %v", i, err)
	}
	c.nodes[i] = nil
}

// restart stops node i and starts it again on a fresh transport with the
// same address and the same stores.
func (c *testCluster) restart(i int) {
	c.stop(i)
	c.trans[i].DisconnectAll()
	_, c.trans[i] = raft.NewInmemTransport(c.addrs[i])
	c.connectAll()
	c.start(i)
}

func (c *testCluster) connectAll() {
	for i := range c.trans {
		for j := range c.trans {
			if i != j && !c.cut[[2]int{i, j}] {
				c.trans[i].Connect(c.addrs[j], c.trans[j])
			}
		}
	}
}

// isolate cuts node i off from every other node, both ways.
func (c *testCluster) isolate(i int) {
	for j := range c.trans {
		if j == i {
			continue
		}
		c.cut[[2]int{i, j}], c.cut[[2]int{j, i}] = true, true
		c.trans[j].Disconnect(c.addrs[i])
	}
	c.trans[i].DisconnectAll()
}

func (c *testCluster) heal() {
	clear(c.cut)
	c.connectAll()
}

// leader waits for a node that leads and has established leadership.
func (c *testCluster) leader(exclude ...int) *Node {
	c.t.Helper()
	var found *Node
	waitFor(c.t, 15*time.Second, "a leader", func() bool {
		for i, n := range c.nodes {
			if n == nil || contains(exclude, i) {
				continue
			}
			if n.IsLeader() && n.ready.Load() {
				found = n
				return true
			}
		}
		return false
	})
	return found
}

func (c *testCluster) index(n *Node) int {
	for i, m := range c.nodes {
		if m == n {
			return i
		}
	}
	return -1
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// converged waits until every running node has the same FSM snapshot bytes.
func (c *testCluster) converged() []byte {
	c.t.Helper()
	var ref []byte
	waitFor(c.t, 20*time.Second, "identical FSM state on all nodes", func() bool {
		ref = nil
		for _, n := range c.nodes {
			if n == nil {
				continue
			}
			b := n.fsm.snapshotBytes()
			if ref == nil {
				ref = b
			} else if !bytes.Equal(ref, b) {
				return false
			}
		}
		return true
	})
	return ref
}

func writeN(t *testing.T, n *Node, prefix string, count int) {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	for i := range count {
		if _, err := n.Create(ctx, fmt.Sprintf("%s-%03d", prefix, i), []byte(prefix), Persistent); err != nil {
			t.Fatalf("write %s %d: %v", prefix, i, err)
		}
	}
}

func TestClusterReplication(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := testCtx(t, 20*time.Second)
	writeN(t, l, "/r", 40) // crosses SnapshotThreshold
	if _, err := l.Multi(ctx, 0, CreateOp("/m", nil, Persistent), CreateOp("/m/s-", nil, PersistentSequential)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SetData(ctx, "/r-000", []byte("changed"), -1); err != nil {
		t.Fatal(err)
	}
	c.converged()

	// Followers refuse writes and name the leader.
	for _, n := range c.nodes {
		if n == l {
			continue
		}
		_, err := n.Create(ctx, "/follower-write", nil, Persistent)
		var nle *NotLeaderError
		if !errors.As(err, &nle) || !errors.Is(err, ErrNotLeader) || nle.LeaderID != l.cfg.NodeID || nle.LeaderAddr != l.Addr() {
			t.Fatalf("follower write: %v", err)
		}
		// Follower Sync then read sees the leader's writes.
		if err := n.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if d, _, err := n.Get("/r-000"); err != nil || string(d) != "changed" {
			t.Fatalf("follower read: %q %v", d, err)
		}
	}
	// A follower's watch fires as its FSM applies.
	f := c.nodes[(c.index(l)+1)%3]
	w := f.NewWatcher()
	if _, err := f.ExistsW("/watched", w); !errors.Is(err, ErrNoNode) {
		t.Fatal(err)
	}
	if _, err := l.Create(ctx, "/watched", nil, Persistent); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, w, Event{Type: NodeCreated, Path: "/watched"})
}

func TestClusterLeaderFailover(t *testing.T) {
	c := newTestCluster(t, 3)
	old := c.leader()
	oi := c.index(old)
	writeN(t, old, "/before", 10)
	c.stop(oi)

	l := c.leader(oi)
	writeN(t, l, "/after", 40) // enough to compact the log past the stopped node
	c.converged()

	c.restart(oi)
	state := c.converged()
	if len(state) == 0 {
		t.Fatal("no state")
	}
	if _, err := c.nodes[oi].Exists("/after-039"); err != nil {
		t.Fatalf("restarted node did not catch up: %v", err)
	}
	// The cluster still takes writes.
	writeN(t, c.leader(), "/again", 3)
	c.converged()
}

func TestClusterPartition(t *testing.T) {
	c := newTestCluster(t, 3)
	old := c.leader()
	oi := c.index(old)
	writeN(t, old, "/pre", 5)
	c.converged()

	c.isolate(oi)
	// The minority side cannot write.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := old.Create(ctx, "/minority", nil, Persistent)
	cancel()
	t.Logf("minority write: %v", err)
	if !errors.Is(err, ErrNotLeader) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("minority write: %v", err)
	}
	// The majority elects a leader and keeps writing.
	l := c.leader(oi)
	writeN(t, l, "/majority", 20)
	if _, err := old.Exists("/majority-000"); !errors.Is(err, ErrNoNode) {
		t.Fatal("isolated node saw a majority write")
	}

	c.heal()
	c.converged()
	for _, n := range c.nodes {
		if _, err := n.Exists("/minority"); !errors.Is(err, ErrNoNode) {
			t.Fatalf("minority write survived on %s", n.cfg.NodeID)
		}
		if _, err := n.Exists("/majority-019"); err != nil {
			t.Fatalf("%s misses a majority write: %v", n.cfg.NodeID, err)
		}
	}
}

func TestClusterSessionExpiry(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := testCtx(t, 20*time.Second)
	s, err := l.CreateSession(ctx, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Do(ctx, s.ID, CreateOp("/eph", nil, Ephemeral)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create(ctx, "/keep", nil, Persistent); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "ephemeral replicated", func() bool {
		for _, n := range c.nodes {
			if _, err := n.Exists("/eph"); err != nil {
				return false
			}
		}
		return true
	})
	// Nobody touches the session: the leader expires it everywhere.
	waitFor(t, 10*time.Second, "ephemeral removed on all nodes", func() bool {
		for _, n := range c.nodes {
			if _, err := n.Exists("/eph"); !errors.Is(err, ErrNoNode) || len(n.Sessions()) != 0 {
				return false
			}
		}
		return true
	})
	if _, err := l.Exists("/keep"); err != nil {
		t.Fatal(err)
	}
	c.converged()
}

func TestClusterFailoverGrantsFreshTimeouts(t *testing.T) {
	c := newTestCluster(t, 3)
	old := c.leader()
	ctx := testCtx(t, 20*time.Second)
	const timeout = 600 * time.Millisecond
	s, err := old.CreateSession(ctx, timeout)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Do(ctx, s.ID, CreateOp("/eph", nil, Ephemeral)); err != nil {
		t.Fatal(err)
	}
	// Keep the session alive on the leader for longer than its timeout.
	keepAlive := time.NewTicker(timeout / 6)
	for end := time.Now().Add(2 * timeout); time.Now().Before(end); <-keepAlive.C {
		old.Touch(s.ID)
		if _, err := old.Exists("/eph"); err != nil {
			t.Fatal("session expired although touched")
		}
	}
	keepAlive.Stop()
	// The session must be known everywhere before the leader goes away.
	waitFor(t, 10*time.Second, "session replicated", func() bool {
		for _, n := range c.nodes {
			if _, err := n.Exists("/eph"); err != nil {
				return false
			}
		}
		return true
	})
	oi := c.index(old)
	c.stop(oi)
	l := c.leader(oi)
	established := time.Now()

	// The new leader never heard from the session, yet grants it a full
	// timeout from its own election.
	if _, err := l.Exists("/eph"); err != nil {
		t.Fatal("session expired at failover")
	}
	waitFor(t, 10*time.Second, "session expired by the new leader", func() bool {
		_, err := l.Exists("/eph")
		return errors.Is(err, ErrNoNode)
	})
	if since := time.Since(established); since < timeout/2 {
		t.Fatalf("session expired %s after failover, before its %s timeout", since, timeout)
	}
	c.converged()
}
