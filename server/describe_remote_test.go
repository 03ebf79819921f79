package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"strom/raftmeta/catalog"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/server/coordinator"
)

// DescribeBuckets shows what the metadata says of remote storage: a
// tiered log table's remote range and bytes (none before the first
// tiering round), and a primary-key table's retained KV snapshots.
func TestDescribeBucketsShowsRemoteStorage(t *testing.T) {
	cfg, _ := tieringConfig(t)
	cfg.KvSnapshotInterval = time.Hour // the test runs the rounds
	s := startServer(t, cfg)
	ctx := context.Background()
	describe := func(table string) *stromv1.BucketState {
		t.Helper()
		resp, err := tabletClient(s).DescribeBuckets(ctx, connect.NewRequest(&stromv1.DescribeBucketsRequest{Database: "demo", Table: table}))
		if err != nil {
			t.Fatal(err)
		}
		st := resp.Msg.Buckets[0]
		if st.Error != nil {
			t.Fatalf("describe %s: %v", table, st.Error)
		}
		return st
	}

	info := createTableWithOptions(t, s, "demo", "tiered", tierDDL, nil)
	waitReplicas(t, s, info)
	produceRows(t, s, info, 0, 20)
	if st := describe("tiered"); st.RemoteLogStartOffset != -1 || st.RemoteLogEndOffset != -1 || st.RemoteLogBytes != 0 || len(st.KvSnapshots) != 0 {
		t.Fatalf("before tiering: %+v", st)
	}
	s.replicas.TierOnce(ctx, time.Now())
	man, err := s.cat.RemoteLogs(info.TableId, 0)
	if err != nil || len(man.Segments) == 0 {
		t.Fatalf("manifest %+v, %v", man, err)
	}
	st := describe("tiered")
	if st.RemoteLogStartOffset != 0 || st.RemoteLogEndOffset != man.EndOffset() || st.RemoteLogBytes <= 0 || st.LogStartOffset == 0 {
		t.Fatalf("after tiering: remote %d-%d, %d bytes, local start %d; manifest ends at %d",
			st.RemoteLogStartOffset, st.RemoteLogEndOffset, st.RemoteLogBytes, st.LogStartOffset, man.EndOffset())
	}

	kvInfo := createTable(t, s, "demo", "kv", "id BIGINT NOT NULL, v STRING", 1, "id")
	waitReplicas(t, s, kvInfo)
	if code, resp := postJSON(t, s, "PutKv", `{"database":"demo","table":"kv","rows":[{"id":1,"v":"a"},{"id":2,"v":"b"}]}`); code != 200 || strings.Contains(resp, `"error"`) {
		t.Fatalf("PutKv: %d %s", code, resp)
	}
	s.replicas.SnapshotOnce(ctx, time.Now())
	st = describe("kv")
	if len(st.KvSnapshots) != 1 {
		t.Fatalf("kv snapshots %+v, want one", st.KvSnapshots)
	}
	if sn := st.KvSnapshots[0]; sn.Id != 1 || sn.LogOffset != st.HighWatermark || sn.Files == 0 || sn.SizeBytes <= 0 || sn.Leader != cfg.NodeID || sn.CreatedTimeMs == 0 {
		t.Fatalf("snapshot %+v (high watermark %d)", sn, st.HighWatermark)
	}
}

// The coordinator refuses KV snapshots from a deposed leader epoch and a
// list out of order, and writes nothing then.
func TestKvSnapshotCommitIsFenced(t *testing.T) {
	cfg, _ := tieringConfig(t)
	cfg.KvSnapshotInterval = time.Hour
	s := startServer(t, cfg)
	ctx := context.Background()
	info := createTable(t, s, "demo", "kv", "id BIGINT NOT NULL, v STRING", 1, "id")
	waitReplicas(t, s, info)
	if code, resp := postJSON(t, s, "PutKv", `{"database":"demo","table":"kv","rows":[{"id":1,"v":"a"}]}`); code != 200 || strings.Contains(resp, `"error"`) {
		t.Fatalf("PutKv: %d %s", code, resp)
	}
	s.replicas.SnapshotOnce(ctx, time.Now())
	before, err := s.cat.KvSnapshots(info.TableId, 0)
	if err != nil || len(before.Snapshots) != 1 {
		t.Fatalf("snapshots %+v, %v; want one", before, err)
	}
	_, lisr, err := s.cat.Bucket(info.TableId, 0)
	if err != nil {
		t.Fatal(err)
	}
	next := before.Snapshots[0]
	next.ID++
	err = s.coord.CommitKvSnapshots(ctx, coordinator.CommitKvSnapshotsRequest{
		TableID: info.TableId, Bucket: 0, Leader: lisr.Leader, LeaderEpoch: lisr.LeaderEpoch - 1, Snapshots: []catalog.KvSnapshot{next},
	})
	if !errors.Is(err, coordinator.ErrFencedLeaderEpoch) {
		t.Fatalf("commit at an old leader epoch: %v, want ErrFencedLeaderEpoch", err)
	}
	err = s.coord.CommitKvSnapshots(ctx, coordinator.CommitKvSnapshotsRequest{
		TableID: info.TableId, Bucket: 0, Leader: lisr.Leader, LeaderEpoch: lisr.LeaderEpoch, Snapshots: []catalog.KvSnapshot{next, before.Snapshots[0]},
	})
	if !errors.Is(err, coordinator.ErrInvalidKvSnapshots) {
		t.Fatalf("commit of snapshots out of order: %v, want ErrInvalidKvSnapshots", err)
	}
	if after, _ := s.cat.KvSnapshots(info.TableId, 0); len(after.Snapshots) != 1 || after.Snapshots[0].ID != before.Snapshots[0].ID {
		t.Fatalf("a refused commit changed the snapshots: %+v", after)
	}
}
