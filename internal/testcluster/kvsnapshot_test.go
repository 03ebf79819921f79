package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"strom/raftmeta/catalog"
	"strom/server"
	"strom/tablet/replica"
)

// newSnapshotKV starts three nodes whose KV snapshots go to remoteDir and
// run only when the test calls SnapshotOnce, with 1 KB log segments, and
// creates a one-bucket primary-key table with RF 3.
func newSnapshotKV(ctx context.Context, t *testing.T, remoteDir string, retained int) (*Cluster, catalog.Table) {
	t.Helper()
	c := New(t, Options{Nodes: 3, Verbose: os.Getenv("VERBOSE") != "", Configure: func(_ int, cfg *server.Config) {
		cfg.RemoteDataDir = "file://" + remoteDir
		cfg.RemoteLogTaskInterval = 0
		cfg.KvSnapshotInterval = time.Hour // the test runs the rounds
		cfg.KvSnapshotNumRetained = retained
		cfg.SegmentBytes = 1 << 10
	}})
	return c, createKVTable(ctx, t, c, "snap")
}

// snapshotRound runs a snapshot round on every running node, the bucket's
// leader first, and returns the bucket's retained snapshots then.
func snapshotRound(ctx context.Context, t *testing.T, c *Cluster, tb replica.TableBucket) catalog.KvSnapshots {
	t.Helper()
	return snapshotRoundAt(ctx, t, c, tb, time.Now())
}

// snapshotRoundAt is snapshotRound with now the time of the rounds (the
// snapshots' creation time, table.log.ttl's judge).
func snapshotRoundAt(ctx context.Context, t *testing.T, c *Cluster, tb replica.TableBucket, now time.Time) catalog.KvSnapshots {
	t.Helper()
	l := bucketLeader(ctx, t, c, tb)
	l.Server().Replicas().SnapshotOnce(ctx, now)
	for _, n := range c.Nodes() {
		if n != l && n.Server() != nil {
			if err := n.Server().Metadata().Sync(ctx); err != nil {
				t.Fatal(err)
			}
			n.Server().Replicas().SnapshotOnce(ctx, now)
		}
	}
	s, err := catalog.New(l.Server().Metadata()).KvSnapshots(tb.TableID, tb.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// remoteKeys lists the files under dir, as keys relative to it.
func remoteKeys(t *testing.T, dir string) []string {
	t.Helper()
	var keys []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return keys
}

// upsertRange upserts ids from..to-1 with value v<round>-<id>, acks=-1.
func (k kvCodec) upsertRange(ctx context.Context, t *testing.T, c *Cluster, tbl catalog.Table, from, to int64, round int) {
	t.Helper()
	for id := from; id < to; id++ {
		k.putKv(ctx, t, c, tbl, tbl.Assignment.Buckets[0], -1, id, fmt.Sprintf("v%d-%d", round, id))
	}
}

// Under a continuous upsert load, each round's leader snapshot is
// committed, the coordinator keeps kv.snapshot.num-retained of them, the objects of a
// snapshot no longer retained go, and every replica's changelog is trimmed
// below the oldest retained snapshot's offset, so the disk stays bounded;
// lookups and every replica's folded changelog are unchanged.
func TestKvSnapshotsTrimTheChangelog(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	remoteDir := t.TempDir()
	c, tbl := newSnapshotKV(ctx, t, remoteDir, 2)
	tb := bucket0(tbl)
	k := newKVCodec(t, tbl)
	prefix := fmt.Sprintf("kv/fluss/snap-%d/0/", tb.TableID)

	for round := 1; round <= 4; round++ {
		k.upsertRange(ctx, t, c, tbl, 0, 30, round)
		if round == 2 {
			// What an upload whose commit failed leaves, and a file
			// store's put a crash cut short: gone after the next commit.
			orphan := filepath.Join(remoteDir, prefix, "snap-9-deadbeef", "MANIFEST-000001")
			if err := os.MkdirAll(filepath.Dir(orphan), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{orphan, filepath.Join(remoteDir, prefix, "shared", ".strom-tmp-000009.sst-1")} {
				if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		snaps := snapshotRound(ctx, t, c, tb)
		latest, ok := snaps.Latest()
		if !ok || latest.ID != int64(round) {
			t.Fatalf("round %d: snapshots %+v, want the newest with id %d", round, snaps.Snapshots, round)
		}
		if want := min(round, 2); len(snaps.Snapshots) != want {
			t.Fatalf("round %d: %d snapshots retained, want %d", round, len(snaps.Snapshots), want)
		}
		l := replicaOn(bucketLeader(ctx, t, c, tb), tb)
		if latest.LogOffset != l.Log().HighWatermark() {
			t.Fatalf("round %d: snapshot at offset %d, the high watermark is %d (everything was flushed)", round, latest.LogOffset, l.Log().HighWatermark())
		}

		// Remote storage holds exactly the retained snapshots' files.
		var want []string
		seen := map[string]bool{}
		for _, s := range snaps.Snapshots {
			for _, f := range s.Files {
				if !seen[f.Key] {
					seen[f.Key] = true
					want = append(want, prefix+f.Key)
				}
			}
		}
		sort.Strings(want)
		if got := remoteKeys(t, remoteDir); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("round %d: remote objects\n%s\nwant the retained snapshots' files\n%s", round, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// Every replica's changelog starts at or below the oldest
		// retained snapshot, above 0 once one was trimmed.
		oldest := snaps.Snapshots[0].LogOffset
		for _, n := range c.Nodes() {
			r := replicaOn(n, tb)
			if start := r.Log().LogStartOffset(); start > oldest || (round > 1 && start == 0) {
				t.Fatalf("round %d: node %d's changelog starts at %d, the oldest retained snapshot at %d", round, n.ID, start, oldest)
			}
			t.Logf("round %d: node %d log start %d, %d segments, oldest snapshot %d, files %d", round, n.ID, r.Log().LogStartOffset(), len(r.Log().Segments()), oldest, len(snaps.Snapshots[0].Files))
			if segs := len(r.Log().Segments()); segs > 40 {
				t.Fatalf("round %d: node %d keeps %d segments", round, n.ID, segs)
			}
		}
	}
	// Every replica (the log no longer starts at 0, so the fold cannot be
	// checked from the log) holds the last round's values.
	checkValues(ctx, t, c, tb, k, 30, "v4")
}

// checkValues waits until every running replica of tb has flushed its KV
// to its high watermark and checks that ids 0..n-1 have the value
// <v>-<id>.
func checkValues(ctx context.Context, t *testing.T, c *Cluster, tb replica.TableBucket, k kvCodec, n int64, v string) {
	t.Helper()
	for _, node := range c.Nodes() {
		if node.Server() == nil {
			continue
		}
		var r *replica.Replica
		waitUntil(ctx, t, fmt.Sprintf("node %d's KV flushed to its high watermark", node.ID), func() bool {
			r = replicaOn(node, tb)
			return r != nil && r.LocalKV() != nil && r.LocalKV().FlushedOffset() == r.Log().HighWatermark()
		})
		for id := range n {
			if got, want := k.lookup(t, r.LocalKV(), id), fmt.Sprintf("%s-%d", v, id); got != want {
				t.Fatalf("node %d: lookup %d = %q, want %q", node.ID, id, got, want)
			}
		}
	}
}

// A follower loses its data: with wipe "kv" its KV directory only (the
// KV then opens with kv.ErrAheadOfLog: its log was trimmed, so it cannot be
// refolded), with wipe "tablets" every replica's log and KV (a new disk: an
// empty log, below the leader's trimmed start). Restarted, it restores the
// latest KV snapshot and replays the changelog from its offset, fetched
// from the leader: it ends with every row, back in the ISR, and takes the
// next upserts like the others.
func TestWipedReplicaRestoresTheLatestSnapshot(t *testing.T) {
	for _, wipe := range []string{"kv", "tablets"} {
		t.Run(wipe, func(t *testing.T) {
			ctx := ctxFor(t, 120*time.Second)
			c, tbl := newSnapshotKV(ctx, t, t.TempDir(), 1)
			tb := bucket0(tbl)
			k := newKVCodec(t, tbl)
			for round := 1; round <= 2; round++ {
				k.upsertRange(ctx, t, c, tbl, 0, 30, round)
				snapshotRound(ctx, t, c, tb)
			}
			k.upsertRange(ctx, t, c, tbl, 10, 20, 3) // above the snapshot: replayed from the log
			l := bucketLeader(ctx, t, c, tb)
			if start := replicaOn(l, tb).Log().LogStartOffset(); start == 0 {
				t.Fatal("the leader's changelog was not trimmed")
			}
			f := another(c, l.ID)
			dir := filepath.Join(f.Config().DataDir, "tablets")
			if wipe == "kv" {
				dir = filepath.Join(dir, fmt.Sprint(tb.TableID), "0", "kv")
			}
			c.Kill(int(f.ID))
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			c.Restart(int(f.ID))
			waitUntil(ctx, t, "the wiped follower restored and caught up", func() bool {
				r := replicaOn(f, tb)
				return r != nil && r.LocalKV() != nil && r.Log().LogEndOffset() == replicaOn(l, tb).Log().LogEndOffset()
			})
			k.upsertRange(ctx, t, c, tbl, 0, 5, 4)
			for _, n := range c.Nodes() {
				r := replicaOn(n, tb)
				waitUntil(ctx, t, fmt.Sprintf("node %d's KV flushed to its high watermark", n.ID), func() bool {
					return r.LocalKV().FlushedOffset() == r.Log().HighWatermark() && r.Log().HighWatermark() == replicaOn(l, tb).Log().HighWatermark()
				})
				for id := int64(0); id < 30; id++ {
					round := 2
					switch {
					case id < 5:
						round = 4
					case id >= 10 && id < 20:
						round = 3
					}
					if got, want := k.lookup(t, r.LocalKV(), id), fmt.Sprintf("v%d-%d", round, id); got != want {
						t.Fatalf("node %d: lookup %d = %q, want %q", n.ID, id, got, want)
					}
				}
			}
			waitUntil(ctx, t, "the restored follower back in the ISR", func() bool {
				return slices.Contains(replicaOn(l, tb).ISR(), f.ID)
			})
		})
	}
}
