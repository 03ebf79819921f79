package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"strom/client"
	stromv1 "strom/rpc/gen/strom/v1"
)

// countingTransport counts the requests of each RPC method it passes on.
type countingTransport struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.calls[r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// Subscribing from the beginning costs no ListOffsets request: the first
// fetch resolves Earliest (before, Subscribe asked ListOffsets once per
// bucket). The rows are all read, once each, and a bucket that was empty
// at its first fetch is read from its start once rows arrive.
func TestSubscribeEarliestSendsNoListOffsets(t *testing.T) {
	c := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "demo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().Create(ctx, "demo", "log", client.NewTable(client.NewSchema().
		Column("v", client.BigInt()).Column("k", client.String())).DistributedBy(4, "k"), false); err != nil {
		t.Fatal(err)
	}
	ct := &countingTransport{calls: map[string]int{}}
	cc, err := client.New(c.Address(), client.WithHTTPClient(&http.Client{Transport: ct}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cc.Table(ctx, "demo", "log")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewAppendWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	appendRows(t, ctx, w, "a", 0, 50)
	sc, err := tbl.NewLogScanner(client.MaxWait(10 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for b := range tbl.Buckets() {
		if err := sc.Subscribe(ctx, b, client.Earliest()); err != nil {
			t.Fatal(err)
		}
	}
	if n := ct.count("ListOffsets"); n != 0 {
		t.Fatalf("subscribing %d buckets from Earliest sent %d ListOffsets requests, want 0", tbl.Buckets(), n)
	}
	for b, o := range sc.Position() {
		if o != client.EarliestOffset {
			t.Fatalf("bucket %d at %d before any fetch, want EarliestOffset", b, o)
		}
	}
	seen := map[int64]int{}
	// read polls until every bucket has answered and want rows were read.
	read := func(want int) {
		t.Helper()
		for len(seen) < want || func() bool {
			for _, o := range sc.Position() {
				if o == client.EarliestOffset {
					return true
				}
			}
			return false
		}() {
			fs, err := sc.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				// A bucket whose replica is not open yet answers so until it is.
				if e, ok := errors.AsType[*client.Error](f.Err); f.Err != nil && !(ok && e.Retriable) {
					t.Fatalf("bucket %d: %v", f.Bucket, f.Err)
				}
			}
			for _, r := range fs.Records() {
				seen[r.Row[0].(int64)]++
			}
			fs.Release()
		}
	}
	read(50)
	appendRows(t, ctx, w, "b", 50, 80) // to another bucket, maybe one empty so far
	read(80)
	for v := int64(0); v < 80; v++ {
		if seen[v] != 1 {
			t.Errorf("row %d read %d times", v, seen[v])
		}
	}
	if n := ct.count("ListOffsets"); n != 0 {
		t.Errorf("%d ListOffsets requests, want 0", n)
	}
}
