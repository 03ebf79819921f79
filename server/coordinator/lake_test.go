package coordinator

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"strom/internal/metatest"
	"strom/raftmeta/catalog"
)

func TestLakeSnapshotsPrepareCommitRetain(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, APIAddress: "127.0.0.1:1", ClusterID: "c1", DefaultBucketNumber: 3})
	registerServers(t, meta, 1)
	ctx := context.Background()
	if err := c.CreateDatabase(ctx, "db", "", nil, false); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.CreateTable(ctx, "db", "t", logTable("a"), false)
	if err != nil {
		t.Fatal(err)
	}
	id := tbl.Registration.TableID
	cat := catalog.New(meta)

	if _, err := c.PrepareLakeOffsets(ctx, id, "db.t", map[int32]int64{3: 1}, false); !errors.Is(err, ErrInvalidLakeOffsets) {
		t.Fatalf("bucket 3 of 3: err = %v, want ErrInvalidLakeOffsets", err)
	}
	if _, err := c.PrepareLakeOffsets(ctx, id+100, "db.x", nil, false); !errors.Is(err, catalog.ErrTableNotExist) {
		t.Fatalf("unknown table: err = %v", err)
	}
	p1, err := c.PrepareLakeOffsets(ctx, id, "db.t", map[int32]int64{0: 10, 1: 20}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CommitLakeSnapshot(ctx, CommitLakeSnapshotRequest{TableID: id, SnapshotID: 1, TieredPath: "strom:/nope"}); !errors.Is(err, ErrLakeOffsetsNotFound) {
		t.Fatalf("unknown path: err = %v", err)
	}
	if err := c.CommitLakeSnapshot(ctx, CommitLakeSnapshotRequest{TableID: id, SnapshotID: 1, TieredPath: p1}); err != nil {
		t.Fatal(err)
	}
	// The next round names bucket 1 and 2 only: bucket 0 carries over.
	p2, err := c.PrepareLakeOffsets(ctx, id, "db.t", map[int32]int64{1: 25, 2: 5}, false)
	if err != nil {
		t.Fatal(err)
	}
	keep := int64(-1)
	if err := c.CommitLakeSnapshot(ctx, CommitLakeSnapshotRequest{TableID: id, SnapshotID: 2, TieredPath: p2, ReadablePath: p1, EarliestToKeep: &keep}); err != nil {
		t.Fatal(err)
	}
	l, err := cat.LakeTable(id)
	if err != nil {
		t.Fatal(err)
	}
	latest, ok := l.Latest()
	if !ok || latest.ID != 2 || !maps.Equal(latest.Tiered.Offsets, map[int32]int64{0: 10, 1: 25, 2: 5}) {
		t.Fatalf("latest = %+v, want snapshot 2 with merged offsets", latest)
	}
	if latest.Readable == nil || !maps.Equal(latest.Readable.Offsets, map[int32]int64{0: 10, 1: 20}) {
		t.Fatalf("readable = %+v, want snapshot 1's offsets", latest.Readable)
	}
	if len(l.Snapshots) != 2 || len(l.Prepared) != 0 {
		t.Fatalf("kept %d snapshots, %d prepared; want 2 (keep all) and 0", len(l.Snapshots), len(l.Prepared))
	}
	// ignore_previous_table_offsets does not merge.
	p3, err := c.PrepareLakeOffsets(ctx, id, "db.t", map[int32]int64{2: 7}, true)
	if err != nil {
		t.Fatal(err)
	}
	keep = 2
	if err := c.CommitLakeSnapshot(ctx, CommitLakeSnapshotRequest{TableID: id, SnapshotID: 3, TieredPath: p3, EarliestToKeep: &keep}); err != nil {
		t.Fatal(err)
	}
	// A re-commit of a kept snapshot's path (the tiering job's missing
	// snapshot recovery) finds the offsets; no boundary keeps only it.
	if err := c.CommitLakeSnapshot(ctx, CommitLakeSnapshotRequest{TableID: id, SnapshotID: 4, TieredPath: p3}); err != nil {
		t.Fatal(err)
	}

	// What was committed is in the replicated catalog: a coordinator
	// that takes office later reads it.
	l, err = catalog.New(meta).LakeTable(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Snapshots) != 1 || l.Snapshots[0].ID != 4 || !maps.Equal(l.Snapshots[0].Tiered.Offsets, map[int32]int64{2: 7}) {
		t.Fatalf("snapshots = %+v, want only 4 with {2:7}", l.Snapshots)
	}
	if _, ok := l.Snapshot(2); ok {
		t.Fatal("snapshot 2 kept after a commit without retention")
	}

	if err := c.DropTable(ctx, "db", "t", false); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.LakeTable(id); !errors.Is(err, catalog.ErrTableNotExist) {
		t.Fatalf("after drop: err = %v, want ErrTableNotExist", err)
	}
}

func TestRetainLakeSnapshots(t *testing.T) {
	snaps := func(ids ...int64) []catalog.LakeSnapshot {
		var out []catalog.LakeSnapshot
		for _, id := range ids {
			out = append(out, catalog.LakeSnapshot{ID: id})
		}
		return out
	}
	ids := func(s []catalog.LakeSnapshot) []int64 {
		var out []int64
		for _, x := range s {
			out = append(out, x.ID)
		}
		return out
	}
	i := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		prev     []int64
		earliest *int64
		want     []int64
	}{
		{[]int64{1, 2}, nil, []int64{9}},
		{nil, i(1), []int64{9}},
		{[]int64{1, 2, 3}, i(2), []int64{2, 3, 9}},
		{[]int64{1, 2, 3}, i(-1), []int64{1, 2, 3, 9}},
		{[]int64{5, 3, 4}, i(3), []int64{3, 4, 9}}, // by position, not by id order
	} {
		got := ids(retainLakeSnapshots(snaps(tc.prev...), catalog.LakeSnapshot{ID: 9}, tc.earliest))
		if !slices.Equal(got, tc.want) {
			t.Errorf("prev %v earliest %v: got %v, want %v", tc.prev, tc.earliest, got, tc.want)
		}
	}
}
