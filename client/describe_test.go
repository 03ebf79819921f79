package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// TestDescribeBuckets: each bucket's leader (one node here) reports its
// high watermark and its replica's log end, with lag 0; once the node is
// gone, every bucket comes back with an error saying it could not be
// reached, not a failed call.
func TestDescribeBuckets(t *testing.T) {
	s := startServer(t, t.TempDir(), "127.0.0.1:0")
	c, err := client.New(s.Addr(), client.WithRetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tbl := createTable(t, c, "demo", "described", 2, nil, &stromv1.Column{Name: "id", Type: "BIGINT NOT NULL"})
	w, err := tbl.NewAppendWriter(ctx, client.BatchTimeout(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	const rows = 50
	for id := range int64(rows) {
		w.Append(ctx, record.Row{id})
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A replica opens once its node has applied the table's creation, which
	// may come after the writes to the other bucket: until then its leader
	// answers UNKNOWN_TABLE_OR_BUCKET (retriable) and the call is one try.
	states := tbl.DescribeBuckets(ctx)
	for retriable(states) {
		select {
		case <-ctx.Done():
			t.Fatalf("buckets not described: %v", states)
		case <-time.After(10 * time.Millisecond):
		}
		states = tbl.DescribeBuckets(ctx)
	}
	var total int64
	for _, st := range states {
		if st.Error != nil || len(st.Replicas) != 1 {
			t.Fatalf("bucket %d: %+v", st.Bucket, st)
		}
		r := st.Replicas[0]
		if st.HighWatermark != st.LogEndOffset || r.LogEndOffset != st.LogEndOffset || r.Lag != 0 || !r.InSync {
			t.Errorf("bucket %d: %+v, want the leader's replica at its log end, in sync, lag 0", st.Bucket, st)
		}
		total += st.HighWatermark
	}
	if total != rows {
		t.Errorf("high watermarks add up to %d, want %d", total, rows)
	}

	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	states = tbl.DescribeBuckets(ctx)
	if len(states) != 2 {
		t.Fatalf("%d states for 2 buckets", len(states))
	}
	for _, st := range states {
		if e := st.Error; e == nil || !strings.Contains(e.Message, client.ErrUnreachable.Error()) {
			t.Errorf("bucket %d with its node stopped: %+v, want an error saying it is unreachable", st.Bucket, st)
		}
	}
}

// retriable reports whether a bucket's description failed with a retriable
// error from its leader.
func retriable(states []*stromv1.BucketState) bool {
	for _, st := range states {
		if st.Error != nil && st.Error.Retriable {
			return true
		}
	}
	return false
}
