package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"strom/record"
)

// strom consume stops at a batch damaged on disk, naming the bucket and
// offsets; --skip-bad reads past it and reports what it skipped on stderr.
func TestConsumeSkipBad(t *testing.T) {
	bin := buildStrom(t)
	dir := t.TempDir()
	addr, raft := freeAddr(t), freeAddr(t)
	startNode(t, bin, dir, addr, "--data-dir", dir, "--listen", addr, "--raft-listen", raft)
	strom(t, bin, addr, "db", "create", "demo")
	var tbl tableJSON
	mustJSON(t, strom(t, bin, addr, "table", "create", "demo.t", "--output", "json", "--schema", "id BIGINT NOT NULL, name STRING"), &tbl)
	for _, row := range []string{`{"id": 0, "name": "a"}`, `{"id": 1, "name": "b"}`, `{"id": 2, "name": "c"}`} {
		file := filepath.Join(t.TempDir(), "row.json")
		if err := os.WriteFile(file, []byte(row+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		strom(t, bin, addr, "produce", "demo.t", "--file", file) // one batch each: offsets 0, 1, 2
	}

	// Damage the second batch where it is stored.
	seg := filepath.Join(dir, "tablets", tbl.TableID, "0", "log", "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	first, rest, err := record.NextBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := record.NextBatch(rest)
	if err != nil || second.BaseOffset() != 1 {
		t.Fatalf("second batch: %v, base offset %d", err, second.BaseOffset())
	}
	at := int64(len(first) + len(second) - 8)
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{data[at] ^ 0x40}, at); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for _, columns := range []string{"id", "id,name"} { // projected on the node, or passed on as stored
		out, errOut, err := stromResult(bin, addr, "consume", "demo.t", "--columns", columns, "--output", "json")
		if err == nil || !strings.Contains(errOut, "bucket 0: offsets 1 to 1 cannot be read") || !strings.Contains(errOut, "--skip-bad") {
			t.Errorf("consume --columns %s: %v\nstdout: %s\nstderr: %s\nwant a failure naming bucket 0, offsets 1 to 1 and --skip-bad", columns, err, out, errOut)
		}
		out, errOut, err = stromResult(bin, addr, "consume", "demo.t", "--columns", columns, "--output", "json", "--skip-bad")
		if err != nil || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"id":0`) || !strings.Contains(out, `"id":2`) ||
			!strings.Contains(errOut, "strom: skipped bucket 0 offsets 1 to 1: 1 records lost") {
			t.Errorf("consume --columns %s --skip-bad: %v\nstdout: %s\nstderr: %s\nwant ids 0 and 2, and the skip on stderr", columns, err, out, errOut)
		}
	}
}
