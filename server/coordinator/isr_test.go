package coordinator

import (
	"context"
	"errors"
	"slices"
	"testing"

	"strom/internal/metatest"
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
	read := func() catalog.LeaderAndISR {
		t.Helper()
		_, lisr, err := catalog.New(meta).Bucket(id, 0)
		if err != nil {
			t.Fatal(err)
		}
		return lisr
	}
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
