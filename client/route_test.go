package client_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"strom/client"
	"strom/internal/metatest"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/server"
)

// newLeaderHost is where the fake moves a bucket's leadership: requests
// sent there go on to the real node, which keeps the bucket's data and its
// writers' state, as a new leader would (the data is replicated).
const newLeaderHost = "new-leader.test:9123"

// mover is a transport in front of one real node that fakes a leader
// change of one bucket: once moved, the old leader (the real node's
// address) refuses the bucket's data calls with NOT_LEADER_OR_FOLLOWER
// naming newLeaderHost, which serves them. The first ProduceLog of the
// bucket after the move is appended by the old leader before the refusal,
// as when leadership moves between an append and its answer: a writer
// that sends the batch again to the new leader must keep its writer id and
// sequence, or the row is written twice.
type mover struct {
	next   http.RoundTripper
	real   string // host:port of the node
	bucket int32

	mu        sync.Mutex
	moved     bool
	appended  bool           // the first produce after the move went through
	atNewHost map[string]int // data calls served through newLeaderHost, by method
}

func (m *mover) move() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.moved = true
}

func (m *mover) servedByNewLeader(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.atNewHost[method]
}

func (m *mover) RoundTrip(r *http.Request) (*http.Response, error) {
	method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	if r.URL.Host == newLeaderHost {
		m.mu.Lock()
		m.atNewHost[method]++
		m.mu.Unlock()
		r = r.Clone(r.Context())
		r.URL.Host, r.Host = m.real, m.real
		return m.next.RoundTrip(r)
	}
	m.mu.Lock()
	moved := m.moved
	m.mu.Unlock()
	if !moved || !strings.Contains(r.URL.Path, "TabletService") {
		return m.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	refusal := &stromv1.ErrorDetail{Code: 12, Name: "NOT_LEADER_OR_FOLLOWER", Retriable: true,
		Message: "moved for the test", LeaderId: 2, LeaderAddress: newLeaderHost}
	var reply proto.Message
	switch method {
	case "ProduceLog":
		var req stromv1.ProduceLogRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		if len(req.Buckets) != 1 || req.Buckets[0].Bucket != m.bucket {
			return m.next.RoundTrip(r)
		}
		m.mu.Lock()
		first := !m.appended
		m.appended = true
		m.mu.Unlock()
		if first {
			resp, err := m.next.RoundTrip(r)
			if err != nil {
				return nil, err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		reply = &stromv1.ProduceLogResponse{Buckets: []*stromv1.ProduceBucketResult{{Bucket: m.bucket, Error: refusal}}}
	case "FetchLog":
		// The moved bucket's result is refused, the others' served.
		resp, err := m.next.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		var fr stromv1.FetchLogResponse
		if resp.StatusCode != 200 || proto.Unmarshal(data, &fr) != nil {
			resp.Body = io.NopCloser(bytes.NewReader(data))
			return resp, nil
		}
		for i, b := range fr.Buckets {
			if b.Bucket == m.bucket {
				fr.Buckets[i] = &stromv1.FetchBucketResult{Bucket: b.Bucket, Error: refusal}
			}
		}
		reply = &fr
	case "Lookup":
		// The moved bucket's result is refused, the others' served.
		resp, err := m.next.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		var lr stromv1.LookupResponse
		if resp.StatusCode != 200 || proto.Unmarshal(data, &lr) != nil {
			resp.Body = io.NopCloser(bytes.NewReader(data))
			return resp, nil
		}
		for i, b := range lr.Buckets {
			if b.Bucket == m.bucket {
				lr.Buckets[i] = &stromv1.LookupBucketResult{Bucket: b.Bucket, Error: refusal}
			}
		}
		reply = &lr
	case "ListOffsets":
		var req stromv1.ListOffsetsRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		if len(req.Buckets) != 1 || req.Buckets[0] != m.bucket {
			return m.next.RoundTrip(r)
		}
		reply = &stromv1.ListOffsetsResponse{Buckets: []*stromv1.BucketOffset{{Bucket: m.bucket, Error: refusal}}}
	default:
		return m.next.RoundTrip(r)
	}
	data, err := proto.Marshal(reply)
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/proto"}},
		Body: io.NopCloser(bytes.NewReader(data)), ContentLength: int64(len(data)), Request: r}, nil
}

// A writer and a scanner keep working when a bucket's leader moves: they
// follow the NOT_LEADER_OR_FOLLOWER hint at once, and the batch the old
// leader appended but could not acknowledge is written once, since its
// retry keeps the writer id and sequence.
func TestWriterAndScannerFollowTheLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startNode(t)
	createTable(t, c, "demo", "t", 2, []string{"k"},
		&stromv1.Column{Name: "v", Type: "BIGINT"}, &stromv1.Column{Name: "k", Type: "STRING"})
	real := strings.TrimPrefix(c.Address(), "http://")
	m := &mover{next: http.DefaultTransport, real: real, bucket: 1, atNewHost: map[string]int{}}
	c2, err := client.New(real, client.WithHTTPClient(&http.Client{Transport: m}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c2.Table(ctx, "demo", "t")
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{keyFor(t, tbl, 0), keyFor(t, tbl, 1)}
	w, err := tbl.NewAppendWriter(ctx, client.DeliveryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	write := func(from, to int64) {
		t.Helper()
		for v := from; v < to; v++ {
			for _, k := range keys {
				w.Append(ctx, record.Row{v, k})
			}
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatalf("flush rows %d..%d: %v", from, to-1, err)
		}
	}
	write(0, 10)
	m.move()
	write(10, 20)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := m.servedByNewLeader("ProduceLog"); n == 0 {
		t.Error("no ProduceLog went to the new leader")
	}

	sc, err := tbl.NewLogScanner(client.MaxWait(20 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for b := range int32(2) {
		if err := sc.Subscribe(ctx, b, client.Earliest()); err != nil {
			t.Fatalf("subscribe bucket %d: %v", b, err)
		}
	}
	got := map[int32][]int64{}
	for len(got[0])+len(got[1]) < 40 {
		fs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		for _, r := range fs.Records() {
			got[r.Bucket] = append(got[r.Bucket], r.Row[0].(int64))
		}
		fs.Release()
	}
	for b, vs := range got {
		for i, v := range vs {
			if v != int64(i) {
				t.Fatalf("bucket %d holds %v, want 0..19 once each in order", b, vs)
			}
		}
	}
	if n := m.servedByNewLeader("FetchLog"); n == 0 {
		t.Error("no FetchLog went to the new leader")
	}
	// Earliest asks no ListOffsets (the fetch resolves it); Latest does.
	if err := sc.Subscribe(ctx, 1, client.Latest()); err != nil {
		t.Fatalf("subscribe bucket 1 at Latest: %v", err)
	}
	if n := m.servedByNewLeader("ListOffsets"); n == 0 {
		t.Error("no ListOffsets went to the new leader")
	}
	if pos := sc.Position()[1]; pos != 20 {
		t.Errorf("bucket 1 at Latest is at %d, want 20", pos)
	}
}

// startCluster runs n real nodes in-process, started at once with
// bootstrap-expect n, and returns once all are ready.
func startCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	gossip := make([]string, n)
	for i := range gossip {
		gossip[i] = free()
	}
	servers := make([]*server.Server, n)
	errs := make(chan error, n)
	for i := range n {
		cfg := server.DefaultConfig()
		cfg.NodeID = int32(i + 1)
		cfg.DataDir = t.TempDir()
		cfg.Listen, cfg.RaftListen, cfg.GossipListen = "127.0.0.1:0", free(), gossip[i]
		cfg.Join, cfg.BootstrapExpect = gossip, n
		cfg.ClusterSecret = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
		cfg.ServerStabilizationTime = 100 * time.Millisecond
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := server.Start(ctx, cfg, metatest.Logger(t))
			servers[i] = s
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("start: %v", err)
		}
	}
	for _, s := range servers {
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
	}
	return servers
}

// A client given one node of three (after one that is down) writes,
// reads and looks up tables whose buckets the three nodes lead.
func TestClientAcrossNodes(t *testing.T) {
	servers := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down.Close() // nothing listens there
	c, err := client.New(down.Addr().String() + "," + servers[2].Addr())
	if err != nil {
		t.Fatal(err)
	}
	for {
		cl, err := c.Admin().DescribeCluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		registered := 0
		for _, n := range cl.Nodes {
			if slices.Contains(n.Roles, "tablet-server") {
				registered++
			}
		}
		if registered == 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	const buckets, rows = 6, 60
	logTbl := createTable(t, c, "demo", "log", buckets, []string{"k"},
		&stromv1.Column{Name: "v", Type: "BIGINT"}, &stromv1.Column{Name: "k", Type: "STRING"})
	leaders := map[int32]bool{}
	for _, b := range logTbl.Info().Buckets {
		leaders[b.Leader] = true
	}
	if len(leaders) != 3 {
		t.Fatalf("buckets led by %v, want all three nodes", leaders)
	}
	w, err := logTbl.NewAppendWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for v := range int64(rows) {
		w.Append(ctx, record.Row{v, fmt.Sprintf("key-%d", v)})
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("write: %v", err)
	}
	sc, err := logTbl.NewLogScanner(client.MaxWait(20 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for b := range int32(buckets) {
		if err := sc.Subscribe(ctx, b, client.Earliest()); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int64]bool{}
	for len(seen) < rows {
		fs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Errors(); err != nil {
			t.Logf("poll: %v", err)
		}
		for _, r := range fs.Records() {
			seen[r.Row[0].(int64)] = true
		}
		fs.Release()
	}
	ends, err := logTbl.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, o := range ends {
		total += o
	}
	if len(ends) != buckets || total != rows {
		t.Errorf("high watermarks %v, want %d rows over %d buckets", ends, rows, buckets)
	}

	if _, err := c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "demo", Table: "kv", Descriptor_: &stromv1.TableDescriptor{
		Schema: &stromv1.Schema{
			Columns:    []*stromv1.Column{{Name: "id", Type: "BIGINT NOT NULL"}, {Name: "name", Type: "STRING"}},
			PrimaryKey: []string{"id"},
		},
		BucketCount: buckets,
	}}); err != nil {
		t.Fatal(err)
	}
	kvTbl, err := c.Table(ctx, "demo", "kv")
	if err != nil {
		t.Fatal(err)
	}
	uw, err := kvTbl.NewUpsertWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]record.Row, rows)
	for i := range int64(rows) {
		uw.Upsert(ctx, record.Row{i, fmt.Sprintf("name-%d", i)})
		keys[i] = record.Row{i}
	}
	if err := uw.Close(ctx); err != nil {
		t.Fatalf("upsert: %v", err)
	}
	l, err := kvTbl.NewLookuper()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	found, err := l.Lookup(ctx, keys...)
	if err != nil {
		t.Fatalf("lookup: %v", err)
	}
	for i, r := range found {
		if r == nil || r[1] != fmt.Sprintf("name-%d", i) {
			t.Fatalf("key %d: %v", i, r)
		}
	}
	scanned := 0
	for b := range int32(buckets) {
		rs, err := kvTbl.Scan(ctx, b, 0)
		if err != nil {
			t.Fatalf("scan bucket %d: %v", b, err)
		}
		scanned += len(rs)
	}
	if scanned != rows {
		t.Errorf("scans found %d rows, want %d", scanned, rows)
	}
}

// notCoordinatorAdmin answers every ListDatabases with the retriable error
// of a node cut off from the coordinator, counting the calls.
type notCoordinatorAdmin struct {
	stromv1connect.UnimplementedAdminServiceHandler
	calls atomic.Int32
}

func (a *notCoordinatorAdmin) ListDatabases(context.Context, *connect.Request[stromv1.ListDatabasesRequest]) (*connect.Response[stromv1.ListDatabasesResponse], error) {
	a.calls.Add(1)
	err := connect.NewError(connect.CodeUnavailable, errors.New("this node is not the coordinator (no other coordinator is known)"))
	if d, derr := connect.NewErrorDetail(&stromv1.ErrorDetail{Code: 44, Name: "NOT_COORDINATOR", Retriable: true}); derr == nil {
		err.AddDetail(d)
	}
	return nil, err
}

// answeringAdmin answers ListDatabases.
type answeringAdmin struct {
	stromv1connect.UnimplementedAdminServiceHandler
}

func (answeringAdmin) ListDatabases(context.Context, *connect.Request[stromv1.ListDatabasesRequest]) (*connect.Response[stromv1.ListDatabasesResponse], error) {
	return connect.NewResponse(&stromv1.ListDatabasesResponse{Databases: []string{"fluss"}}), nil
}

// A bootstrap server that answers an admin call with a retriable error (a
// node cut off from the others, not from the client) is left for the next
// one, which answers: the call does not wait out the retry timeout on it.
func TestAdminCallMovesOnFromARetriableSeed(t *testing.T) {
	bad := &notCoordinatorAdmin{}
	mux := http.NewServeMux()
	mux.Handle(stromv1connect.NewAdminServiceHandler(bad))
	a := httptest.NewServer(mux)
	defer a.Close()
	mux = http.NewServeMux()
	mux.Handle(stromv1connect.NewAdminServiceHandler(answeringAdmin{}))
	b := httptest.NewServer(mux)
	defer b.Close()

	c, err := client.New(a.URL+","+b.URL, client.WithRetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	dbs, err := c.Admin().ListDatabases(t.Context())
	if err != nil || len(dbs) != 1 {
		t.Fatalf("ListDatabases = %v, %v", dbs, err)
	}
	if n := bad.calls.Load(); n != 1 {
		t.Fatalf("the retriable seed was called %d times, want once before the client moved on", n)
	}
}
