package robustness

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"strom/client"
	"strom/internal/proxy"
)

// Cluster is a cluster of real strom processes, each on its own loopback
// IP (127.a.b.10+i), dialing from it (node.source-ip) and listening on
// private ports, with every address it advertises (API, Raft, gossip TCP
// and UDP) a listener of the harness's proxy. Every node-to-node path and
// every client path goes through the proxy. Safe for concurrent use, but
// one node takes one fault at a time (the schedule's business).
type Cluster struct {
	lg     *slog.Logger
	bin    string
	dir    string
	net    *proxy.Network
	nodes  []*Node
	secret string
	env    []string // STROM_* settings given to every node
}

// Node is one process of the cluster.
type Node struct {
	// ID is the node id (1-based); Name names it in the proxy ("n1").
	ID   int
	Name string
	// IP is the node's loopback IP; API its advertised API address.
	IP, API string

	c       *Cluster
	dir     string
	private string   // the API's private address, for /readyz
	gossip  string   // the advertised gossip address, for cluster.join
	args    []string // `strom server` flags

	mu struct {
		sync.Mutex
		cmd    *exec.Cmd
		done   chan struct{} // closed when cmd has exited
		log    *os.File
		paused bool
		starts int
	}
}

// ClusterOptions shape a cluster.
type ClusterOptions struct {
	// Bin is the strom binary; Dir the run directory (node i's data and
	// log go under Dir/n<i>).
	Bin, Dir string
	// Nodes is the cluster's size (3 or 5).
	Nodes int
	// Env holds extra KEY=value settings for every node (STROM_* keys).
	Env []string
	// Logger logs the harness's and the proxy's actions.
	Logger *slog.Logger
}

// StartCluster starts opts.Nodes processes at once with
// cluster.bootstrap-expect set to that count and waits until every node is
// ready (/readyz) or ctx ends. Close stops it.
func StartCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	c := &Cluster{lg: opts.Logger, bin: opts.Bin, dir: opts.Dir, net: proxy.New(opts.Logger.With("component", "proxy")),
		secret: base64.StdEncoding.EncodeToString(key)}
	c.env = append([]string{
		"STROM_CLUSTER_SECRET=" + c.secret,
		"STROM_SESSION_TIMEOUT=3s",
		"STROM_CLUSTER_SERVER_STABILIZATION_TIME=1s",
		"STROM_CLUSTER_DEAD_VOTER_GRACE=3s",
		"STROM_LOG_REPLICA_MIN_IN_SYNC_REPLICAS_NUMBER=2",
		"STROM_LOG_REPLICA_MAX_LAG_TIME=4s",
		"STROM_DEFAULT_REPLICATION_FACTOR=3",
		"STROM_SHUTDOWN_TIMEOUT=10s",
		"STROM_LOG_FORMAT=json",
		"STROM_LOG_LEVEL=info",
		"STROM_DEBUG_PPROF=true", // for DumpGoroutines
	}, opts.Env...)
	prefix := proxy.LoopbackPrefix()
	var joins []string
	for i := 1; i <= opts.Nodes; i++ {
		n, err := c.newNode(i, prefix+strconv.Itoa(10+i), opts.Nodes)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
		joins = append(joins, n.gossip)
	}
	for _, n := range c.nodes {
		n.args = append(n.args, "--join", strings.Join(joins, ","))
	}
	for _, n := range c.nodes {
		if err := n.launch(); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if err := n.WaitReady(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// newNode configures node i on ip, with its proxies listening.
func (c *Cluster) newNode(i int, ip string, expect int) (*Node, error) {
	n := &Node{ID: i, Name: "n" + strconv.Itoa(i), IP: ip, c: c, dir: filepath.Join(c.dir, "n"+strconv.Itoa(i))}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return nil, err
	}
	c.net.AddNode(n.Name, ip)
	api, apiPub, err := c.net.Expose(n.Name, ip, 1, false)
	if err != nil {
		return nil, err
	}
	raft, raftPub, err := c.net.Expose(n.Name, ip, 2, false)
	if err != nil {
		return nil, err
	}
	gossip, gossipPub, err := c.net.Expose(n.Name, ip, 3, true)
	if err != nil {
		return nil, err
	}
	n.API, n.private, n.gossip = apiPub, api, gossipPub
	n.args = []string{"server", "--node-id", strconv.Itoa(i), "--data-dir", filepath.Join(n.dir, "data"),
		"--bootstrap-expect", strconv.Itoa(expect),
		"--listen", api, "--advertise", apiPub, "--raft-listen", raft, "--raft-advertise", raftPub,
		"--gossip-listen", gossip, "--gossip-advertise", gossipPub}
	return n, nil
}

// launch starts the node's process, its output appended to its log file.
func (n *Node) launch() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd != nil {
		return fmt.Errorf("robustness: node %d is running", n.ID)
	}
	f, err := os.OpenFile(filepath.Join(n.dir, "node.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.mu.starts++
	fmt.Fprintf(f, "=== start %d at %s\n", n.mu.starts, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(n.c.bin, n.args...)
	cmd.Dir = n.dir
	cmd.Env = append(append(os.Environ(), n.c.env...), "STROM_NODE_SOURCE_IP="+n.IP)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("robustness: start node %d: %w", n.ID, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	n.mu.cmd, n.mu.done, n.mu.log, n.mu.paused = cmd, done, f, false
	return nil
}

// Running reports whether the node's process is up (paused counts).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.cmd != nil
}

// Paused reports whether the node is stopped by SIGSTOP.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.paused
}

// WaitReady waits until the node answers /readyz with 200, its process
// exits, or ctx ends.
func (n *Node) WaitReady(ctx context.Context) error {
	n.mu.Lock()
	done := n.mu.done
	n.mu.Unlock()
	if done == nil {
		return fmt.Errorf("robustness: node %d is down", n.ID)
	}
	hc := &http.Client{Timeout: time.Second}
	for {
		resp, err := hc.Get("http://" + n.private + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("robustness: node %d exited before it was ready (see %s)", n.ID, filepath.Join(n.dir, "node.log"))
		case <-ctx.Done():
			return fmt.Errorf("robustness: node %d not ready: %w", n.ID, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// signal sends sig to the running process.
func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd == nil {
		return fmt.Errorf("robustness: node %d is down", n.ID)
	}
	if err := n.mu.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("robustness: signal node %d: %w", n.ID, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		n.mu.paused = true
	case syscall.SIGCONT:
		n.mu.paused = false
	}
	return nil
}

// Pause stops the process with SIGSTOP: its sockets stay open, it answers
// nothing (a paused leader, a long GC pause). Resume continues it.
func (n *Node) Pause() error { return n.signal(syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT) }

// Kill stops the process with SIGKILL and waits for it to exit.
func (n *Node) Kill() error {
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	n.reap()
	return nil
}

// Stop stops the process with SIGTERM (a controlled shutdown) and waits
// for it to exit. After timeout it gets SIGQUIT, so that the Go runtime
// writes every goroutine's stack to the node's log, then SIGKILL, and
// that is an error: a clean stop that hangs is a bug the run reports.
func (n *Node) Stop(timeout time.Duration) error {
	if err := n.signal(syscall.SIGTERM); err != nil {
		return err
	}
	n.mu.Lock()
	done := n.mu.done
	n.mu.Unlock()
	select {
	case <-done:
		n.reap()
		return nil
	case <-time.After(timeout):
	}
	_ = n.signal(syscall.SIGQUIT)
	select {
	case <-done:
		n.reap()
	case <-time.After(5 * time.Second):
		_ = n.Kill()
	}
	return fmt.Errorf("robustness: node %d did not stop within %v of SIGTERM (its goroutines are at the end of its log %s)",
		n.ID, timeout, filepath.Join(n.dir, "node.log"))
}

// reap waits for the exited process and forgets it.
func (n *Node) reap() {
	n.mu.Lock()
	done, f := n.mu.done, n.mu.log
	n.mu.Unlock()
	<-done
	n.mu.Lock()
	n.mu.cmd, n.mu.done, n.mu.log, n.mu.paused = nil, nil, nil, false
	n.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// Start starts the stopped node again, on the same data directory and
// addresses, and waits until it is ready.
func (n *Node) Start(ctx context.Context) error {
	if err := n.launch(); err != nil {
		return err
	}
	return n.WaitReady(ctx)
}

// Nodes returns the nodes in id order.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the node of id i (1-based).
func (c *Cluster) Node(i int) *Node { return c.nodes[i-1] }

// Net is the proxy between the nodes and between clients and nodes.
func (c *Cluster) Net() *proxy.Network { return c.net }

// Servers is the comma list of every node's advertised API address.
func (c *Cluster) Servers() string {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.API)
	}
	return strings.Join(addrs, ",")
}

// Client returns a client bootstrapped with every node, retrying for
// retry.
func (c *Cluster) Client(retry time.Duration) (*client.Client, error) {
	return client.New(c.Servers(), client.WithRetryTimeout(retry))
}

// DumpGoroutines writes every running node's goroutine stacks (its
// /debug/pprof/goroutine?debug=2) to goroutines-<run clock>.txt in the
// node's directory, for a run whose cluster stopped serving: the stacks
// show what a stuck node waits for, where its log only shows that it does.
// Paused and stopped nodes are skipped.
func (c *Cluster) DumpGoroutines(ctx context.Context, label string) {
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, n := range c.nodes {
		if !n.Running() || n.Paused() {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.private+"/debug/pprof/goroutine?debug=2", nil)
		if err != nil {
			continue
		}
		resp, err := hc.Do(req)
		if err != nil {
			c.lg.Warn("goroutine dump failed", "node", n.Name, "err", err)
			continue
		}
		path := filepath.Join(n.dir, "goroutines-"+label+".txt")
		f, err := os.Create(path)
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			err = errors.Join(err, f.Close())
		}
		resp.Body.Close()
		if err != nil {
			c.lg.Warn("goroutine dump failed", "node", n.Name, "err", err)
			continue
		}
		c.lg.Info("goroutines dumped", "node", n.Name, "path", path)
	}
}

// RaftLeader asks every running, unpaused node which node is the Raft
// leader (the coordinator) and returns the answer most of them give (a
// node cut off may still name itself); 0 when none knows one.
func (c *Cluster) RaftLeader(ctx context.Context) int {
	votes := map[int]int{}
	best := 0
	for _, n := range c.nodes {
		if !n.Running() || n.Paused() {
			continue
		}
		cl, err := client.New(n.API, client.WithRetryTimeout(time.Millisecond))
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		d, err := cl.Admin().DescribeCluster(cctx)
		cancel()
		if err == nil && d.RaftLeader > 0 {
			l := int(d.RaftLeader)
			if votes[l]++; votes[l] > votes[best] {
				best = l
			}
		}
	}
	return best
}

// BucketLeader returns the leader of bucket 0 of db.table as the cluster's
// metadata says; 0 when it cannot be told.
func (c *Cluster) BucketLeader(ctx context.Context, db, table string) int {
	cl, err := c.Client(time.Second)
	if err != nil {
		return 0
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ti, err := cl.Admin().GetTable(cctx, db, table)
	if err != nil {
		return 0
	}
	for _, b := range ti.Buckets {
		if b.Bucket == 0 {
			return int(b.Leader)
		}
	}
	return 0
}

// Close kills every process (resuming paused ones is not needed: SIGKILL
// ends a stopped process too) and stops the proxy.
func (c *Cluster) Close() {
	var errs []error
	for _, n := range c.nodes {
		if n.Running() {
			errs = append(errs, n.Kill())
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.lg.Warn("robustness: killing the nodes", "err", err)
	}
	c.net.Close()
}
