package log

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"strom/record"
)

// crashedLog builds a log of several segments whose last segment holds a
// few batches, ending with a small one, and abandons it as a crash would.
// It returns the config, the model and the last segment's path.
func crashedLog(t *testing.T, batches int) (Config, *model, string) {
	t.Helper()
	cfg := testConfig(t)
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 200
	tb := openT(t, cfg)
	m := &model{}
	for i := range batches {
		appendLeader(t, tb, m, 1, t0.Add(time.Duration(i)*time.Second), batchSpec{id: int64(i), records: 1 + i%3, size: 150 + 7*i})
	}
	// The last batch is small so that every cut position can be tried.
	appendLeader(t, tb, m, 1, t0.Add(time.Minute), batchSpec{id: 1000, records: 2, size: 40})
	segs := tb.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	tb.crash()
	return cfg, m, segs[len(segs)-1].Path
}

// damager opens damaged copies of cfg's directory. Each call of its open
// first puts the copy back to the original's contents (cheaper than a new
// copy), lets damage change the file named like path, and opens the copy.
type damager struct {
	t    *testing.T
	cfg  Config
	orig map[string][]byte
	last *Tablet
}

func newDamager(t *testing.T, cfg Config) *damager {
	d := &damager{t: t, cfg: cfg, orig: map[string][]byte{}}
	d.cfg.Dir = copyDir(t, cfg.Dir)
	ents, err := os.ReadDir(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(cfg.Dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		d.orig[e.Name()] = data
	}
	t.Cleanup(func() {
		if d.last != nil {
			d.last.crash()
		}
	})
	return d
}

func (d *damager) open(path string, damage func(path string)) (*Tablet, *logCapture, error) {
	t := d.t
	t.Helper()
	if d.last != nil {
		d.last.crash()
		d.last = nil
	}
	ents, err := os.ReadDir(d.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, ok := d.orig[e.Name()]; !ok {
			if err := os.Remove(filepath.Join(d.cfg.Dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, data := range d.orig {
		p := filepath.Join(d.cfg.Dir, name)
		if cur, err := os.ReadFile(p); err == nil && bytes.Equal(cur, data) {
			continue
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := d.cfg
	var lc *logCapture
	c.Logger, lc = testLogger(t)
	damage(filepath.Join(c.Dir, filepath.Base(path)))
	tb, err := Open(c)
	if err == nil {
		d.last = tb
	}
	return tb, lc, err
}

// reopenAt opens a damaged copy of cfg's directory (see damager).
func reopenAt(t *testing.T, cfg Config, path string, damage func(path string)) (*Tablet, *logCapture, error) {
	t.Helper()
	return newDamager(t, cfg).open(path, damage)
}

// checkRecovered checks that the log is exactly m and still takes appends
// at its end.
func checkRecovered(t *testing.T, tb *Tablet, m *model) {
	t.Helper()
	readAll(t, tb, m, 700)
	if err := tb.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	end := tb.LogEndOffset()
	mm := &model{batches: append([]stored(nil), m.batches...)}
	info := appendLeader(t, tb, mm, 1, t0.Add(time.Hour), batchSpec{id: 2000, records: 3, size: 60})
	if info.FirstOffset != end {
		t.Fatalf("append after recovery at %d, want %d", info.FirstOffset, end)
	}
	readAll(t, tb, mm, 700)
}

func TestRecoveryTornTail(t *testing.T) {
	cfg, m, lastPath := crashedLog(t, 14)
	st, err := os.Stat(lastPath)
	if err != nil {
		t.Fatal(err)
	}
	last := m.batches[len(m.batches)-1]
	lastSize := int64(record.BatchHeaderSize + last.size)
	lastPos := st.Size() - lastSize
	survivors := &model{batches: m.batches[:len(m.batches)-1]}
	d := newDamager(t, cfg)
	for cut := lastPos; cut < st.Size(); cut++ {
		tb, lc, err := d.open(lastPath, func(p string) {
			if err := os.Truncate(p, cut); err != nil {
				t.Fatal(err)
			}
		})
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		ri := tb.RecoveryInfo()
		if tb.LogEndOffset() != last.base {
			t.Fatalf("cut at %d: log end %d, want %d", cut, tb.LogEndOffset(), last.base)
		}
		if cut == lastPos {
			if ri.Truncated {
				t.Fatalf("cut on a batch boundary reported a truncation: %+v", ri)
			}
		} else {
			if !ri.Truncated || ri.TruncatedPosition != lastPos || ri.TruncatedBytes != cut-lastPos || ri.TruncatedOffset != last.base || ri.TruncateReason == "" {
				t.Fatalf("cut at %d: RecoveryInfo %+v, want a cut of %d bytes at %d", cut, ri, cut-lastPos, lastPos)
			}
			if logs := lc.String(); !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "bytes_dropped=") {
				t.Fatalf("cut at %d not logged at Warn: %q", cut, logs)
			}
			if st, _ := os.Stat(filepath.Join(tb.Dir(), filepath.Base(lastPath))); st.Size() != lastPos {
				t.Fatalf("segment file is %d bytes after the cut, want %d", st.Size(), lastPos)
			}
		}
		checkRecovered(t, tb, survivors)
	}
}

func TestRecoveryCorruptLastBatch(t *testing.T) {
	cfg, m, lastPath := crashedLog(t, 14)
	st, err := os.Stat(lastPath)
	if err != nil {
		t.Fatal(err)
	}
	last := m.batches[len(m.batches)-1]
	lastSize := int64(record.BatchHeaderSize + last.size)
	lastPos := st.Size() - lastSize
	d := newDamager(t, cfg)
	for i := range lastSize {
		tb, _, err := d.open(lastPath, func(p string) { flipByte(t, p, lastPos+i) })
		if err != nil {
			t.Fatalf("flip at +%d: Open: %v", i, err)
		}
		ri := tb.RecoveryInfo()
		if i >= 13 && i < 25 {
			// CommitTimestamp and LeaderEpoch are outside the CRC (the
			// leader sets them in place): a flip there cannot be seen.
			if ri.Truncated || tb.LogEndOffset() != last.last+1 {
				t.Fatalf("flip at +%d (outside the CRC): %+v", i, ri)
			}
			continue
		}
		if !ri.Truncated || ri.TruncatedPosition != lastPos || tb.LogEndOffset() != last.base {
			t.Fatalf("flip at +%d: RecoveryInfo %+v, log end %d; want the last batch cut", i, ri, tb.LogEndOffset())
		}
		checkRecovered(t, tb, &model{batches: m.batches[:len(m.batches)-1]})
	}
}

func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
}

func appendToFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
}

func TestRecoveryGarbageAfterLastBatch(t *testing.T) {
	cfg, m, lastPath := crashedLog(t, 14)
	st, err := os.Stat(lastPath)
	if err != nil {
		t.Fatal(err)
	}
	last := m.batches[len(m.batches)-1]
	// A whole, valid batch that does not continue the offsets.
	repeat := batchSpec{id: 7, records: 1, size: 30}.bytes()
	record.Batch(repeat).SetBaseOffset(last.base)
	huge := batchSpec{id: 8, records: 1, size: 30}.bytes()
	record.Batch(huge).SetBaseOffset(last.last + 1)
	huge[8], huge[9], huge[10], huge[11] = 0xff, 0xff, 0xff, 0x0f
	tests := []struct {
		name    string
		garbage []byte
	}{
		{"one byte", []byte{7}},
		{"eleven bytes", bytes.Repeat([]byte{9}, 11)},
		{"zeros", make([]byte, 100)},
		{"random", payload(42, 4096)},
		{"a batch with a repeated offset", repeat},
		{"a header claiming a huge batch", huge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb, lc, err := reopenAt(t, cfg, lastPath, func(p string) { appendToFile(t, p, tc.garbage) })
			if err != nil {
				t.Fatal(err)
			}
			ri := tb.RecoveryInfo()
			if !ri.Truncated || ri.TruncatedPosition != st.Size() || ri.TruncatedBytes != int64(len(tc.garbage)) || ri.TruncatedOffset != last.last+1 {
				t.Fatalf("RecoveryInfo %+v, want %d bytes cut at %d", ri, len(tc.garbage), st.Size())
			}
			if !strings.Contains(lc.String(), "bytes_dropped="+strconv.Itoa(len(tc.garbage))) {
				t.Fatalf("cut not logged: %q", lc.String())
			}
			checkRecovered(t, tb, m)
		})
	}
}

func TestRecoveryIndexFiles(t *testing.T) {
	cfg, m, _ := crashedLog(t, 40)
	// A clean open and Close writes every index file; keep them to compare.
	tb := openT(t, cfg)
	segs := tb.Segments()
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	sealed := segs[1] // a sealed segment in the middle
	activeBase := segs[len(segs)-1].BaseOffset
	orig := map[string][]byte{}
	for _, s := range segs {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			name := fileName(s.BaseOffset, suffix)
			data, err := os.ReadFile(filepath.Join(cfg.Dir, name))
			if err != nil {
				t.Fatal(err)
			}
			orig[name] = data
		}
	}
	idx := fileName(sealed.BaseOffset, indexSuffix)
	tidx := fileName(sealed.BaseOffset, timeIndexSuffix)
	write := func(name string, data []byte) func(string) {
		return func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(names ...string) func(string) {
		return func(dir string) {
			for _, n := range names {
				if err := os.Remove(filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// An entry that points at a real batch start, but not the one it names.
	lying := append([]byte(nil), orig[idx]...)
	if len(lying) < 2*offsetEntrySize {
		t.Fatalf("segment %d has %d index entries, want two or more", sealed.BaseOffset, len(lying)/offsetEntrySize)
	}
	copy(lying[len(lying)-offsetEntrySize+4:], lying[len(lying)-2*offsetEntrySize+4:len(lying)-offsetEntrySize])
	tests := []struct {
		name        string
		damage      func(dir string)
		wantRebuilt []int64
		wantClean   bool
	}{
		{"offset index deleted", remove(idx), []int64{sealed.BaseOffset}, true},
		{"time index deleted", remove(tidx), []int64{sealed.BaseOffset}, true},
		{"offset index torn", write(idx, orig[idx][:5]), []int64{sealed.BaseOffset}, true},
		{"offset index garbage", write(idx, bytes.Repeat([]byte{0xff}, 16)), []int64{sealed.BaseOffset}, true},
		{"offset index entry lies", write(idx, lying), []int64{sealed.BaseOffset}, true},
		{"time index garbage", write(tidx, bytes.Repeat([]byte{0x01}, 24)), []int64{sealed.BaseOffset}, true},
		{"active segment's index deleted", remove(fileName(activeBase, indexSuffix)), nil, false},
		{"active segment's index garbage", write(fileName(activeBase, indexSuffix), bytes.Repeat([]byte{0x7f}, 8)), nil, false},
		{"every index deleted", func(dir string) { removeGlob(t, dir, "*.index"); removeGlob(t, dir, "*.timeindex") }, allSealed(segs), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Dir = copyDir(t, cfg.Dir)
			c.Logger, _ = testLogger(t)
			tc.damage(c.Dir)
			tb := openT(t, c)
			ri := tb.RecoveryInfo()
			if !ri.Clean || ri.Truncated {
				t.Fatalf("RecoveryInfo %+v, want a clean open without a cut", ri)
			}
			if !equalInts(ri.RebuiltIndexes, tc.wantRebuilt) {
				t.Fatalf("rebuilt indexes of %v, want %v", ri.RebuiltIndexes, tc.wantRebuilt)
			}
			if wantScan := !tc.wantClean; wantScan != (ri.ScannedBatches > 0) {
				t.Fatalf("scanned %d batches of the last segment, want a scan: %v", ri.ScannedBatches, wantScan)
			}
			// Rebuilt files equal what the running log wrote.
			for _, s := range segs[:len(segs)-1] {
				for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
					name := fileName(s.BaseOffset, suffix)
					data, err := os.ReadFile(filepath.Join(c.Dir, name))
					if err != nil || !bytes.Equal(data, orig[name]) {
						t.Fatalf("%s after recovery differs from the original (%v)", name, err)
					}
				}
			}
			checkTimestamps(t, tb, m)
			checkRecovered(t, tb, m)
		})
	}
}

func allSealed(segs []SegmentInfo) []int64 {
	var out []int64
	for _, s := range segs[:len(segs)-1] {
		out = append(out, s.BaseOffset)
	}
	return out
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkTimestamps checks OffsetForTimestamp against the model for every
// millisecond around every batch's timestamp.
func checkTimestamps(t *testing.T, tb *Tablet, m *model) {
	t.Helper()
	for _, b := range m.batches {
		for _, ms := range []int64{b.ts - 1, b.ts, b.ts + 1} {
			want := int64(-1)
			for _, x := range m.batches {
				if x.ts >= ms {
					want = x.base
					break
				}
			}
			got, found, err := tb.OffsetForTimestamp(ms)
			if err != nil || found != (want >= 0) || (found && got != want) {
				t.Fatalf("OffsetForTimestamp(%d) = %d, %v, %v; want %d", ms, got, found, err, want)
			}
		}
	}
}

func TestRecoveryCorruptSealedSegment(t *testing.T) {
	cfg, m, _ := crashedLog(t, 40)
	tb := openT(t, cfg)
	segs := tb.Segments()
	tb.crash()
	s := segs[1]
	segPath := filepath.Join(cfg.Dir, filepath.Base(s.Path))
	// The position of the second batch of segment 1.
	i := m.find(s.BaseOffset)
	second := int64(record.BatchHeaderSize + m.batches[i].size)
	secondEnd := second + int64(record.BatchHeaderSize+m.batches[i+1].size)

	next := segs[2].BaseOffset
	j := m.find(next) - 1 // the last batch of segment 1
	lastPos := s.Size - int64(record.BatchHeaderSize+m.batches[j].size)
	good := copyOf(t, cfg) // another replica's intact copy
	wantLog := logBytes(t, good)
	origSeg, err := os.ReadFile(segPath)
	if err != nil {
		t.Fatal(err)
	}
	removeIndexes := func(p string) {
		os.Remove(strings.TrimSuffix(p, logSuffix) + indexSuffix)
		os.Remove(strings.TrimSuffix(p, logSuffix) + timeIndexSuffix)
	}
	cut := func(size int64) func(string) {
		return func(p string) {
			if err := os.Truncate(p, size); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name   string
		damage func(p string)
		want   []DamagedRange
	}{
		{"bad frame where indexes are rebuilt", func(p string) {
			flipByte(t, p, second+12) // magic: the rest of the segment
			removeIndexes(p)
		}, []DamagedRange{{m.batches[i+1].base, next}}},
		{"a bad batch and a bad frame", func(p string) {
			flipByte(t, p, secondEnd-1) // the second batch's records: that batch only
			flipByte(t, p, secondEnd+12)
			removeIndexes(p)
		}, []DamagedRange{{m.batches[i+1].base, m.batches[i+2].base}, {m.batches[i+2].base, next}}},
		{"bad frame, epochs and writer snapshots lost too", func(p string) {
			flipByte(t, p, second+12)
			removeIndexes(p)
			os.Remove(filepath.Join(filepath.Dir(p), epochFile))
			removeGlob(t, filepath.Dir(p), "*"+snapshotSuffix)
		}, []DamagedRange{{m.batches[i+1].base, next}}},
		{"sealed segment cut short", cut(s.Size - 1), []DamagedRange{{m.batches[j].base, next}}},
		{"sealed segment cut at a batch boundary", cut(lastPos), []DamagedRange{{m.batches[j].base, next}}},
		{"sealed segment empty", cut(0), []DamagedRange{{s.BaseOffset, next}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb, _, err := reopenAt(t, cfg, segPath, tc.damage)
			if err != nil {
				t.Fatalf("Open: %v, want it to open and refuse only the damaged range", err)
			}
			ri := tb.RecoveryInfo()
			if !slices.Equal(ri.Damaged, tc.want) || !slices.Equal(tb.Damaged(), tc.want) || ri.Truncated {
				t.Fatalf("RecoveryInfo.Damaged %v, Damaged() %v, truncated %v; want %v, no cut", ri.Damaged, tb.Damaged(), ri.Truncated, tc.want)
			}
			if tb.LogEndOffset() != good.LogEndOffset() || tb.FirstCorruptOffset() != tc.want[0].From {
				t.Fatalf("log end %d, first corrupt offset %d; want %d, %d", tb.LogEndOffset(), tb.FirstCorruptOffset(), good.LogEndOffset(), tc.want[0].From)
			}
			for _, d := range tc.want {
				var cre *CorruptRecordError
				if _, err := tb.Read(d.From, 100, math.MaxInt64); !errors.As(err, &cre) || cre.Offset != d.From || cre.NextOffset != d.To {
					t.Fatalf("Read(%d) = %v, want a *CorruptRecordError for [%d, %d)", d.From, err, d.From, d.To)
				}
			}
			// The rest of the log serves: before the damage, and after it.
			if info, err := tb.Read(0, 1<<20, math.MaxInt64); err != nil || len(info.Batches) == 0 {
				t.Fatalf("Read(0) = %v", err)
			}
			if info, err := tb.Read(next, 1<<20, math.MaxInt64); err != nil || !bytes.Equal(info.Batches, readAt(t, good, next)) {
				t.Fatalf("Read(%d) after the damage = %v, or other bytes than the copy's", next, err)
			}
			for _, d := range tc.want {
				if err := tb.RepairDamaged(d.From, func(o int64) ([]byte, error) {
					info, err := good.Read(o, 700, math.MaxInt64)
					return info.Batches, err
				}); err != nil {
					t.Fatalf("RepairDamaged(%d): %v", d.From, err)
				}
			}
			if got := logBytes(t, tb); !bytes.Equal(got, wantLog) {
				t.Error("the repaired log reads differently from the copy")
			}
			if now, err := os.ReadFile(tb.Segments()[1].Path); err != nil || !bytes.Equal(now, origSeg) {
				t.Errorf("the repaired segment differs from its original bytes (%v)", err)
			}
			if err := tb.Verify(); err != nil {
				t.Fatalf("Verify after the repair: %v", err)
			}
			checkTimestamps(t, tb, m)
		})
	}
	t.Run("bad records found by Verify", func(t *testing.T) {
		tb, _, err := reopenAt(t, cfg, segPath, func(p string) { flipByte(t, p, secondEnd-1) })
		if err != nil {
			t.Fatalf("Open: %v (sealed segments are not CRC-checked on open)", err)
		}
		err = tb.Verify()
		var ce *CorruptSegmentError
		if !errors.As(err, &ce) || ce.Position != second || filepath.Base(ce.Path) != filepath.Base(segPath) {
			t.Fatalf("Verify = %v, want a *CorruptSegmentError at %d", err, second)
		}
		// Reads of the other batches still work.
		if _, err := tb.Read(m.batches[0].base, 100, math.MaxInt64); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRecoveryEmptyAndFresh(t *testing.T) {
	cfg := testConfig(t)
	tb := openT(t, cfg)
	if tb.LogStartOffset() != 0 || tb.LogEndOffset() != 0 {
		t.Fatal("fresh log not at 0")
	}
	if info, err := tb.Read(0, 100, math.MaxInt64); err != nil || info.Batches != nil {
		t.Fatalf("Read of an empty log = %+v, %v", info, err)
	}
	tb.crash()
	tb = openT(t, cfg)
	m := &model{}
	appendLeader(t, tb, m, 0, t0, batchSpec{id: 1, records: 1, size: 10})
	// A crash that leaves only the start of the first batch.
	tb.crash()
	seg := filepath.Join(cfg.Dir, fileName(0, logSuffix))
	if err := os.Truncate(seg, 20); err != nil {
		t.Fatal(err)
	}
	tb = openT(t, cfg)
	if ri := tb.RecoveryInfo(); !ri.Truncated || tb.LogEndOffset() != 0 {
		t.Fatalf("RecoveryInfo %+v, log end %d", ri, tb.LogEndOffset())
	}
}

// readAt reads the batches of tb from offset o.
func readAt(t *testing.T, tb *Tablet, o int64) []byte {
	t.Helper()
	info, err := tb.Read(o, 1<<20, math.MaxInt64)
	if err != nil {
		t.Fatalf("Read(%d): %v", o, err)
	}
	return info.Batches
}
