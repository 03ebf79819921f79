package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	stromv1 "strom/rpc/gen/strom/v1"
)

// TestPrintRemoteAndSnapshots: the remote storage rows of `strom table
// describe` and the rows of `strom snapshot list`, against a golden file
// (-update rewrites it): bucket 0 has a tiered log and two retained
// snapshots (the latest shown by describe, both listed), bucket 1 has
// neither, bucket 2's leader did not answer.
func TestPrintRemoteAndSnapshots(t *testing.T) {
	buckets := []*stromv1.BucketAssignment{{Bucket: 0}, {Bucket: 1}, {Bucket: 2}}
	states := []*stromv1.BucketState{
		{Bucket: 0, LogStartOffset: 400, RemoteLogStartOffset: 0, RemoteLogEndOffset: 420, RemoteLogBytes: 1 << 20, KvSnapshots: []*stromv1.KvSnapshotInfo{
			{Id: 6, LogOffset: 380, CreatedTimeMs: 1_800_000_000_000, Files: 7, SizeBytes: 81920, Leader: 1, LeaderEpoch: 3},
			{Id: 7, LogOffset: 450, CreatedTimeMs: 1_800_000_600_000, Files: 8, SizeBytes: 90112, Leader: 2, LeaderEpoch: 4},
		}},
		{Bucket: 1, LogStartOffset: 0, RemoteLogStartOffset: -1, RemoteLogEndOffset: -1},
		{Bucket: 2, Error: &stromv1.ErrorDetail{Code: -1, Name: "UNKNOWN", Message: "client: cannot reach a Strom node at http://127.0.0.1:9133"}},
	}
	var out, errOut bytes.Buffer
	if err := printRemoteStates(&out, buckets, states); err != nil {
		t.Fatal(err)
	}
	out.WriteString("--- snapshot list\n")
	if err := printSnapshots(&out, &errOut, states); err != nil {
		t.Fatal(err)
	}
	got := out.String() + "--- stderr\n" + errOut.String()
	golden := filepath.Join("testdata", "remote-states.txt")
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
