package listener_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/server"
)

// connectJSON posts body to the node's Connect API TabletService method.
func connectJSON(t *testing.T, s *server.Server, method, body string) {
	t.Helper()
	resp, err := http.Post("http://"+s.Addr()+"/strom.v1.TabletService/"+method, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || strings.Contains(string(out), `"error"`) {
		t.Fatalf("%s %s: %d %s", method, body, resp.StatusCode, out)
	}
}

func createIn(db, name, js string) *flusspb.CreateTableRequest {
	return &flusspb.CreateTableRequest{TablePath: path(db, name), TableJson: []byte(js), IgnoreIfExists: proto.Bool(false)}
}

// waitReplicas waits until GET_TABLE_STATS answers every bucket.
func waitReplicas(t *testing.T, cl *client, id int64, buckets int32) {
	t.Helper()
	req := &flusspb.GetTableStatsRequest{TableId: proto.Int64(id)}
	for b := range buckets {
		req.BucketsReq = append(req.BucketsReq, &flusspb.PbTableStatsReqForBucket{BucketId: proto.Int32(b)})
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var resp flusspb.GetTableStatsResponse
		cl.ok(protocol.GetTableStats, req, &resp)
		if !slices.ContainsFunc(resp.BucketsResp, func(b *flusspb.PbTableStatsRespForBucket) bool { return b.ErrorCode != nil }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET_TABLE_STATS of table %d still answers errors after a minute: %v", id, &resp)
		}
	}
}

// rowCount sums GET_TABLE_STATS's row_count over buckets, failing on a
// bucket error.
func rowCount(t *testing.T, cl *client, id int64, buckets int32) int64 {
	t.Helper()
	req := &flusspb.GetTableStatsRequest{TableId: proto.Int64(id)}
	for b := range buckets {
		req.BucketsReq = append(req.BucketsReq, &flusspb.PbTableStatsReqForBucket{BucketId: proto.Int32(b)})
	}
	var resp flusspb.GetTableStatsResponse
	cl.ok(protocol.GetTableStats, req, &resp)
	if len(resp.BucketsResp) != int(buckets) {
		t.Fatalf("GET_TABLE_STATS: %d buckets answered, want %d", len(resp.BucketsResp), buckets)
	}
	var n int64
	for i, b := range resp.BucketsResp {
		if b.ErrorCode != nil || b.RowCount == nil || b.GetBucketId() != int32(i) {
			t.Fatalf("GET_TABLE_STATS bucket %d: %v", i, b)
		}
		n += b.GetRowCount()
	}
	return n
}

// The small keys (issue #17 key group 5) over TCP against a real node:
// GET_TABLE_STATS counts a primary-key table's live rows (upserts, an update
// and a delete written through the Connect API) and a log table's records;
// GET_LATEST_KV_SNAPSHOTS answers every bucket without a snapshot;
// GET_FILESYSTEM_SECURITY_TOKEN a local file system's empty token;
// DROP_KV_SNAPSHOT_LEASE succeeds; and the error answers of each.
func TestSmallKeysOnNode(t *testing.T) {
	s := startNode(t)
	cl := dialFluss(t, s.FlussAddr())
	for deadline := time.Now().Add(time.Minute); !dbExists(cl, "fluss"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the database fluss was not created")
		}
	}
	cl.ok(protocol.CreateTable, createIn("fluss", "users", pkTableJSON), &flusspb.CreateTableResponse{})
	cl.ok(protocol.CreateTable, createIn("fluss", "events", logTableJSON), &flusspb.CreateTableResponse{})
	ids := map[string]int64{}
	for _, name := range []string{"users", "events"} {
		var info flusspb.GetTableInfoResponse
		cl.ok(protocol.GetTableInfo, &flusspb.GetTableInfoRequest{TablePath: path("fluss", name)}, &info)
		ids[name] = info.GetTableId()
	}

	// Until each bucket's replica is open, its stats answer a retriable
	// error (as a bucket without a replica yet does on Fluss).
	for name, buckets := range map[string]int32{"users": 2, "events": 3} {
		waitReplicas(t, cl, ids[name], buckets)
	}

	// A primary-key table (2 buckets, the node's default): empty, then 10
	// keys, one updated and one deleted: 9 rows.
	if n := rowCount(t, cl, ids["users"], 2); n != 0 {
		t.Fatalf("row count of an empty table: %d", n)
	}
	var rows []string
	for k := range 10 {
		rows = append(rows, `{"k":`+string(rune('0'+k))+`,"v":"a"}`)
	}
	connectJSON(t, s, "PutKv", `{"database":"fluss","table":"users","rows":[`+strings.Join(rows, ",")+`]}`)
	connectJSON(t, s, "PutKv", `{"database":"fluss","table":"users","rows":[{"k":1,"v":"updated"}],"deletes":[{"k":3}]}`)
	if n := rowCount(t, cl, ids["users"], 2); n != 9 {
		t.Fatalf("row count after 10 upserts, an update and a delete: %d, want 9", n)
	}
	// A log table (3 buckets): its records.
	connectJSON(t, s, "ProduceLog", `{"database":"fluss","table":"events","rows":[{"id":1,"name":"a"},{"id":2,"name":"b"},{"id":3},{"id":4},{"id":5}]}`)
	if n := rowCount(t, cl, ids["events"], 3); n != 5 {
		t.Fatalf("row count of a log table with 5 records: %d", n)
	}
	// Per-bucket errors: a bucket that does not exist, a partition.
	var stats flusspb.GetTableStatsResponse
	cl.ok(protocol.GetTableStats, &flusspb.GetTableStatsRequest{TableId: proto.Int64(ids["users"]), BucketsReq: []*flusspb.PbTableStatsReqForBucket{
		{BucketId: proto.Int32(5)}, {BucketId: proto.Int32(0), PartitionId: proto.Int64(1)}}}, &stats)
	if b := stats.BucketsResp; len(b) != 2 || b[0].RowCount != nil || !strings.Contains(b[0].GetErrorMessage(), "bucket 5") ||
		protocol.ErrorCode(b[1].GetErrorCode()) != protocol.PartitionNotExists || b[1].GetPartitionId() != 1 {
		t.Fatalf("GET_TABLE_STATS of bucket 5 and a partition: %v", b)
	}
	cl.fails(protocol.GetTableStats, &flusspb.GetTableStatsRequest{TableId: proto.Int64(999999)}, protocol.TableNotExist, "999999")

	// GET_LATEST_KV_SNAPSHOTS: no snapshot for any bucket (read the changelog
	// from the start).
	var snaps flusspb.GetLatestKvSnapshotsResponse
	cl.ok(protocol.GetLatestKvSnapshots, &flusspb.GetLatestKvSnapshotsRequest{TablePath: path("fluss", "users")}, &snaps)
	if snaps.GetTableId() != ids["users"] || snaps.PartitionId != nil || len(snaps.LatestSnapshots) != 2 {
		t.Fatalf("GET_LATEST_KV_SNAPSHOTS: %v", &snaps)
	}
	for i, b := range snaps.LatestSnapshots {
		if b.GetBucketId() != int32(i) || b.SnapshotId != nil || b.LogOffset != nil {
			t.Fatalf("GET_LATEST_KV_SNAPSHOTS bucket %d: %v, want no snapshot", i, b)
		}
	}
	cl.fails(protocol.GetLatestKvSnapshots, &flusspb.GetLatestKvSnapshotsRequest{TablePath: path("fluss", "events")}, protocol.NonPrimaryKeyTableException, "events")
	cl.fails(protocol.GetLatestKvSnapshots, &flusspb.GetLatestKvSnapshotsRequest{TablePath: path("fluss", "nope")}, protocol.TableNotExist, "nope")
	cl.fails(protocol.GetLatestKvSnapshots, &flusspb.GetLatestKvSnapshotsRequest{TablePath: path("fluss", "users"), PartitionName: proto.String("p")}, protocol.PartitionNotExists, "partition")

	var tok flusspb.GetFileSystemSecurityTokenResponse
	cl.ok(protocol.GetFilesystemSecurityToken, &flusspb.GetFileSystemSecurityTokenRequest{}, &tok)
	if tok.GetSchema() != "file" || tok.Token == nil || len(tok.Token) != 0 || tok.ExpirationTime != nil || len(tok.AdditionInfo) != 0 {
		t.Fatalf("GET_FILESYSTEM_SECURITY_TOKEN: %v", &tok)
	}
	cl.ok(protocol.DropKvSnapshotLease, &flusspb.DropKvSnapshotLeaseRequest{LeaseId: proto.String("a-lease-never-acquired")}, &flusspb.DropKvSnapshotLeaseResponse{})
}
