package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"strom/raftmeta/catalog"
	"strom/record"
	"strom/server"
	"strom/tablet/replica"
)

// newTieredKV starts three nodes whose changelog tiering and KV snapshots
// go to remoteDir and run only when the test calls them, with 1 KB log
// segments, and creates a one-bucket primary-key table with RF 3.
func newTieredKV(ctx context.Context, t *testing.T, remoteDir string) (*Cluster, catalog.Table) {
	t.Helper()
	c := New(t, Options{Nodes: 3, Verbose: os.Getenv("VERBOSE") != "", Configure: func(_ int, cfg *server.Config) {
		cfg.RemoteDataDir = "file://" + remoteDir
		cfg.RemoteLogTaskInterval = time.Hour // the test runs the rounds
		cfg.KvSnapshotInterval = time.Hour
		cfg.KvSnapshotNumRetained = 1
		cfg.SegmentBytes = 1 << 10
	}})
	return c, createKVTable(ctx, t, c, "tieredkv")
}

// readChangelog reads r's changelog as a consumer does (Replica.Read: remote
// segments below the local log start) from its log start to its high
// watermark, checks every batch follows the one before, and returns each
// change as kvCodec.changelog writes it.
func (k kvCodec) readChangelog(t *testing.T, r *replica.Replica) []string {
	t.Helper()
	var changes []string
	hw := r.Log().HighWatermark()
	for off := r.LogStartOffset(); off < hw; {
		rr, err := r.Read(off, 4<<10)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(rr.Batches) == 0 {
			t.Fatalf("read at %d returned nothing below the high watermark %d", off, hw)
		}
		for data := rr.Batches; len(data) > 0; {
			b, rest, err := record.NextBatch(data)
			if err != nil {
				t.Fatal(err)
			}
			if b.BaseOffset() != off {
				t.Fatalf("a batch at %d where %d was next", b.BaseOffset(), off)
			}
			data, off = rest, b.NextOffset()
			if b.RecordCount() == 0 {
				continue
			}
			ab, err := record.DecodeArrowBatch(b, k.schema, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range ab.Len() {
				changes = append(changes, fmt.Sprintf("%s%v", ab.ChangeType(i), []any(ab.Row(i))))
			}
			ab.Release()
		}
	}
	return changes
}

// remoteManifest is tb's remote log manifest in n's metadata.
func remoteManifest(t *testing.T, n *Node, tb replica.TableBucket) catalog.RemoteLogManifest {
	t.Helper()
	m, err := catalog.New(n.Server().Metadata()).RemoteLogs(tb.TableID, tb.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A primary-key table's changelog is tiered like a log table's: a snapshot
// alone trims nothing (no segment is dropped that is neither tiered nor
// expired), a tiering round lets the replicas trim below both the oldest
// retained snapshot and the manifest's end, and a consumer from the
// earliest offset reads the whole changelog, once and in order, across
// remote and local segments.
func TestPrimaryKeyChangelogIsTiered(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	c, tbl := newTieredKV(ctx, t, t.TempDir())
	tb := bucket0(tbl)
	k := newKVCodec(t, tbl)

	var want []string
	var hw int64
	for round := 1; round <= 3; round++ {
		k.upsertRange(ctx, t, c, tbl, 0, 30, round)
		l := replicaOn(bucketLeader(ctx, t, c, tb), tb)
		end := l.Log().HighWatermark()
		want = append(want, k.changelog(t, l, hw, end)...)
		hw = end

		// Snapshots first: every replica may drop the changelog below the
		// snapshot as far as its KV goes, but not what is not tiered yet.
		waitUntil(ctx, t, "a snapshot round commits", func() bool {
			s := snapshotRound(ctx, t, c, tb)
			latest, _ := s.Latest()
			return latest.ID == int64(round)
		})
		man := remoteManifest(t, bucketLeader(ctx, t, c, tb), tb)
		for _, n := range c.Nodes() {
			r := replicaOn(n, tb)
			if start := r.Log().LogStartOffset(); start > man.EndOffset() {
				t.Fatalf("round %d: node %d's changelog starts at %d after a snapshot round, the remote log ends at %d: untiered segments were dropped",
					round, n.ID, start, man.EndOffset())
			}
		}

		// Then tiering: the leader tiers and trims, the followers trim in
		// their next snapshot round (from the manifest in their metadata).
		_, man = tierRound(ctx, t, c, tb, func(m catalog.RemoteLogManifest) bool { return m.EndOffset() > 0 && m.EndOffset() >= man.EndOffset() })
		snaps := snapshotRound(ctx, t, c, tb)
		oldest := snaps.Snapshots[0].LogOffset
		for _, n := range c.Nodes() {
			r := replicaOn(n, tb)
			start := r.Log().LogStartOffset()
			t.Logf("round %d: node %d log start %d, %d segments, remote %d..%d, oldest snapshot %d", round, n.ID, start, len(r.Log().Segments()), man.StartOffset(), man.EndOffset(), oldest)
			if start > man.EndOffset() || start > oldest {
				t.Fatalf("round %d: node %d's changelog starts at %d, the remote log ends at %d, the oldest snapshot is at %d", round, n.ID, start, man.EndOffset(), oldest)
			}
			if round > 1 && start == 0 {
				t.Fatalf("round %d: node %d's changelog was never trimmed (remote log ends at %d, oldest snapshot %d)", round, n.ID, man.EndOffset(), oldest)
			}
		}
	}
	man := remoteManifest(t, bucketLeader(ctx, t, c, tb), tb)
	if man.StartOffset() != 0 {
		t.Fatalf("the remote changelog starts at %d, want 0", man.StartOffset())
	}
	l := replicaOn(bucketLeader(ctx, t, c, tb), tb)
	if got := l.LogStartOffset(); got != 0 {
		t.Fatalf("the leader's log start is %d, want 0 (the remote start)", got)
	}
	if got := k.readChangelog(t, l); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the changelog from the earliest offset:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkValues(ctx, t, c, tb, k, 30, "v3")
}

// table.log.ttl applies to a primary-key table's changelog: expired remote
// segments leave the manifest and their objects go, and expired local
// segments are dropped without being tiered, but only below the oldest
// retained snapshot (the KV needs the rest).
func TestPrimaryKeyChangelogTTL(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	remoteDir := t.TempDir()
	c, tbl := newTieredKV(ctx, t, remoteDir)
	tb := bucket0(tbl)
	k := newKVCodec(t, tbl)

	k.upsertRange(ctx, t, c, tbl, 0, 30, 1)
	var first int64
	waitUntil(ctx, t, "a snapshot round commits", func() bool {
		s := snapshotRound(ctx, t, c, tb)
		if len(s.Snapshots) > 0 {
			first = s.Snapshots[0].LogOffset
		}
		return len(s.Snapshots) > 0
	})
	_, man := tierRound(ctx, t, c, tb, func(m catalog.RemoteLogManifest) bool { return m.EndOffset() > 0 })
	logKeys := func() (n int) {
		for _, key := range remoteKeys(t, remoteDir) {
			if strings.HasPrefix(key, "log/") {
				n++
			}
		}
		return n
	}
	if logKeys() == 0 {
		t.Fatal("nothing tiered")
	}
	k.upsertRange(ctx, t, c, tbl, 0, 30, 2) // above the snapshot

	// Eight days on, everything is older than the default 7 days.
	later := time.Now().Add(8 * 24 * time.Hour)
	l := bucketLeader(ctx, t, c, tb)
	l.Server().Replicas().TierOnce(ctx, later)
	if m := remoteManifest(t, l, tb); len(m.Segments) != 0 {
		t.Fatalf("after the TTL the manifest holds %d segments (was %d)", len(m.Segments), len(man.Segments))
	}
	if n := logKeys(); n != 0 {
		t.Fatalf("after the TTL %d remote changelog objects remain", n)
	}
	if start := replicaOn(l, tb).Log().LogStartOffset(); start == 0 || start > first {
		t.Fatalf("the leader's changelog starts at %d after the TTL, want above 0 and at most the snapshot's %d", start, first)
	}
	snaps := snapshotRoundAt(ctx, t, c, tb, later)
	oldest := snaps.Snapshots[0].LogOffset
	for _, n := range c.Nodes() {
		n.Server().Replicas().TierOnce(ctx, later) // the leader's trims again, after the new snapshot
		r := replicaOn(n, tb)
		start := r.Log().LogStartOffset()
		t.Logf("node %d: log start %d, %d segments, oldest snapshot %d, high watermark %d", n.ID, start, len(r.Log().Segments()), oldest, r.Log().HighWatermark())
		if start == 0 || start > oldest {
			t.Fatalf("node %d's changelog starts at %d after the TTL, want above 0 and at most the oldest snapshot's %d", n.ID, start, oldest)
		}
	}
	checkValues(ctx, t, c, tb, k, 30, "v2")
}

// A follower whose disk was wiped restores the latest KV snapshot, so its
// changelog starts at the snapshot's offset, above the remote log's end
// (the old leader had not tiered the segments between). Elected leader, it
// must not restart the remote log above the gap (dropping and deleting the
// segments below it: a consumer from the earliest offset would lose them):
// its tiering round fills the gap from a follower's copy and continues the
// manifest, and the whole changelog reads from offset 0, once and in order.
func TestRestoredLeaderKeepsTheRemoteChangelog(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	remoteDir := t.TempDir()
	c, tbl := newTieredKV(ctx, t, remoteDir)
	tb := bucket0(tbl)
	k := newKVCodec(t, tbl)

	var want []string
	var hw int64
	upsert := func(round int) {
		k.upsertRange(ctx, t, c, tbl, 0, 30, round)
		l := replicaOn(bucketLeader(ctx, t, c, tb), tb)
		end := l.Log().HighWatermark()
		want = append(want, k.changelog(t, l, hw, end)...)
		hw = end
	}
	upsert(1)
	waitUntil(ctx, t, "snapshot 1", func() bool { latest, _ := snapshotRound(ctx, t, c, tb).Latest(); return latest.ID == 1 })
	_, before := tierRound(ctx, t, c, tb, func(m catalog.RemoteLogManifest) bool { return m.EndOffset() > 0 })
	upsert(2)
	var snap catalog.KvSnapshot
	waitUntil(ctx, t, "snapshot 2", func() bool { snap, _ = snapshotRound(ctx, t, c, tb).Latest(); return snap.ID == 2 })
	if snap.LogOffset <= before.EndOffset() {
		t.Fatalf("snapshot 2 is at %d, not above the remote log's end %d", snap.LogOffset, before.EndOffset())
	}

	// The follower elected next (the first in replica order after the
	// leader) loses its disk and restores snapshot 2.
	l := bucketLeader(ctx, t, c, tb)
	var f *Node
	for _, id := range tbl.Assignment.Buckets[0] {
		if id != l.ID {
			f = c.Node(int(id))
			break
		}
	}
	c.Kill(int(f.ID))
	if err := os.RemoveAll(filepath.Join(f.Config().DataDir, "tablets")); err != nil {
		t.Fatal(err)
	}
	c.Restart(int(f.ID))
	waitUntil(ctx, t, "the wiped follower restored, caught up and in the ISR", func() bool {
		r := replicaOn(f, tb)
		return r != nil && r.LocalKV() != nil && r.Log().LogEndOffset() == replicaOn(l, tb).Log().LogEndOffset() &&
			slices.Contains(replicaOn(l, tb).ISR(), f.ID)
	})
	if start := replicaOn(f, tb).Log().LogStartOffset(); start <= before.EndOffset() {
		t.Fatalf("the restored follower's log starts at %d, not above the remote log's end %d: no gap to test", start, before.EndOffset())
	}

	c.Kill(int(l.ID))
	if nl := bucketLeader(ctx, t, c, tb); nl != f {
		t.Fatalf("node %d leads, want the restored node %d", nl.ID, f.ID)
	}
	upsert(3)
	_, after := tierRound(ctx, t, c, tb, func(m catalog.RemoteLogManifest) bool { return m.EndOffset() > snap.LogOffset })
	if after.StartOffset() != 0 {
		t.Fatalf("the remote changelog starts at %d after the restored leader's round, want 0", after.StartOffset())
	}
	for i, s := range before.Segments {
		if after.Segments[i] != s {
			t.Fatalf("segment %d of the old manifest is %+v, the new has %+v", i, s, after.Segments[i])
		}
	}
	for i := 1; i < len(after.Segments); i++ {
		if after.Segments[i].BaseOffset != after.Segments[i-1].EndOffset {
			t.Fatalf("the manifest has a gap: segment %d ends at %d, the next starts at %d", i-1, after.Segments[i-1].EndOffset, after.Segments[i].BaseOffset)
		}
	}
	r := replicaOn(f, tb)
	if got := r.LogStartOffset(); got != 0 {
		t.Fatalf("the restored leader's log start is %d, want 0 (the remote start)", got)
	}
	if got := k.readChangelog(t, r); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the changelog from the earliest offset:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
