package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// kvTable creates, on c's node, a primary-key table demo.kv (k BIGINT primary
// key, v STRING, 2 buckets) holding rows k = 0..n-1 with v = "v<k>", and
// opens it through a client whose requests go through rt.
func kvTable(t testing.TB, ctx context.Context, c *client.Client, n int64, rt http.RoundTripper) *client.Table {
	t.Helper()
	if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "demo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "demo", Table: "kv", Descriptor_: &stromv1.TableDescriptor{
		Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "k", Type: "BIGINT"}, {Name: "v", Type: "STRING"}}, PrimaryKey: []string{"k"}}, BucketCount: 2,
	}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Table(ctx, "demo", "kv")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewUpsertWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range n {
		w.Upsert(ctx, record.Row{k, fmt.Sprint("v", k)})
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if rt == nil {
		return tbl
	}
	c2, err := client.New(c.Address(), client.WithHTTPClient(&http.Client{Transport: rt}))
	if err != nil {
		t.Fatal(err)
	}
	if tbl, err = c2.Table(ctx, "demo", "kv"); err != nil {
		t.Fatal(err)
	}
	return tbl
}

// getAll runs Get for keys 0..n-1 at once and checks that each caller
// gets its own key's row (nil from want on).
func getAll(t *testing.T, ctx context.Context, l *client.Lookuper, n, want int64) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row, err := l.Get(ctx, record.Row{k})
			switch {
			case err != nil:
				errs <- fmt.Errorf("key %d: %w", k, err)
			case k < want && (row == nil || row[0] != k || row[1] != fmt.Sprint("v", k)):
				errs <- fmt.Errorf("key %d answered %v", k, row)
			case k >= want && row != nil:
				errs <- fmt.Errorf("absent key %d answered %v", k, row)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// overlap is a transport that holds each Lookup request until another is
// in flight beside it (or a second has passed, so that a client sending one
// at a time still ends), then delays it by a random few milliseconds so
// that answers come back in any order; it records the most Lookups in
// flight at once.
type overlap struct {
	next http.RoundTripper

	mu       sync.Mutex
	rng      *rand.Rand
	inflight int
	most     int
	joined   chan struct{} // closed when a request finds another in flight
}

func (o *overlap) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(r.URL.Path, "/Lookup") {
		return o.next.RoundTrip(r)
	}
	o.mu.Lock()
	o.inflight++
	o.most = max(o.most, o.inflight)
	if o.inflight == 1 {
		o.joined = make(chan struct{})
	} else {
		select {
		case <-o.joined:
		default:
			close(o.joined)
		}
	}
	joined := o.joined
	d := time.Duration(o.rng.IntN(5)) * time.Millisecond
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.inflight--
		o.mu.Unlock()
	}()
	select {
	case <-joined:
	case <-time.After(time.Second):
	}
	time.Sleep(d)
	return o.next.RoundTrip(r)
}

// Get keeps several Lookup requests in flight, and each answer, coming
// back in any order, reaches its own caller. (Before max-inflight, the
// batcher waited for each request: one in flight at a time.)
func TestLookuperKeepsRequestsInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := &overlap{next: http.DefaultTransport, rng: rand.New(rand.NewPCG(1, 2))}
	tbl := kvTable(t, ctx, startNode(t), 100, o)
	l, err := tbl.NewLookuper(client.LookupBatchSize(4))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	getAll(t, ctx, l, 120, 100)
	o.mu.Lock()
	most := o.most
	o.mu.Unlock()
	if most < 2 {
		t.Fatalf("at most %d Lookup in flight at once for 120 concurrent Gets in batches of 4; want several", most)
	}
	if _, err := tbl.NewLookuper(client.LookupMaxInflight(0)); err == nil || !strings.Contains(err.Error(), "max in-flight requests 0") {
		t.Fatalf("max in-flight 0: %v, want an error naming it", err)
	}
}

// With many Lookups in flight, a bucket's leader moving (NOT_LEADER_OR_
// FOLLOWER naming the new one) has every Get of its keys retried there and
// answered.
func TestLookuperFollowsTheLeaderWithManyInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startNode(t)
	real := strings.TrimPrefix(c.Address(), "http://")
	m := &mover{next: http.DefaultTransport, real: real, bucket: 1, atNewHost: map[string]int{}}
	o := &overlap{next: m, rng: rand.New(rand.NewPCG(3, 4))}
	tbl := kvTable(t, ctx, c, 300, o)
	l, err := tbl.NewLookuper(client.LookupBatchSize(4), client.LookupMaxInflight(128))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	getAll(t, ctx, l, 150, 300)
	m.move()
	getAll(t, ctx, l, 300, 300)
	if n := m.servedByNewLeader("Lookup"); n == 0 {
		t.Fatal("no Lookup went to the new leader")
	}
}

// A Get after Close returns ErrLookuperClosed at once, whether or not the
// batcher ever started. (Before, it waited for its ctx to end.)
func TestLookuperGetAfterClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tbl := kvTable(t, ctx, startNode(t), 1, nil)
	for _, started := range []bool{false, true} {
		l, err := tbl.NewLookuper()
		if err != nil {
			t.Fatal(err)
		}
		if started {
			if row, err := l.Get(ctx, record.Row{int64(0)}); err != nil || row == nil {
				t.Fatalf("get before close: %v, %v", row, err)
			}
		}
		l.Close()
		if _, err := l.Get(ctx, record.Row{int64(0)}); !errors.Is(err, client.ErrLookuperClosed) {
			t.Fatalf("get after close (batcher started: %v): %v, want ErrLookuperClosed", started, err)
		}
	}
}
