package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// clusterNode is one process of a cluster and the arguments it was started
// with.
type clusterNode struct {
	*node
	dir  string
	args []string
}

func launchClusterNode(t *testing.T, bin string, id int, gossip, join string, expect int) *clusterNode {
	dir := t.TempDir()
	addr := freeAddr(t)
	args := []string{"--node-id", strconv.Itoa(id), "--data-dir", dir, "--listen", addr, "--raft-listen", freeAddr(t),
		"--gossip-listen", gossip, "--join", join, "--bootstrap-expect", strconv.Itoa(expect)}
	return &clusterNode{node: launchNode(t, bin, dir, addr, args...), dir: dir, args: args}
}

func clusterIDOf(t *testing.T, dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	var id struct {
		ClusterID string `json:"cluster_id"`
	}
	if err := json.Unmarshal(data, &id); err != nil || id.ClusterID == "" {
		t.Fatalf("node.json: %s (%v)", data, err)
	}
	return id.ClusterID
}

// TestClusterOfThreeProcesses starts three real processes at once with the
// issue's flags (--join all three, --bootstrap-expect 3): they form one
// cluster (one cluster id in every node.json, every node ready, which it
// is only once registered through the one metadata group); a fourth
// joins; a node killed with SIGKILL restarts into the same cluster without
// bootstrapping again.
func TestClusterOfThreeProcesses(t *testing.T) {
	bin := buildStrom(t)
	t.Setenv("STROM_CLUSTER_SECRET", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	gossip := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	join := strings.Join(gossip, ",")
	var nodes []*clusterNode
	for i, g := range gossip {
		nodes = append(nodes, launchClusterNode(t, bin, i+1, g, join, 3))
	}
	for _, n := range nodes {
		n.waitReady()
	}
	cid := clusterIDOf(t, nodes[0].dir)
	bootstraps := 0
	for _, n := range nodes {
		if got := clusterIDOf(t, n.dir); got != cid {
			t.Fatalf("node.json in %s names cluster %s, node 1's %s", n.dir, got, cid)
		}
		bootstraps += strings.Count(n.logs.String(), "bootstrapped cluster")
	}
	// Each of the three may bootstrap (the same configuration), or find
	// that the others already have and wait to be replicated to.
	if bootstraps < 1 || bootstraps > 3 {
		t.Fatalf("%d bootstraps, want 1 to 3", bootstraps)
	}

	fourth := launchClusterNode(t, bin, 4, freeAddr(t), gossip[0], 3)
	fourth.waitReady()
	if got := clusterIDOf(t, fourth.dir); got != cid {
		t.Fatalf("node 4 joined cluster %s, want %s", got, cid)
	}
	if strings.Contains(fourth.logs.String(), "bootstrapped cluster") {
		t.Fatal("node 4 bootstrapped")
	}

	victim := nodes[1]
	victim.kill(syscall.SIGKILL)
	restarted := &clusterNode{node: startNode(t, bin, victim.dir, victim.addr, victim.args...), dir: victim.dir, args: victim.args}
	if got := clusterIDOf(t, restarted.dir); got != cid {
		t.Fatalf("restarted node 2 is in cluster %s, want %s", got, cid)
	}
	if strings.Contains(restarted.logs.String(), "bootstrapped cluster") {
		t.Fatal("a restart bootstrapped again")
	}
}
