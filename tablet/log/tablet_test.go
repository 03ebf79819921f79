package log

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"strom/record"
)

var t0 = time.UnixMilli(1_700_000_000_000)

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Dir = "x"
	if err := good.Validate(); err != nil {
		t.Fatalf("default config with Dir: %v", err)
	}
	bad := Config{SegmentBytes: 0, SegmentAge: -1, IndexIntervalBytes: -1, IndexFileBytes: 4, WriterExpiration: -1}
	err := bad.Validate()
	for _, field := range []string{"Dir", "SegmentBytes", "SegmentAge", "IndexIntervalBytes", "IndexFileBytes", "WriterExpiration"} {
		if err == nil || !strings.Contains(err.Error(), "Config."+field) {
			t.Errorf("Validate() = %v, want a problem with %s", err, field)
		}
	}
	if _, err := Open(bad); err == nil {
		t.Fatal("Open accepted an invalid config")
	}
}

// fill appends n random batches (sizes, record counts, calls of one to
// three batches) and returns the model.
func fill(t testing.TB, tb *Tablet, m *model, r *rand.Rand, n int, epoch int32) {
	t.Helper()
	id := int64(len(m.batches))
	for n > 0 {
		k := min(n, 1+r.IntN(3))
		specs := make([]batchSpec, k)
		for i := range specs {
			specs[i] = batchSpec{id: id, records: r.IntN(6), size: 8 + r.IntN(700)}
			id++
		}
		appendLeader(t, tb, m, epoch, t0.Add(time.Duration(id)*time.Millisecond), specs...)
		n -= k
	}
}

func TestAppendReadRoundTrip(t *testing.T) {
	cfg := testConfig(t)
	tb := openT(t, cfg)
	m := &model{}
	r := rand.New(rand.NewPCG(1, 2))
	fill(t, tb, m, r, 400, 3)
	if n := len(tb.Segments()); n < 20 {
		t.Fatalf("%d segments, want many rolls", n)
	}
	check := func(t *testing.T, tb *Tablet) {
		readAll(t, tb, m, 1<<20)
		readAll(t, tb, m, 1) // one batch per read
		// Every offset, including the middle of batches.
		end := tb.LogEndOffset()
		for o := int64(0); o < end; o++ {
			maxBytes := r.IntN(3000)
			info, err := tb.Read(o, maxBytes, math.MaxInt64)
			if err != nil {
				t.Fatalf("Read(%d): %v", o, err)
			}
			bs := decode(t, info.Batches)
			if len(bs) == 0 {
				t.Fatalf("Read(%d) returned nothing", o)
			}
			if len(bs) > 1 && len(info.Batches) > maxBytes {
				t.Fatalf("Read(%d, %d) returned %d bytes in %d batches", o, maxBytes, len(info.Batches), len(bs))
			}
			i := m.find(o)
			for _, b := range bs {
				checkBatch(t, b, m.batches[i])
				i++
			}
			if info.LogStartOffset != 0 || info.LogEndOffset != end {
				t.Fatalf("ReadInfo bounds [%d, %d), want [0, %d)", info.LogStartOffset, info.LogEndOffset, end)
			}
		}
	}
	t.Run("open", func(t *testing.T) { check(t, tb) })
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	t.Run("reopened clean", func(t *testing.T) {
		tb := openT(t, cfg)
		if ri := tb.RecoveryInfo(); !ri.Clean || ri.Truncated || len(ri.RebuiltIndexes) > 0 {
			t.Fatalf("RecoveryInfo %+v, want clean", ri)
		}
		check(t, tb)
		// Appends continue densely after the reopen.
		fill(t, tb, m, r, 30, 3)
		readAll(t, tb, m, 1<<20)
		tb.crash()
	})
	t.Run("reopened after crash", func(t *testing.T) {
		tb := openT(t, cfg)
		if ri := tb.RecoveryInfo(); ri.Clean || ri.Truncated || ri.ScannedBatches == 0 {
			t.Fatalf("RecoveryInfo %+v, want a scan without a cut", ri)
		}
		check(t, tb)
	})
}

func TestReadLimits(t *testing.T) {
	cfg := testConfig(t)
	tb := openT(t, cfg)
	m := &model{}
	for i := range 40 {
		appendLeader(t, tb, m, 0, t0, batchSpec{id: int64(i), records: 2, size: 300})
	}
	// 40 batches of 2 offsets: [0,1], [2,3], ... [78,79]; ~356 bytes each.
	tests := []struct {
		name      string
		offset    int64
		maxBytes  int
		maxOffset int64
		want      []int64 // base offsets of the batches returned
	}{
		{"one batch when maxBytes is smaller", 10, 1, math.MaxInt64, []int64{10}},
		{"middle of a batch", 11, 1, math.MaxInt64, []int64{10}},
		{"maxBytes fits two", 10, 2 * 356, math.MaxInt64, []int64{10, 12}},
		{"high watermark cuts", 10, 1 << 20, 14, []int64{10, 12}},
		{"high watermark inside a batch excludes it", 10, 1 << 20, 13, []int64{10}},
		{"offset at the high watermark", 14, 1 << 20, 14, nil},
		{"offset above the high watermark", 20, 1 << 20, 14, nil},
		{"high watermark zero", 0, 1 << 20, 0, nil},
		{"log end", 80, 1 << 20, math.MaxInt64, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := tb.Read(tc.offset, tc.maxBytes, tc.maxOffset)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, b := range decode(t, info.Batches) {
				got = append(got, b.BaseOffset())
			}
			if len(got) != len(tc.want) || (len(got) > 0 && (got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1])) {
				t.Fatalf("batches at %v, want %v", got, tc.want)
			}
			if tc.want == nil && info.Batches != nil {
				t.Fatalf("Batches = %d bytes, want nil", len(info.Batches))
			}
		})
	}
	t.Run("out of range", func(t *testing.T) {
		for _, o := range []int64{-1, 81, 1000} {
			_, err := tb.Read(o, 100, math.MaxInt64)
			var oe *OffsetOutOfRangeError
			if !errors.As(err, &oe) || !errors.Is(err, ErrOffsetOutOfRange) || oe.Offset != o || oe.LogStart != 0 || oe.LogEnd != 80 {
				t.Fatalf("Read(%d) error %v, want *OffsetOutOfRangeError{%d, 0, 80}", o, err, o)
			}
		}
	})
	t.Run("below start after retention", func(t *testing.T) {
		tb.SetHighWatermark(80)
		if n, err := tb.DeleteSegmentsBefore(40); err != nil || n == 0 {
			t.Fatalf("DeleteSegmentsBefore = %d, %v", n, err)
		}
		start := tb.LogStartOffset()
		if start == 0 || start > 40 {
			t.Fatalf("log start %d after deleting below 40", start)
		}
		if _, err := tb.Read(start-1, 100, math.MaxInt64); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("Read below start: %v", err)
		}
		m.truncateFront(start)
		readAll(t, tb, m, 1000)
	})
}

func (m *model) truncateFront(start int64) {
	for i, b := range m.batches {
		if b.base >= start {
			m.batches = m.batches[i:]
			return
		}
	}
	m.batches = nil
}

func TestAppendValidation(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 2000
	tb := openT(t, cfg)
	good := batchSpec{id: 1, records: 1, size: 50}.bytes()
	flipped := batchSpec{id: 2, records: 1, size: 50}.bytes()
	flipped[len(flipped)-1] ^= 1
	v1 := batchSpec{id: 3, records: 1, size: 50}.bytes()
	v1[12] = byte(record.MagicV1)
	tests := []struct {
		name  string
		input []byte
		want  error
	}{
		{"empty", nil, record.ErrCorruptBatch},
		{"bad CRC", flipped, record.ErrCorruptBatch},
		{"good then bad CRC", append(append([]byte(nil), good...), flipped...), record.ErrCorruptBatch},
		{"trailing bytes", append(append([]byte(nil), good...), 1, 2, 3), record.ErrCorruptBatch},
		{"cut batch", good[:len(good)-1], record.ErrCorruptBatch},
		{"old magic", v1, record.ErrCorruptBatch},
		{"larger than a segment", batchSpec{id: 4, records: 1, size: 3000}.bytes(), ErrRecordTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]byte(nil), tc.input...)
			_, err := tb.AppendAsLeader(in, 0, t0)
			mustErrIs(t, err, tc.want)
			mustErrIs(t, tb.AppendAsFollower(in), tc.want)
			if tb.LogEndOffset() != 0 {
				t.Fatalf("log end %d after a rejected append", tb.LogEndOffset())
			}
			if string(in) != string(tc.input) {
				t.Fatal("a rejected append modified the caller's bytes")
			}
		})
	}
}

func TestCommitTimestampNeverDecreases(t *testing.T) {
	tb := openT(t, testConfig(t))
	m := &model{}
	a := appendLeader(t, tb, m, 0, t0, batchSpec{id: 1, records: 1, size: 10})
	b := appendLeader(t, tb, m, 0, t0.Add(-time.Hour), batchSpec{id: 2, records: 1, size: 10})
	if a.CommitTimestamp != t0.UnixMilli() || b.CommitTimestamp != a.CommitTimestamp {
		t.Fatalf("timestamps %d then %d with a clock going back, want %d twice", a.CommitTimestamp, b.CommitTimestamp, t0.UnixMilli())
	}
	readAll(t, tb, m, 1000)
}

func TestAppendAsFollower(t *testing.T) {
	leader := openT(t, testConfig(t))
	m := &model{}
	r := rand.New(rand.NewPCG(3, 4))
	fill(t, leader, m, r, 30, 2)
	if err := leader.AssignEpoch(5, leader.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	fill(t, leader, m, r, 30, 5)

	follower := openT(t, testConfig(t))
	// Replicate in fetches of ~1000 bytes.
	for o := int64(0); o < leader.LogEndOffset(); {
		info, err := leader.Read(o, 1000, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		if err := follower.AppendAsFollower(info.Batches); err != nil {
			t.Fatalf("AppendAsFollower at %d: %v", o, err)
		}
		o = follower.LogEndOffset()
	}
	readAll(t, follower, m, 1<<20)
	if got, want := follower.Epochs(), leader.Epochs(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("follower epochs %v, leader %v", got, want)
	}

	t.Run("offsets must continue the log", func(t *testing.T) {
		info, err := leader.Read(0, 1000, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		mustErrIs(t, follower.AppendAsFollower(info.Batches), ErrOffsetMismatch)
		// A gap between two batches of one call.
		b1 := batchSpec{id: 1, records: 2, size: 10}.bytes()
		b2 := batchSpec{id: 2, records: 2, size: 10}.bytes()
		end := follower.LogEndOffset()
		record.Batch(b1).SetBaseOffset(end)
		record.Batch(b2).SetBaseOffset(end + 3)
		mustErrIs(t, follower.AppendAsFollower(append(b1, b2...)), ErrOffsetMismatch)
		if follower.LogEndOffset() != end {
			t.Fatal("a rejected follower append changed the log")
		}
	})
}

func TestHighWatermark(t *testing.T) {
	cfg := testConfig(t)
	tb := openT(t, cfg)
	m := &model{}
	fill(t, tb, m, rand.New(rand.NewPCG(5, 6)), 20, 0)
	end := tb.LogEndOffset()
	if got := tb.SetHighWatermark(end + 100); got != end {
		t.Fatalf("SetHighWatermark above the end = %d, want %d", got, end)
	}
	if got := tb.SetHighWatermark(-5); got != 0 {
		t.Fatalf("SetHighWatermark(-5) = %d, want 0", got)
	}
	tb.SetHighWatermark(end - 3)
	if err := tb.CheckpointHighWatermark(); err != nil {
		t.Fatal(err)
	}
	tb.crash()
	tb = openT(t, cfg)
	if hw := tb.HighWatermark(); hw != end-3 {
		t.Fatalf("high watermark after reopen %d, want %d", hw, end-3)
	}
	// A checkpoint above the recovered log end is lowered to it.
	tb.SetHighWatermark(end)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	tb = openT(t, cfg)
	if err := tb.TruncateTo(end - 5); err != nil {
		t.Fatal(err)
	}
	if hw := tb.HighWatermark(); hw > tb.LogEndOffset() {
		t.Fatalf("high watermark %d above the log end %d after truncation", hw, tb.LogEndOffset())
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Read(0, 10, math.MaxInt64); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if _, err := tb.AppendAsLeader(batchSpec{id: 1, records: 1, size: 1}.bytes(), 0, t0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v", err)
	}
	if err := tb.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestSyncedLog runs the main operations with every fsync on (the other
// tests use NoSync for speed).
func TestSyncedLog(t *testing.T) {
	cfg := testConfig(t)
	cfg.NoSync = false
	cfg.SegmentBytes = 2000
	tb := openT(t, cfg)
	m := &model{}
	fill(t, tb, m, rand.New(rand.NewPCG(20, 21)), 20, 1)
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	segs := tb.Segments()
	for i, s := range segs {
		if s.Sealed != (i < len(segs)-1) || s.NextOffset <= s.BaseOffset && s.Sealed {
			t.Fatalf("segment %d: %+v", i, s)
		}
	}
	tb.SetHighWatermark(tb.LogEndOffset())
	if _, err := tb.DeleteSegmentsBefore(segs[1].BaseOffset); err != nil {
		t.Fatal(err)
	}
	m.truncateFront(segs[1].BaseOffset)
	if err := tb.TruncateTo(segs[len(segs)-2].BaseOffset + 1); err != nil {
		t.Fatal(err)
	}
	m.truncate(segs[len(segs)-2].BaseOffset + 1)
	readAll(t, tb, m, 1000)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	tb = openT(t, cfg)
	if !tb.RecoveryInfo().Clean {
		t.Fatal("not clean after Close")
	}
	readAll(t, tb, m, 1000)
	if err := tb.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
}

func TestRollTriggers(t *testing.T) {
	tests := []struct {
		name      string
		configure func(*Config)
		step      time.Duration // commit time between appends
		wantSegs  int           // after 10 appends of ~156-byte batches
	}{
		{"none", func(c *Config) {}, time.Second, 1},
		{"size", func(c *Config) { c.SegmentBytes = 400 }, time.Second, 5}, // two batches per segment
		{"age", func(c *Config) { c.SegmentAge = 3 * time.Second }, time.Second, 4},
		{"index full", func(c *Config) { c.IndexIntervalBytes = 0; c.IndexFileBytes = 3 * timeEntrySize }, time.Second, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.SegmentBytes = 1 << 20
			tc.configure(&cfg)
			tb := openT(t, cfg)
			m := &model{}
			for i := range 10 {
				appendLeader(t, tb, m, 0, t0.Add(time.Duration(i)*tc.step), batchSpec{id: int64(i), records: 1, size: 100})
			}
			if got := len(tb.Segments()); got != tc.wantSegs {
				t.Fatalf("%d segments, want %d", got, tc.wantSegs)
			}
			readAll(t, tb, m, 1000)
			tb.crash()
			readAll(t, openT(t, cfg), m, 1000)
		})
	}
}

// ReadInto reads into the caller's buffer when it is large enough (the
// bytes Read returns, in buf's memory, the buffer reused read after read)
// and into a fresh one when it is not.
func TestReadInto(t *testing.T) {
	tb := openT(t, testConfig(t))
	m := &model{}
	fill(t, tb, m, rand.New(rand.NewPCG(3, 4)), 200, 3)
	buf := make([]byte, 0, 8<<10)
	for i := range buf[:cap(buf)] {
		buf[:cap(buf)][i] = 0xee // what a pooled buffer held before
	}
	for o := int64(0); o < tb.LogEndOffset(); {
		want, err := tb.Read(o, 4<<10, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tb.ReadInto(buf, o, 4<<10, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Batches, want.Batches) {
			t.Fatalf("ReadInto(%d) returned other bytes than Read", o)
		}
		if len(got.Batches) > 0 && &got.Batches[0] != &buf[:1][0] {
			t.Fatalf("ReadInto(%d) did not read into the buffer given", o)
		}
		bs := decode(t, got.Batches)
		o = bs[len(bs)-1].NextOffset()
	}
	small := make([]byte, 0, 10)
	got, err := tb.ReadInto(small, 0, 4<<10, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tb.Read(0, 4<<10, math.MaxInt64)
	if !bytes.Equal(got.Batches, want.Batches) || cap(got.Batches) <= cap(small) {
		t.Fatalf("ReadInto into a short buffer: %d bytes (want %d), cap %d", len(got.Batches), len(want.Batches), cap(got.Batches))
	}
}
