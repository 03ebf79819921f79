package kv

import (
	"os"
	"path/filepath"
	"testing"
)

// A checkpoint holds the rows flushed when it was taken and says their
// offset; a KV directory replaced by it opens as a new database (another
// ID) and replays the log from that offset, ending equal to the fold of
// the changelog. With Pebble's WAL on and off.
func TestCheckpointOpensAsTheKV(t *testing.T) {
	for _, disableWAL := range []bool{false, true} {
		t.Run(map[bool]string{false: "wal", true: "nowal"}[disableWAL], func(t *testing.T) {
			f := newFixture(t, testTable(t, testSchema(), nil), func(c *Config) { c.DisableWAL = disableWAL })
			f.put(nil, up(int32(1), "a", nil, nil, nil), up(int32(2), "b", nil, nil, nil))
			f.put(nil, up(int32(1), "a2", nil, nil, nil), del(int32(2), nil, nil, nil, nil))
			id := f.kv.ID()
			if id == "" {
				t.Fatal("empty ID")
			}
			dir := filepath.Join(t.TempDir(), "ckpt")
			off, err := f.kv.Checkpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			if want := f.log.HighWatermark(); off != want {
				t.Fatalf("checkpoint at offset %d, want the high watermark %d", off, want)
			}
			if _, err := f.kv.Checkpoint(dir); err == nil {
				t.Fatal("a second checkpoint into the same directory succeeded")
			}
			f.put(nil, up(int32(3), "c", nil, nil, nil))
			f.close()
			if err := os.RemoveAll(f.cfg.Dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(dir, f.cfg.Dir); err != nil {
				t.Fatal(err)
			}
			f.open()
			if got := f.kv.ID(); got == id || got == "" {
				t.Fatalf("the restored database's ID is %q, the original's %q", got, id)
			}
			if got := f.lookupRow(int32(1)); got == nil || got[1] != "a2" {
				t.Fatalf("row 1 = %v", got)
			}
			if got := f.lookupRow(int32(2)); got != nil {
				t.Fatalf("deleted row 2 = %v", got)
			}
			if got := f.lookupRow(int32(3)); got == nil || got[1] != "c" {
				t.Fatalf("row 3 (replayed from the log) = %v", got)
			}
			f.checkInvariant()
		})
	}
}

// Restore swaps a live tablet's database for a checkpoint: after it the
// tablet holds the checkpoint's rows and what the log has above it, under a
// new ID, and serves reads and writes.
func TestRestoreReplacesTheDatabase(t *testing.T) {
	f := newFixture(t, testTable(t, testSchema(), nil), nil)
	f.put(nil, up(int32(1), "a", nil, nil, nil), up(int32(2), "b", nil, nil, nil))
	dir := filepath.Join(t.TempDir(), "ckpt")
	if _, err := f.kv.Checkpoint(dir); err != nil {
		t.Fatal(err)
	}
	id := f.kv.ID()
	f.put(nil, up(int32(1), "a2", nil, nil, nil))
	if err := f.kv.Restore(dir); err != nil {
		t.Fatal(err)
	}
	if f.kv.ID() == id {
		t.Fatal("the restored database kept the old ID")
	}
	if got := f.lookupRow(int32(1)); got == nil || got[1] != "a2" {
		t.Fatalf("row 1 = %v, want a2 (replayed from the log above the checkpoint)", got)
	}
	f.put(nil, del(int32(2), nil, nil, nil, nil), up(int32(4), "d", nil, nil, nil))
	if got := f.lookupRow(int32(2)); got != nil {
		t.Fatalf("deleted row 2 = %v", got)
	}
	f.checkInvariant()
	f.reopen()
	f.checkInvariant()
}
