package log

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestTruncateTo(t *testing.T) {
	// Build one log, then truncate copies of it at different points.
	base := testConfig(t)
	base.SegmentBytes = 1500
	tb := openT(t, base)
	m0 := &model{}
	for i := range 40 {
		// Writer 9 writes every batch: sequence i at offsets [2i, 2i+1].
		appendLeader(t, tb, m0, 2, t0.Add(time.Duration(i)*time.Second), batchSpec{id: int64(i), records: 2, size: 150, writer: 9, seq: int32(i)})
	}
	segs := tb.Segments()
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	sealedMid := segs[1].BaseOffset + 2 // a batch start inside a sealed segment
	tests := []struct {
		name    string
		offset  int64
		wantEnd int64
	}{
		{"middle of the active segment", segs[len(segs)-1].BaseOffset + 2, segs[len(segs)-1].BaseOffset + 2},
		{"inside a batch", 71, 70},
		{"segment boundary", segs[2].BaseOffset, segs[2].BaseOffset},
		{"inside a sealed segment", sealedMid, sealedMid},
		{"log start", 0, 0},
		{"log end", 80, 80},
		{"beyond the log end", 1000, 80},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.Dir = copyDir(t, base.Dir)
			tb := openT(t, cfg)
			tb.SetHighWatermark(80)
			if err := tb.TruncateTo(tc.offset); err != nil {
				t.Fatal(err)
			}
			m := &model{batches: append([]stored(nil), m0.batches...)}
			m.truncate(tc.offset)
			if end := tb.LogEndOffset(); end != tc.wantEnd || m.end(0) != end {
				t.Fatalf("log end %d, want %d", end, tc.wantEnd)
			}
			if hw := tb.HighWatermark(); hw != tc.wantEnd {
				t.Fatalf("high watermark %d, want it lowered to %d", hw, tc.wantEnd)
			}
			for _, s := range tb.Segments() {
				if s.BaseOffset > tc.wantEnd || (s.BaseOffset == tc.wantEnd && s.BaseOffset != 0) {
					t.Fatalf("segment %d survived a truncation to %d", s.BaseOffset, tc.wantEnd)
				}
			}
			readAll(t, tb, m, 1000)
			// The writer state was rebuilt: the next sequence after the
			// cut is accepted, a truncated one is not a duplicate.
			seq := int32(tc.wantEnd / 2)
			info := appendLeader(t, tb, m, 2, t0.Add(time.Hour), batchSpec{id: 100, records: 2, size: 150, writer: 9, seq: seq})
			if info.FirstOffset != tc.wantEnd {
				t.Fatalf("append after truncation at %d, want %d", info.FirstOffset, tc.wantEnd)
			}
			// More appends roll segments again over the truncated range.
			for i := range 20 {
				appendLeader(t, tb, m, 2, t0.Add(time.Hour), batchSpec{id: int64(200 + i), records: 2, size: 150, writer: 9, seq: seq + 1 + int32(i)})
			}
			readAll(t, tb, m, 1000)
			checkTimestamps(t, tb, m)
			if err := tb.Verify(); err != nil {
				t.Fatal(err)
			}
			// And all of it survives a crash and a clean reopen.
			tb.crash()
			tb = openT(t, cfg)
			readAll(t, tb, m, 1000)
			if err := tb.Close(); err != nil {
				t.Fatal(err)
			}
			tb = openT(t, cfg)
			readAll(t, tb, m, 1000)
		})
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	cfg := testConfig(t)
	tb := openT(t, cfg)
	m := &model{}
	fill(t, tb, m, rand.New(rand.NewPCG(8, 9)), 50, 1)
	if err := tb.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if tb.LogStartOffset() != 1000 || tb.LogEndOffset() != 1000 || tb.HighWatermark() != 1000 || len(tb.Epochs()) != 0 || len(tb.Segments()) != 1 {
		t.Fatalf("after TruncateFullyAndStartAt(1000): [%d, %d) hw %d epochs %v segments %d", tb.LogStartOffset(), tb.LogEndOffset(), tb.HighWatermark(), tb.Epochs(), len(tb.Segments()))
	}
	if _, err := tb.Read(999, 100, math.MaxInt64); err == nil {
		t.Fatal("read below the new start succeeded")
	}
	m = &model{}
	info := appendLeader(t, tb, m, 2, t0, batchSpec{id: 1, records: 3, size: 50})
	if info.FirstOffset != 1000 {
		t.Fatalf("first append at %d, want 1000", info.FirstOffset)
	}
	tb.crash()
	tb = openT(t, cfg)
	if tb.LogStartOffset() != 1000 {
		t.Fatalf("log start %d after reopen, want 1000", tb.LogStartOffset())
	}
	readAll(t, tb, m, 100)

	// TruncateTo below the log start does the same.
	if err := tb.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	if tb.LogStartOffset() != 10 || tb.LogEndOffset() != 10 {
		t.Fatalf("TruncateTo below the start: [%d, %d)", tb.LogStartOffset(), tb.LogEndOffset())
	}
}
