package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	stromv1 "strom/rpc/gen/strom/v1"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// TestPrintBucketStates: the per-bucket rows of `strom table describe`
// against a golden file (go test -run TestPrintBucketStates -update
// rewrites it): bucket 0's leader reported its state (node 3 lags by 40
// offsets and is out of the ISR; node 2 has not fetched from this leader
// yet), bucket 1's leader did not answer (unknown, and why on stderr),
// bucket 2 has no state at all, and bucket 3's node 3 is dead: out of the
// ISR, its last fetch caught up 125 s ago, so its lag of 0 is marked with
// that age rather than shown as if it were in sync.
func TestPrintBucketStates(t *testing.T) {
	buckets := []*stromv1.BucketAssignment{
		{Bucket: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, Isr: []int32{1, 2}},
		{Bucket: 1, Replicas: []int32{2, 3, 1}, Leader: 2, LeaderEpoch: 1, Isr: []int32{2, 3, 1}},
		{Bucket: 2, Replicas: []int32{3, 1, 2}, Leader: -1, LeaderEpoch: 2, Isr: []int32{3}},
		{Bucket: 3, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 5, Isr: []int32{1, 2}},
	}
	now := time.UnixMilli(1_800_000_000_000)
	states := []*stromv1.BucketState{
		{Bucket: 0, Leader: 1, LeaderEpoch: 4, Isr: []int32{1, 2}, HighWatermark: 120, LogEndOffset: 130, Replicas: []*stromv1.ReplicaState{
			{Node: 1, LogEndOffset: 130, Lag: 0, InSync: true},
			{Node: 2, LogEndOffset: -1, Lag: -1, InSync: true},
			{Node: 3, LogEndOffset: 90, Lag: 40},
		}},
		{Bucket: 1, Error: &stromv1.ErrorDetail{Code: -1, Name: "UNKNOWN", Message: "client: cannot reach a Strom node at http://127.0.0.1:9133"}},
		{Bucket: 3, Leader: 1, LeaderEpoch: 5, Isr: []int32{1, 2}, HighWatermark: 70, LogEndOffset: 70, Replicas: []*stromv1.ReplicaState{
			{Node: 1, LogEndOffset: 70, Lag: 0, InSync: true},
			{Node: 2, LogEndOffset: 70, Lag: 0, InSync: true, CaughtUpTimeMs: now.UnixMilli() - 200},
			{Node: 3, LogEndOffset: 70, Lag: 0, CaughtUpTimeMs: now.UnixMilli() - 125_000},
		}},
	}
	var out, errOut bytes.Buffer
	if err := printBucketStates(&out, &errOut, buckets, states, now); err != nil {
		t.Fatal(err)
	}
	got := out.String() + "--- stderr\n" + errOut.String()
	golden := filepath.Join("testdata", "bucket-states.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("got:\n%s\nwant (%s):\n%s", got, golden, want)
	}
}
