package log

import (
	"errors"
	"math"
	"os"
	"testing"
	"time"
)

// timedLog appends 60 batches, batch i committed at t0 + i minutes, in
// segments of a few batches each.
func timedLog(t *testing.T, cfg Config) (*Tablet, *model) {
	t.Helper()
	tb := openT(t, cfg)
	m := &model{}
	for i := range 60 {
		appendLeader(t, tb, m, 0, t0.Add(time.Duration(i)*time.Minute), batchSpec{id: int64(i), records: 1 + i%2, size: 300})
	}
	return tb, m
}

func TestDeleteExpiredSegments(t *testing.T) {
	cfg := testConfig(t)
	tb, m := timedLog(t, cfg)
	segs := tb.Segments()
	now := t0.Add(100 * time.Minute)

	if n, err := tb.DeleteExpiredSegments(now, time.Hour); err != nil || n != 0 {
		t.Fatalf("with the high watermark at 0: deleted %d, %v", n, err)
	}
	tb.SetHighWatermark(tb.LogEndOffset())
	if n, err := tb.DeleteExpiredSegments(now, 0); err != nil || n != 0 {
		t.Fatalf("ttl 0 deleted %d, %v", n, err)
	}
	// ttl 1h at t0+100m: batches committed before t0+40m have expired; a
	// segment goes when its newest batch has.
	n, err := tb.DeleteExpiredSegments(now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	limit := now.Add(-time.Hour).UnixMilli()
	want := 0
	for want < len(segs)-1 && segs[want].MaxTimestamp < limit {
		want++
	}
	if n != want || n == 0 {
		t.Fatalf("deleted %d segments, want %d", n, want)
	}
	start := tb.LogStartOffset()
	if start != segs[n].BaseOffset {
		t.Fatalf("log start %d, want %d", start, segs[n].BaseOffset)
	}
	for _, s := range segs[:n] {
		if _, err := os.Stat(s.Path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("segment file %s still there: %v", s.Path, err)
		}
	}
	var oe *OffsetOutOfRangeError
	if _, err := tb.Read(start-1, 100, math.MaxInt64); !errors.As(err, &oe) || oe.LogStart != start {
		t.Fatalf("Read below the new start: %v", err)
	}
	m.truncateFront(start)
	readAll(t, tb, m, 1000)
	checkTimestamps(t, tb, m)

	// Everything expired: all but the active segment go.
	if _, err := tb.DeleteExpiredSegments(now.Add(24*time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := tb.Segments(); len(got) != 1 || got[0].BaseOffset != segs[len(segs)-1].BaseOffset {
		t.Fatalf("segments after everything expired: %+v", got)
	}
	tb.crash()
	tb = openT(t, cfg)
	if tb.LogStartOffset() != segs[len(segs)-1].BaseOffset {
		t.Fatalf("log start %d after reopen", tb.LogStartOffset())
	}
}

func TestDeleteSegmentsBefore(t *testing.T) {
	tb, m := timedLog(t, testConfig(t))
	segs := tb.Segments()
	tb.SetHighWatermark(segs[3].BaseOffset)
	// Bounded by the high watermark even when asked for more.
	n, err := tb.DeleteSegmentsBefore(segs[5].BaseOffset)
	if err != nil || n != 3 {
		t.Fatalf("deleted %d, %v; want 3 (up to the high watermark)", n, err)
	}
	tb.SetHighWatermark(tb.LogEndOffset())
	// A segment holding offset-1 stays.
	if n, err := tb.DeleteSegmentsBefore(segs[5].BaseOffset + 1); err != nil || n != 2 {
		t.Fatalf("deleted %d, %v; want 2", n, err)
	}
	m.truncateFront(segs[5].BaseOffset)
	readAll(t, tb, m, 1000)
}

func TestOffsetForTimestamp(t *testing.T) {
	cfg := testConfig(t)
	cfg.IndexIntervalBytes = 700
	tb := openT(t, cfg)
	m := &model{}
	// Runs of equal timestamps, and a clock that goes back (the commit
	// timestamp stays).
	ms := []int64{0, 0, 0, 5, 5, 6, 3, 10, 10, 10, 10, 11, 20, 21, 21, 22, 40, 41, 42, 43, 50, 50, 50, 51}
	for i, d := range ms {
		appendLeader(t, tb, m, 0, t0.Add(time.Duration(d)*time.Millisecond), batchSpec{id: int64(i), records: 1 + i%3, size: 400})
	}
	check := func(t *testing.T, tb *Tablet) {
		checkTimestamps(t, tb, m)
		if _, found, err := tb.OffsetForTimestamp(t0.UnixMilli() + 52); found || err != nil {
			t.Fatalf("a timestamp after every batch found something (%v)", err)
		}
		if o, found, err := tb.OffsetForTimestamp(0); !found || o != 0 || err != nil {
			t.Fatalf("OffsetForTimestamp(0) = %d, %v, %v", o, found, err)
		}
	}
	if len(tb.Segments()) < 3 {
		t.Fatal("want several segments")
	}
	t.Run("live", func(t *testing.T) { check(t, tb) })
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	t.Run("clean reopen", func(t *testing.T) {
		tb := openT(t, cfg)
		check(t, tb)
		tb.crash()
	})
	t.Run("crash reopen", func(t *testing.T) { check(t, openT(t, cfg)) })
}
