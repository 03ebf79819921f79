package coordinator

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"strom/internal/metatest"
	"strom/raftmeta"
	"strom/raftmeta/catalog"
)

func TestAdjustISR(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, ClusterID: "c1"})
	sessions := registerServers(t, meta, 1, 2, 3)
	tbl := createTable(t, c, "t", 1, 3, nil)
	id := tbl.Registration.TableID
	cur := tbl.LeaderISR[0]
	leader, replicas := cur.Leader, tbl.Assignment.Buckets[0]
	follower := without(replicas, leader)
	ctx := context.Background()
	read := func() catalog.LeaderAndISR { return bucketLeaderISR(t, meta, id, 0) }
	req := func(isr ...int32) AdjustISRRequest {
		return AdjustISRRequest{TableID: id, Bucket: 0, Leader: leader, LeaderEpoch: cur.LeaderEpoch, BucketEpoch: cur.BucketEpoch, ISR: isr}
	}

	// The leader drops a lagging follower: written with bucket epoch +1.
	shrunk := []int32{leader, follower[0]}
	got, err := c.AdjustISR(ctx, req(shrunk...))
	if err != nil {
		t.Fatal(err)
	}
	if now := read(); !slices.Equal(now.ISR, shrunk) || now.BucketEpoch != cur.BucketEpoch+1 || !slices.Equal(got.ISR, shrunk) || got.BucketEpoch != now.BucketEpoch {
		t.Fatalf("after the shrink: %+v (answered %+v), want ISR %v at bucket epoch %d", now, got, shrunk, cur.BucketEpoch+1)
	}

	// Stale or wrong requests are refused and write nothing.
	stale := req(replicas...) // still at the old bucket epoch
	wrongEpoch := req(shrunk...)
	wrongEpoch.BucketEpoch, wrongEpoch.LeaderEpoch = cur.BucketEpoch+1, cur.LeaderEpoch-1
	notLeader := req(follower...)
	notLeader.BucketEpoch, notLeader.Leader = cur.BucketEpoch+1, follower[0]
	noLeader := req(follower...)
	noLeader.BucketEpoch = cur.BucketEpoch + 1
	stranger := req(leader, 99)
	stranger.BucketEpoch = cur.BucketEpoch + 1
	for _, tc := range []struct {
		name string
		req  AdjustISRRequest
		want error
	}{
		{"stale bucket epoch", stale, ErrInvalidUpdateVersion},
		{"old leader epoch", wrongEpoch, ErrFencedLeaderEpoch},
		{"not the leader", notLeader, ErrFencedLeaderEpoch},
		{"ISR without the leader", noLeader, ErrIneligibleReplica},
		{"not a replica", stranger, ErrIneligibleReplica},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.AdjustISR(ctx, tc.req); !errors.Is(err, tc.want) {
				t.Fatalf("AdjustISR(%+v) = %v, want %v", tc.req, err, tc.want)
			}
			if now := read(); !slices.Equal(now.ISR, shrunk) || now.BucketEpoch != cur.BucketEpoch+1 {
				t.Fatalf("a refused request wrote %+v", now)
			}
		})
	}

	// A dead node cannot rejoin; a live one can.
	back := req(replicas...)
	back.BucketEpoch = cur.BucketEpoch + 1
	closeSession(t, meta, sessions[follower[1]]) // not in the ISR: no election
	if _, err := c.AdjustISR(ctx, back); !errors.Is(err, ErrIneligibleReplica) {
		t.Fatalf("a dead node rejoins the ISR: %v", err)
	}
	registerServer(t, meta, follower[1], "")
	got, err = c.AdjustISR(ctx, back)
	if err != nil {
		t.Fatal(err)
	}
	if now := read(); !slices.Equal(now.ISR, replicas) || now.BucketEpoch != cur.BucketEpoch+2 || now.LeaderEpoch != cur.LeaderEpoch {
		t.Fatalf("after the rejoin: %+v (answered %+v)", now, got)
	}
}

// A leader whose metadata lags the coordinator's may count the late
// fetches of a follower's earlier run, from before the node started again
// (after a power cut it holds only what it fsynced, and NodeStarting took
// it out of the ISR), and ask it back in on them. The request names the
// run the leader counted; the coordinator refuses one that is not the
// node's current registration's (KIP-903's broker epochs in
// AlterPartition). A request naming no run (a leader of an older build) is
// checked for liveness only, as before.
func TestAdjustISRChecksTheJoinersRun(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, ClusterID: "c1"})
	sessions := map[int32]int64{}
	for _, id := range []int32{1, 2, 3} {
		sessions[id] = registerRun(t, meta, id, int64(id)*10)
	}
	tbl := createTable(t, c, "t", 1, 3, nil)
	id := tbl.Registration.TableID
	cur := tbl.LeaderISR[0]
	leader, replicas := cur.Leader, tbl.Assignment.Buckets[0]
	follower := without(replicas, leader)[0]
	ctx := context.Background()
	read := func() catalog.LeaderAndISR { return bucketLeaderISR(t, meta, id, 0) }
	adjust := func(isr []int32, incarnations map[int32]int64) error {
		now := read()
		_, err := c.AdjustISR(ctx, AdjustISRRequest{TableID: id, Bucket: 0, Leader: leader, LeaderEpoch: now.LeaderEpoch,
			BucketEpoch: now.BucketEpoch, ISR: isr, Incarnations: incarnations})
		return err
	}
	if err := adjust(without(replicas, follower), nil); err != nil {
		t.Fatal(err)
	}
	// The follower starts again as run follower*10+1; its leader counted
	// fetches of the run before.
	closeSession(t, meta, sessions[follower])
	registerRun(t, meta, follower, int64(follower)*10+1)
	before := read()
	err := adjust(replicas, map[int32]int64{follower: int64(follower) * 10})
	if !errors.Is(err, ErrIneligibleReplica) {
		t.Fatalf("a joiner counted on its earlier run's fetches: %v, want %v", err, ErrIneligibleReplica)
	}
	if now := read(); !slices.Equal(now.ISR, before.ISR) || now.BucketEpoch != before.BucketEpoch {
		t.Fatalf("a refused request wrote %+v (was %+v)", now, before)
	}
	// On the current run's fetches it joins.
	if err := adjust(replicas, map[int32]int64{follower: int64(follower)*10 + 1}); err != nil {
		t.Fatal(err)
	}
	if now := read(); !slices.Equal(now.ISR, replicas) {
		t.Fatalf("after the rejoin of the current run: ISR %v, want %v", now.ISR, replicas)
	}
	// A request without incarnations (an older leader) checks liveness only;
	// the runs of members staying in the ISR are not checked.
	if err := adjust(without(replicas, follower), nil); err != nil {
		t.Fatal(err)
	}
	if err := adjust(replicas, map[int32]int64{leader: 999}); err != nil {
		t.Fatalf("a request naming no joiner's run: %v", err)
	}
	if now := read(); !slices.Equal(now.ISR, replicas) {
		t.Fatalf("after the rejoin without runs: ISR %v, want %v", now.ISR, replicas)
	}
}

// registerRun registers tablet server id as run incarnation under a new
// session, and returns the session.
func registerRun(t *testing.T, meta *raftmeta.Node, id int32, incarnation int64) int64 {
	t.Helper()
	ctx := context.Background()
	sess, err := meta.CreateSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Do(ctx, sess.ID, catalog.RegisterTabletServerOp(id, catalog.TabletServerRegistration{Listeners: "CLIENT://x:1", Incarnation: incarnation})); err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

// bucketLeaderISR is a bucket's leader_isr as the metadata holds it.
func bucketLeaderISR(t *testing.T, meta *raftmeta.Node, table int64, bucket int32) catalog.LeaderAndISR {
	t.Helper()
	_, lisr, err := catalog.New(meta).Bucket(table, bucket)
	if err != nil {
		t.Fatal(err)
	}
	return lisr
}
