package server

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
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
