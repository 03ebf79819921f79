package server

import (
	"context"
	"slices"
	"testing"

	"strom/record"
)

// TestControlledShutdownMovesLeadershipFirst: the metadata leader, leading
// two of six buckets (RF 3 on three nodes), is stopped. When Stop returns,
// the metadata leadership has moved and the new coordinator has given its
// buckets other leaders: nothing waits for session.timeout.
func TestControlledShutdownMovesLeadershipFirst(t *testing.T) {
	servers, _ := startCluster(t, 3)
	li := slices.IndexFunc(servers, func(s *Server) bool { return s.meta.IsLeader() })
	if li < 0 {
		t.Fatal("no metadata leader")
	}
	leader := servers[li]
	poll(t, "coordinator in office", func() bool { return leader.coord.Epoch() > 0 })
	poll(t, "three registered tablet servers", func() bool {
		ts, err := leader.cat.TabletServers()
		return err == nil && len(ts) == 3
	})
	ctx := context.Background()
	if err := leader.coord.CreateDatabase(ctx, "db", "", nil, false); err != nil {
		t.Fatal(err)
	}
	desc := record.TableDescriptor{
		Schema:      record.Schema{Columns: []record.Column{{Name: "a", Type: record.DataType{Root: record.Int, Nullable: true}}}},
		BucketCount: 6,
		Properties:  map[string]string{record.OptReplicationFactor: "3"},
	}
	before, err := leader.coord.CreateTable(ctx, "db", "t", desc, false)
	if err != nil {
		t.Fatal(err)
	}
	leads := map[int32]int{}
	for _, lisr := range before.LeaderISR {
		leads[lisr.Leader]++
	}
	if leads[1] != 2 || leads[2] != 2 || leads[3] != 2 {
		t.Fatalf("leaders per node %v, want 2 each", leads)
	}

	if err := leader.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	other := servers[(li+1)%3]
	if err := other.meta.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := other.cat.Table("db", "t")
	if err != nil {
		t.Fatal(err)
	}
	gone := leader.cfg.NodeID
	for b, lisr := range after.LeaderISR {
		if lisr.Leader == gone || lisr.Leader < 0 || slices.Contains(lisr.ISR, gone) {
			t.Errorf("bucket %d when Stop returned: %+v, want a leader and ISR without node %d", b, lisr, gone)
		}
		if was := before.LeaderISR[b]; was.Leader == gone && lisr.CoordinatorEpoch <= was.CoordinatorEpoch {
			t.Errorf("bucket %d: moved by coordinator epoch %d, want a newer coordinator's than %d (on another node)", b, lisr.CoordinatorEpoch, was.CoordinatorEpoch)
		}
	}
}
