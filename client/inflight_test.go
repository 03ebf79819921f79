package client_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// shuffler is a transport that delays each ProduceLog request by a random
// few milliseconds, so that a bucket's requests in flight reach the server
// in any order; and that answers the request numbered failAt itself with a
// non-retriable error, as a server refusing that batch would.
type shuffler struct {
	next     http.RoundTripper
	produces atomic.Int64
	failAt   int64 // 0: none
	mu       sync.Mutex
	rng      *rand.Rand
	pending  map[int64]bool // requests delayed, not yet sent on
	early    int            // requests sent on before an earlier one
}

// sendOn records that request n goes to the server now, and whether it
// overtakes one that came before it.
func (s *shuffler) sendOn(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, n)
	for m := range s.pending {
		if m < n {
			s.early++
			return
		}
	}
}

func (s *shuffler) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(r.URL.Path, "/ProduceLog") {
		return s.next.RoundTrip(r)
	}
	n := s.produces.Add(1)
	if n == s.failAt {
		_, _ = io.Copy(io.Discard, r.Body)
		body := `{"code":"invalid_argument","message":"refused for the test"}`
		return &http.Response{StatusCode: 400, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	s.mu.Lock()
	d := time.Duration(s.rng.IntN(8)) * time.Millisecond
	if s.pending == nil {
		s.pending = map[int64]bool{}
	}
	s.pending[n] = true
	s.mu.Unlock()
	time.Sleep(d)
	s.sendOn(n)
	return s.next.RoundTrip(r)
}

// readBucket returns the bucket's rows' "seq" column in offset order.
func readBucket(t *testing.T, ctx context.Context, tbl *client.Table, bucket int32, want int) []int64 {
	t.Helper()
	sc, err := tbl.NewLogScanner(client.MaxWait(20 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Subscribe(ctx, bucket, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	var got []int64
	next := int64(0)
	for len(got) < want {
		fs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d rows: %v", len(got), err)
		}
		for _, r := range fs.Records() {
			if r.Offset != next {
				t.Fatalf("offset %d after %d", r.Offset, next-1)
			}
			next++
			got = append(got, r.Row[0].(int64))
		}
		fs.Release()
	}
	return got
}

// writeShuffled creates demo.<name> (one bucket, a BIGINT column "seq"),
// writes rows 0..n-1 to it through sh in batches of a few rows, five in
// flight, and returns the table (read through sh too), each row's Future,
// and what the writer's Close returned.
func writeShuffled(t *testing.T, ctx context.Context, c *client.Client, name string, sh *shuffler, n int) (*client.Table, []*client.Future, error) {
	t.Helper()
	createTable(t, c, "demo", name, 1, nil, &stromv1.Column{Name: "seq", Type: "BIGINT"})
	c2, err := client.New(c.Address(), client.WithHTTPClient(&http.Client{Transport: sh}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c2.Table(ctx, "demo", name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewAppendWriter(ctx, client.BatchSize(64), client.MaxInflight(5))
	if err != nil {
		t.Fatal(err)
	}
	futures := make([]*client.Future, n)
	for i := range n {
		futures[i] = w.Append(ctx, record.Row{int64(i)})
	}
	return tbl, futures, w.Close(ctx)
}

// With five batches in flight arriving in any order, a bucket holds the
// rows in the order they were appended, each once, at the offsets their
// futures report.
func TestInflightBatchesKeepTheOrder(t *testing.T) {
	c := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sh := &shuffler{next: http.DefaultTransport, rng: rand.New(rand.NewPCG(1, 2))}
	const n = 3000
	tbl, futures, err := writeShuffled(t, ctx, c, "ordered", sh, n)
	if err != nil {
		t.Fatal(err)
	}
	if sh.produces.Load() < n/20 {
		t.Fatalf("only %d requests: batches too large for the test", sh.produces.Load())
	}
	if sh.early == 0 { // Close returned: no request is in flight
		t.Fatalf("no request of %d overtook an earlier one: the test shows nothing", sh.produces.Load())
	}
	t.Logf("%d of %d requests overtook an earlier one", sh.early, sh.produces.Load())
	for i, f := range futures {
		_, off, err := f.Wait(ctx)
		if err != nil || off != int64(i) {
			t.Fatalf("row %d: offset %d, %v", i, off, err)
		}
	}
	for i, v := range readBucket(t, ctx, tbl, 0, n) {
		if v != int64(i) {
			t.Fatalf("offset %d holds row %d", i, v)
		}
	}
}

// When a batch fails for good, the batches sent after it under the same
// writer cannot be appended (they would follow a gap): they fail too, and
// the writer goes on under a new writer id. Whatever was acknowledged is in
// the bucket once, in order; nothing that failed is.
func TestInflightFailureBreaksOnlyThatWriter(t *testing.T) {
	c := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sh := &shuffler{next: http.DefaultTransport, rng: rand.New(rand.NewPCG(3, 4)), failAt: 10}
	const n = 1000
	tbl, futures, err := writeShuffled(t, ctx, c, "broken", sh, n)
	if err == nil {
		t.Fatal("Close reported no failure")
	}
	var acked []int64
	failed := 0
	for i, f := range futures {
		if _, _, err := f.Wait(ctx); err != nil {
			failed++
			continue
		}
		acked = append(acked, int64(i))
	}
	if failed == 0 || len(acked) == 0 || len(acked) < n/2 {
		t.Fatalf("%d rows failed, %d acknowledged", failed, len(acked))
	}
	got := readBucket(t, ctx, tbl, 0, len(acked))
	if fmt.Sprint(got) != fmt.Sprint(acked) {
		t.Fatalf("bucket holds %d rows, %d acknowledged; first difference in %v vs %v", len(got), len(acked), got[:min(20, len(got))], acked[:min(20, len(acked))])
	}
	// Nothing beyond the acknowledged rows.
	offs, err := tbl.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if offs[0] != int64(len(acked)) {
		t.Fatalf("log end %d, %d rows acknowledged", offs[0], len(acked))
	}
}
