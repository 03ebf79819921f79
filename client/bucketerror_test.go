package client_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// refuseFirst is a transport that answers the first call of each of its
// methods itself, with the asked bucket's result carrying a retriable
// UNKNOWN_TABLE_OR_BUCKET error, as a node answers while it has not yet
// opened the replica of a table just created (or when its leadership has
// just moved); later calls go through.
type refuseFirst struct {
	next http.RoundTripper

	mu      sync.Mutex
	refused map[string]bool // by method
}

func (f *refuseFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	f.mu.Lock()
	first := !f.refused[method]
	f.refused[method] = true
	f.mu.Unlock()
	if !first {
		return f.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	refusal := &stromv1.ErrorDetail{Code: 21, Name: "UNKNOWN_TABLE_OR_BUCKET_EXCEPTION", Retriable: true, Message: "refused for the test"}
	var reply proto.Message
	switch method {
	case "ListOffsets":
		var req stromv1.ListOffsetsRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		reply = &stromv1.ListOffsetsResponse{Buckets: []*stromv1.BucketOffset{{Bucket: req.Buckets[0], Error: refusal}}}
	case "PrefixLookup":
		var req stromv1.PrefixLookupRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			return nil, err
		}
		reply = &stromv1.PrefixLookupResponse{Buckets: []*stromv1.PrefixLookupBucketResult{{Bucket: req.Buckets[0].Bucket, Error: refusal}}}
	default:
		return f.next.RoundTrip(r)
	}
	data, err := proto.Marshal(reply)
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/proto"}},
		Body: io.NopCloser(bytes.NewReader(data)), ContentLength: int64(len(data)), Request: r}, nil
}

// A retriable error in the one bucket's result of a successful call is
// retried as a failed call is: Subscribe (its ListOffsets) and
// PrefixLookup succeed once the bucket answers, instead of failing at
// once (a LogScanner subscribed just after its table was created failed so
// in the rolling-restart e2e test).
func TestOneBucketCallsRetryTheBucketsError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startNode(t)
	if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "shop"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "shop", Table: "orders", Descriptor_: &stromv1.TableDescriptor{
		Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "region", Type: "STRING"}, {Name: "id", Type: "BIGINT"}},
			PrimaryKey: []string{"region", "id"}},
		BucketKeys: []string{"region"},
	}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Table(ctx, "shop", "orders")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewUpsertWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Upsert(ctx, record.Row{"us", int64(1)})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	c2, err := client.New(strings.TrimPrefix(c.Address(), "http://"),
		client.WithHTTPClient(&http.Client{Transport: &refuseFirst{next: http.DefaultTransport, refused: map[string]bool{}}}))
	if err != nil {
		t.Fatal(err)
	}
	tbl2, err := c2.Table(ctx, "shop", "orders")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := tbl2.NewLogScanner()
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Subscribe(ctx, 0, client.Latest()); err != nil {
		t.Errorf("Subscribe: %v", err)
	} else if got := sc.Position()[0]; got != 1 {
		t.Errorf("Subscribe at the latest offset: position %d, want 1", got)
	}
	l, err := tbl2.NewLookuper()
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := l.PrefixLookup(ctx, record.Row{"us"}); err != nil || len(rows) != 1 {
		t.Errorf("PrefixLookup = %v, %v; want the one row", rows, err)
	}
}
