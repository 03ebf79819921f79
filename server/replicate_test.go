package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"strom/raftmeta/catalog"
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

// countingTransport counts the requests it sends.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// TestReadReplicaRangeNeedsItsFeatureLevel: a leader's ReadReplicaRange is
// a node-to-node call that the previous release does not have. While the
// cluster's active level is below catalog.FeatureLevelReplicaRange (a
// rolling upgrade is not over), nothing is sent: the error wraps
// catalog.ErrFeatureNotActive and names both levels. At the level it is
// sent; and should a node of the previous release get it anyway (here node
// 7, registered at a server that has no ReplicaService, as a build without
// the call), its Unimplemented comes back as an error naming it, which the
// leader handles as any follower's failure (replica's corrupt tests).
func TestReadReplicaRangeNeedsItsFeatureLevel(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	info := createTable(t, s, "demo", "events", "id BIGINT NOT NULL", 1)
	waitReplicas(t, s, info)
	ctx := context.Background()

	old := httptest.NewServer(http.NotFoundHandler()) // a build without ReadReplicaRange
	defer old.Close()
	_, _, epochVersion, err := s.cat.Coordinator()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.meta.Multi(ctx, s.session.Load(), catalog.EpochCheck(epochVersion), catalog.RegisterTabletServerOp(7, catalog.TabletServerRegistration{
		Listeners: catalog.Listeners(strings.TrimPrefix(old.URL, "http://")),
	})); err != nil {
		t.Fatal(err)
	}

	p := newReplicaPeers(s)
	sent := &countingTransport{next: p.ranges.http.Transport}
	p.ranges.http = &http.Client{Transport: sent}
	active := catalog.FeatureLevelReplicaRange - 1
	p.level = func() int { return active }
	req := replica.RangeRequest{TB: replicaTB(info.TableId, 0), Leader: 2, LeaderEpoch: 0, Offset: 0, EndOffset: 10, MaxBytes: 1 << 20}
	for _, node := range []int32{1, 7} {
		_, err := p.ReadReplicaRange(ctx, node, req)
		if !errors.Is(err, catalog.ErrFeatureNotActive) || !strings.Contains(err.Error(), fmt.Sprintf("needs feature level %d, the cluster is at %d", catalog.FeatureLevelReplicaRange, active)) {
			t.Errorf("ReadReplicaRange to node %d at level %d: %v, want catalog.ErrFeatureNotActive naming both levels", node, active, err)
		}
	}
	if n := sent.n.Load(); n != 0 {
		t.Fatalf("%d ReadReplicaRange requests sent below the feature level, want none", n)
	}

	active = catalog.FeatureLevelReplicaRange
	// Node 1 (this build) is asked as a follower of node 2, which it is not.
	if _, err := p.ReadReplicaRange(ctx, 1, req); !errors.Is(err, replica.ErrNotLeader) {
		t.Errorf("ReadReplicaRange to node 1 at its level: %v, want replica.ErrNotLeader from node 1", err)
	}
	_, err = p.ReadReplicaRange(ctx, 7, req)
	if connect.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), "node 7 has no ReadReplicaRange") {
		t.Errorf("ReadReplicaRange to a node without the call: %v, want Unimplemented, naming the node and the call", err)
	}
	if n := sent.n.Load(); n != 2 {
		t.Fatalf("%d ReadReplicaRange requests sent at the feature level, want 2", n)
	}
}
