package client_test

import (
	"context"
	"errors"
	"fmt"
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

// holdHost is a transport that counts FetchLog requests and holds those
// sent to one host until release is closed.
type holdHost struct {
	next    http.RoundTripper
	host    string
	release chan struct{}
	fetches atomic.Int64
}

func (h *holdHost) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/FetchLog") {
		h.fetches.Add(1)
		if r.URL.Host == h.host {
			select {
			case <-h.release:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
	}
	return h.next.RoundTrip(r)
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// appendRows appends rows v = from..to-1 with key k and flushes.
func appendRows(t *testing.T, ctx context.Context, w *client.AppendWriter, k string, from, to int64) {
	t.Helper()
	for v := from; v < to; v++ {
		w.Append(ctx, record.Row{v, k})
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// The scanner sends a bucket's next fetch before the next Poll, and a
// leader whose fetch is held does not hold up the other leader's buckets:
// Poll returns what is ready. Offsets stay dense and in order, and both
// buckets are read exactly once each. (Before prefetching, no fetch left
// between Polls, and a Poll waited for every leader's answer.)
func TestScannerPrefetchesAndDoesNotWaitForTheSlowestLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startNode(t)
	createTable(t, c, "demo", "t", 2, []string{"k"},
		&stromv1.Column{Name: "v", Type: "BIGINT"}, &stromv1.Column{Name: "k", Type: "STRING"})
	real := strings.TrimPrefix(c.Address(), "http://")
	// Bucket 1 moves to newLeaderHost, whose fetches are held.
	m := &mover{next: http.DefaultTransport, real: real, bucket: 1, atNewHost: map[string]int{}}
	h := &holdHost{next: m, host: newLeaderHost, release: make(chan struct{})}
	c2, err := client.New(real, client.WithHTTPClient(&http.Client{Transport: h}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c2.Table(ctx, "demo", "t")
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{keyFor(t, tbl, 0), keyFor(t, tbl, 1)}
	w, err := tbl.NewAppendWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	appendRows(t, ctx, w, keys[0], 0, 10)
	appendRows(t, ctx, w, keys[1], 0, 10)
	m.move()

	sc, err := tbl.NewLogScanner(client.MaxWait(20 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for b := range int32(2) {
		if err := sc.Subscribe(ctx, b, client.AtOffset(0)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int32][]int64{}
	poll := func() {
		t.Helper()
		fs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		for _, r := range fs.Records() {
			if want := int64(len(got[r.Bucket])); r.Offset != want || r.Row[0] != want {
				t.Fatalf("bucket %d: offset %d value %v, want %d", r.Bucket, r.Offset, r.Row[0], want)
			}
			got[r.Bucket] = append(got[r.Bucket], r.Row[0].(int64))
		}
		fs.Release()
	}
	// The first poll reads bucket 0 and learns that bucket 1 moved.
	for len(got[0]) < 10 {
		poll()
	}
	// Its next fetch leaves without another Poll.
	sent := h.fetches.Load()
	waitFor(t, ctx, "a fetch sent between polls", func() bool { return h.fetches.Load() > sent })
	// Bucket 1's leader holds its fetch; bucket 0 goes on.
	appendRows(t, ctx, w, keys[0], 10, 20)
	for len(got[0]) < 20 {
		poll()
	}
	if len(got[1]) != 0 {
		t.Fatalf("bucket 1 read %v while its fetch was held", got[1])
	}
	close(h.release)
	for len(got[1]) < 10 {
		poll()
	}
	if pos := sc.Position(); pos[0] != 20 || pos[1] != 10 {
		t.Fatalf("position %v, want bucket 0 at 20 and bucket 1 at 10", pos)
	}
	if n := m.servedByNewLeader("FetchLog"); n == 0 {
		t.Fatal("no FetchLog went to the new leader")
	}
}

// Subscribe drops what was fetched for the bucket before (buffered or in
// flight): the next Poll reads from the new offset.
func TestScannerSubscribeDropsPrefetched(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tbl := keyedTable(t, ctx, 1, http.DefaultTransport)
	w, err := tbl.NewAppendWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	sc, err := tbl.NewLogScanner(client.MaxWait(20 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for round := range int64(20) {
		appendRows(t, ctx, w, "k", round*5, round*5+5)
		from := round * 3 // behind what the previous rounds read
		if err := sc.Subscribe(ctx, 0, client.AtOffset(from)); err != nil {
			t.Fatal(err)
		}
		next := from
		for next < round*5+5 {
			fs, err := sc.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range fs.Records() {
				if r.Offset != next {
					t.Fatalf("round %d: offset %d after subscribing at %d, want %d", round, r.Offset, from, next)
				}
				next++
			}
			fs.Release()
		}
	}
}

// Poll after Close returns ErrScannerClosed; Close waits for the fetches in
// flight.
func TestScannerClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tbl := keyedTable(t, ctx, 2, http.DefaultTransport)
	sc, err := tbl.NewLogScanner(client.MaxWait(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for b := range int32(2) {
		if err := sc.Subscribe(ctx, b, client.Latest()); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pctx, pcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer pcancel()
		_, _ = sc.Poll(pctx) // leaves a long poll in flight
	}()
	wg.Wait()
	sc.Close() // cancels the long poll rather than waiting 10s for it
	if _, err := sc.Poll(ctx); !errors.Is(err, client.ErrScannerClosed) {
		t.Fatalf("poll after close: %v, want ErrScannerClosed", err)
	}
}

// A bucket's next fetch leaves when its answer has come, not when that
// answer has been decoded and polled: with the decode of the first answer
// held, a second fetch of the bucket is sent (from where the first
// answer's batches end), and the rows still come exactly once, in order.
// (Before, the next fetch left only at the Poll after the decode.)
func TestScannerFetchesWhileItDecodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startNode(t)
	createTable(t, c, "demo", "t", 1, []string{"k"},
		&stromv1.Column{Name: "v", Type: "BIGINT"}, &stromv1.Column{Name: "k", Type: "STRING"})
	tr := &countingTransport{calls: map[string]int{}}
	c2, err := client.New(c.Address(), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c2.Table(ctx, "demo", "t")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewAppendWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	appendRows(t, ctx, w, "a", 0, 10)

	hold, decoding := make(chan struct{}), make(chan struct{}, 1)
	var held atomic.Bool
	sc, err := tbl.NewLogScanner(client.MaxWait(20*time.Millisecond), client.BeforeDecode(func() {
		if held.CompareAndSwap(false, true) { // the first answer only
			decoding <- struct{}{}
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := sc.Subscribe(ctx, 0, client.AtOffset(0)); err != nil {
		t.Fatal(err)
	}
	var got []int64
	polled := make(chan error, 1)
	poll := func() error {
		fs, err := sc.Poll(ctx)
		if err != nil {
			return err
		}
		defer fs.Release()
		for _, r := range fs.Records() {
			if want := int64(len(got)); r.Offset != want || r.Row[0] != want {
				return fmt.Errorf("offset %d value %v, want %d", r.Offset, r.Row[0], want)
			}
			got = append(got, r.Row[0].(int64))
		}
		return nil
	}
	go func() { polled <- poll() }()
	<-decoding
	waitFor(t, ctx, "a second fetch while the first answer is decoded", func() bool { return tr.count("FetchLog") >= 2 })
	close(hold)
	if err := <-polled; err != nil {
		t.Fatal(err)
	}
	appendRows(t, ctx, w, "a", 10, 20)
	for len(got) < 20 {
		if err := poll(); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 20 {
		t.Fatalf("read %d rows, want 20", len(got))
	}
}
