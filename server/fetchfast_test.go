package server

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"strom/record"
	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/tablet/replica"
)

// TestFetchFastPathAnswersAsConnect sends the same FetchReplica calls to the
// fast path and to the Connect handler it stands in for, and requires the
// same replies byte for byte: status, content type and body, batches and
// per-bucket errors included.
func TestFetchFastPathAnswersAsConnect(t *testing.T) {
	s, info, schema, r := leaderWithTable(t, 2)
	for i := range 3 {
		if _, err := r.Append(context.Background(), buildBatch(t, schema, info.SchemaId, record.Row{int64(i), "a"}, record.Row{int64(i), "b"}), -1); err != nil {
			t.Fatal(err)
		}
	}
	epoch := r.State().LeaderEpoch
	rh := &replicaHandler{s: s}
	_, connectHandler := stromv1connect.NewReplicaServiceHandler(rh, s.connectOptions()...)
	fast := newFetchFastPath(rh, s.ready.Load, connectHandler)
	marshal := func(m *stromv1.FetchReplicaRequest) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	fetch := func(buckets ...*stromv1.FetchReplicaBucket) []byte {
		return marshal(&stromv1.FetchReplicaRequest{FollowerId: 2, MaxWaitMs: 1, MaxBytes: 1 << 20, Buckets: buckets})
	}
	cases := []struct {
		name     string
		body     []byte
		header   map[string]string
		notReady bool
		success  bool
	}{
		{name: "batches", success: true, body: fetch(&stromv1.FetchReplicaBucket{TableId: info.TableId, LeaderEpoch: epoch, MaxBytes: 1 << 20})},
		{name: "batches from offset 2 and an empty bucket", success: true, body: fetch(
			&stromv1.FetchReplicaBucket{TableId: info.TableId, LeaderEpoch: epoch, FetchOffset: 2, MaxBytes: 1 << 20},
			&stromv1.FetchReplicaBucket{TableId: info.TableId, Bucket: 1, LeaderEpoch: epoch, MaxBytes: 1 << 20})},
		{name: "bucket errors", success: true, body: fetch(
			&stromv1.FetchReplicaBucket{TableId: info.TableId, LeaderEpoch: epoch + 1, MaxBytes: 1 << 20},
			&stromv1.FetchReplicaBucket{TableId: info.TableId, LeaderEpoch: epoch, FetchOffset: 99, MaxBytes: 1 << 20},
			&stromv1.FetchReplicaBucket{TableId: 99, MaxBytes: 1 << 20})},
		{name: "no buckets", success: true, body: fetch()},
		{name: "garbage", body: []byte{0x2a, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2}},
		{name: "timeout not a number", header: map[string]string{"Connect-Timeout-Ms": "soon"}, body: fetch()},
		{name: "timeout negative", header: map[string]string{"Connect-Timeout-Ms": "-5"}, body: fetch()},
		{name: "not ready", notReady: true, body: fetch(&stromv1.FetchReplicaBucket{TableId: info.TableId, LeaderEpoch: epoch, MaxBytes: 1 << 20})},
	}
	do := func(h http.Handler, body []byte, header map[string]string) *httptest.ResponseRecorder {
		return callUnary(h, fetchReplicaPath, body, header)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.ready.Store(!tc.notReady)
			defer s.ready.Store(true)
			before := fast.served.Load()
			f := do(fast, tc.body, tc.header)
			if fast.served.Load() != before+1 {
				t.Fatal("the fast path passed the call on")
			}
			c := do(connectHandler, tc.body, tc.header)
			if f.Code != c.Code || f.Header().Get("Content-Type") != c.Header().Get("Content-Type") {
				t.Fatalf("fast path: %d %s; Connect: %d %s", f.Code, f.Header().Get("Content-Type"), c.Code, c.Header().Get("Content-Type"))
			}
			if (f.Code == http.StatusOK) != tc.success {
				t.Fatalf("status %d, want success %v", f.Code, tc.success)
			}
			if !bytes.Equal(f.Body.Bytes(), c.Body.Bytes()) {
				t.Fatalf("bodies differ:\nfast path: %q\nConnect:   %q", f.Body, c.Body)
			}
			if n := f.Header().Get("Content-Length"); tc.success && n != strconv.Itoa(f.Body.Len()) {
				t.Errorf("Content-Length %s of a body of %d bytes", n, f.Body.Len())
			}
		})
	}
	for name, h := range map[string]map[string]string{
		"json":       {"Content-Type": "application/json"},
		"compressed": {"Content-Encoding": "gzip"},
	} {
		before := fast.served.Load()
		do(fast, []byte("{}"), h)
		if fast.served.Load() != before {
			t.Errorf("%s: the fast path took the call", name)
		}
	}
}

// TestReplicaPeersFetch: the follower's side of the call (fetchReplica)
// against a node reads what Connect's client reads from the same answer,
// batches, offsets and bucket errors alike, and the errors of a failed
// call are the node's domain errors.
func TestReplicaPeersFetch(t *testing.T) {
	s, info, schema, r := leaderWithTable(t, 1)
	batch := buildBatch(t, schema, info.SchemaId, record.Row{int64(1), "a"})
	for range 2 {
		if _, err := r.Append(context.Background(), batch, -1); err != nil {
			t.Fatal(err)
		}
	}
	epoch := r.State().LeaderEpoch
	p := newReplicaPeers(s)
	req := replica.FetchRequest{Follower: 2, MaxWait: 1, MaxBytes: 1 << 20, Buckets: []replica.BucketFetch{
		{TB: replicaTB(info.TableId, 0), LeaderEpoch: epoch, FetchOffset: 1, MaxBytes: 1 << 20},
		{TB: replicaTB(info.TableId, 0), LeaderEpoch: epoch - 1, MaxBytes: 1 << 20},
		{TB: replicaTB(99, 0), MaxBytes: 1 << 20},
	}}
	got, err := p.FetchReplica(context.Background(), 1, req)
	if err != nil {
		t.Fatal(err)
	}
	var m []*stromv1.FetchReplicaBucket
	for _, b := range req.Buckets {
		m = append(m, &stromv1.FetchReplicaBucket{TableId: b.TB.TableID, Bucket: b.TB.Bucket, LeaderEpoch: b.LeaderEpoch, FetchOffset: b.FetchOffset, MaxBytes: int32(b.MaxBytes)})
	}
	want, err := stromv1connect.NewReplicaServiceClient(p.http, "http://"+s.Addr()).FetchReplica(context.Background(),
		connect.NewRequest(&stromv1.FetchReplicaRequest{FollowerId: 2, MaxWaitMs: 1, MaxBytes: 1 << 20, Buckets: m}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want.Msg.Buckets) {
		t.Fatalf("%d buckets, Connect's client %d", len(got), len(want.Msg.Buckets))
	}
	for i, w := range want.Msg.Buckets {
		g := got[i]
		if g.TB != replicaTB(w.TableId, w.Bucket) || g.HighWatermark != w.HighWatermark || g.LogStartOffset != w.LogStartOffset ||
			g.LogEndOffset != w.LogEndOffset || !bytes.Equal(g.Batches, w.Records) || (g.Err == nil) != (w.Error == nil) {
			t.Errorf("bucket %d: %+v, Connect's client %v", i, g, w)
		}
		if g.Err != nil && g.Err.Error() != w.Error.Message {
			t.Errorf("bucket %d: error %q, Connect's client %q", i, g.Err, w.Error.Message)
		}
	}
	if len(got[0].Batches) == 0 {
		t.Errorf("the fetch from offset 1 returned no batch")
	}
	if re, ok := errors.AsType[*rpc.RemoteError](got[1].Err); !ok || re.Detail.Name != "FENCED_LEADER_EPOCH_EXCEPTION" {
		t.Errorf("an old epoch: %v, want FENCED_LEADER_EPOCH", got[1].Err)
	}
	if !errors.Is(got[2].Err, replica.ErrUnknownBucket) {
		t.Errorf("an unknown bucket: %v, want ErrUnknownBucket", got[2].Err)
	}

	s.ready.Store(false)
	_, err = p.FetchReplica(context.Background(), 1, req)
	s.ready.Store(true)
	if !errors.Is(err, rpc.ErrNotReady) {
		t.Errorf("a node not ready: %v, want ErrNotReady", err)
	}
	unsigned := newReplicaPeers(s)
	unsigned.http = http.DefaultClient
	if _, err := unsigned.FetchReplica(context.Background(), 1, req); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("an unsigned call: %v, want HTTP 401", err)
	}
}

// bigBatchLeader is leaderWithTable(1) with one batch of about 1 MiB
// appended (1000 rows of 1 KiB of random letters), and a fetch of it.
func bigBatchLeader(t testing.TB) (*Server, *stromv1.FetchReplicaRequest) {
	s, info, schema, r := leaderWithTable(t, 1)
	var rows []record.Row
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		name := make([]byte, 1024)
		for j := range name {
			name[j] = byte('a' + rnd.IntN(26)) // incompressible enough
		}
		rows = append(rows, record.Row{int64(i), string(name)})
	}
	if _, err := r.Append(context.Background(), buildBatch(t, schema, info.SchemaId, rows...), -1); err != nil {
		t.Fatal(err)
	}
	return s, &stromv1.FetchReplicaRequest{FollowerId: 2, MaxWaitMs: 1, MaxBytes: 16 << 20, Buckets: []*stromv1.FetchReplicaBucket{
		{TableId: info.TableId, LeaderEpoch: r.State().LeaderEpoch, MaxBytes: 4 << 20}}}
}

// BenchmarkFetchReplicaAnswer: a follower's fetch of one bucket holding a
// batch of about 1 MiB from a node over loopback, its answer read into a
// new buffer each time (as before the buffer was reused) and into the
// previous answer's (as replicaPeers does); compare the two in one run.
func BenchmarkFetchReplicaAnswer(b *testing.B) {
	s, m := bigBatchLeader(b)
	p := newReplicaPeers(s)
	for _, reuse := range []bool{false, true} {
		b.Run(map[bool]string{false: "new buffer", true: "reused buffer"}[reuse], func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				res, out, err := fetchReplica(context.Background(), p.http, s.Addr(), m, 32<<20, buf)
				if err != nil || len(res) != 1 || len(res[0].Batches) == 0 {
					b.Fatalf("%v %v", res, err)
				}
				if reuse {
					buf = out
				}
				b.SetBytes(int64(len(res[0].Batches)))
			}
		})
	}
}

// leaderWithTable starts a node with a log table demo.events (id BIGINT,
// name STRING) of the given buckets, and returns its schema and the
// replica of bucket 0, which the node leads.
func leaderWithTable(t testing.TB, buckets int32) (*Server, *stromv1.TableInfo, record.Schema, *replica.Replica) {
	t.Helper()
	s := startServer(t, testConfig(t, t.TempDir()))
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "demo", "events", ddl, buckets)
	waitReplicas(t, s, info)
	r, err := s.replicas.Replica(replicaTB(info.TableId, 0))
	if err != nil {
		t.Fatal(err)
	}
	return s, info, schemaOf(t, ddl), r
}
