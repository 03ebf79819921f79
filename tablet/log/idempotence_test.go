package log

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestIdempotentWriter(t *testing.T) {
	const w = 7
	tests := []struct {
		name    string
		seqs    []int32 // appended first, each in its own call
		next    int32   // then this one
		wantErr error   // nil: accepted; ErrOutOfOrderSequence
		wantDup int     // ≥ 0: a duplicate of seqs[wantDup]
	}{
		{"new writer at 0", nil, 0, nil, -1},
		{"new writer not at 0", nil, 1, ErrOutOfOrderSequence, -1},
		{"next in sequence", []int32{0, 1, 2}, 3, nil, -1},
		{"gap", []int32{0, 1, 2}, 4, ErrOutOfOrderSequence, -1},
		{"retry of the last", []int32{0, 1, 2}, 2, nil, 2},
		{"retry of an earlier one", []int32{0, 1, 2, 3, 4}, 0, nil, 0},
		{"older than the five remembered", []int32{0, 1, 2, 3, 4, 5}, 0, ErrOutOfOrderSequence, -1},
		{"wrap around", []int32{math.MaxInt32 - 1, math.MaxInt32}, 0, nil, -1},
		{"negative sequence", []int32{0}, -1, ErrOutOfOrderSequence, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := openT(t, testConfig(t))
			m := &model{}
			var infos []AppendInfo
			for i, seq := range tc.seqs {
				if i == 0 && seq != 0 {
					// Start a writer at an arbitrary sequence through the
					// follower path, which takes any first sequence.
					b := batchSpec{id: int64(i), records: 2, size: 20, writer: w, seq: seq}.bytes()
					if err := tb.AppendAsFollower(b); err != nil {
						t.Fatal(err)
					}
					m.batches = append(m.batches, stored{base: 0, last: 1, id: int64(i), size: 20, ts: 0, epoch: -1})
					infos = append(infos, AppendInfo{FirstOffset: 0, LastOffset: 1, CommitTimestamp: 0})
					continue
				}
				infos = append(infos, appendLeader(t, tb, m, 0, t0.Add(time.Duration(i)*time.Second), batchSpec{id: int64(i), records: 2, size: 20, writer: w, seq: seq}))
			}
			end := tb.LogEndOffset()
			info, err := tb.AppendAsLeader(batchSpec{id: 99, records: 3, size: 20, writer: w, seq: tc.next}.bytes(), 0, t0.Add(time.Hour))
			switch {
			case tc.wantErr != nil:
				mustErrIs(t, err, tc.wantErr)
				if tb.LogEndOffset() != end {
					t.Fatal("a rejected batch was appended")
				}
			case tc.wantDup >= 0:
				if err != nil {
					t.Fatal(err)
				}
				orig := infos[tc.wantDup]
				if !info.Duplicate || info.FirstOffset != orig.FirstOffset || info.LastOffset != orig.LastOffset || info.CommitTimestamp != orig.CommitTimestamp {
					t.Fatalf("retry answered %+v, want the original %+v as a duplicate", info, orig)
				}
				if tb.LogEndOffset() != end {
					t.Fatal("a duplicate was appended")
				}
			default:
				if err != nil || info.Duplicate || info.FirstOffset != end || info.LastOffset != end+2 {
					t.Fatalf("AppendAsLeader = %+v, %v; want offsets [%d, %d]", info, err, end, end+2)
				}
			}
		})
	}
}

func TestIdempotenceMultiBatchCalls(t *testing.T) {
	tb := openT(t, testConfig(t))
	m := &model{}
	appendLeader(t, tb, m, 0, t0,
		batchSpec{id: 1, records: 1, size: 10, writer: 1, seq: 0},
		batchSpec{id: 2, records: 1, size: 10, writer: 2, seq: 0},
		batchSpec{id: 3, records: 1, size: 10, writer: 1, seq: 1},
		batchSpec{id: 4, records: 1, size: 10}) // not idempotent
	end := tb.LogEndOffset()

	// A call holding a retried batch appends nothing and answers for it.
	var buf []byte
	buf = append(buf, batchSpec{id: 5, records: 1, size: 10, writer: 2, seq: 1}.bytes()...)
	buf = append(buf, batchSpec{id: 3, records: 1, size: 10, writer: 1, seq: 1}.bytes()...)
	info, err := tb.AppendAsLeader(buf, 0, t0)
	if err != nil || !info.Duplicate || info.FirstOffset != 2 {
		t.Fatalf("AppendAsLeader = %+v, %v; want the duplicate at offset 2", info, err)
	}
	// A call whose second batch is out of order appends nothing.
	buf = buf[:0]
	buf = append(buf, batchSpec{id: 5, records: 1, size: 10, writer: 2, seq: 1}.bytes()...)
	buf = append(buf, batchSpec{id: 6, records: 1, size: 10, writer: 2, seq: 3}.bytes()...)
	_, err = tb.AppendAsLeader(buf, 0, t0)
	mustErrIs(t, err, ErrOutOfOrderSequence)
	if tb.LogEndOffset() != end {
		t.Fatal("a rejected call appended")
	}
	// Sequences inside one call follow each other.
	appendLeader(t, tb, m, 0, t0,
		batchSpec{id: 5, records: 1, size: 10, writer: 2, seq: 1},
		batchSpec{id: 6, records: 1, size: 10, writer: 2, seq: 2})
	readAll(t, tb, m, 1000)
}

// TestWriterStateSurvivesReopen checks duplicate detection after a clean
// close, after a crash (state rebuilt from a snapshot plus a scan), after
// the snapshots are lost (full scan), and across segment rolls and
// retention.
func TestWriterStateSurvivesReopen(t *testing.T) {
	cfg := testConfig(t)
	cfg.SegmentBytes = 1000
	tb := openT(t, cfg)
	m := &model{}
	const writers = 4
	var last [writers]AppendInfo
	seq := [writers]int32{}
	for i := range 60 {
		w := i % writers
		last[w] = appendLeader(t, tb, m, 0, t0, batchSpec{id: int64(i), records: 2, size: 100, writer: int64(w + 1), seq: seq[w]})
		seq[w]++
	}
	check := func(t *testing.T, tb *Tablet) {
		t.Helper()
		for w := range writers {
			info, err := tb.AppendAsLeader(batchSpec{id: 0, records: 2, size: 100, writer: int64(w + 1), seq: seq[w] - 1}.bytes(), 0, t0)
			if err != nil || !info.Duplicate || info.FirstOffset != last[w].FirstOffset {
				t.Fatalf("writer %d retry: %+v, %v; want duplicate of %+v", w+1, info, err, last[w])
			}
			_, err = tb.AppendAsLeader(batchSpec{id: 0, records: 2, size: 100, writer: int64(w + 1), seq: seq[w] + 1}.bytes(), 0, t0)
			mustErrIs(t, err, ErrOutOfOrderSequence)
		}
	}
	check(t, tb)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	t.Run("clean", func(t *testing.T) {
		tb := openT(t, cfg)
		if ri := tb.RecoveryInfo(); ri.WriterSnapshot != tb.LogEndOffset() {
			t.Fatalf("writer state from snapshot %d, want the one Close wrote at %d", ri.WriterSnapshot, tb.LogEndOffset())
		}
		check(t, tb)
		tb.crash()
	})
	t.Run("crash", func(t *testing.T) {
		tb := openT(t, cfg)
		if ri := tb.RecoveryInfo(); ri.WriterSnapshot < tb.Segments()[len(tb.Segments())-1].BaseOffset {
			t.Fatalf("writer state from snapshot %d, want one at or after the active segment's base", ri.WriterSnapshot)
		}
		check(t, tb)
		tb.crash()
	})
	t.Run("no snapshots", func(t *testing.T) {
		dir := copyDir(t, cfg.Dir)
		removeGlob(t, dir, "*"+snapshotSuffix)
		c := cfg
		c.Dir = dir
		tb := openT(t, c)
		if ri := tb.RecoveryInfo(); ri.WriterSnapshot != -1 {
			t.Fatalf("WriterSnapshot %d without snapshot files", ri.WriterSnapshot)
		}
		check(t, tb)
	})
	t.Run("corrupt snapshot", func(t *testing.T) {
		// A bit flipped in the newest snapshot: its CRC fails, an older
		// one (or the batches from the log start) gives the same state.
		dir := copyDir(t, cfg.Dir)
		snaps, err := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))
		if err != nil || len(snaps) == 0 {
			t.Fatalf("snapshots %v, %v", snaps, err)
		}
		newest := snaps[len(snaps)-1]
		data, err := os.ReadFile(newest)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)-1] ^= 0x08
		if err := os.WriteFile(newest, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.Dir = dir
		var logs *logCapture
		c.Logger, logs = testLogger(t)
		tb := openT(t, c)
		if ri := tb.RecoveryInfo(); ri.WriterSnapshot >= tb.LogEndOffset() {
			t.Fatalf("writer state from snapshot %d, the corrupt one at the log end %d", ri.WriterSnapshot, tb.LogEndOffset())
		}
		if !strings.Contains(logs.String(), "writer snapshot unusable") || !strings.Contains(logs.String(), "CRC") {
			t.Errorf("no warning naming the bad snapshot's CRC:\n%s", logs)
		}
		check(t, tb)
	})
	t.Run("after retention", func(t *testing.T) {
		tb := openT(t, cfg)
		tb.SetHighWatermark(tb.LogEndOffset())
		if n, err := tb.DeleteSegmentsBefore(tb.LogEndOffset()); err != nil || n == 0 {
			t.Fatalf("DeleteSegmentsBefore: %d, %v", n, err)
		}
		check(t, tb)
		if err := tb.Close(); err != nil {
			t.Fatal(err)
		}
		tb = openT(t, cfg)
		check(t, tb)
	})
}

func TestRemoveExpiredWriters(t *testing.T) {
	cfg := testConfig(t)
	cfg.WriterExpiration = time.Hour
	cfg.Now = fixedNow(t0.Add(90 * time.Minute).UnixMilli())
	tb := openT(t, cfg)
	m := &model{}
	appendLeader(t, tb, m, 0, t0, batchSpec{id: 1, records: 1, size: 10, writer: 1, seq: 0})
	appendLeader(t, tb, m, 0, t0.Add(time.Hour), batchSpec{id: 2, records: 1, size: 10, writer: 2, seq: 0})
	if n := tb.RemoveExpiredWriters(); n != 1 {
		t.Fatalf("removed %d writers, want 1", n)
	}
	// Writer 1 is forgotten: its next sequence is refused, 0 is new again.
	_, err := tb.AppendAsLeader(batchSpec{id: 3, records: 1, size: 10, writer: 1, seq: 1}.bytes(), 0, t0.Add(time.Hour))
	mustErrIs(t, err, ErrOutOfOrderSequence)
	appendLeader(t, tb, m, 0, t0.Add(time.Hour), batchSpec{id: 4, records: 1, size: 10, writer: 1, seq: 0})
	// Writer 2 is remembered.
	info, err := tb.AppendAsLeader(batchSpec{id: 2, records: 1, size: 10, writer: 2, seq: 0}.bytes(), 0, t0.Add(time.Hour))
	if err != nil || !info.Duplicate {
		t.Fatalf("writer 2 retry: %+v, %v", info, err)
	}
}

// A batch up to four ahead of its writer's next sequence is early, not
// wrong: the writer may have that many requests in flight.
func TestSequenceErrorAhead(t *testing.T) {
	tests := []struct {
		last, seq int32
		ahead     bool
	}{
		{-1, 1, true}, {-1, 4, true}, {-1, 5, false}, // a new writer starts at 0
		{3, 5, true}, {3, 8, true}, {3, 9, false},
		{3, 3, false}, {3, 2, false}, {3, -1, false}, // behind, or not a sequence
		{math.MaxInt32, 1, true}, {math.MaxInt32 - 1, 1, true}, {math.MaxInt32 - 1, 3, true}, {math.MaxInt32 - 1, 4, false},
		{1, math.MaxInt32, false},
	}
	for _, tc := range tests {
		e := &SequenceError{WriterID: 1, Last: tc.last, Sequence: tc.seq}
		if e.Ahead() != tc.ahead {
			t.Errorf("last %d, sequence %d: Ahead() = %v, want %v", tc.last, tc.seq, e.Ahead(), tc.ahead)
		}
	}
	tb := openT(t, testConfig(t))
	_, err := tb.AppendAsLeader(batchSpec{id: 1, records: 1, size: 20, writer: 9, seq: 2}.bytes(), 0, t0)
	var se *SequenceError
	if !errors.As(err, &se) || !se.Ahead() || se.Last != -1 || se.Sequence != 2 {
		t.Fatalf("AppendAsLeader of a new writer's third batch: %v", err)
	}
}

// CheckSequence answers as AppendAsLeader would, without appending.
func TestCheckSequence(t *testing.T) {
	tb := openT(t, testConfig(t))
	m := &model{}
	for seq := int32(0); seq < 3; seq++ {
		appendLeader(t, tb, m, 0, t0, batchSpec{id: int64(seq), records: 1, size: 20, writer: 5, seq: seq})
	}
	for _, tc := range []struct {
		writer int64
		seq    int32
		ok     bool
	}{
		{5, 3, true}, {5, 2, true}, {5, 0, true}, // next, retries
		{5, 4, false}, {5, -1, false}, // early, wrong
		{6, 0, true}, {6, 1, false}, // a new writer starts at 0
		{-1, 9, true}, // no writer
	} {
		err := tb.CheckSequence(tc.writer, tc.seq)
		if (err == nil) != tc.ok {
			t.Errorf("writer %d sequence %d: %v", tc.writer, tc.seq, err)
		}
		var se *SequenceError
		if err != nil && !errors.As(err, &se) {
			t.Errorf("writer %d sequence %d: %v is not a *SequenceError", tc.writer, tc.seq, err)
		}
	}
	if tb.LogEndOffset() != 3 {
		t.Fatalf("log end %d, want 3", tb.LogEndOffset())
	}
}

// An expired writer stays forgotten after a restart, whether the state
// comes back from the snapshot a clean Close wrote or from an older
// snapshot and the log after a crash; a writer that has not expired is
// remembered.
func TestExpiredWritersStayForgottenAfterRestart(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(map[bool]string{true: "clean", false: "crash"}[clean], func(t *testing.T) {
			cfg := testConfig(t)
			cfg.WriterExpiration = time.Hour
			var now atomic.Int64
			now.Store(t0.UnixMilli())
			cfg.Now = func() time.Time { return time.UnixMilli(now.Load()) }
			tb := openT(t, cfg)
			m := &model{}
			appendLeader(t, tb, m, 0, t0, batchSpec{id: 1, records: 1, size: 10, writer: 1, seq: 0})
			if err := tb.Close(); err != nil { // a snapshot that holds writer 1
				t.Fatal(err)
			}
			tb = openT(t, cfg)
			now.Store(t0.Add(90 * time.Minute).UnixMilli())
			appendLeader(t, tb, m, 0, t0.Add(90*time.Minute), batchSpec{id: 2, records: 1, size: 10, writer: 2, seq: 0})
			if n := tb.RemoveExpiredWriters(); n != 1 {
				t.Fatalf("removed %d writers, want 1", n)
			}
			if clean {
				if err := tb.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				tb.crash()
			}
			tb = openT(t, cfg)
			if err := tb.CheckSequence(1, 1); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Errorf("writer 1 after restart: sequence 1 gives %v, want it forgotten (must start at 0)", err)
			}
			if err := tb.CheckSequence(2, 1); err != nil {
				t.Errorf("writer 2 after restart: %v, want it remembered", err)
			}
		})
	}
}
