package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var testSecret = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// clusterConfig is node id in dir, clustering with the nodes at join.
func clusterConfig(t *testing.T, dir string, id int32, gossip string, expect int, join ...string) Config {
	cfg := testConfig(t, dir)
	cfg.NodeID = id
	cfg.GossipListen = gossip
	cfg.Join = join
	cfg.BootstrapExpect = expect
	cfg.ClusterSecret = testSecret
	cfg.ServerStabilizationTime = 100 * time.Millisecond
	return cfg
}

func recordedClusterID(t *testing.T, dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, identityFile))
	if err != nil {
		t.Fatal(err)
	}
	var id identity
	if err := json.Unmarshal(data, &id); err != nil {
		t.Fatal(err)
	}
	return id.ClusterID
}

// suffrages returns the metadata group's configuration as seen by s:
// "id:v" for voters, "id:n" for non-voters, sorted.
func suffrages(t *testing.T, s *Server) []string {
	servers, err := s.meta.Servers()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sv := range servers {
		k := ":n"
		if sv.Voter {
			k = ":v"
		}
		out = append(out, sv.ID+k)
	}
	slices.Sort(out)
	return out
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startCluster starts n nodes at once with bootstrap-expect n, each
// listing all n gossip addresses, and returns once all are ready.
func startCluster(t *testing.T, n int) ([]*Server, []Config) {
	gossip := make([]string, n)
	for i := range gossip {
		gossip[i] = freeAddr(t)
	}
	cfgs := make([]Config, n)
	for i := range cfgs {
		cfgs[i] = clusterConfig(t, t.TempDir(), int32(i+1), gossip[i], n, gossip...)
	}
	return startConfigs(t, cfgs), cfgs
}

// startConfigs starts a node of each config at once, and returns once all
// are ready.
func startConfigs(t *testing.T, cfgs []Config) []*Server {
	n := len(cfgs)
	servers := make([]*Server, n)
	errs := make(chan error, n)
	for i := range cfgs {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			s, err := Start(ctx, cfgs[i], testLogger(t))
			servers[i] = s
			errs <- err
		}()
	}
	for range cfgs {
		if err := <-errs; err != nil {
			t.Fatalf("start: %v", err)
		}
	}
	for _, s := range servers {
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
	}
	return servers
}

// TestClusterBootstrapExpect: three nodes started at once with
// bootstrap-expect 3 form one metadata group of three voters with one
// leader and one cluster id; a fourth joins as a non-voter; a restarted
// node does not bootstrap again (it would fail: its Raft has state) and
// keeps its cluster.
func TestClusterBootstrapExpect(t *testing.T) {
	servers, cfgs := startCluster(t, 3)
	gossip := cfgs[0].Join
	dirs := []string{cfgs[0].DataDir, cfgs[1].DataDir, cfgs[2].DataDir, t.TempDir()}
	want := []string{"1:v", "2:v", "3:v"}
	for _, s := range servers {
		if got := suffrages(t, s); !slices.Equal(got, want) {
			t.Fatalf("node %d sees the configuration %v, want %v", s.cfg.NodeID, got, want)
		}
	}
	leaders := 0
	for _, s := range servers {
		if s.meta.IsLeader() {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders", leaders)
	}
	cid := servers[0].ClusterID()
	for i, s := range servers {
		if s.ClusterID() != cid || recordedClusterID(t, dirs[i]) != cid {
			t.Fatalf("node %d: cluster %s (node.json %s), node 1: %s", i+1, s.ClusterID(), recordedClusterID(t, dirs[i]), cid)
		}
		poll(t, "three alive members", func() bool {
			n := 0
			for _, m := range s.Members() {
				if m.Alive && m.ClusterID == cid && m.HasState && m.Version == Version {
					n++
				}
			}
			return n == 3
		})
	}

	// A fourth, started the same way, joins as a non-voter (raft.voters 3).
	cfg4 := clusterConfig(t, dirs[3], 4, freeAddr(t), 3, gossip...)
	s4 := startServer(t, cfg4)
	want = []string{"1:v", "2:v", "3:v", "4:n"}
	poll(t, "node 4 as a non-voter", func() bool { return slices.Equal(suffrages(t, servers[0]), want) })
	if s4.ClusterID() != cid || recordedClusterID(t, dirs[3]) != cid {
		t.Fatalf("node 4 is in cluster %s, want %s", s4.ClusterID(), cid)
	}

	// A restart neither bootstraps nor changes cluster.
	if err := servers[1].Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfgs[1].RaftListen = servers[1].meta.Addr() // the address the group knows
	s2 := startServer(t, cfgs[1])
	if s2.ClusterID() != cid {
		t.Fatalf("restarted node 2 is in cluster %s, want %s", s2.ClusterID(), cid)
	}
	poll(t, "the configuration unchanged", func() bool { return slices.Equal(suffrages(t, s2), want) })
}

// TestClusterRefusesAnotherCluster: a node whose data directory belongs to
// one cluster, told to join another, is refused with both ids named.
func TestClusterRefusesAnotherCluster(t *testing.T) {
	a := clusterConfig(t, t.TempDir(), 1, freeAddr(t), 1)
	sa := startServer(t, a)
	b := clusterConfig(t, t.TempDir(), 2, freeAddr(t), 1)
	sb := startServer(t, b)
	idB := sb.ClusterID()
	if err := sb.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.Join = []string{a.GossipListen}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, b, testLogger(t))
	if err == nil {
		s.Stop(context.Background())
		t.Fatal("a node of another cluster joined")
	}
	if !strings.Contains(err.Error(), "cluster "+sa.ClusterID()) || !strings.Contains(err.Error(), "cluster "+idB) || !strings.Contains(err.Error(), "cluster.join") {
		t.Fatalf("err = %v, want both cluster ids and cluster.join named", err)
	}
}

// TestGossipFailureExpiresRegistration: when gossip declares a node dead,
// the Raft leader closes its registration session at once instead of
// waiting for session.timeout. Here only the node's gossip dies (a false
// suspicion, as far as the node is concerned): it sees its registration
// gone and registers again under a new session.
func TestGossipFailureExpiresRegistration(t *testing.T) {
	servers, _ := startCluster(t, 3)
	var victim *Server
	for _, s := range servers {
		if !s.meta.IsLeader() {
			victim = s
		}
	}
	old := victim.session.Load()
	if err := victim.members.Load().Kill(); err != nil {
		t.Fatal(err)
	}
	poll(t, "a new registration session of the node whose gossip died", func() bool {
		owner, err := victim.cat.TabletServerOwner(victim.cfg.NodeID)
		return err == nil && owner != 0 && owner != old && owner == victim.session.Load()
	})
	if _, live := victim.meta.Session(old); live {
		t.Fatal("the old registration session is still open")
	}
}

// TestLeaderDeathExpiresItsRegistration: the Raft leader crashes (its gossip
// and Raft stop, its session is not closed); the new leader closes the dead
// node's registration session when it takes over, though gossip declared
// the node dead while it was still a follower. The session timeout is long,
// so only that can remove the registration within the wait.
func TestLeaderDeathExpiresItsRegistration(t *testing.T) {
	gossip := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cfgs := make([]Config, 3)
	for i := range cfgs {
		cfgs[i] = clusterConfig(t, t.TempDir(), int32(i+1), gossip[i], 3, gossip...)
		cfgs[i].SessionTimeout = 10 * time.Minute
	}
	servers := startConfigs(t, cfgs)
	var leader *Server
	var rest []*Server
	for _, s := range servers {
		if s.meta.IsLeader() {
			leader = s
		} else {
			rest = append(rest, s)
		}
	}
	// A crash: gossip and Raft stop; nothing is closed cleanly.
	leader.members.Load().Kill()
	if err := leader.meta.Raft().Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	poll(t, "the dead leader's registration gone", func() bool {
		owner, err := rest[0].cat.TabletServerOwner(leader.cfg.NodeID)
		return err == nil && owner == 0 && (rest[0].meta.IsLeader() || rest[1].meta.IsLeader())
	})
}
