package testcluster

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/raftmeta/catalog"
	"strom/record"
	"strom/server"
	"strom/tablet/replica"
)

// bucketLeader waits for a running node that leads tb and returns it.
func bucketLeader(ctx context.Context, t *testing.T, c *Cluster, tb replica.TableBucket) *Node {
	t.Helper()
	var l *Node
	waitUntil(ctx, t, "a node leads the bucket", func() bool {
		for _, n := range c.Nodes() {
			if r := replicaOn(n, tb); r != nil && r.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// appendRows appends rows from..to-1, one batch each, acks=-1, on the
// bucket's leader (found again when leadership moves: appendToLeader), and
// returns the leader that took the last.
func appendRows(ctx context.Context, t *testing.T, c *Cluster, tbl catalog.Table, from, to int64) *Node {
	t.Helper()
	return appendToLeader(ctx, t, c, tbl, from, to, 1, -1)
}

// tierRound runs tiering rounds on the bucket's leader until its manifest
// satisfies done, and returns that leader and manifest.
func tierRound(ctx context.Context, t *testing.T, c *Cluster, tb replica.TableBucket, done func(catalog.RemoteLogManifest) bool) (*Node, catalog.RemoteLogManifest) {
	t.Helper()
	var l *Node
	var m catalog.RemoteLogManifest
	waitUntil(ctx, t, "a tiering round commits the manifest wanted", func() bool {
		l = bucketLeader(ctx, t, c, tb)
		l.Server().Replicas().TierOnce(ctx, time.Now())
		var err error
		if m, err = catalog.New(l.Server().Metadata()).RemoteLogs(tb.TableID, tb.Bucket); err != nil {
			t.Fatal(err)
		}
		return done(m)
	})
	return l, m
}

// readTieredIDs reads r from offset 0 to its high watermark and returns the id of
// every row.
func readTieredIDs(t *testing.T, r *replica.Replica, tbl catalog.Table) []int64 {
	t.Helper()
	var ids []int64
	for off := int64(0); off < r.Log().HighWatermark(); {
		rr, err := r.Read(off, 4<<10)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		for data := rr.Batches; len(data) > 0; {
			b, rest, err := record.NextBatch(data)
			if err != nil {
				t.Fatal(err)
			}
			data, off = rest, b.NextOffset()
			dec, err := record.DecodeArrowBatch(b, tbl.Schema, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			for i := range dec.Len() {
				ids = append(ids, dec.Row(i)[0].(int64))
			}
			dec.Release()
		}
		if len(rr.Batches) == 0 {
			t.Fatalf("read at %d returned nothing below the high watermark %d", off, r.Log().HighWatermark())
		}
	}
	return ids
}

// A bucket's leader tiers its segments to the shared remote.data.dir and
// is killed; the new leader continues from the manifest (the segments the
// old one committed stay, its own follow them, at its leader epoch) and
// serves every row from offset 0, the old leader's remote segments
// included, once and in order.
func TestTieringContinuesAfterLeaderChange(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	remoteDir := t.TempDir()
	c := New(t, Options{Nodes: 3, Verbose: os.Getenv("VERBOSE") != "", Configure: func(_ int, cfg *server.Config) {
		cfg.RemoteDataDir = "file://" + remoteDir
		cfg.RemoteLogTaskInterval = time.Hour // the test runs the rounds
		cfg.SegmentBytes = 1 << 10
	}})
	coord, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := createTable(ctx, coord, "fluss", "tiered", 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	tb := bucket0(tbl)
	appendRows(ctx, t, c, tbl, 0, 40)
	old, before := tierRound(ctx, t, c, tb, func(m catalog.RemoteLogManifest) bool { return len(m.Segments) >= 3 })
	if n := len(replicaOn(old, tb).Log().Segments()); n != 2 {
		t.Fatalf("the leader kept %d local segments, want 2", n)
	}

	c.Kill(int(old.ID))
	appendRows(ctx, t, c, tbl, 40, 80)
	nl, after := tierRound(ctx, t, c, tb, func(m catalog.RemoteLogManifest) bool { return m.LeaderEpoch > before.LeaderEpoch })
	r := replicaOn(nl, tb)
	if len(after.Segments) <= len(before.Segments) || after.LeaderEpoch <= before.LeaderEpoch {
		t.Fatalf("manifest after the new leader's round: %d segments at epoch %d; before %d at epoch %d",
			len(after.Segments), after.LeaderEpoch, len(before.Segments), before.LeaderEpoch)
	}
	for i, s := range before.Segments {
		if after.Segments[i] != s {
			t.Fatalf("segment %d of the old manifest is %+v, the new has %+v: the new leader did not continue from it", i, s, after.Segments[i])
		}
	}
	if n := len(r.Log().Segments()); n != 2 {
		t.Fatalf("the new leader kept %d local segments, want 2", n)
	}
	if got := r.LogStartOffset(); got != 0 {
		t.Fatalf("log start %d, want 0 (the remote start)", got)
	}
	ids := readTieredIDs(t, r, tbl)
	if len(ids) != 80 {
		t.Fatalf("read %d rows from offset 0, want 80", len(ids))
	}
	for i, id := range ids {
		if id != int64(i) {
			t.Fatalf("row %d has id %d", i, id)
		}
	}
}
