package listener_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
)

const lakeTableJSON = `{"version":1,"schema":{"version":1,"columns":[{"name":"id","data_type":{"type":"BIGINT"},"id":0}],"highest_field_id":0},"partition_key":[],"bucket_key":[],"bucket_count":3,"properties":{"table.datalake.enabled":"true","table.datalake.freshness":"1s"},"custom_properties":{}}`

func lakeSnapshot(cl *client, db, table string) (*flusspb.GetLakeSnapshotResponse, *flusspb.ErrorResponse) {
	resp, e := cl.call(protocol.GetLakeSnapshot, &flusspb.GetLakeSnapshotRequest{TablePath: path(db, table)})
	if e != nil {
		return nil, e
	}
	var r flusspb.GetLakeSnapshotResponse
	if err := proto.Unmarshal(resp.Body, &r); err != nil {
		cl.t.Fatal(err)
	}
	return &r, nil
}

func bucketOffsets(r *flusspb.GetLakeSnapshotResponse) map[int32]int64 {
	out := map[int32]int64{}
	for _, b := range r.BucketSnapshots {
		out[b.GetBucketId()] = b.GetLogOffset()
	}
	return out
}

func hb(id int64, coordEpoch int32, tieringEpoch int64) *flusspb.PbHeartbeatReqForTable {
	return &flusspb.PbHeartbeatReqForTable{TableId: proto.Int64(id), CoordinatorEpoch: proto.Int32(coordEpoch), TieringEpoch: proto.Int64(tieringEpoch)}
}

// The lake keys as the tiering job (fluss-flink-tiering 0.9.1) sends them,
// against a real node over TCP: no lake snapshot before the first commit
// (LAKE_SNAPSHOT_NOT_EXIST, which Flink's batch read of a lake table gets
// until then); a lake table offered by LAKE_TIERING_HEARTBEAT once its
// table.datalake.freshness has passed, with its tiering epoch, heartbeats
// fenced by both epochs; PREPARE then COMMIT of a snapshot, which
// GET_LAKE_SNAPSHOT then answers, and which a restarted node still has.
func TestLakeKeysOnNode(t *testing.T) {
	cfg := nodeConfig(t, t.TempDir())
	cfg.DatalakeFormat, cfg.DatalakePaimonWarehouse = "paimon", t.TempDir()
	s := startNodeWith(t, cfg)
	cl := dialFluss(t, s.FlussAddr())
	for deadline := time.Now().Add(time.Minute); !dbExists(cl, "fluss"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the database fluss was not created")
		}
	}
	cl.ok(protocol.CreateTable, createIn("fluss", "orders", lakeTableJSON), &flusspb.CreateTableResponse{})
	cl.ok(protocol.CreateTable, createIn("fluss", "plain", logTableJSON), &flusspb.CreateTableResponse{})
	var info flusspb.GetTableInfoResponse
	cl.ok(protocol.GetTableInfo, &flusspb.GetTableInfoRequest{TablePath: path("fluss", "orders")}, &info)
	id := info.GetTableId()

	cl.fails(protocol.GetLakeSnapshot, &flusspb.GetLakeSnapshotRequest{TablePath: path("fluss", "orders")}, protocol.LakeSnapshotNotExist, "doesn't exist for table: fluss.orders")
	cl.fails(protocol.GetLakeSnapshot, &flusspb.GetLakeSnapshotRequest{TablePath: path("fluss", "nope")}, protocol.TableNotExist, "")

	// The tiering service asks until the table's freshness (1 s) passed;
	// the table without table.datalake.enabled is never offered.
	var offer *flusspb.PbLakeTieringTableInfo
	var coordEpoch int32
	for deadline := time.Now().Add(time.Minute); offer == nil; time.Sleep(100 * time.Millisecond) {
		var r flusspb.LakeTieringHeartbeatResponse
		cl.ok(protocol.LakeTieringHeartbeat, &flusspb.LakeTieringHeartbeatRequest{RequestTable: proto.Bool(true)}, &r)
		offer, coordEpoch = r.TieringTable, r.GetCoordinatorEpoch()
		if time.Now().After(deadline) {
			t.Fatal("no lake table offered in a minute")
		}
	}
	if offer.GetTableId() != id || offer.GetTablePath().GetTableName() != "orders" || offer.GetTieringEpoch() != 1 || coordEpoch < 1 {
		t.Fatalf("offered %v at coordinator epoch %d, want fluss.orders (id %d) at tiering epoch 1", offer, coordEpoch, id)
	}
	var r flusspb.LakeTieringHeartbeatResponse
	cl.ok(protocol.LakeTieringHeartbeat, &flusspb.LakeTieringHeartbeatRequest{
		TieringTables: []*flusspb.PbHeartbeatReqForTable{hb(id, coordEpoch, 1), hb(id, coordEpoch, 7), hb(id, coordEpoch+1, 1)},
		RequestTable:  proto.Bool(true),
	}, &r)
	want := []protocol.ErrorCode{protocol.None, protocol.FencedTieringEpochException, protocol.InvalidCoordinatorException}
	for i, tr := range r.TieringTableResp {
		if got := protocol.ErrorCode(tr.GetError().GetErrorCode()); got != want[i] {
			t.Errorf("heartbeat %d: %s (%s), want %s", i, got, tr.GetError().GetErrorMessage(), want[i])
		}
	}
	if len(r.TieringTableResp) != 3 || r.TieringTable != nil {
		t.Fatalf("heartbeat answer %v: want 3 table answers and no second offer", &r)
	}

	// A round: prepare the offsets, commit the snapshot with the path.
	var prep flusspb.PrepareLakeTableSnapshotResponse
	cl.ok(protocol.PrepareLakeTableSnapshot, &flusspb.PrepareLakeTableSnapshotRequest{BucketOffsets: []*flusspb.PbTableOffsets{{
		TableId: proto.Int64(id), TablePath: path("fluss", "orders"),
		BucketOffsets: []*flusspb.PbBucketOffset{{BucketId: proto.Int32(0), LogEndOffset: proto.Int64(5)}, {BucketId: proto.Int32(2), LogEndOffset: proto.Int64(7)}},
	}, {
		TableId: proto.Int64(id), TablePath: path("fluss", "orders"),
		BucketOffsets: []*flusspb.PbBucketOffset{{BucketId: proto.Int32(3), LogEndOffset: proto.Int64(1)}},
	}}}, &prep)
	if len(prep.PrepareLakeTableResp) != 2 || prep.PrepareLakeTableResp[0].ErrorCode != nil || prep.PrepareLakeTableResp[0].GetLakeTableOffsetsPath() == "" || prep.PrepareLakeTableResp[1].ErrorCode == nil {
		t.Fatalf("prepare answered %v: want a path for the first table and an error for bucket 3 of 3", &prep)
	}
	offsetsPath := prep.PrepareLakeTableResp[0].GetLakeTableOffsetsPath()
	var commit flusspb.CommitLakeTableSnapshotResponse
	cl.ok(protocol.CommitLakeTableSnapshot, &flusspb.CommitLakeTableSnapshotRequest{LakeTableSnapshotMetadata: []*flusspb.PbLakeTableSnapshotMetadata{
		{TableId: proto.Int64(id), SnapshotId: proto.Int64(1), TieredBucketOffsetsFilePath: proto.String(offsetsPath)},
		{TableId: proto.Int64(id), SnapshotId: proto.Int64(2), TieredBucketOffsetsFilePath: proto.String("strom:/lake/never-prepared.offsets")},
	}}, &commit)
	if len(commit.TableResp) != 2 || commit.TableResp[0].ErrorCode != nil || commit.TableResp[1].ErrorCode == nil {
		t.Fatalf("commit answered %v: want snapshot 1 committed and the unknown path refused", &commit)
	}
	snap, e := lakeSnapshot(cl, "fluss", "orders")
	if e != nil || snap.GetTableId() != id || snap.GetSnapshotId() != 1 || !maps.Equal(bucketOffsets(snap), map[int32]int64{0: 5, 2: 7}) {
		t.Fatalf("GET_LAKE_SNAPSHOT = %v, %v; want snapshot 1 with buckets 0:5 2:7", snap, e)
	}
	cl.fails(protocol.GetLakeSnapshot, &flusspb.GetLakeSnapshotRequest{TablePath: path("fluss", "orders"), Readable: proto.Bool(true)}, protocol.LakeSnapshotNotExist, "readable snapshot")
	cl.fails(protocol.GetLakeSnapshot, &flusspb.GetLakeSnapshotRequest{TablePath: path("fluss", "orders"), SnapshotId: proto.Int64(9)}, protocol.LakeSnapshotNotExist, "snapshot id: 9")
	cl.ok(protocol.LakeTieringHeartbeat, &flusspb.LakeTieringHeartbeatRequest{FinishedTables: []*flusspb.PbHeartbeatReqForTable{hb(id, coordEpoch, 1)}}, &r)
	if len(r.FinishedTableResp) != 1 || r.FinishedTableResp[0].Error != nil {
		t.Fatalf("finish answered %v", &r)
	}

	// The snapshot is in the replicated catalog: a restarted node has it.
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = startNodeWith(t, cfg)
	cl = dialFluss(t, s.FlussAddr())
	snap, e = lakeSnapshot(cl, "fluss", "orders")
	if e != nil || snap.GetSnapshotId() != 1 || !maps.Equal(bucketOffsets(snap), map[int32]int64{0: 5, 2: 7}) {
		t.Fatalf("after a restart GET_LAKE_SNAPSHOT = %v, %v; want snapshot 1", snap, e)
	}
}
