package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"strom/client"
	stromv1 "strom/rpc/gen/strom/v1"
)

// benchCluster is a cluster of real `strom server` processes started by a
// benchmark: this binary re-executed, each node with its own data directory
// and log under dir, on loopback ports, default settings otherwise.
type benchCluster struct {
	bin, dir, secret string
	env              []string
	nodes            []*benchNode // node i+1 is nodes[i]
}

type benchNode struct {
	id                int
	api, raft, gossip string
	cmd               *exec.Cmd
	done              chan struct{} // closed when cmd has exited
}

// clusterFlags are the flags of the benchmarks that start their own
// cluster.
type clusterFlags struct {
	dir      string
	basePort int
	keep     bool
	env      []string
}

func (f *clusterFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dir, "dir", "", "directory for the nodes' data and logs (default: a new temporary directory)")
	cmd.Flags().IntVar(&f.basePort, "base-port", 0, "node I listens on BASE+3(I-1) (API), +1 (Raft), +2 (gossip); 0 picks free ports")
	cmd.Flags().BoolVar(&f.keep, "keep", false, "keep the nodes' data and logs afterwards (printed)")
	cmd.Flags().StringArrayVar(&f.env, "server-env", nil, "STROM_KEY=VALUE given to every node (repeatable; default: none, every setting at its default)")
}

// startBenchCluster starts n nodes at once (--bootstrap-expect n) and waits
// until each is ready. On error the nodes started are stopped.
func startBenchCluster(ctx context.Context, f clusterFlags, n int) (*benchCluster, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary to run the nodes: %w", err)
	}
	dir := f.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "strom-bench-cluster-*"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	for _, kv := range f.env {
		if !strings.HasPrefix(kv, "STROM_") || !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("--server-env: want STROM_KEY=VALUE, got %q", kv)
		}
	}
	c := &benchCluster{bin: bin, dir: dir, secret: base64.StdEncoding.EncodeToString(key), env: f.env}
	addrs, err := benchAddrs(f.basePort, 3*n)
	if err != nil {
		return nil, err
	}
	for i := range n {
		c.nodes = append(c.nodes, &benchNode{id: i + 1, api: addrs[3*i], raft: addrs[3*i+1], gossip: addrs[3*i+2]})
	}
	for _, nd := range c.nodes {
		if err := c.launch(nd); err != nil {
			c.close(true)
			return nil, err
		}
	}
	for _, nd := range c.nodes {
		if err := c.waitReady(ctx, nd); err != nil {
			c.close(true)
			return nil, err
		}
	}
	return c, nil
}

// startBenchClusterFor starts a cluster of three nodes for a benchmark
// command, says where its files are if they are kept, and returns it with
// a client of it and the database "bench" created.
func startBenchClusterFor(ctx context.Context, cmd *cobra.Command, cf clusterFlags) (*benchCluster, *client.Client, error) {
	bc, err := startBenchCluster(ctx, cf, 3)
	if err != nil {
		return nil, nil, err
	}
	if cf.keep {
		fmt.Fprintf(cmd.ErrOrStderr(), "strom: the nodes' data and logs are in %s\n", bc.dir)
	}
	c, err := client.New(bc.servers(), client.WithRetryTimeout(2*time.Minute))
	if err == nil {
		_, err = c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "bench", IgnoreIfExists: true})
	}
	if err != nil {
		bc.close(cf.keep)
		return nil, nil, err
	}
	return bc, c, nil
}

// benchAddrs returns n loopback addresses: base, base+1, ... or, with base
// 0, ports free for TCP and UDP (gossip uses both), each a different one.
func benchAddrs(base, n int) ([]string, error) {
	var out []string
	if base > 0 {
		for i := range n {
			out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i)))
		}
		return out, nil
	}
	seen := map[string]bool{}
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n {
			return nil, errors.New("no free loopback ports; give --base-port")
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		a := ln.Addr().String()
		ln.Close()
		pc, err := net.ListenPacket("udp", a)
		if err != nil || seen[a] {
			continue
		}
		pc.Close()
		seen[a] = true
		out = append(out, a)
	}
	return out, nil
}

func (c *benchCluster) joins() string {
	var js []string
	for _, nd := range c.nodes {
		js = append(js, nd.gossip)
	}
	return strings.Join(js, ",")
}

// servers is the client's address list: every node.
func (c *benchCluster) servers() string {
	var s []string
	for _, nd := range c.nodes {
		s = append(s, nd.api)
	}
	return strings.Join(s, ",")
}

// launch starts nd's process (its log appended to DIR/nI/log).
func (c *benchCluster) launch(nd *benchNode) error {
	nodeDir := filepath.Join(c.dir, "n"+strconv.Itoa(nd.id))
	if err := os.MkdirAll(nodeDir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(nodeDir, "log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(c.bin, "server", "--node-id", strconv.Itoa(nd.id), "--data-dir", filepath.Join(nodeDir, "data"),
		"--listen", nd.api, "--raft-listen", nd.raft, "--gossip-listen", nd.gossip,
		"--join", c.joins(), "--bootstrap-expect", strconv.Itoa(len(c.nodes)))
	cmd.Env = append(append(os.Environ(), "STROM_CLUSTER_SECRET="+c.secret), c.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node %d: %w", nd.id, err)
	}
	nd.cmd, nd.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(nd.done) }()
	return nil
}

// waitReady waits until nd answers /readyz, failing when it exits first.
func (c *benchCluster) waitReady(ctx context.Context, nd *benchNode) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.api+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-nd.done:
			return fmt.Errorf("node %d exited before it was ready; its log is %s", nd.id, c.logPath(nd))
		case <-ctx.Done():
			return fmt.Errorf("node %d not ready: %w; its log is %s", nd.id, ctx.Err(), c.logPath(nd))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *benchCluster) logPath(nd *benchNode) string {
	return filepath.Join(c.dir, "n"+strconv.Itoa(nd.id), "log")
}

// node returns node id, nil when there is none.
func (c *benchCluster) node(id int32) *benchNode {
	if id < 1 || int(id) > len(c.nodes) {
		return nil
	}
	return c.nodes[id-1]
}

// kill sends SIGKILL to nd and waits until the process is gone.
func (c *benchCluster) kill(nd *benchNode) error {
	if err := nd.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL node %d: %w", nd.id, err)
	}
	<-nd.done
	return nil
}

// restart starts a killed node again and waits until it is ready.
func (c *benchCluster) restart(ctx context.Context, nd *benchNode) error {
	if err := c.launch(nd); err != nil {
		return err
	}
	return c.waitReady(ctx, nd)
}

// close stops every node (SIGTERM, then SIGKILL after 30 s) and removes
// the directory unless keep.
func (c *benchCluster) close(keep bool) {
	for _, nd := range c.nodes {
		if nd.cmd != nil {
			_ = nd.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, nd := range c.nodes {
		if nd.cmd == nil {
			continue
		}
		select {
		case <-nd.done:
		case <-time.After(30 * time.Second):
			_ = nd.cmd.Process.Kill()
			<-nd.done
		}
	}
	if !keep {
		_ = os.RemoveAll(c.dir)
	}
}

// waitBucket polls the table's bucket until ok says its assignment is what
// is wanted, and returns that assignment.
func waitBucket(ctx context.Context, c *client.Client, db, table string, bucket int32, what string, ok func(*stromv1.BucketAssignment) bool) (*stromv1.BucketAssignment, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var last string
	for {
		ti, err := c.Admin().GetTable(ctx, db, table)
		if err == nil {
			for _, b := range ti.Buckets {
				if b.Bucket == bucket {
					if ok(b) {
						return b, nil
					}
					last = fmt.Sprintf("leader %d, ISR %v", b.Leader, b.Isr)
				}
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("bucket %d of %s.%s: waiting for %s: %w (last: %s)", bucket, db, table, what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
