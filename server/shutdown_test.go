package server

import (
	"context"
	"slices"
	"testing"
	"time"

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

// TestLastNodeStopsAtOnce: nodes stopped one at a time; the last one, which
// the gossip shows alone of three voters, cannot commit anything (no
// session close, no election) and stops without waiting out its
// shutdown.timeout.
func TestLastNodeStopsAtOnce(t *testing.T) {
	servers, _ := startCluster(t, 3)
	for _, s := range servers {
		s.cfg.ShutdownTimeout = time.Hour
	}
	for i, s := range servers {
		if i == len(servers)-1 {
			poll(t, "the last node's gossip seeing the others gone", func() bool {
				alive := 0
				for _, m := range s.Members() {
					if m.Alive {
						alive++
					}
				}
				return alive == 1
			})
		}
		// A deadline far below shutdown.timeout: a stop that waits for
		// what cannot happen ends there.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := s.Stop(ctx)
		waited := ctx.Err() != nil
		cancel()
		if waited {
			t.Fatalf("node %d (%d of %d stopped before it) waited until its stop's deadline: %v", s.cfg.NodeID, i, len(servers), err)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
