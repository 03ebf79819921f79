package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// holdBucket is a transport that holds every ProduceLog request for one
// bucket until release is closed, as a server whose append to that bucket
// is stuck would.
type holdBucket struct {
	next    http.RoundTripper
	bucket  int32
	release chan struct{}
}

func (h *holdBucket) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(r.URL.Path, "/ProduceLog") {
		return h.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var m stromv1.ProduceLogRequest
	if err := proto.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	if len(m.Buckets) == 1 && m.Buckets[0].Bucket == h.bucket {
		select {
		case <-h.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return h.next.RoundTrip(r)
}

// keyedTable starts a node with a table demo.t of columns v BIGINT and
// k STRING, bucketed by k, and opens it through a client whose requests go
// through rt.
func keyedTable(t *testing.T, ctx context.Context, buckets int32, rt http.RoundTripper) *client.Table {
	t.Helper()
	c := startNode(t)
	createTable(t, c, "demo", "t", buckets, []string{"k"},
		&stromv1.Column{Name: "v", Type: "BIGINT"}, &stromv1.Column{Name: "k", Type: "STRING"})
	c2, err := client.New(c.Address(), client.WithHTTPClient(&http.Client{Transport: rt}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c2.Table(ctx, "demo", "t")
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// keyFor returns a value of the bucket-key column "k" that the table's
// bucketing puts in bucket b.
func keyFor(t *testing.T, tbl *client.Table, b int32) string {
	t.Helper()
	cols := tbl.Schema().Columns
	kc, err := record.NewKeyCodec(cols, []string{"k"})
	if err != nil {
		t.Fatal(err)
	}
	row := make(record.Row, len(cols))
	for i := 0; ; i++ {
		k := fmt.Sprintf("key-%d", i)
		for j, c := range cols {
			if c.Name == "k" {
				row[j] = k
			}
		}
		key, err := kc.AppendRow(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		if record.BucketOf(key, int(tbl.Buckets())) == int(b) {
			return k
		}
	}
}

// A bucket whose appends are stuck holds up only its own batches: appends
// to the writer's other buckets still go through and are acknowledged.
func TestSlowBucketDoesNotStallOtherBuckets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hold := &holdBucket{next: http.DefaultTransport, bucket: 0, release: make(chan struct{})}
	tbl := keyedTable(t, ctx, 2, hold)
	// A batch per row: the stuck bucket has far more batches than it may
	// have in flight, and they take little of the buffer memory.
	w, err := tbl.NewAppendWriter(ctx, client.BatchSize(1))
	if err != nil {
		t.Fatal(err)
	}
	stuck, free := keyFor(t, tbl, 0), keyFor(t, tbl, 1)
	done := make(chan []*client.Future, 1)
	go func() {
		for i := range 500 {
			w.Append(ctx, record.Row{int64(i), stuck})
		}
		var fs []*client.Future
		for i := range 20 {
			fs = append(fs, w.Append(ctx, record.Row{int64(i), free}))
		}
		done <- fs
	}()
	var fs []*client.Future
	select {
	case fs = <-done:
	case <-ctx.Done():
		t.Fatal("appends to bucket 1 blocked while bucket 0 is stuck")
	}
	for i, f := range fs {
		if b, off, err := f.Wait(ctx); err != nil || b != 1 || off != int64(i) {
			t.Fatalf("row %d to bucket 1 while bucket 0 is stuck: bucket %d offset %d, %v", i, b, off, err)
		}
	}
	close(hold.release)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	offs, err := tbl.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
	if err != nil || offs[0] != 500 || offs[1] != 20 {
		t.Fatalf("log ends %v, %v; want 500 and 20", offs, err)
	}
}

// faults is a transport that counts InitWriter calls and fails chosen
// ProduceLog requests (numbered from 1): lost ones reach the server but
// their answer is lost (the connection breaks), refused ones are answered
// with a non-retriable error without reaching it.
type faults struct {
	next     http.RoundTripper
	inits    atomic.Int64
	produces atomic.Int64
	lost     func(n int64) bool
	refused  func(n int64) bool
}

func (f *faults) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/InitWriter"):
		f.inits.Add(1)
	case strings.HasSuffix(r.URL.Path, "/ProduceLog"):
		n := f.produces.Add(1)
		if f.refused != nil && f.refused(n) {
			_, _ = io.Copy(io.Discard, r.Body)
			body := `{"code":"invalid_argument","message":"refused for the test"}`
			return &http.Response{StatusCode: 400, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		}
		if f.lost != nil && f.lost(n) {
			resp, err := f.next.RoundTrip(r)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return nil, errors.New("connection reset for the test")
		}
	}
	return f.next.RoundTrip(r)
}

// writeThrough writes n rows, round robin, to a new table of the given
// buckets through f, and checks that each bucket holds exactly the rows
// acknowledged, once each and in order. It returns the writer's Close
// result.
func writeThrough(t *testing.T, f *faults, buckets int32, n int) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.next = http.DefaultTransport
	tbl := keyedTable(t, ctx, buckets, f)
	w, err := tbl.NewAppendWriter(ctx, client.BatchSize(64))
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, buckets)
	for b := range keys {
		keys[b] = keyFor(t, tbl, int32(b))
	}
	futures := make([]*client.Future, n)
	for i := range n {
		futures[i] = w.Append(ctx, record.Row{int64(i), keys[i%int(buckets)]})
	}
	closeErr := w.Close(ctx)
	acked := make([][]int64, buckets)
	for i, f := range futures {
		if _, _, err := f.Wait(ctx); err == nil {
			acked[i%int(buckets)] = append(acked[i%int(buckets)], int64(i))
		}
	}
	offs, err := tbl.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for b := range buckets {
		got := readBucket(t, ctx, tbl, b, len(acked[b]))
		if fmt.Sprint(got) != fmt.Sprint(acked[b]) || offs[b] != int64(len(acked[b])) {
			t.Fatalf("bucket %d holds %d rows (log end %d), %d acknowledged", b, len(got), offs[b], len(acked[b]))
		}
	}
	return closeErr
}

// A batch whose answer was lost is retried and recognised as written,
// even when the batches after it were acknowledged meanwhile: no batch is
// sent more than four sequences past the oldest unsettled one, so the
// server still remembers that one when its retry arrives.
func TestLostAnswersAreRetriedIntoPlace(t *testing.T) {
	f := &faults{lost: func(n int64) bool { return n%5 == 0 }}
	if err := writeThrough(t, f, 1, 1000); err != nil {
		t.Fatal(err)
	}
}

// An idempotent writer uses one writer id for all the buckets it writes
// to, as Fluss's does: retried batches keep it, and a batch that fails for
// good retires it for one new id, shared again by every bucket.
func TestOneWriterIDForAllBuckets(t *testing.T) {
	const buckets = 4
	t.Run("lost answers", func(t *testing.T) {
		f := &faults{lost: func(n int64) bool { return n%5 == 0 }}
		if err := writeThrough(t, f, buckets, 800); err != nil {
			t.Fatal(err)
		}
		if got := f.inits.Load(); got != 1 {
			t.Errorf("%d InitWriter calls for %d buckets, want 1", got, buckets)
		}
	})
	t.Run("a batch refused", func(t *testing.T) {
		f := &faults{refused: func(n int64) bool { return n == 10 }}
		if err := writeThrough(t, f, buckets, 800); err == nil {
			t.Fatal("Close reported no failure")
		}
		if got := f.inits.Load(); got != 2 {
			t.Errorf("%d InitWriter calls for %d buckets and one failure, want 2", got, buckets)
		}
	})
}

// countCalls is a transport that counts the requests sent.
type countCalls struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countCalls) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// An admin call made before the node is up waits for it: it is retried,
// with backoff, while no node listens (connection refused) and while the
// node starts (NODE_NOT_READY), then served.
func TestCallWaitsForTheNodeToStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	calls := &countCalls{next: http.DefaultTransport}
	c, err := client.New(addr, client.WithHTTPClient(&http.Client{Transport: calls}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "early"})
		done <- err
	}()
	// The node starts only once the call has found nothing there.
	for calls.n.Load() == 0 {
		select {
		case err := <-done:
			t.Fatalf("CreateDatabase with no node up returned at once: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	startServer(t, t.TempDir(), addr)
	if err := <-done; err != nil {
		t.Fatalf("CreateDatabase made before the node started: %v", err)
	}
	if _, err := c.Admin().GetDatabase(ctx, "early"); err != nil {
		t.Fatal(err)
	}
}

// The retry timeout bounds the retrying, not a call: a long poll longer
// than it is answered, not cut off.
func TestRetryTimeoutDoesNotBoundACall(t *testing.T) {
	c := startNode(t)
	ctx := t.Context()
	// Offsets retries until the bucket is served.
	if _, err := createTable(t, c, "demo", "empty", 1, nil, &stromv1.Column{Name: "v", Type: "BIGINT"}).
		Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_EARLIEST, time.Time{}); err != nil {
		t.Fatal(err)
	}
	c2, err := client.New(c.Address(), client.WithRetryTimeout(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c2.Table(ctx, "demo", "empty")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := tbl.NewLogScanner(client.MaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Subscribe(ctx, 0, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	fs, err := sc.Poll(ctx)
	if err != nil || len(fs.Records()) != 0 {
		t.Fatalf("a poll waiting longer than the retry timeout: %v, %v", fs, err)
	}
}

// WithRetryNotify hears of every retry, with the failed try's error and the
// time since the first try; a call that cannot succeed ends with the retry
// timeout.
func TestRetryNotify(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var mu sync.Mutex
	var waited []time.Duration
	var errs []error
	c, err := client.New(addr, client.WithRetryTimeout(500*time.Millisecond),
		client.WithRetryNotify(func(err error, d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			waited, errs = append(waited, d), append(errs, err)
		}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().ListDatabases(t.Context()); err == nil {
		t.Fatal("ListDatabases with no node up succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waited) < 2 {
		t.Fatalf("notified of %d retries, want several", len(waited))
	}
	for i := range waited {
		if errs[i] == nil || (i > 0 && waited[i] <= waited[i-1]) {
			t.Fatalf("retry %d: err %v, waited %v (all %v)", i, errs[i], waited[i], waited)
		}
	}
}
