package kv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// putRows writes n rows (ids 0..n-1, names "<prefix>-<id>") in batches of
// 100, committed, then flushes Pebble's memtable to an SST.
func putRows(t *testing.T, f *fixture, n int, prefix string) {
	t.Helper()
	for i := 0; i < n; i += 100 {
		var ops []op
		for id := i; id < min(i+100, n); id++ {
			ops = append(ops, up(int32(id), fmt.Sprintf("%s-%d-%s", prefix, id, strings.Repeat("x", 40)), int64(id), nil, nil))
		}
		f.put(nil, ops...)
	}
	if err := f.kv.db.Flush(); err != nil {
		t.Fatal(err)
	}
}

// flipSSTBit flips one bit in the middle of the largest SST of the KV
// directory (a data block: the index, filter and footer are at its end).
func flipSSTBit(t *testing.T, dir string) string {
	t.Helper()
	ssts, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(ssts) == 0 {
		t.Fatalf("no SST in %s (%v)", dir, err)
	}
	var path string
	var size int64
	for _, p := range ssts {
		if st, err := os.Stat(p); err == nil && st.Size() > size {
			path, size = p, st.Size()
		}
	}
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	at := size / 3
	b := make([]byte, 1)
	if _, err := fh.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x04
	if _, err := fh.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	return path
}

// lookupAll looks up ids 0..n-1 one at a time and returns the first error.
func lookupAll(f *fixture, n int) (map[int32]string, error) {
	got := map[int32]string{}
	for id := range n {
		key, err := f.keys.Append(nil, []any{int32(id)})
		if err != nil {
			return nil, err
		}
		vals, err := f.kv.Lookup([][]byte{key})
		if err != nil {
			return got, err
		}
		if vals[0] == nil {
			continue
		}
		row, err := f.kv.decodeValue(vals[0])
		if err != nil {
			return got, err
		}
		got[int32(id)] = row[1].(string)
	}
	return got, nil
}

// TestCorruptSSTRefusedThenRebuilt: a bit flips in a data block of one of
// the KV's SSTs (the tablet closed, so no cache holds the block). The
// lookup that meets it fails with ErrStoreCorrupt (never a wrong value,
// never a crash), and so does every read and PutKv after it, until
// Rebuild folds the log into a new database: then every row reads back as
// written, the writes committed after the damage included. Before,
// Pebble's default DataCorruption handler (Fatalf: a panic) took the node
// down.
func TestCorruptSSTRefusedThenRebuilt(t *testing.T) {
	const n = 2000
	f := newFixture(t, testTable(t, testSchema(), nil), nil)
	putRows(t, f, n, "a")
	f.close()
	flipSSTBit(t, f.cfg.Dir)
	f.open()

	_, err := lookupAll(f, n)
	if !errors.Is(err, ErrStoreCorrupt) {
		t.Fatalf("lookups over a flipped bit: %v, want ErrStoreCorrupt", err)
	}
	if f.kv.Damaged() == nil {
		t.Fatal("Damaged() = nil after a corruption error")
	}
	key, _ := f.keys.Append(nil, []any{int32(0)})
	if _, err := f.kv.Lookup([][]byte{key}); !errors.Is(err, ErrStoreCorrupt) {
		t.Fatalf("a lookup of a sound block after the damage: %v, want ErrStoreCorrupt", err)
	}
	if _, err := f.kv.LimitScan(10); !errors.Is(err, ErrStoreCorrupt) {
		t.Fatalf("LimitScan after the damage: %v, want ErrStoreCorrupt", err)
	}
	if _, err := f.kv.Checkpoint(filepath.Join(t.TempDir(), "cp")); !errors.Is(err, ErrStoreCorrupt) {
		t.Fatalf("Checkpoint after the damage: %v, want ErrStoreCorrupt (a snapshot of damaged files)", err)
	}
	end := f.log.LogEndOffset()
	if _, err := f.kv.PutKv(t.Context(), f.batch(up(int32(1), "b", nil, nil, nil)), nil); !errors.Is(err, ErrStoreCorrupt) {
		t.Fatalf("PutKv after the damage: %v, want ErrStoreCorrupt", err)
	}
	if f.log.LogEndOffset() != end {
		t.Fatal("a refused PutKv appended to the log")
	}

	if err := f.kv.Rebuild(); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	if err := f.kv.Damaged(); err != nil {
		t.Fatalf("Damaged() = %v after Rebuild", err)
	}
	got, err := lookupAll(f, n)
	if err != nil {
		t.Fatalf("lookups after Rebuild: %v", err)
	}
	for id := range int32(n) {
		if want := fmt.Sprintf("a-%d-%s", id, strings.Repeat("x", 40)); got[id] != want {
			t.Fatalf("id %d = %q after Rebuild, want %q", id, got[id], want)
		}
	}
	f.put(nil, up(int32(1), "b", nil, nil, nil))
	if row := f.lookupRow(int32(1)); row[1] != "b" {
		t.Fatalf("id 1 = %v after a put on the rebuilt KV", row)
	}
	f.checkInvariant()
	f.reopen()
	f.checkInvariant()
}

// TestCorruptSSTAtOpen: the flipped bit is in the block of the flushed
// offset, which Open reads first: Open rebuilds the KV from the log
// (it starts at 0) instead of failing, and every row reads back.
func TestCorruptSSTAtOpen(t *testing.T) {
	const n = 50 // one data block: the meta key's
	f := newFixture(t, testTable(t, testSchema(), nil), nil)
	putRows(t, f, n, "a")
	f.close()
	flipSSTBit(t, f.cfg.Dir)
	f.open()
	got, err := lookupAll(f, n)
	if err != nil {
		t.Fatalf("lookups after Open over a flipped bit: %v", err)
	}
	if len(got) != n {
		t.Fatalf("%d rows after Open, want %d", len(got), n)
	}
	f.checkInvariant()
}

// TestCorruptSSTOverATrimmedLog: a KV over a log that does not start at 0
// cannot be refolded: Rebuild fails with ErrAheadOfLog (restore a
// snapshot) and reads stay refused.
func TestCorruptSSTOverATrimmedLog(t *testing.T) {
	const n = 2000
	f := newFixture(t, testTable(t, testSchema(), nil), nil)
	putRows(t, f, n, "a")
	f.kv.damage.note(pebble.ErrCorruption)
	if err := f.log.TruncateFullyAndStartAt(f.log.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := f.kv.Rebuild(); !errors.Is(err, ErrAheadOfLog) {
		t.Fatalf("Rebuild over a trimmed log: %v, want ErrAheadOfLog", err)
	}
	if _, err := lookupAll(f, 1); !errors.Is(err, ErrStoreCorrupt) {
		t.Fatalf("a lookup after a failed Rebuild: %v, want ErrStoreCorrupt", err)
	}
}
