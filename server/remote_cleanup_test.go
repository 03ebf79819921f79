package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	stromv1 "strom/rpc/gen/strom/v1"
)

// filesUnder lists the files below dir (relative, slash-separated).
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Dropping tables deletes their remote objects (a log table's tiered
// segments, a primary-key table's tiered changelog and KV snapshots, a
// crash's temporary file), and nothing of a table that stays; the record
// of a pending deletion survives a failed pass (a cancelled context: a
// crash mid-delete) and an object put late (a round in flight at the drop),
// and is removed only by an empty pass after the grace.
func TestDroppedTablesRemoteObjectsAreDeleted(t *testing.T) {
	cfg, remoteDir := tieringConfig(t)
	cfg.KvSnapshotInterval = time.Hour // the test runs the rounds
	s := startServer(t, cfg)
	ctx := context.Background()
	logT := createTableWithOptions(t, s, "demo", "gone", tierDDL, nil)
	kvT := createTable(t, s, "demo", "gonekv", "id BIGINT NOT NULL, v STRING", 1, "id")
	keepT := createTableWithOptions(t, s, "demo", "kept", tierDDL, nil)
	for _, info := range []*stromv1.TableInfo{logT, kvT, keepT} {
		waitReplicas(t, s, info)
	}
	produceRows(t, s, logT, 0, 30)
	produceRows(t, s, keepT, 0, 30)
	for round := range 3 {
		for id := range 20 {
			body := fmt.Sprintf(`{"database":"demo","table":"gonekv","rows":[{"id":%d,"v":"r%d-%s"}]}`, id, round, randomPad(id))
			if code, resp := postJSON(t, s, "PutKv", body); code != 200 || strings.Contains(resp, `"error"`) {
				t.Fatalf("PutKv: %d %s", code, resp)
			}
		}
		s.replicas.SnapshotOnce(ctx, time.Now())
		s.replicas.TierOnce(ctx, time.Now())
	}
	count := func(prefix string) (n int) {
		for _, f := range filesUnder(t, remoteDir) {
			if strings.HasPrefix(f, prefix) {
				n++
			}
		}
		return n
	}
	gone := []string{"log/demo/gone-" + strconv.FormatInt(logT.TableId, 10) + "/", "log/demo/gonekv-" + strconv.FormatInt(kvT.TableId, 10) + "/", "kv/demo/gonekv-" + strconv.FormatInt(kvT.TableId, 10) + "/"}
	kept := "log/demo/kept-" + strconv.FormatInt(keepT.TableId, 10) + "/"
	for _, p := range append(gone, kept) {
		if count(p) == 0 {
			t.Fatalf("nothing under %s before the drop", p)
		}
	}
	keptBefore := count(kept)
	// A put a crash cut short.
	tmp := filepath.Join(remoteDir, gone[0], "0", ".strom-tmp-x-1")
	if err := os.WriteFile(tmp, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"gone", "gonekv"} {
		if _, err := adminClient(s).DropTable(ctx, connect.NewRequest(&stromv1.DropTableRequest{Database: "demo", Table: name})); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Metadata().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	pending := func() int {
		t.Helper()
		d, err := s.cat.RemoteDeletions()
		if err != nil {
			t.Fatal(err)
		}
		return len(d)
	}
	if n := pending(); n != 2 {
		t.Fatalf("%d pending remote deletions after two drops, want 2", n)
	}

	// A pass that fails (its context cancelled: a crash) keeps the records.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.CleanDroppedRemote(cancelled, time.Now()); err == nil {
		t.Fatal("a cancelled pass returned no error")
	}
	if n := pending(); n != 2 {
		t.Fatalf("%d pending remote deletions after a failed pass, want 2", n)
	}
	if err := s.CleanDroppedRemote(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, p := range gone {
		if n := count(p); n != 0 {
			t.Fatalf("%d files under %s after the cleanup", n, p)
		}
	}
	if n := count(kept); n != keptBefore {
		t.Fatalf("the kept table has %d remote files, had %d", n, keptBefore)
	}
	if n := pending(); n != 2 {
		t.Fatalf("%d pending remote deletions within the grace, want 2", n)
	}

	// An object put late (a round in flight at the drop) goes in a later pass.
	late := filepath.Join(remoteDir, gone[2], "0", "shared", "late.sst")
	if err := os.MkdirAll(filepath.Dir(late), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(late, []byte("late"), 0o644); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(droppedRemoteGrace)
	if err := s.CleanDroppedRemote(ctx, after); err != nil {
		t.Fatal(err)
	}
	if n := count(gone[2]); n != 0 {
		t.Fatalf("the late object is still there")
	}
	if n := pending(); n != 1 {
		t.Fatalf("%d pending remote deletions after a pass past the grace (one table had a late object), want 1", n)
	}
	if err := s.CleanDroppedRemote(ctx, after); err != nil {
		t.Fatal(err)
	}
	if err := s.Metadata().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 0 {
		t.Fatalf("%d pending remote deletions after an empty pass past the grace, want 0", n)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the temporary file: %v", err)
	}
}
