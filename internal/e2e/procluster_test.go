package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"strom/client"
	stromv1 "strom/rpc/gen/strom/v1"
)

// procCluster is a cluster of real strom processes on loopback ports,
// started as the README's cluster section starts them.
type procCluster struct {
	t      *testing.T
	bin    string
	secret string
	expect int
	joins  []string
	nodes  map[int]*procNode
}

type procNode struct {
	id                int
	dir               string
	api, raft, gossip string
	*node             // nil while down
}

func newProcCluster(t *testing.T, bin string, expect int) *procCluster {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &procCluster{t: t, bin: bin, expect: expect, secret: base64.StdEncoding.EncodeToString(key), nodes: map[int]*procNode{}}
}

// add configures node id (addresses, data dir) without starting it.
func (c *procCluster) add(id int) *procNode {
	n := &procNode{id: id, dir: c.t.TempDir(), api: freeAddr(c.t), raft: freeAddr(c.t), gossip: freeUDPAddr(c.t)}
	c.nodes[id] = n
	c.joins = append(c.joins, n.gossip)
	return n
}

// launch starts node id's process without waiting for it.
func (c *procCluster) launch(id int) {
	n := c.nodes[id]
	t := c.t
	t.Setenv("STROM_CLUSTER_SECRET", c.secret)
	t.Setenv("STROM_SESSION_TIMEOUT", "3s")
	n.node = launchNode(t, c.bin, n.dir, n.api, "--node-id", strconv.Itoa(id), "--data-dir", filepath.Join(n.dir, "data"),
		"--listen", n.api, "--raft-listen", n.raft, "--gossip-listen", n.gossip,
		"--join", strings.Join(c.joins, ","), "--bootstrap-expect", strconv.Itoa(c.expect))
}

// start configures and starts nodes 1..n at once and waits until all are
// ready.
func (c *procCluster) start(n int) {
	for i := 1; i <= n; i++ {
		c.add(i)
	}
	for i := 1; i <= n; i++ {
		c.launch(i)
	}
	for i := 1; i <= n; i++ {
		c.nodes[i].waitReady()
	}
}

func (c *procCluster) ids() []int {
	var ids []int
	for id := range c.nodes {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}

// describe asks node id for the cluster.
func (c *procCluster) describe(ctx context.Context, id int) (*stromv1.DescribeClusterResponse, error) {
	cl, err := client.New(c.nodes[id].api, client.WithRetryTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	return cl.Admin().DescribeCluster(ctx)
}

// waitFormed waits until every running node reports the same Raft leader and
// the voters want.
func (c *procCluster) waitFormed(ctx context.Context, voters []int32) *stromv1.DescribeClusterResponse {
	c.t.Helper()
	var last string
	for {
		var first *stromv1.DescribeClusterResponse
		ok := true
		for _, id := range c.ids() {
			if c.nodes[id].node == nil {
				continue
			}
			d, err := c.describe(ctx, id)
			if err != nil {
				ok, last = false, fmt.Sprintf("node %d: %v", id, err)
				break
			}
			got := slices.Clone(d.Voters)
			slices.Sort(got)
			if d.RaftLeader == 0 || !slices.Equal(got, voters) || (first != nil && d.RaftLeader != first.RaftLeader) {
				ok, last = false, fmt.Sprintf("node %d sees leader %d, voters %v", id, d.RaftLeader, got)
				break
			}
			if first == nil {
				first = d
			}
		}
		if ok && first != nil {
			return first
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("the cluster did not form (want voters %v): %s", voters, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freeUDPAddr returns a loopback address whose port is free for TCP and
// UDP (gossip uses both).
func freeUDPAddr(t *testing.T) string {
	for range 20 {
		a := freeAddr(t)
		if pc, err := net.ListenPacket("udp", a); err == nil {
			pc.Close()
			return a
		}
	}
	t.Fatal("no free TCP+UDP port")
	return ""
}

// clusterStarts is how many times TestClusterFormsAtEveryStart forms a
// cluster: STROM_CLUSTER_STARTS, 20 by default, 3 with -short.
func clusterStarts(t *testing.T) int {
	if s := os.Getenv("STROM_CLUSTER_STARTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("STROM_CLUSTER_STARTS: %v", err)
		}
		return n
	}
	if testing.Short() {
		return 3
	}
	return 20
}

// TestClusterFormsAtEveryStart starts three processes at once with
// --bootstrap-expect 3, again and again: each time they form one cluster of
// three voters with one coordinator. The last time, a fourth node joins as a
// non-voter.
func TestClusterFormsAtEveryStart(t *testing.T) {
	bin := buildStrom(t)
	starts := clusterStarts(t)
	for round := 1; round <= starts; round++ {
		ok := t.Run(fmt.Sprintf("start%d", round), func(t *testing.T) {
			c := newProcCluster(t, bin, 3)
			c.start(3)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			d := c.waitFormed(ctx, []int32{1, 2, 3})
			coordinators := 0
			for _, n := range d.Nodes {
				if slices.Contains(n.Roles, "coordinator") {
					coordinators++
				}
			}
			if coordinators != 1 {
				t.Fatalf("%d coordinators in %v", coordinators, d.Nodes)
			}
			if round < starts {
				return
			}
			c.add(4)
			c.launch(4)
			c.nodes[4].waitReady()
			d = c.waitFormed(ctx, []int32{1, 2, 3})
			var roles []string
			for _, n := range d.Nodes {
				if n.Id == 4 {
					roles = n.Roles
				}
			}
			if !slices.Contains(roles, "raft-nonvoter") {
				t.Fatalf("node 4 has roles %v, want a non-voter", roles)
			}
		})
		if !ok {
			t.Fatalf("round %d of %d failed", round, starts)
		}
	}
}

// TestFailoverAfterSIGKILL kills the Raft leader (the coordinator) with
// SIGKILL, again and again, and measures how long until a table can be
// created again; it prints the median.
func TestFailoverAfterSIGKILL(t *testing.T) {
	bin := buildStrom(t)
	kills := 10
	if testing.Short() {
		kills = 3
	}
	c := newProcCluster(t, bin, 3)
	c.start(3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var took []time.Duration
	for k := 1; k <= kills; k++ {
		d := c.waitFormed(ctx, []int32{1, 2, 3})
		leader := int(d.RaftLeader)
		start := time.Now()
		if err := c.nodes[leader].kill(syscall.SIGKILL); err == nil {
			t.Fatal("SIGKILL: the process exited cleanly")
		}
		c.nodes[leader].node = nil
		for {
			if err := createAnywhere(ctx, c, fmt.Sprintf("t%d", k)); err == nil {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("no table could be created after killing node %d: %v", leader, err)
			}
		}
		took = append(took, time.Since(start))
		t.Logf("kill %d: node %d killed, a table created again after %v", k, leader, took[len(took)-1])
		c.launch(leader)
		c.nodes[leader].waitReady()
	}
	slices.Sort(took)
	fmt.Printf("failover: median %v over %d SIGKILLs of the Raft leader (min %v, max %v)\n",
		took[len(took)/2], len(took), took[0], took[len(took)-1])
}

// createAnywhere tries once to create db.table through each running node.
func createAnywhere(ctx context.Context, c *procCluster, table string) error {
	var err error
	for _, id := range c.ids() {
		if c.nodes[id].node == nil {
			continue
		}
		var cl *client.Client
		if cl, err = client.New(c.nodes[id].api, client.WithRetryTimeout(time.Millisecond)); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = cl.Admin().CreateDatabase(cctx, &stromv1.CreateDatabaseRequest{Database: "failover", IgnoreIfExists: true})
		if err == nil {
			_, err = cl.Admin().CreateTable(cctx, &stromv1.CreateTableRequest{Database: "failover", Table: table, IgnoreIfExists: true,
				Descriptor_: &stromv1.TableDescriptor{Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "id", Type: "BIGINT"}}}}})
		}
		cancel()
		if err == nil {
			return nil
		}
	}
	time.Sleep(20 * time.Millisecond)
	return err
}
