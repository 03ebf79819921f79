package listener

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/raftmeta/catalog"
	"strom/record"
)

// startsAt is a unit-test SmallNode: one primary-key table of 3 buckets
// whose changelogs start at the given offsets (absent: unknown).
type startsAt struct {
	SmallNode // the other methods are not called
	start     map[int32]int64
}

func (f startsAt) Table(context.Context, string, string) (catalog.Table, error) {
	return catalog.Table{Database: "fluss", Name: "users", Schema: record.Schema{PrimaryKey: []string{"k"}},
		Registration: catalog.TableRegistration{TableID: 5, BucketCount: 3}}, nil
}

func (f startsAt) ChangelogStart(_ catalog.Table, b int32) (int64, bool, error) {
	s, ok := f.start[b]
	return s, ok, nil
}

// GET_LATEST_KV_SNAPSHOTS answers "no snapshot" (read from the log start)
// only while every bucket's changelog starts at 0: one whose start moved
// would make a Fluss reader miss the rows below it, so the request fails
// naming the bucket.
func TestLatestKvSnapshotsRefusesMovedLogStart(t *testing.T) {
	req := &flusspb.GetLatestKvSnapshotsRequest{TablePath: &flusspb.PbTablePath{DatabaseName: proto.String("fluss"), TableName: proto.String("users")}}
	s := &Server{cfg: Config{Small: startsAt{start: map[int32]int64{0: 0, 2: 0}}}}
	resp, err := s.getLatestKvSnapshots(context.Background(), 0, req)
	if err != nil || len(resp.(*flusspb.GetLatestKvSnapshotsResponse).LatestSnapshots) != 3 {
		t.Fatalf("changelogs from 0 (bucket 1 unknown): %v, %v", resp, err)
	}
	s = &Server{cfg: Config{Small: startsAt{start: map[int32]int64{0: 0, 1: 0, 2: 40}}}}
	_, err = s.getLatestKvSnapshots(context.Background(), 0, req)
	var e *Error
	if !errors.As(err, &e) || e.Code != protocol.LogOffsetOutOfRangeException || !strings.Contains(e.Message, "bucket 2") || !strings.Contains(e.Message, "40") {
		t.Fatalf("bucket 2's changelog from 40: %v, want LOG_OFFSET_OUT_OF_RANGE_EXCEPTION naming bucket 2 and offset 40", err)
	}
}
