package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
)

// FuzzDecode feeds any bytes to the frame reader and then each frame to the
// request and response decoders and to the Fluss message of its API key. It
// checks that nothing panics, that every failure is one of the documented
// errors, and that whatever decodes encodes back to a frame that decodes to
// the same header and message. scripts/test.sh runs it briefly,
// scripts/fuzz.sh longer.
func FuzzDecode(f *testing.F) {
	seed := func(b []byte, err error) {
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(AppendRequest(nil, RequestHeader{protocol.ApiVersions, 0, 1},
		&flusspb.ApiVersionsRequest{ClientSoftwareName: proto.String("fluss-java-client"), ClientSoftwareVersion: proto.String("0.9.1")}))
	seed(AppendRequest(nil, RequestHeader{protocol.GetMetadata, 0, 2},
		&flusspb.MetadataRequest{TablePath: []*flusspb.PbTablePath{{DatabaseName: proto.String("fluss"), TableName: proto.String("orders")}}}))
	seed(AppendRequest(nil, RequestHeader{protocol.PutKv, 1, 3},
		&flusspb.PutKvRequest{Acks: proto.Int32(-1), TableId: proto.Int64(5), TimeoutMs: proto.Int32(30000),
			BucketsReq: []*flusspb.PbPutKvReqForBucket{{BucketId: proto.Int32(0), Records: []byte{1, 2, 3}}}}))
	// The lake keys, as the tiering job sends them.
	seed(AppendRequest(nil, RequestHeader{protocol.LakeTieringHeartbeat, 0, 5},
		&flusspb.LakeTieringHeartbeatRequest{RequestTable: proto.Bool(true), ForceFinishedTables: []int64{7},
			FinishedTables: []*flusspb.PbHeartbeatReqForTable{{TableId: proto.Int64(7), CoordinatorEpoch: proto.Int32(1), TieringEpoch: proto.Int64(2)}}}))
	seed(AppendRequest(nil, RequestHeader{protocol.PrepareLakeTableSnapshot, 0, 6},
		&flusspb.PrepareLakeTableSnapshotRequest{BucketOffsets: []*flusspb.PbTableOffsets{{TableId: proto.Int64(7),
			TablePath:     &flusspb.PbTablePath{DatabaseName: proto.String("fluss"), TableName: proto.String("orders")},
			BucketOffsets: []*flusspb.PbBucketOffset{{BucketId: proto.Int32(0), LogEndOffset: proto.Int64(10)}}}}}))
	seed(AppendRequest(nil, RequestHeader{protocol.CommitLakeTableSnapshot, 0, 7},
		&flusspb.CommitLakeTableSnapshotRequest{LakeTableSnapshotMetadata: []*flusspb.PbLakeTableSnapshotMetadata{{TableId: proto.Int64(7),
			SnapshotId: proto.Int64(1), TieredBucketOffsetsFilePath: proto.String("strom:/lake/x.offsets"), EarliestSnapshotIdToKeep: proto.Int64(-1)}}}))
	seed(AppendRequest(nil, RequestHeader{protocol.GetLakeSnapshot, 0, 8},
		&flusspb.GetLakeSnapshotRequest{TablePath: &flusspb.PbTablePath{DatabaseName: proto.String("fluss"), TableName: proto.String("orders")}, Readable: proto.Bool(true)}))
	seed(AppendResponse(nil, 8, &flusspb.GetLakeSnapshotResponse{TableId: proto.Int64(7), SnapshotId: proto.Int64(1),
		BucketSnapshots: []*flusspb.PbLakeSnapshotForBucket{{BucketId: proto.Int32(0), LogOffset: proto.Int64(10)}}}))
	seed(AppendResponse(nil, 1, &flusspb.ApiVersionsResponse{ServerType: proto.Int32(2),
		ApiVersions: []*flusspb.PbApiVersion{{ApiKey: proto.Int32(1000), MinVersion: proto.Int32(0), MaxVersion: proto.Int32(0)}}}))
	seed(AppendError(nil, 4, protocol.TableNotExist, ""))
	seed(AppendServerFailure(nil, protocol.CorruptMessage, "x"))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})

	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), 1<<16, "k")
		for {
			frame, err := r.ReadFrame()
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("ReadFrame: undocumented error %v", err)
				}
				return
			}
			checkRequest(t, frame)
			checkResponse(t, frame)
		}
	})
}

func checkRequest(t *testing.T, frame []byte) {
	h, body, err := ParseRequest(frame)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseRequest: undocumented error %v", err)
		}
		return
	}
	req, _, ok := protocol.Messages(h.APIKey)
	if !ok || proto.Unmarshal(body, req) != nil {
		return
	}
	again, err := AppendRequest(nil, h, req)
	if err != nil {
		t.Fatalf("re-encoding %s: %v", h.APIKey, err)
	}
	h2, body2, err := ParseRequest(again[4:])
	if err != nil || h2 != h {
		t.Fatalf("re-encoded header %+v, %v; want %+v", h2, err, h)
	}
	req2, _, _ := protocol.Messages(h.APIKey)
	if err := proto.Unmarshal(body2, req2); err != nil || !proto.Equal(req, req2) {
		t.Fatalf("%s re-encoded: %v, %v; want %v", h.APIKey, req2, err, req)
	}
}

func checkResponse(t *testing.T, frame []byte) {
	resp, err := ParseResponse(frame)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseResponse: undocumented error %v", err)
		}
		return
	}
	if resp.Type == SuccessResponse {
		return
	}
	e, err := DecodeError(resp.Body)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("DecodeError: undocumented error %v", err)
		}
		return
	}
	var again []byte
	if resp.Type == ErrorResponse {
		again, err = AppendError(nil, resp.RequestID, protocol.ErrorCode(e.GetErrorCode()), e.GetErrorMessage())
	} else {
		again, err = AppendServerFailure(nil, protocol.ErrorCode(e.GetErrorCode()), e.GetErrorMessage())
	}
	if err != nil {
		t.Fatal(err)
	}
	resp2, err := ParseResponse(again[4:])
	if err != nil || resp2.Type != resp.Type || resp2.RequestID != resp.RequestID {
		t.Fatalf("re-encoded %+v, %v; want %+v", resp2, err, resp)
	}
	e2, err := DecodeError(resp2.Body)
	if err != nil || e2.GetErrorCode() != e.GetErrorCode() || (e.GetErrorMessage() != "" && e2.GetErrorMessage() != e.GetErrorMessage()) {
		t.Fatalf("re-encoded error %v, %v; want %v", e2, err, e)
	}
}
