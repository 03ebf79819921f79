package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
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

// keyFor returns a bucket-key value that the table's bucketing puts in
// bucket b.
func keyFor(t *testing.T, tbl *client.Table, b int32) string {
	t.Helper()
	kc, err := record.NewKeyCodec(tbl.Schema().Columns, []string{"k"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		k := fmt.Sprintf("key-%d", i)
		key, err := kc.AppendRow(nil, record.Row{k, int64(0)})
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
	c := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createTable(t, c, "demo", "slow", 2, []string{"k"},
		&stromv1.Column{Name: "k", Type: "STRING"}, &stromv1.Column{Name: "v", Type: "BIGINT"})
	hold := &holdBucket{next: http.DefaultTransport, bucket: 0, release: make(chan struct{})}
	c2, err := client.New(c.Address(), client.WithHTTPClient(&http.Client{Transport: hold}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c2.Table(ctx, "demo", "slow")
	if err != nil {
		t.Fatal(err)
	}
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
			w.Append(ctx, record.Row{stuck, int64(i)})
		}
		var fs []*client.Future
		for i := range 20 {
			fs = append(fs, w.Append(ctx, record.Row{free, int64(i)}))
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
