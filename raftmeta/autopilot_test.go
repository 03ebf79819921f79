package raftmeta

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestAutopilotPlan(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	long := now.Add(-time.Hour)
	c := AutopilotConfig{Voters: 5, StabilizationTime: 10 * time.Second, DeadVoterGrace: 30 * time.Second, DeadNodeCleanup: 50 * time.Minute}
	alive := func(id string, since time.Time) Peer { return Peer{ID: id, Addr: "a" + id, Alive: true, Since: since} }
	dead := func(id string, since time.Time) Peer { return Peer{ID: id, Addr: "a" + id, Since: since} }
	voter := func(id string) Server { return Server{ID: id, Address: "a" + id, Voter: true} }
	nonvoter := func(id string) Server { return Server{ID: id, Address: "a" + id} }
	for _, tc := range []struct {
		name    string
		voters  int
		servers []Server
		peers   []Peer
		want    []change
	}{
		{name: "a new node is added as a non-voter",
			servers: []Server{voter("1")}, peers: []Peer{alive("1", long), alive("2", now)},
			want: []change{{addNonvoter, "2", "a2"}}},
		{name: "not promoted before it is stable",
			servers: []Server{voter("1"), nonvoter("2"), nonvoter("3")}, peers: []Peer{alive("1", long), alive("2", now.Add(-time.Second)), alive("3", long)},
			want: nil}, // 1 + 1 stable = 2 voters would be even
		{name: "promoted up to an odd count",
			servers: []Server{voter("1"), nonvoter("2"), nonvoter("3"), nonvoter("4")}, peers: []Peer{alive("1", long), alive("2", long), alive("3", long), alive("4", long)},
			want: []change{{promote, "2", "a2"}, {promote, "3", "a3"}}},
		{name: "raft.voters caps the voters",
			voters:  3,
			servers: []Server{voter("1"), voter("2"), voter("3"), nonvoter("4"), nonvoter("5")}, peers: []Peer{alive("1", long), alive("2", long), alive("3", long), alive("4", long), alive("5", long)},
			want: nil},
		{name: "a dead voter within the grace keeps its vote",
			voters:  3,
			servers: []Server{voter("1"), voter("2"), voter("3"), nonvoter("4")}, peers: []Peer{alive("1", long), dead("2", now.Add(-10*time.Second)), alive("3", long), alive("4", long)},
			want: nil},
		{name: "a dead voter past the grace is replaced: promote first, then demote",
			voters:  3,
			servers: []Server{voter("1"), voter("2"), voter("3"), nonvoter("4")}, peers: []Peer{alive("1", long), dead("2", now.Add(-time.Minute)), alive("3", long), alive("4", long)},
			want: []change{{promote, "4", "a4"}, {demote, "2", "a2"}}},
		{name: "with no replacement a dead voter stays",
			voters:  3,
			servers: []Server{voter("1"), voter("2"), voter("3")}, peers: []Peer{alive("1", long), dead("2", now.Add(-time.Minute)), alive("3", long)},
			want: nil},
		{name: "dead past the cleanup: removed, never the leader itself",
			servers: []Server{voter("1"), voter("2"), voter("3"), nonvoter("4")}, peers: []Peer{dead("1", long), alive("2", long), alive("3", long), dead("4", long)},
			want: []change{{remove, "4", "a4"}}},
		{name: "a server gossip does not know is missing from now on",
			servers: []Server{voter("1"), nonvoter("9")}, peers: []Peer{alive("1", long)},
			want: nil},
		{name: "a node back on another address is re-added there",
			servers: []Server{voter("1"), nonvoter("2")}, peers: []Peer{alive("1", long), {ID: "2", Addr: "new", Alive: true, Since: now}},
			want: []change{{addNonvoter, "2", "new"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := c
			if tc.voters != 0 {
				cc.Voters = tc.voters
			}
			got := plan(cc, "1", tc.servers, tc.peers, map[string]time.Time{}, now)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("plan = %+v, want %+v", got, tc.want)
			}
		})
	}
	// A server missing from gossip counts as dead from when the leader
	// first noticed.
	missing := map[string]time.Time{}
	servers := []Server{voter("1"), nonvoter("9")}
	peers := []Peer{alive("1", long)}
	plan(c, "1", servers, peers, missing, now)
	if got := plan(c, "1", servers, peers, missing, now.Add(time.Hour)); !slices.Equal(got, []change{{remove, "9", "a9"}}) {
		t.Fatalf("missing for an hour: plan = %+v", got)
	}
}

// gossipView is a fake membership: every node's Peer, with HasState read
// from the real node.
type gossipView struct {
	mu    sync.Mutex
	nodes []*Node
	addrs []raft.ServerAddress
	dead  map[int]time.Time
}

func (g *gossipView) peers() []Peer {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Peer
	for i, a := range g.addrs {
		p := Peer{ID: fmt.Sprintf("n%d", i), Addr: string(a), Alive: true, Since: time.Unix(0, 0)}
		if since, ok := g.dead[i]; ok {
			p.Alive, p.Since = false, since
		}
		if n := g.nodes[i]; n != nil && p.Alive {
			p.HasState = n.HasState()
		}
		out = append(out, p)
	}
	return out
}

func (g *gossipView) kill(i int) {
	g.mu.Lock()
	n := g.nodes[i]
	g.nodes[i] = nil
	g.dead[i] = time.Now()
	g.mu.Unlock()
	n.Close()
}

// startFresh starts size nodes without state, each running autopilot when
// leader, on raft's in-memory transport.
func startFresh(t *testing.T, size int, ap AutopilotConfig) (*gossipView, []*raft.InmemStore) {
	g := &gossipView{dead: map[int]time.Time{}}
	var trans []*raft.InmemTransport
	var stores []*raft.InmemStore
	for range size {
		addr, tr := raft.NewInmemTransport("")
		g.addrs, trans = append(g.addrs, addr), append(trans, tr)
		stores = append(stores, raft.NewInmemStore())
	}
	for i := range trans {
		for j := range trans {
			if i != j {
				trans[i].Connect(g.addrs[j], trans[j])
			}
		}
	}
	ap.Peers = g.peers
	for i := range size {
		cfg := fastTimings(DefaultConfig())
		cfg.NodeID = fmt.Sprintf("n%d", i)
		cfg.Logger = testLogger(t, cfg.NodeID)
		cfg.Autopilot = ap
		n, err := OpenWith(cfg, trans[i], stores[i], stores[i], raft.NewInmemSnapshotStore())
		if err != nil {
			t.Fatal(err)
		}
		g.nodes = append(g.nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range g.nodes {
			if n != nil {
				n.Close()
			}
		}
	})
	return g, stores
}

func (g *gossipView) leader(t *testing.T) *Node {
	t.Helper()
	var l *Node
	waitFor(t, 20*time.Second, "a leader", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, n := range g.nodes {
			if n != nil && n.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// suffrage returns the configuration as "id:v" / "id:n" sorted.
func suffrage(t *testing.T, n *Node) []string {
	servers, err := n.Servers()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range servers {
		k := "n"
		if s.Voter {
			k = "v"
		}
		out = append(out, s.ID+":"+k)
	}
	slices.Sort(out)
	return out
}

// TestBootstrapExpect: three fresh nodes started at once with
// bootstrap-expect 3 form one group of three voters; a fourth, fresh,
// is not among the first three, so it does not bootstrap: the leader adds
// it as a non-voter (raft.voters 3). A node with state never bootstraps.
func TestBootstrapExpect(t *testing.T) {
	g, _ := startFresh(t, 4, AutopilotConfig{Voters: 3, StabilizationTime: time.Millisecond, Interval: 20 * time.Millisecond})
	ctx := testCtx(t, 30*time.Second)
	errs := make(chan error, 4)
	for _, n := range g.nodes {
		go func() { errs <- n.BootstrapExpect(ctx, 3, nil, g.peers) }()
	}
	for range g.nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	l := g.leader(t)
	want := []string{"n0:v", "n1:v", "n2:v", "n3:n"}
	waitFor(t, 20*time.Second, fmt.Sprint("configuration ", want), func() bool { return slices.Equal(suffrage(t, l), want) })
	for _, n := range g.nodes {
		if !n.HasState() {
			t.Fatalf("%s has no state", n.cfg.NodeID)
		}
		if err := n.BootstrapExpect(ctx, 3, nil, g.peers); err != nil {
			t.Fatalf("a node with state: %v", err)
		}
	}
}

// TestBootstrapSet: who bootstraps, and when.
func TestBootstrapSet(t *testing.T) {
	n := &Node{cfg: Config{NodeID: "2"}}
	p := func(id string, alive, state bool) Peer {
		return Peer{ID: id, Addr: "a" + id, Alive: alive, HasState: state}
	}
	open, closed := make(chan struct{}), make(chan struct{})
	close(closed)
	for _, tc := range []struct {
		name   string
		expect int
		joined <-chan struct{}
		peers  []Peer
		want   bool
	}{
		{"alone with bootstrap-expect 1", 1, nil, []Peer{p("2", true, false)}, true},
		// With a join list, a node does not bootstrap alone before its
		// join has succeeded: the cluster it joins may exist already.
		{"join not yet succeeded", 1, open, []Peer{p("2", true, false)}, false},
		{"join succeeded", 1, closed, []Peer{p("2", true, false)}, true},
		{"too few", 3, nil, []Peer{p("1", true, false), p("2", true, false)}, false},
		{"a dead one does not count", 3, nil, []Peer{p("1", true, false), p("2", true, false), p("3", false, false)}, false},
		{"enough", 3, nil, []Peer{p("1", true, false), p("2", true, false), p("3", true, false)}, true},
		{"a group exists: wait to be added", 3, nil, []Peer{p("1", true, true), p("2", true, false), p("3", true, false)}, false},
		{"not among the first expect", 2, nil, []Peer{p("0", true, false), p("1", true, false), p("2", true, false)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := n.bootstrapSet(tc.expect, tc.joined, tc.peers); got != tc.want {
				t.Fatalf("bootstrap = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAutopilotReplacesDeadVoter: with five nodes and raft.voters 3, a
// dead voter is replaced by a live non-voter after the grace period and
// removed after the cleanup; the leader keeps three voters throughout.
func TestAutopilotReplacesDeadVoter(t *testing.T) {
	g, _ := startFresh(t, 5, AutopilotConfig{Voters: 3, StabilizationTime: time.Millisecond, DeadVoterGrace: 200 * time.Millisecond,
		DeadNodeCleanup: time.Second, Interval: 20 * time.Millisecond})
	ctx := testCtx(t, 30*time.Second)
	if err := g.nodes[0].BootstrapCluster(g.peers()[:1]); err != nil {
		t.Fatal(err)
	}
	l := g.leader(t)
	voters := func() (v, all int) {
		for _, s := range suffrage(t, l) {
			all++
			if s[len(s)-1] == 'v' {
				v++
			}
		}
		return v, all
	}
	waitFor(t, 20*time.Second, "5 servers, 3 voters", func() bool { v, all := voters(); return v == 3 && all == 5 })
	for _, n := range g.nodes {
		if err := n.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Kill a voter that is not the leader.
	victim := -1
	for _, s := range suffrage(t, l) {
		var i int
		fmt.Sscanf(s, "n%d", &i)
		if s[len(s)-1] == 'v' && g.nodes[i] != l {
			victim = i
			break
		}
	}
	g.kill(victim)
	id := fmt.Sprintf("n%d", victim)
	waitFor(t, 20*time.Second, id+" demoted and a replacement voting", func() bool {
		v, _ := voters()
		return v == 3 && slices.Contains(suffrage(t, l), id+":n")
	})
	waitFor(t, 20*time.Second, id+" removed", func() bool { _, all := voters(); return all == 4 })
	if v, _ := voters(); v != 3 {
		t.Fatalf("voters after cleanup: %v", suffrage(t, l))
	}
}
