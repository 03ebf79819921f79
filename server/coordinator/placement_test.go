package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"strom/internal/metatest"
	"strom/raftmeta/catalog"
	"strom/record"
)

func servers(racks ...string) []catalog.TabletServer {
	out := make([]catalog.TabletServer, len(racks))
	for i, r := range racks {
		out[i] = catalog.TabletServer{ID: int32(i + 1), Registration: catalog.TabletServerRegistration{Rack: r}}
	}
	return out
}

// counts returns, per node, the buckets it leads (first replica) and the
// replicas it holds; it fails on a bucket with a repeated node.
func counts(t *testing.T, a catalog.TableAssignment, replication int) (leads, holds map[int32]int) {
	t.Helper()
	leads, holds = map[int32]int{}, map[int32]int{}
	for b, replicas := range a.Buckets {
		if len(replicas) != replication {
			t.Fatalf("bucket %d: replicas %v, want %d", b, replicas, replication)
		}
		for i, id := range replicas {
			if slices.Contains(replicas[:i], id) {
				t.Fatalf("bucket %d: replicas %v repeat node %d", b, replicas, id)
			}
			holds[id]++
		}
		leads[replicas[0]]++
	}
	return leads, holds
}

func TestPlacementIsBalanced(t *testing.T) {
	for _, tc := range []struct{ nodes, buckets, replication int }{
		{3, 6, 3}, {3, 6, 1}, {4, 8, 3}, {5, 10, 2}, {6, 12, 3}, {1, 4, 1},
	} {
		t.Run(fmt.Sprintf("%dnodes_%dbuckets_rf%d", tc.nodes, tc.buckets, tc.replication), func(t *testing.T) {
			ss := servers(make([]string, tc.nodes)...)
			for tableID := range int64(tc.nodes) {
				leads, holds := counts(t, place(tableID, tc.buckets, tc.replication, ss), tc.replication)
				for _, s := range ss {
					if leads[s.ID] != tc.buckets/tc.nodes || holds[s.ID] != tc.buckets*tc.replication/tc.nodes {
						t.Fatalf("table %d: node %d leads %d and holds %d; want %d and %d (leads %v, holds %v)", tableID, s.ID,
							leads[s.ID], holds[s.ID], tc.buckets/tc.nodes, tc.buckets*tc.replication/tc.nodes, leads, holds)
					}
				}
			}
		})
	}
}

func TestPlacementBalancesLeadersAcrossTables(t *testing.T) {
	// Tables of one bucket each (ids 0..5) on three nodes: each node leads
	// two of them, not all on the first node.
	ss := servers("", "", "")
	leads := map[int32]int{}
	for tableID := range int64(6) {
		leads[place(tableID, 1, 2, ss).Buckets[0][0]]++
	}
	for _, s := range ss {
		if leads[s.ID] != 2 {
			t.Fatalf("leaders per node over 6 one-bucket tables: %v, want 2 each", leads)
		}
	}
}

func TestPlacementIsRackAware(t *testing.T) {
	for _, tc := range []struct {
		name        string
		racks       []string
		replication int
		wantRacks   int // distinct racks per bucket
	}{
		{"three racks of two, rf 3", []string{"a", "a", "b", "b", "c", "c"}, 3, 3},
		{"racks listed out of order", []string{"a", "a", "a", "b", "b", "b"}, 2, 2},
		{"two racks, rf 3", []string{"a", "b", "a", "b"}, 3, 2},
		{"uneven racks", []string{"a", "a", "a", "a", "b"}, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := servers(tc.racks...)
			rackOf := map[int32]string{}
			for _, s := range ss {
				rackOf[s.ID] = s.Registration.Rack
			}
			for tableID := range int64(len(ss)) {
				a := place(tableID, 2*len(ss), tc.replication, ss)
				leads, _ := counts(t, a, tc.replication)
				for _, s := range ss {
					if leads[s.ID] != 2 {
						t.Fatalf("table %d: leaders %v, want 2 per node", tableID, leads)
					}
				}
				for b, replicas := range a.Buckets {
					racks := map[string]bool{}
					for _, id := range replicas {
						racks[rackOf[id]] = true
					}
					if len(racks) != tc.wantRacks {
						t.Fatalf("table %d bucket %d: replicas %v span racks %v, want %d racks", tableID, b, replicas, racks, tc.wantRacks)
					}
				}
			}
		})
	}
}

func TestCreateTablePlacesOnRegisteredRacks(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, ClusterID: "c1"})
	racks := map[int32]string{1: "r1", 2: "r1", 3: "r2", 4: "r2"}
	for id := int32(1); id <= 4; id++ {
		registerServer(t, meta, id, racks[id])
	}
	ctx := context.Background()
	if err := c.CreateDatabase(ctx, "db", "", nil, false); err != nil {
		t.Fatal(err)
	}
	desc := logTable("a")
	desc.BucketCount = 8
	desc.Properties = map[string]string{record.OptReplicationFactor: "2"}
	tbl, err := c.CreateTable(ctx, "db", "t", desc, false)
	if err != nil {
		t.Fatal(err)
	}
	for b, replicas := range tbl.Assignment.Buckets {
		if racks[replicas[0]] == racks[replicas[1]] {
			t.Errorf("bucket %d: replicas %v both on rack %s", b, replicas, racks[replicas[0]])
		}
	}
}

func TestReplicationFactorAboveLiveNodesIsRefused(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, ClusterID: "c1", DefaultReplicationFactor: 3})
	registerServers(t, meta, 1, 2)
	ctx := context.Background()
	if err := c.CreateDatabase(ctx, "db", "", nil, false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		props map[string]string
		key   string
	}{
		{map[string]string{record.OptReplicationFactor: "3"}, record.OptReplicationFactor},
		{nil, "default.replication.factor"},
	} {
		desc := logTable("a")
		desc.Properties = tc.props
		_, err := c.CreateTable(ctx, "db", "t", desc, false)
		if !errors.Is(err, ErrNotEnoughServers) {
			t.Fatalf("err = %v, want ErrNotEnoughServers", err)
		}
		for _, want := range []string{"replication factor 3", tc.key, "2 are registered"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
	if _, err := catalog.New(meta).Table("db", "t"); !errors.Is(err, catalog.ErrTableNotExist) {
		t.Fatalf("a refused table was written: %v", err)
	}
}
