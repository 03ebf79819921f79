package server

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// A fetch from offset -2 (Fluss's EARLIEST_OFFSET) reads from the bucket's
// log start: the remote start while tiered segments exist, the local start
// once table.log.ttl has expired them, and answers that start as
// log_start_offset and the first batch's offset. (Before, -2 was an offset
// like any other, below every log: LOG_OFFSET_OUT_OF_RANGE.)
func TestFetchFromEarliestOffset(t *testing.T) {
	cfg, _ := tieringConfig(t)
	s := startServer(t, cfg)
	info := createTableWithOptions(t, s, "demo", "tiered", tierDDL, map[string]string{"table.log.tiered.local-segments": "2"})
	waitReplicas(t, s, info)
	produceRows(t, s, info, 0, 60)
	r, err := s.replicas.Replica(replicaTB(info.TableId, 0))
	if err != nil {
		t.Fatal(err)
	}
	// fetchEarliest returns the result of a fetch from -2 and its first batch's offset.
	fetchEarliest := func() (*stromv1.FetchBucketResult, int64) {
		t.Helper()
		resp, err := tabletClient(s).FetchLog(context.Background(), connect.NewRequest(&stromv1.FetchLogRequest{
			Database: "demo", Table: "tiered", Buckets: []*stromv1.FetchBucket{{Bucket: 0, Offset: fetchEarliestOffset, MaxBytes: 1}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		fb := resp.Msg.Buckets[0]
		if fb.Error != nil {
			t.Fatalf("fetch from -2: %v", fb.Error)
		}
		b, _, err := record.NextBatch(fb.Records)
		if err != nil {
			t.Fatalf("fetch from -2 answered no batch: %v", err)
		}
		if fb.NextOffset != b.NextOffset() {
			t.Fatalf("next offset %d after the batch at %d, want %d", fb.NextOffset, b.BaseOffset(), b.NextOffset())
		}
		return fb, b.BaseOffset()
	}

	s.replicas.TierOnce(context.Background(), time.Now())
	if r.Log().LogStartOffset() == 0 {
		t.Fatal("tiering left the local log starting at 0; the test wants remote segments below it")
	}
	if fb, first := fetchEarliest(); first != 0 || fb.LogStartOffset != 0 {
		t.Fatalf("from -2 with remote segments: first batch at %d, log start %d; want 0 (the remote start)", first, fb.LogStartOffset)
	}

	s.replicas.TierOnce(context.Background(), time.Now().Add(8*24*time.Hour)) // past table.log.ttl: the remote segments go
	start := r.LogStartOffset()
	if start == 0 {
		t.Fatal("the log still starts at 0 after the remote segments expired")
	}
	if fb, first := fetchEarliest(); first != start || fb.LogStartOffset != start {
		t.Fatalf("from -2 after expiry: first batch at %d, log start %d; want %d", first, fb.LogStartOffset, start)
	}
}
