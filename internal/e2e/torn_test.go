package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"strom/record"
)

// A node killed while the tail of a bucket's log was only partly written
// (the SIGKILL or power cut of a large append, made exact here by cutting
// the last stored batch in half after the kill) comes back with the log
// ending at the last whole batch: the torn bytes are gone from the file,
// the cut is logged with where and how much, readers see only whole
// batches, and new appends continue at the next offset. The node runs
// with log.flush.interval-messages: 1, so acks=-1 produces also go through
// the fsync path of the real binary.
func TestTornTailAfterSIGKILL(t *testing.T) {
	bin := buildStrom(t)
	dir := t.TempDir()
	addr, raft := freeAddr(t), freeAddr(t)
	args := []string{"--data-dir", dir, "--listen", addr, "--raft-listen", raft, "--log-format", "json",
		"--config", writeConfig(t, "log.flush.interval-messages: 1\n")}
	n := startNode(t, bin, dir, addr, args...)
	strom(t, bin, addr, "db", "create", "demo")
	var tbl tableJSON
	mustJSON(t, strom(t, bin, addr, "table", "create", "demo.t", "--output", "json", "--schema", "id BIGINT NOT NULL, name STRING"), &tbl)
	produce := func(from, rows int) {
		var b strings.Builder
		for i := from; i < from+rows; i++ {
			fmt.Fprintf(&b, `{"id": %d, "name": "row %d %s"}`+"\n", i, i, strings.Repeat("x", 100))
		}
		file := filepath.Join(t.TempDir(), "rows.json")
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		strom(t, bin, addr, "produce", "demo.t", "--file", file) // acks=-1
	}
	produce(0, 10)
	produce(10, 10)
	produce(20, 2000) // the large append that the kill tears
	if err := n.kill(syscall.SIGKILL); err == nil {
		t.Fatal("SIGKILL: want a non-zero exit")
	}

	// Cut the last stored batch in half, as a write cut short leaves it.
	seg := filepath.Join(dir, "tablets", tbl.TableID, "0", "log", "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	var last record.Batch
	lastPos := 0
	for pos, rest := 0, data; len(rest) > 0; {
		b, r, err := record.NextBatch(rest)
		if err != nil {
			t.Fatalf("stored batches before the cut: %v", err)
		}
		last, lastPos = b, pos
		pos += len(b)
		rest = r
	}
	if last == nil || last.BaseOffset() < 20 {
		t.Fatalf("the last stored batch starts at offset %d; want one of the large append", last.BaseOffset())
	}
	torn := int64(lastPos + len(last)/2)
	if err := os.Truncate(seg, torn); err != nil {
		t.Fatal(err)
	}

	n = startNode(t, bin, dir, addr, args...)
	end := last.BaseOffset()
	if got := strings.TrimSpace(strom(t, bin, addr, "offsets", "demo.t")); !strings.Contains(got, fmt.Sprint(end)) {
		t.Fatalf("offsets after the cut:\n%s\nwant the latest at %d", got, end)
	}
	if st, err := os.Stat(seg); err != nil || st.Size() != int64(lastPos) {
		t.Fatalf("segment after recovery: %v, %d bytes; want the torn bytes gone (%d)", err, st.Size(), lastPos)
	}
	// New appends continue densely from the cut; readers see whole
	// batches only: ids 0..end-1, then the new rows.
	produce(5000, 3)
	out := strom(t, bin, addr, "consume", "demo.t", "--output", "json")
	next := int64(0)
	for line := range strings.Lines(out) {
		var r struct {
			ID     int64 `json:"id"`
			Offset int64 `json:"_offset"`
		}
		mustJSON(t, line, &r)
		want := next
		if next >= end {
			want = 5000 + next - end
		}
		if r.Offset != next || r.ID != want {
			t.Fatalf("record at offset %d has id %d; want offset %d, id %d", r.Offset, r.ID, next, want)
		}
		next++
	}
	if next != end+3 {
		t.Fatalf("consumed %d records, want %d (the whole batches, then 3 new)", next, end+3)
	}

	// The cut was logged: where, how much, and the new end.
	if err := n.kill(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	var cut map[string]any
	sc := bufio.NewScanner(strings.NewReader(n.logs.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "cut invalid tail of the log" {
			cut = m
		}
	}
	if cut == nil || cut["position"] != float64(lastPos) || cut["bytes_dropped"] != float64(torn-int64(lastPos)) ||
		cut["next_offset"] != float64(end) || !strings.Contains(fmt.Sprint(cut["reason"]), "torn") {
		t.Fatalf("recovery logged %v; want a cut at position %d of %d bytes, next offset %d, reason torn", cut, lastPos, torn-int64(lastPos), end)
	}
}
