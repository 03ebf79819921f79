package log

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// copyOf opens a second tablet on a copy of tb's directory as it is now:
// another replica's log of the same batches.
func copyOf(t *testing.T, cfg Config) *Tablet {
	t.Helper()
	c := cfg
	c.Dir = t.TempDir()
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(cfg.Dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) { // a temporary file, renamed meanwhile
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.Dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return openT(t, c)
}

// logBytes reads every batch of tb from offset 0.
func logBytes(t *testing.T, tb *Tablet) []byte {
	t.Helper()
	var out []byte
	for o := int64(0); o < tb.LogEndOffset(); {
		info, err := tb.Read(o, 1<<20, math.MaxInt64)
		if err != nil {
			t.Fatalf("Read(%d): %v", o, err)
		}
		out = append(out, info.Batches...)
		bs := decode(t, info.Batches)
		o = bs[len(bs)-1].NextOffset()
	}
	return out
}

// A damaged batch, and a segment whose damage hides where its batches end,
// are rewritten in place from another replica's copy: reads of them serve
// the original bytes again, the segment files are byte for byte what they
// were, and the next check finds nothing. A copy that is not the range's
// batches is refused and the range stays refused. Before, a damaged range
// of a leader stayed refused until a failover.
func TestRepairDamagedFromACopy(t *testing.T) {
	cfg := testConfig(t)
	tb := openT(t, cfg)
	m := &model{}
	for i := range 40 {
		appendLeader(t, tb, m, 0, t0, batchSpec{id: int64(i), records: 3, size: 300})
	}
	want := logBytes(t, tb)
	segs := tb.Segments()
	orig := map[string][]byte{}
	for _, s := range segs {
		data, err := os.ReadFile(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		orig[s.Path] = data
	}
	good := copyOf(t, cfg)
	batches, pos := batchesOf(t, segs[0].Path)
	flipByte(t, segs[0].Path, pos[1]+int64(len(batches[1]))-10) // a batch's records
	flipByte(t, segs[2].Path, 10)                               // a length field: the rest of the segment
	damagedCopy := copyOf(t, cfg)
	verifyRound(t, tb, 1<<20)
	ranges := tb.Damaged()
	if len(ranges) != 2 {
		t.Fatalf("Damaged() = %v, want 2 ranges", ranges)
	}

	readFrom := func(src *Tablet) func(int64) ([]byte, error) {
		return func(o int64) ([]byte, error) {
			info, err := src.Read(o, 700, math.MaxInt64) // a few batches a call
			return info.Batches, err
		}
	}
	bad := []struct {
		name string
		read func(int64) ([]byte, error)
	}{
		{"a copy with the same damage", readFrom(damagedCopy)},
		{"another range's batches", func(int64) ([]byte, error) { return readFrom(good)(0) }},
		{"an empty answer", func(int64) ([]byte, error) { return nil, nil }},
		{"a failed read", func(int64) ([]byte, error) { return nil, errors.New("node 2 is down") }},
	}
	for _, r := range ranges {
		for _, b := range bad {
			if err := tb.RepairDamaged(r.From, b.read); !errors.Is(err, ErrRepair) {
				t.Errorf("repair of [%d, %d) from %s: %v, want ErrRepair", r.From, r.To, b.name, err)
			}
			if _, err := tb.Read(r.From, 1<<20, math.MaxInt64); !errors.Is(err, ErrCorruptRecord) {
				t.Errorf("after a refused repair from %s, Read(%d) = %v, want ErrCorruptRecord", b.name, r.From, err)
			}
		}
	}
	if err := tb.RepairDamaged(ranges[0].From+1, readFrom(good)); !errors.Is(err, ErrRepair) {
		t.Errorf("repair at an offset inside a range: %v, want ErrRepair", err)
	}

	for _, r := range ranges {
		if err := tb.RepairDamaged(r.From, readFrom(good)); err != nil {
			t.Fatalf("repair of [%d, %d): %v", r.From, r.To, err)
		}
	}
	if d := tb.Damaged(); len(d) != 0 || tb.RepairedRanges() != 2 {
		t.Fatalf("after the repairs: Damaged() = %v, RepairedRanges() = %d; want none and 2", d, tb.RepairedRanges())
	}
	if got := logBytes(t, tb); !bytes.Equal(got, want) {
		t.Error("the repaired log reads differently from the original")
	}
	for path, data := range orig {
		now, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(now, data) {
			t.Errorf("%s differs from its original bytes", path)
		}
	}
	verifyRound(t, tb, 1<<20)
	if d, n := tb.Damaged(), tb.CorruptBatches(); len(d) != 0 || n != 2 {
		t.Errorf("the next check: Damaged() = %v, CorruptBatches() = %d; want none and still 2", d, n)
	}
}
