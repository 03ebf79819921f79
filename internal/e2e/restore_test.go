package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// TestWipedNodeRestoresFromSnapshots: three real processes with KV
// snapshots to a shared directory every 300 ms and 16 KiB log segments (4 KiB batches); a
// primary-key table of RF 3 takes two rounds of upserts, its leader
// snapshots and trims the changelog. A follower is SIGKILLed, its whole
// data directory removed, and it is started again: it rejoins the cluster,
// restores the latest snapshot, fetches the changelog above it from the
// leader and gets back into the ISR. Then leadership is moved to it (the
// other nodes SIGKILLed and restarted in turn): its lookups return every
// row of the last round.
func TestWipedNodeRestoresFromSnapshots(t *testing.T) {
	bin := buildStrom(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	t.Setenv("STROM_REMOTE_DATA_DIR", "file://"+t.TempDir())
	t.Setenv("STROM_KV_SNAPSHOT_INTERVAL", "300ms")
	t.Setenv("STROM_LOG_SEGMENT_FILE_SIZE", "16kb")
	rc := startReplicated(ctx, t, bin, client.WithRetryTimeout(60*time.Second))
	schema := &stromv1.Schema{Columns: []*stromv1.Column{{Name: "id", Type: "BIGINT NOT NULL"}, {Name: "note", Type: "STRING"}},
		PrimaryKey: []string{"id"}}
	tbl := rc.createTable(ctx, "restored", schema, 1)
	rc.waitInSync(ctx, "restored")
	w, err := tbl.NewUpsertWriter(ctx, client.Acks(-1), client.BatchSize(4<<10))
	if err != nil {
		t.Fatal(err)
	}
	const keys = 200
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[int64]string{}
	upsertRound := func(round int) {
		t.Helper()
		for id := range int64(keys) {
			// Incompressible, so that the changelog rolls segments.
			pad := make([]byte, 64)
			for i := range pad {
				pad[i] = byte(rng.Uint32())
			}
			want[id] = fmt.Sprintf("round %d key %d %x", round, id, pad)
			w.Upsert(ctx, record.Row{id, want[id]})
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	upsertRound(1)
	upsertRound(2)
	// Wait for a snapshot at the high watermark and a trimmed changelog.
	for {
		st := tbl.DescribeBuckets(ctx)[0]
		if n := len(st.KvSnapshots); st.Error == nil && n > 0 && st.KvSnapshots[n-1].LogOffset == st.HighWatermark && st.LogStartOffset > 0 {
			t.Logf("leader %d: snapshot %d at offset %d, changelog starts at %d", st.Leader, st.KvSnapshots[n-1].Id, st.HighWatermark, st.LogStartOffset)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no snapshot at the high watermark with a trimmed changelog: %v", st)
		case <-time.After(100 * time.Millisecond):
		}
	}

	leader := rc.waitInSync(ctx, "restored")[0]
	wiped := leader%3 + 1
	rc.sigkill(wiped)
	if err := os.RemoveAll(filepath.Join(rc.nodes[int(wiped)].dir, "data")); err != nil {
		t.Fatal(err)
	}
	upsertRound(3) // above the snapshot: fetched from the leader
	rc.restart(wiped)
	rc.waitInSync(ctx, "restored")
	if logs := rc.nodes[int(wiped)].logs.String(); !strings.Contains(logs, "restoring the latest kv snapshot") {
		t.Fatalf("node %d caught up without restoring a snapshot:\n%s", wiped, logs)
	}
	t.Logf("node %d: data directory wiped, restarted, restored the latest snapshot, back in the ISR", wiped)

	l, err := tbl.NewLookuper()
	if err != nil {
		t.Fatal(err)
	}
	for leader = rc.waitInSync(ctx, "restored")[0]; leader != wiped; leader = rc.waitInSync(ctx, "restored")[0] {
		rc.sigkill(leader)
		rc.waitLeaderOtherThan(ctx, "restored", 0, leader)
		rc.restart(leader)
	}
	ks := make([]record.Row, keys)
	for id := range int64(keys) {
		ks[id] = record.Row{id}
	}
	rows, err := l.Lookup(ctx, ks...)
	if err != nil {
		t.Fatal(err)
	}
	for id, row := range rows {
		if row == nil || row[1] != want[int64(id)] {
			t.Fatalf("node %d (restored, leading): key %d = %v, want %q", wiped, id, row, want[int64(id)])
		}
	}
	t.Logf("node %d leads and serves all %d keys", wiped, keys)
}
