package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// TestProduceFastPathAnswersAsConnect sends the same ProduceLog calls to the
// fast path and to the Connect handler it stands in for, and requires the
// same replies: status, content type, and body (byte for byte for errors;
// for successes the same message but for the offsets, which the first call
// advanced).
func TestProduceFastPathAnswersAsConnect(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "demo", "events", ddl, 2)
	createTable(t, s, "demo", "users", ddl, 1, "id")
	waitReplicas(t, s, info)
	good := buildBatch(t, schemaOf(t, ddl), info.SchemaId, record.Row{int64(1), "a"}, record.Row{int64(2), "b"})
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff

	th := &tabletHandler{s: s}
	_, connectHandler := stromv1connect.NewTabletServiceHandler(th, s.connectOptions()...)
	fast := newProduceFastPath(th, s.ready.Load, connectHandler)

	marshal := func(m *stromv1.ProduceLogRequest) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	acks := func(a int32) *int32 { return &a }
	cases := []struct {
		name     string
		body     []byte
		header   map[string]string
		notReady bool
		success  bool
	}{
		{name: "appended", success: true, body: marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: good}, {Bucket: 1, Records: good}}})},
		{name: "bucket errors", success: true, body: marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: badCRC}, {Bucket: 7, Records: good}, {Bucket: 1}}})},
		{name: "no such table", body: marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "nope",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: good}}})},
		{name: "primary-key table", body: marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "users",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: good}}})},
		{name: "bad acks", body: marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "events", Acks: acks(3),
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: good}}})},
		{name: "rows and buckets", body: marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: good}}, Rows: nil}) /* rows below */},
		{name: "garbage", body: []byte{0x2a, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2}},
		{name: "empty", body: nil},
		{name: "timeout not a number", header: map[string]string{"Connect-Timeout-Ms": "soon"}, body: marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "events"})},
		{name: "timeout too long", header: map[string]string{"Connect-Timeout-Ms": "12345678901"}, body: marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "events"})},
		{name: "timeout negative", header: map[string]string{"Connect-Timeout-Ms": "-5"}, body: marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "events"})},
		{name: "not ready", notReady: true, body: marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: good}}})},
	}
	// A request with rows takes proto.Unmarshal inside the fast path.
	withRows, err := proto.Marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
		Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: good}}, Rows: rowsOf(t, `{"id":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	cases[5].body = withRows

	do := func(h http.Handler, body []byte, header map[string]string) *httptest.ResponseRecorder {
		return callUnary(h, stromv1connect.TabletServiceProduceLogProcedure, body, header)
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
			if !tc.success {
				if f.Code == http.StatusOK {
					t.Fatalf("want an error, got %d", f.Code)
				}
				if !bytes.Equal(f.Body.Bytes(), c.Body.Bytes()) {
					t.Fatalf("error bodies differ:\nfast path: %s\nConnect:   %s", f.Body, c.Body)
				}
				return
			}
			var fm, cm stromv1.ProduceLogResponse
			if err := proto.Unmarshal(f.Body.Bytes(), &fm); err != nil {
				t.Fatal(err)
			}
			if err := proto.Unmarshal(c.Body.Bytes(), &cm); err != nil {
				t.Fatal(err)
			}
			for _, b := range cm.Buckets {
				if b.Error == nil { // Connect's call came second: two rows later
					b.BaseOffset -= 2
					b.NextOffset -= 2
				}
			}
			if !proto.Equal(&fm, &cm) {
				t.Fatalf("replies differ:\nfast path: %v\nConnect:   %v", &fm, &cm)
			}
		})
	}

	// Calls the fast path does not take reach Connect.
	for name, h := range map[string]map[string]string{
		"json":       {"Content-Type": "application/json"},
		"compressed": {"Content-Encoding": "gzip"},
		"grpc":       {"Content-Type": "application/grpc"},
	} {
		before := fast.served.Load()
		do(fast, []byte("{}"), h)
		if fast.served.Load() != before {
			t.Errorf("%s: the fast path took the call", name)
		}
	}
}

// TestConnectClientsTakeTheFastPath checks that connect-go's own client (as
// other Go programs would use it) sends ProduceLog in the form the fast path
// takes, over HTTP/1.1 and HTTP/2 alike.
func TestConnectClientsTakeTheFastPath(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "demo", "events", ddl, 1)
	waitReplicas(t, s, info)
	good := buildBatch(t, schemaOf(t, ddl), info.SchemaId, record.Row{int64(1), "a"})
	th := &tabletHandler{s: s}
	_, connectHandler := stromv1connect.NewTabletServiceHandler(th, s.connectOptions()...)
	fast := newProduceFastPath(th, s.ready.Load, connectHandler)
	srv := httptest.NewUnstartedServer(fast)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	for name, hc := range map[string]*http.Client{"HTTP/1.1": http.DefaultClient, "HTTP/2": h2cClient()} {
		c := stromv1connect.NewTabletServiceClient(hc, srv.URL)
		before := fast.served.Load()
		resp, err := c.ProduceLog(context.Background(), connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: good}}}))
		if err != nil || resp.Msg.Buckets[0].Error != nil {
			t.Fatalf("%s: %v %v", name, err, resp)
		}
		if fast.served.Load() != before+1 {
			t.Errorf("%s: connect-go's call did not take the fast path", name)
		}
	}
}

// callUnary sends h a call to path in Connect's unary protocol with a
// binary protobuf body, and header's extra headers.
func callUnary(h http.Handler, path string, body []byte, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set("Connect-Protocol-Version", "1")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// rowsOf parses JSON objects into the rows field of a request.
func rowsOf(t *testing.T, objects ...string) []*structpb.Struct {
	t.Helper()
	var out []*structpb.Struct
	for _, o := range objects {
		st := &structpb.Struct{}
		if err := protojson.Unmarshal([]byte(o), st); err != nil {
			t.Fatal(err)
		}
		out = append(out, st)
	}
	return out
}

// The Go client sends its batches in chunks with their length in a header
// (so that net/http writes them without copying): the fast path takes those
// calls, and refuses a body whose length differs from the header's.
// redirect is a transport that sends requests for host from to host to.
type redirect struct{ from, to string }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == r.from {
		req = req.Clone(req.Context())
		req.URL.Host, req.Host = r.to, r.to
	}
	return http.DefaultTransport.RoundTrip(req)
}

func TestGoClientTakesTheFastPath(t *testing.T) {
	if client.BodyLengthHeader != bodyLengthHeader {
		t.Fatalf("client sends %q, server reads %q", client.BodyLengthHeader, bodyLengthHeader)
	}
	s := startServer(t, testConfig(t, t.TempDir()))
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "demo", "events", ddl, 1)
	waitReplicas(t, s, info)
	th := &tabletHandler{s: s}
	_, connectHandler := stromv1connect.NewTabletServiceHandler(th, s.connectOptions()...)
	fast := newProduceFastPath(th, s.ready.Load, connectHandler)
	mux := http.NewServeMux()
	mux.Handle(produceLogPath, fast)
	mux.Handle("/", s.handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// The client sends data to the bucket's leader, at the node's
	// registered address: send that to srv.
	front := strings.TrimPrefix(srv.URL, "http://")
	c, err := client.New(front, client.WithHTTPClient(&http.Client{Transport: redirect{s.Addr(), front}}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Table(t.Context(), "demo", "events")
	if err != nil {
		t.Fatal(err)
	}
	good := buildBatch(t, schemaOf(t, ddl), info.SchemaId, record.Row{int64(1), "a"})
	if err := tbl.ProduceBatches(t.Context(), 0, good, -1); err != nil {
		t.Fatal(err)
	}
	if fast.served.Load() != 1 {
		t.Fatalf("the fast path served %d calls, want 1", fast.served.Load())
	}

	body, err := proto.Marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
		Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: good}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, claimed := range []int{len(body) - 1, len(body) + 1} {
		req := httptest.NewRequest(http.MethodPost, produceLogPath, bytes.NewReader(body))
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/proto")
		req.Header.Set(bodyLengthHeader, strconv.Itoa(claimed))
		rec := httptest.NewRecorder()
		fast.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "request body") {
			t.Errorf("body of %d bytes claimed as %d: %d %s", len(body), claimed, rec.Code, rec.Body)
		}
	}
}

// A request's buckets are written concurrently: one that waits for its
// writer's earlier batch does not hold up the others.
func TestProduceBucketsDoNotWaitForEachOther(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "demo", "events", ddl, 2)
	waitReplicas(t, s, info)
	batch := func(writer int64, seq int32) []byte {
		b := buildBatch(t, schemaOf(t, ddl), info.SchemaId, record.Row{int64(seq), "a"})
		record.Batch(b).SetWriter(writer, seq)
		return b
	}
	c := tabletClient(s)
	ctx := context.Background()
	done := make(chan error, 1)
	bucket0Waited := true
	go func() {
		// Bucket 0 gets writer 7's second batch before its first.
		resp, err := c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: batch(7, 1)}, {Bucket: 1, Records: batch(8, 0)}}}))
		if err == nil && resp.Msg.Buckets[1].Error != nil {
			err = fmt.Errorf("bucket 1: %v", resp.Msg.Buckets[1].Error)
		}
		// Bucket 0 waits a second at most; on a slow machine the first
		// batch may come later, and the second must then be sent again.
		bucket0Waited = err == nil && resp.Msg.Buckets[0].Error == nil
		done <- err
	}()
	latest := func(bucket int32) int64 {
		resp, err := c.ListOffsets(ctx, connect.NewRequest(&stromv1.ListOffsetsRequest{Database: "demo", Table: "events",
			Spec: stromv1.OffsetSpec_OFFSET_SPEC_LATEST, Buckets: []int32{bucket}}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.Buckets[0].Offset
	}
	for latest(1) == 0 {
		select {
		case err := <-done:
			t.Fatalf("the request ended before bucket 1 was visible: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if latest(0) != 0 {
		t.Fatal("bucket 0 appended a batch ahead of its writer's first")
	}
	// Now the first batch: both of bucket 0's are appended, in order.
	resp, err := c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
		Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: batch(7, 0)}}}))
	if err != nil || resp.Msg.Buckets[0].Error != nil || resp.Msg.Buckets[0].BaseOffset != 0 {
		t.Fatalf("first batch: %v %v", resp, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bucket0Waited {
		resp, err := c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: batch(7, 1)}}}))
		if err != nil || resp.Msg.Buckets[0].Error != nil {
			t.Fatalf("second batch again: %v %v", resp, err)
		}
	}
	if latest(0) != 2 {
		t.Fatalf("bucket 0 ends at %d, want 2", latest(0))
	}
}

// Bodies beyond what the fast path allocates up front are read as they
// arrive, into growing buffers, and appended whole.
func TestProduceFastPathLargeBody(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "demo", "big", ddl, 1)
	waitReplicas(t, s, info)
	rows := make([]record.Row, 120000)
	for i := range rows {
		rows[i] = record.Row{int64(i), fmt.Sprintf("%x-%x", uint64(i)*0x9e3779b97f4a7c15, uint64(i)*0xc2b2ae3d27d4eb4f)}
	}
	big := buildBatch(t, schemaOf(t, ddl), info.SchemaId, rows...)
	if len(big) <= 16*minBodyGrant {
		t.Fatalf("batch of %d bytes: want more than %d", len(big), 16*minBodyGrant)
	}
	resp, err := tabletClient(s).ProduceLog(context.Background(), connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "big",
		Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: big}}}))
	if err != nil || resp.Msg.Buckets[0].Error != nil || resp.Msg.Buckets[0].NextOffset != int64(len(rows)) {
		t.Fatalf("%v %v", resp, err)
	}
	for _, n := range []int{1, minBodyGrant, 4*minBodyGrant - 1, 4 * minBodyGrant, 64*minBodyGrant + 3} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i * 7)
		}
		got, err := readBody(bytes.NewReader(data), n)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("readBody of %d bytes: %v", n, err)
		}
		if _, err := readBody(bytes.NewReader(data[:n-1]), n); err == nil {
			t.Fatalf("readBody of %d bytes from %d: no error", n, n-1)
		}
	}
}

// readBody takes memory as the body arrives, not as its header claims: at
// every read it holds at most four times what has arrived (plus its first
// grant, under 256 KiB).
func TestReadBodyTakesMemoryAsBytesArrive(t *testing.T) {
	const n = 100 << 20 // claimed
	r := &heldReader{sent: 3<<20 + 5}
	if _, err := readBody(r, n); err == nil {
		t.Fatal("short body read without error")
	}
	if r.worst > 0 {
		t.Fatalf("readBody held %d bytes with %d arrived; want at most 4×arrived + %d", r.worst, r.worstAt, 4*minBodyGrant)
	}
}

// heldReader sends sent bytes then fails, and records the worst ratio of
// memory held (the bytes received plus the room offered for the next read)
// to bytes received.
type heldReader struct {
	sent, got      int
	worst, worstAt int
}

func (r *heldReader) Read(p []byte) (int, error) {
	if held := r.got + len(p); held > 4*r.got+4*minBodyGrant && held > r.worst {
		r.worst, r.worstAt = held, r.got
	}
	if r.got == r.sent {
		return 0, io.ErrUnexpectedEOF
	}
	k := min(len(p), r.sent-r.got, 64<<10)
	r.got += k
	return k, nil
}
