package log

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lyingIndexLog is a cleanly closed log of several sealed segments whose
// every batch has an offset and a time index entry (one second apart), and
// the path of a middle sealed segment.
func lyingIndexLog(t *testing.T) (Config, *model, string) {
	t.Helper()
	cfg := testConfig(t)
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 0
	tb, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := &model{}
	for i := range 60 {
		appendLeader(t, tb, m, 1, t0.Add(time.Duration(i)*time.Second), batchSpec{id: int64(i), records: 1 + i%3, size: 150})
	}
	segs := tb.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg, m, segs[1].Path
}

// checkLog reads every batch by itself (so each read looks up its own
// index entry) and every timestamp from before the first batch to after
// the last, and compares them with m.
func checkLog(t *testing.T, tb *Tablet, m *model) {
	t.Helper()
	for _, b := range m.batches {
		info, err := tb.Read(b.base, 1, math.MaxInt64)
		if err != nil {
			t.Fatalf("Read(%d): %v", b.base, err)
		}
		bs := decode(t, info.Batches)
		if len(bs) != 1 {
			t.Fatalf("Read(%d, 1 byte) returned %d batches, want 1", b.base, len(bs))
		}
		checkBatch(t, bs[0], b)
	}
	readAll(t, tb, m, 700)
	first, last := m.batches[0].ts, m.batches[len(m.batches)-1].ts
	for ms := first - 500; ms <= last+500; ms += 250 {
		want := int64(-1)
		for _, b := range m.batches {
			if b.ts >= ms {
				want = b.base
				break
			}
		}
		got, found, err := tb.OffsetForTimestamp(ms)
		if err != nil {
			t.Fatalf("OffsetForTimestamp(%d): %v", ms, err)
		}
		if got != want || found != (want >= 0) {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %v, want %d", ms, got, found, want)
		}
	}
}

// TestLyingIndexEntry: a byte flips in a middle entry of a sealed
// segment's offset or time index (either field), where Open's checks of
// the index ends do not see it. Reads and timestamp lookups through it
// return the right batches (the entry a lookup lands on is checked against
// the batch it names; on a mismatch the segment's indexes are rebuilt from
// its batches), the rebuild is counted, the rebuilt files are the
// original ones, and a restart finds nothing to rebuild. A truncation that
// lands on the lying entry cuts at the right batch. Before, reads through
// the entry failed with a corrupt segment error on every restart, a
// timestamp lookup could answer a later offset, and the truncation cut at
// the entry's position.
func TestLyingIndexEntry(t *testing.T) {
	cfg, m, segPath := lyingIndexLog(t)
	idxPath := strings.TrimSuffix(segPath, logSuffix) + indexSuffix
	tidxPath := strings.TrimSuffix(segPath, logSuffix) + timeIndexSuffix
	origIdx, err := os.ReadFile(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	origTidx, err := os.ReadFile(tidxPath)
	if err != nil {
		t.Fatal(err)
	}
	nOff, nTime := len(origIdx)/offsetEntrySize, len(origTidx)/timeEntrySize
	if nOff < 5 || nTime < 5 {
		t.Fatalf("segment %s has %d offset and %d time index entries, want several", segPath, nOff, nTime)
	}
	midOff, midTime := int64(nOff/2)*offsetEntrySize, int64(nTime/2)*timeEntrySize
	flip := func(pos int64, bit byte) func(string) {
		return func(p string) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			data[pos] ^= bit
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name string
		file string
		pos  int64
		bit  byte
	}{
		{"offset index: relative offset", indexSuffix, midOff, 0x01},
		{"offset index: position", indexSuffix, midOff + 4, 0x08},
		{"offset index: position, high byte", indexSuffix, midOff + 5, 0x01},
		{"time index: timestamp", timeIndexSuffix, midTime, 0x80},
		{"time index: timestamp, high byte", timeIndexSuffix, midTime + 1, 0x02},
		{"time index: relative offset", timeIndexSuffix, midTime + 8, 0x01},
		{"time index: relative offset, later", timeIndexSuffix, midTime + 8, 0x08},
	}
	d := newDamager(t, cfg)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.TrimSuffix(filepath.Base(segPath), logSuffix) + tc.file
			tb, _, err := d.open(name, flip(tc.pos, tc.bit))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			checkLog(t, tb, m)
			if n := tb.IndexRebuilds(); n != 1 {
				t.Errorf("IndexRebuilds() = %d, want 1", n)
			}
			dir := tb.cfg.Dir
			for path, want := range map[string][]byte{indexSuffix: origIdx, timeIndexSuffix: origTidx} {
				got, err := os.ReadFile(filepath.Join(dir, strings.TrimSuffix(filepath.Base(segPath), logSuffix)+path))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("the rebuilt %s file differs from the original", path)
				}
			}
			if err := tb.Close(); err != nil {
				t.Fatal(err)
			}
			c := tb.cfg
			again, err := Open(c)
			if err != nil {
				t.Fatalf("Open after the rebuild: %v", err)
			}
			defer again.Close()
			checkLog(t, again, m)
			if n := again.IndexRebuilds(); n != 0 {
				t.Errorf("after a restart IndexRebuilds() = %d, want 0 (the rebuilt files were kept)", n)
			}
		})
	}

	t.Run("truncation through a lying offset entry", func(t *testing.T) {
		// The entry's position moves to another batch's start: a cut
		// trusting it would keep the wrong bytes.
		e, prev := decodeOffsetEntry(origIdx[midOff:]), decodeOffsetEntry(origIdx[midOff-offsetEntrySize:])
		tb, _, err := d.open(filepath.Base(idxPath), func(p string) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			le.PutUint32(data[midOff+4:], prev.pos) // names the previous batch's start
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		cutAt := segBase(t, segPath) + int64(e.rel)
		if err := tb.TruncateTo(cutAt); err != nil {
			t.Fatalf("TruncateTo(%d): %v", cutAt, err)
		}
		mm := &model{batches: append([]stored(nil), m.batches...)}
		mm.truncate(cutAt)
		if got := tb.LogEndOffset(); got != cutAt {
			t.Fatalf("log end after TruncateTo(%d) = %d", cutAt, got)
		}
		readAll(t, tb, mm, 700)
		if err := tb.Verify(); err != nil {
			t.Fatalf("Verify after the truncation: %v", err)
		}
	})
}

// segBase is the base offset in a segment file's name.
func segBase(t *testing.T, path string) int64 {
	t.Helper()
	o, ok := parseFileName(filepath.Base(path), logSuffix)
	if !ok {
		t.Fatalf("%s is not a segment file", path)
	}
	return o
}
