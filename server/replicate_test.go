package server

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/tablet/log"
	"strom/tablet/replica"
)

// TestReplicaCallsNeedTheClusterSecret: ReplicaService is on the public API
// port, so a call without the cluster secret's signature is refused
// (Unauthenticated, 401), as is one signed with another secret
// (PermissionDenied, 403); one signed by a node is served.
func TestReplicaCallsNeedTheClusterSecret(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	req := &stromv1.FetchReplicaRequest{FollowerId: 2, MaxWaitMs: 1, MaxBytes: 1 << 20,
		Buckets: []*stromv1.FetchReplicaBucket{{TableId: 99, Bucket: 0, MaxBytes: 1 << 20}}}
	call := func(hc *http.Client) (*connect.Response[stromv1.FetchReplicaResponse], error) {
		return stromv1connect.NewReplicaServiceClient(hc, "http://"+s.Addr()).FetchReplica(ctx, connect.NewRequest(req))
	}
	if _, err := call(http.DefaultClient); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("unsigned FetchReplica: %v, want unauthenticated", err)
	}
	other := make([]byte, 32)
	wrong := &http.Client{Transport: &signingTransport{next: http.DefaultTransport, secret: other, from: "2"}}
	if _, err := call(wrong); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("FetchReplica signed with another secret: %v, want permission denied", err)
	}
	resp, err := call(newReplicaPeers(s).http)
	if err != nil {
		t.Fatalf("signed FetchReplica: %v", err)
	}
	if b := resp.Msg.Buckets; len(b) != 1 || b[0].Error.GetName() != "UNKNOWN_TABLE_OR_BUCKET_EXCEPTION" {
		t.Errorf("signed FetchReplica of an unknown bucket answered %v, want UNKNOWN_TABLE_OR_BUCKET_EXCEPTION", b)
	}
}

// TestPeerErrorsAreTheFetchersSentinels: a follower's fetcher tells a
// bucket's error (that bucket backs off) from a failed call (the whole
// fetcher backs off) with errors.Is on the log's and the replica's
// sentinels, so the errors replicaPeers rebuilds from a leader's answer
// must match them. A stale epoch in OffsetForLeaderEpoch used to come back
// as the coordinator's FENCED_LEADER_EPOCH sentinel, not the log's, and
// so backed off every bucket fetched from that leader.
func TestPeerErrorsAreTheFetchersSentinels(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	info := createTable(t, s, "demo", "events", "id BIGINT NOT NULL", 1)
	waitReplicas(t, s, info)
	r, err := s.replicas.Replica(replicaTB(info.TableId, 0))
	if err != nil {
		t.Fatal(err)
	}
	epoch := r.State().LeaderEpoch
	p := newReplicaPeers(s)
	ctx := context.Background()
	if _, _, err := p.OffsetForLeaderEpoch(ctx, 1, replicaTB(info.TableId, 0), epoch-1, epoch-1); !errors.Is(err, log.ErrFencedLeaderEpoch) {
		t.Errorf("OffsetForLeaderEpoch at an old epoch: %v, want log.ErrFencedLeaderEpoch", err)
	}
	if _, _, err := p.OffsetForLeaderEpoch(ctx, 1, replicaTB(99, 0), 0, 0); !errors.Is(err, replica.ErrUnknownBucket) {
		t.Errorf("OffsetForLeaderEpoch of an unknown bucket: %v, want replica.ErrUnknownBucket", err)
	}
	res, err := p.FetchReplica(ctx, 1, replica.FetchRequest{Follower: 2, MaxWait: time.Millisecond, MaxBytes: 1 << 20, Buckets: []replica.BucketFetch{
		{TB: replicaTB(info.TableId, 0), LeaderEpoch: epoch - 1, MaxBytes: 1 << 20},
		{TB: replicaTB(info.TableId, 0), LeaderEpoch: epoch, FetchOffset: 5, MaxBytes: 1 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, log.ErrFencedLeaderEpoch) {
		t.Errorf("a fetch at an old epoch: %v, want log.ErrFencedLeaderEpoch", res[0].Err)
	}
	if !errors.Is(res[1].Err, log.ErrOffsetOutOfRange) {
		t.Errorf("a fetch past the log end: %v, want log.ErrOffsetOutOfRange", res[1].Err)
	}
}
