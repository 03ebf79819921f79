// Package testcluster runs a Strom cluster of N nodes in one test process,
// on loopback, with shortened timings, and every node-to-node path (Raft,
// gossip, forwarding and other node-to-node calls) through a proxy the test
// controls (internal/proxy): WaitLeader, WaitRegistered, Kill, Restart,
// Partition, Heal, and PowerOff (with Options.PowerLoss). New, Restart and
// PowerOff return once every live node's metadata holds every live node's
// registration.
//
// Each node has its own loopback IP (127.a.b.10+i, a and b random per
// cluster, so clusters of parallel tests do not meet), makes its
// node-to-node connections from it, listens on private ports, and
// advertises the ports of its proxies. Clients (the test) connect from
// 127.0.0.1 and are never cut by a partition.
package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/client"
	"strom/internal/metatest"
	"strom/internal/proxy"
	"strom/internal/strictfs"
	"strom/raftmeta/catalog"
	"strom/raftmeta/membership"
	"strom/server"
)

// Options shape a cluster; the zero value is three nodes.
type Options struct {
	// Nodes is the cluster's size at start (default 3).
	Nodes int
	// Configure, when set, adjusts node i's (1-based) configuration after
	// the harness has filled in addresses and timings.
	Configure func(i int, cfg *server.Config)
	// Verbose sends the nodes' logs to t.Log; otherwise only warnings and
	// errors are logged.
	Verbose bool
	// PowerLoss puts each node's tablets (every replica's log and KV) on a
	// file system of its own in memory that knows what was fsynced
	// (internal/strictfs), so that PowerOff can drop the rest. The
	// metadata replica stays on disk (raft-boltdb fsyncs every commit).
	PowerLoss bool
}

// Cluster is a running test cluster. Its methods are safe for concurrent
// use, except that a node must not be killed and restarted at once.
type Cluster struct {
	t      testing.TB
	net    *proxy.Network
	nodes  []*Node
	secret string
	opts   Options
	dir    string // holds the nodes' data directories
}

// Node is one member of the cluster.
type Node struct {
	// ID is the node id (1-based).
	ID int32
	// Name names the node in the proxy ("n1").
	Name string
	// IP is the node's loopback IP.
	IP string
	// API is the advertised API address (through the proxy).
	API string

	c   *Cluster
	cfg server.Config
	fs  *strictfs.FS // with Options.PowerLoss: the tablets' file system

	mu      sync.Mutex
	srv     *server.Server // nil while down
	started int64          // when this run's start began, in Unix ms
}

// New starts a cluster of opts.Nodes nodes at once, each with
// cluster.bootstrap-expect set to that count, and waits until every node is
// ready and every node's metadata holds every node's registration
// (WaitRegistered). The cluster is stopped when the test ends.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	// The data directories' removal is registered first, so it runs after
	// the nodes are stopped (cleanups run last registered first).
	c := &Cluster{t: t, opts: opts, dir: t.TempDir(), net: proxy.New(testLogger(t, "proxy", opts.Verbose))}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	c.secret = base64.StdEncoding.EncodeToString(key)
	t.Cleanup(c.close)

	prefix := proxy.LoopbackPrefix()
	for i := 1; i <= opts.Nodes; i++ {
		c.nodes = append(c.nodes, c.newNode(i, prefix+strconv.Itoa(10+i)))
	}
	var joins []string
	for _, n := range c.nodes {
		joins = append(joins, n.cfg.GossipAdvertise)
	}
	for _, n := range c.nodes {
		n.cfg.Join = joins
	}
	errs := make(chan error, len(c.nodes))
	for _, n := range c.nodes {
		go func() { errs <- n.start() }()
	}
	for range c.nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	c.waitRegistered()
	return c
}

// newNode configures node i on ip, with its proxies listening.
func (c *Cluster) newNode(i int, ip string) *Node {
	t := c.t
	n := &Node{ID: int32(i), Name: "n" + strconv.Itoa(i), IP: ip, c: c}
	c.net.AddNode(n.Name, ip)
	cfg := server.DefaultConfig()
	cfg.NodeID = n.ID
	cfg.DataDir = filepath.Join(c.dir, n.Name)
	cfg.ClusterSecret = c.secret
	cfg.BootstrapExpect = c.opts.Nodes
	cfg.SourceIP = ip
	cfg.SessionTimeout = 3 * time.Second
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.SegmentVerifyRate = 0
	cfg.ServerStabilizationTime = time.Second
	cfg.DeadVoterGrace = 3 * time.Second
	cfg.GossipTimings = membership.LocalTimings()

	var err error
	cfg.Listen, cfg.Advertise, err = c.net.Expose(n.Name, n.IP, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RaftListen, cfg.RaftAdvertise, err = c.net.Expose(n.Name, n.IP, 2, false); err != nil {
		t.Fatal(err)
	}
	if cfg.GossipListen, cfg.GossipAdvertise, err = c.net.Expose(n.Name, n.IP, 3, true); err != nil {
		t.Fatal(err)
	}
	n.API = cfg.Advertise
	if c.opts.PowerLoss {
		n.fs = strictfs.New()
		cfg.TabletFS = n.fs
	}
	if c.opts.Configure != nil {
		c.opts.Configure(i, &cfg)
	}
	n.cfg = cfg
	return n
}

// startTimeout bounds a node's start, and the wait for the registrations
// after it.
const startTimeout = 60 * time.Second

func (n *Node) start() error {
	lg := testLogger(n.c.t, n.Name, n.c.opts.Verbose)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	started := time.Now().UnixMilli()
	srv, err := server.Start(ctx, n.cfg, lg)
	if err != nil {
		return fmt.Errorf("start node %d: %w", n.ID, err)
	}
	n.mu.Lock()
	n.srv, n.started = srv, started
	n.mu.Unlock()
	return nil
}

// running returns the node's server and when its run started, or nil
// while it is down.
func (n *Node) running() (*server.Server, int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv, n.started
}

// Server returns the node's server, nil while it is down.
func (n *Node) Server() *server.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

// Config returns the node's configuration.
func (n *Node) Config() server.Config { return n.cfg }

// Nodes returns the nodes, in id order (down ones included).
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the node of id i (1-based).
func (c *Cluster) Node(i int) *Node { return c.nodes[i-1] }

// Net is the proxy between the nodes, for faults this package does not name.
func (c *Cluster) Net() *proxy.Network { return c.net }

// Servers is the comma list of every node's advertised API address, a
// client's bootstrap list.
func (c *Cluster) Servers() string {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.API)
	}
	return strings.Join(addrs, ",")
}

// Client returns a client bootstrapped with every node.
func (c *Cluster) Client(opts ...client.Option) *client.Client {
	c.t.Helper()
	cl, err := client.New(c.Servers(), opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// Leader returns a node, not cut off by the proxy, that is the metadata
// (Raft) leader and has taken office as the coordinator, or nil. (A node cut
// off may still believe it leads, until its leader lease runs out.)
func (c *Cluster) Leader() *Node {
	for _, n := range c.nodes {
		if s := n.Server(); s != nil && s.IsCoordinator() && !c.isolated(n) {
			return n
		}
	}
	return nil
}

// WaitLeader waits until a live node not cut off is the Raft leader and has
// taken office as the coordinator, and every live node not cut off knows
// that leader.
func (c *Cluster) WaitLeader(ctx context.Context) (*Node, error) {
	for {
		if l := c.Leader(); l != nil && c.allFollow(l) {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("testcluster: no coordinator: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// allFollow reports whether every live node, but for those cut off by the
// proxy, names l as the Raft leader.
func (c *Cluster) allFollow(l *Node) bool {
	for _, n := range c.nodes {
		s := n.Server()
		if s == nil || c.isolated(n) {
			continue
		}
		if s.MetadataLeader() != l.ID {
			return false
		}
	}
	return true
}

func (c *Cluster) isolated(n *Node) bool { return len(c.nodes) > 1 && c.net.Isolated(n.Name) }

// WaitRegistered waits until every live node not cut off holds, in its own
// metadata, the registration of every live node not cut off made in the
// node's current run (a registration left by an earlier run, or one whose
// session expired, does not count). server.Start returns once the node's
// own registration is committed, but another node applies it later, and
// a node the gossip takes for dead (a busy machine) loses its registration
// until its heartbeat loop registers it again; meanwhile a table created
// has fewer servers to place its replicas on, and a node's catalog does
// not list the node. New, Restart and PowerOff call it.
func (c *Cluster) WaitRegistered(ctx context.Context) error {
	for {
		missing := c.unregistered()
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testcluster: %s: %w", missing, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// unregistered names a registration missing from a live node's metadata
// (see WaitRegistered), or is "" when none is.
func (c *Cluster) unregistered() string {
	for _, o := range c.nodes {
		srv, _ := o.running()
		if srv == nil || c.isolated(o) {
			continue
		}
		servers, err := catalog.New(srv.Metadata()).TabletServers()
		if err != nil {
			return fmt.Sprintf("node %d's tablet servers: %v", o.ID, err)
		}
		reg := make(map[int32]int64, len(servers))
		for _, ts := range servers {
			reg[ts.ID] = ts.Registration.RegisterTimestamp
		}
		for _, n := range c.nodes {
			s, started := n.running()
			if s == nil || c.isolated(n) {
				continue
			}
			if at, ok := reg[n.ID]; !ok || at < started {
				return fmt.Sprintf("node %d's metadata does not hold node %d's registration of its current run", o.ID, n.ID)
			}
		}
	}
	return ""
}

// waitRegistered is WaitRegistered within startTimeout, failing the test
// when it ends.
func (c *Cluster) waitRegistered() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.WaitRegistered(ctx); err != nil {
		c.t.Fatal(err)
	}
}

// Kill takes node i down abruptly, as a crash would: it is cut off from the
// others first, so nothing it does on its way down (closing its session,
// handing over leadership) reaches them, then stopped, then its links are
// restored for a Restart. Its session expires on the leader after its
// timeout, as a dead node's does.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	n := c.Node(i)
	srv := n.Server()
	if srv == nil {
		c.t.Fatalf("testcluster: node %d is already down", i)
	}
	c.net.Isolate(n.Name)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no time for a controlled shutdown
	_ = srv.Stop(ctx)
	n.mu.Lock()
	n.srv = nil
	n.mu.Unlock()
	c.net.Rejoin(n.Name)
}

// PowerOff cuts the power of the given nodes at once, then starts them
// again and waits until they are ready and registered (WaitRegistered):
// each is cut off from the others (so they can exchange nothing more), its
// tablets' file system is replaced by what it had fsynced
// (strictfs.FS.Crash), and it is stopped with no time for a controlled
// shutdown (what it writes on its way down goes to the file system thrown
// away). Its metadata replica on disk keeps what it had (raft-boltdb
// fsyncs every commit). Requires Options.PowerLoss; the nodes must be
// running.
func (c *Cluster) PowerOff(ids ...int) {
	c.t.Helper()
	c.powerOff(vfs.CrashCloneCfg{}, ids)
}

// PowerOffTorn is PowerOff where each node keeps, beside what it fsynced, a
// random half of the rest (4 KiB blocks of file data, directory entries),
// chosen by a random source seeded with seed: torn writes.
func (c *Cluster) PowerOffTorn(seed uint64, ids ...int) {
	c.t.Helper()
	c.powerOff(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: mrand.New(mrand.NewPCG(seed, 0))}, ids)
}

func (c *Cluster) powerOff(cc vfs.CrashCloneCfg, ids []int) {
	c.t.Helper()
	if !c.opts.PowerLoss {
		c.t.Fatal("testcluster: PowerOff needs Options.PowerLoss")
	}
	var nodes []*Node
	for _, i := range ids {
		n := c.Node(i)
		if n.Server() == nil {
			c.t.Fatalf("testcluster: node %d is down", i)
		}
		nodes = append(nodes, n)
		c.net.Isolate(n.Name)
	}
	for _, n := range nodes {
		n.fs = n.fs.Crash(cc)
		n.cfg.TabletFS = n.fs
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // no time for a controlled shutdown
			_ = n.Server().Stop(ctx)
			n.mu.Lock()
			n.srv = nil
			n.mu.Unlock()
		})
	}
	wg.Wait()
	for _, n := range nodes {
		c.net.Rejoin(n.Name)
	}
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() { errs <- n.start() }()
	}
	for range nodes {
		if err := <-errs; err != nil {
			c.t.Fatal(err)
		}
	}
	c.waitRegistered()
}

// Stop takes node i down cleanly (a controlled shutdown, as on SIGTERM).
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	n := c.Node(i)
	srv := n.Server()
	if srv == nil {
		c.t.Fatalf("testcluster: node %d is already down", i)
	}
	if err := srv.Stop(context.Background()); err != nil {
		c.t.Logf("testcluster: stop node %d: %v", i, err)
	}
	n.mu.Lock()
	n.srv = nil
	n.mu.Unlock()
}

// Restart starts node i again, on the same data directory and addresses,
// and waits until it is ready and its registration of this run is in
// every live node's metadata (WaitRegistered).
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	n := c.Node(i)
	if n.Server() != nil {
		c.t.Fatalf("testcluster: node %d is running", i)
	}
	if err := n.start(); err != nil {
		c.t.Fatal(err)
	}
	c.waitRegistered()
}

// Partition cuts every link between nodes (by id) of different groups,
// both ways; Heal restores them.
func (c *Cluster) Partition(groups ...[]int) {
	var names [][]string
	for _, g := range groups {
		var ns []string
		for _, i := range g {
			ns = append(ns, c.Node(i).Name)
		}
		names = append(names, ns)
	}
	c.net.Partition(names...)
}

// Heal restores every link.
func (c *Cluster) Heal() { c.net.Heal() }

func (c *Cluster) close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		if srv := n.Server(); srv != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = srv.Stop(ctx)
			}()
		}
	}
	wg.Wait()
	c.net.Close()
}

// testLogger writes a node's logs through t.Log: warnings and errors only
// unless verbose.
func testLogger(t testing.TB, name string, verbose bool) *slog.Logger {
	lvl := slog.LevelWarn
	if verbose {
		lvl = slog.LevelDebug
	}
	return metatest.LoggerAt(t, lvl).With("node", name)
}
