package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	stromv1 "strom/rpc/gen/strom/v1"
)

// TestPrintCluster: `strom cluster describe` against a golden file (go test
// -run TestPrintCluster -update rewrites it), in the middle of a rolling
// upgrade: the cluster's active feature level is still 0, nodes 1 and 2 run
// a new build that speaks level 1, node 3 an old one (level 0, no version),
// and node 3 is down.
func TestPrintCluster(t *testing.T) {
	resp := &stromv1.DescribeClusterResponse{
		ClusterId: "c-42", Version: "v0.2.0", RaftLeader: 2, Voters: []int32{1, 2, 3}, CoordinatorEpoch: 7,
		Buckets: 6, UnderReplicatedBuckets: 2, ActiveFeatureLevel: 0,
		Nodes: []*stromv1.Node{
			{Id: 1, ApiAddress: "127.0.0.1:34001", RaftAddress: "127.0.0.1:34011", GossipAddress: "127.0.0.1:34021", Alive: true,
				Version: "v0.2.0", FeatureLevel: 1, Rack: "r1", Roles: []string{"tablet-server", "raft-voter"}},
			{Id: 2, ApiAddress: "127.0.0.1:34002", RaftAddress: "127.0.0.1:34012", GossipAddress: "127.0.0.1:34022", Alive: true,
				Version: "v0.2.0", FeatureLevel: 1, Rack: "r2", Roles: []string{"tablet-server", "raft-voter", "raft-leader", "coordinator"}},
			{Id: 3, ApiAddress: "127.0.0.1:34003", Roles: []string{"tablet-server", "raft-voter"}},
		},
	}
	var out bytes.Buffer
	if err := printCluster(&out, resp); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "cluster-describe.txt")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Fatalf("cluster describe:\n%s\nwant (%s):\n%s", out.String(), golden, want)
	}
}
