package kv

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"strom/record"
)

// replicate copies the leader's log batches the follower lacks into the
// follower's log (as replica fetching does); apply also passes them to the
// follower's ApplyChangelog. It returns the batches copied.
func replicate(t *testing.T, leader, follower *fixture, apply bool) []byte {
	t.Helper()
	from, to := follower.log.LogEndOffset(), leader.log.LogEndOffset()
	if from == to {
		return nil
	}
	info, err := leader.log.Read(from, 1<<20, to)
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.log.AppendAsFollower(info.Batches); err != nil {
		t.Fatal(err)
	}
	if apply {
		if err := follower.kv.ApplyChangelog(info.Batches); err != nil {
			t.Fatal(err)
		}
	}
	return info.Batches
}

// setHW moves a fixture's high watermark and flushes its KV to it.
func (f *fixture) setHW(hw int64) {
	f.t.Helper()
	if err := f.kv.FlushTo(f.log.SetHighWatermark(hw)); err != nil {
		f.t.Fatal(err)
	}
}

// A follower fed its leader's batches one at a time, its high watermark a
// batch behind the leader's log end, restarted part way: at every step its
// Pebble is the fold of the changelog below its high watermark and it has
// applied its whole log; promoted, its next PutKv merges against the
// uncommitted tail, and a writer's retry of a replicated batch is a
// duplicate.
func TestHotStandbyFollower(t *testing.T) {
	d := testTable(t, testSchema(), nil)
	leader := newFixture(t, d, nil)
	follower := newFixture(t, d, nil)
	ctx := context.Background()
	writes := [][]op{
		{up(int32(1), "a", nil, nil, nil), up(int32(2), "b", nil, nil, nil)},
		{up(int32(1), "a2", nil, nil, nil), del(int32(2), nil, nil, nil, nil)},
		{up(int32(3), "c", nil, nil, nil)},
		{up(int32(1), "a3", nil, nil, nil)},
	}
	for i, w := range writes {
		prevEnd := leader.log.LogEndOffset()
		if _, err := leader.kv.PutKv(ctx, leader.batchW(7, int32(i), w...), nil); err != nil {
			t.Fatal(err)
		}
		replicate(t, leader, follower, true)
		follower.setHW(prevEnd) // the leader's high watermark lags by a batch
		if i == 1 {
			follower.reopen() // a restart replays the uncommitted tail
		}
		follower.checkInvariant()
		if st := follower.kv.Stats(); st.AppliedOffset != follower.log.LogEndOffset() || st.FlushedOffset != prevEnd {
			t.Fatalf("write %d: follower %+v, log end %d, high watermark %d", i, st, follower.log.LogEndOffset(), prevEnd)
		}
	}
	// The last batch (a3) is above the follower's high watermark: lookups
	// do not see it yet.
	if got := follower.lookupRow(int32(1)); got[1] != "a2" {
		t.Fatalf("follower's committed row 1: %v", got)
	}
	if err := follower.kv.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	// The writer's retry of its last batch, which the follower holds
	// uncommitted: a duplicate with the original offsets, nothing appended.
	end := follower.log.LogEndOffset()
	dup, err := follower.kv.PutKv(ctx, follower.batchW(7, 3, writes[3]...), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate || dup.LastOffset != end-1 || follower.log.LogEndOffset() != end {
		t.Fatalf("retry on the new leader: %+v, log end %d → %d", dup, end, follower.log.LogEndOffset())
	}
	// The next write merges against a3, uncommitted but in the log.
	info := follower.put(nil, up(int32(1), "a4", nil, nil, nil))
	cts, rows := follower.changelog(info.FirstOffset, info.LastOffset+1)
	if got := changeString(cts, rows); !slices.Equal(got, []string{"-U[1 a3 null null null]", "+U[1 a4 null null null]"}) {
		t.Fatalf("new leader's changelog %v", got)
	}
	follower.checkInvariant()
}

// A follower whose KV missed batches its log appended (an ApplyChangelog
// that failed, or was never made) catches up from its log: on the next
// ApplyChangelog, and on BecomeLeader, so the new leader merges against the
// whole log.
func TestKVCatchesUpWithItsLog(t *testing.T) {
	d := testTable(t, testSchema(), nil)
	leader := newFixture(t, d, nil)
	ctx := context.Background()
	put := func(ops ...op) {
		t.Helper()
		if _, err := leader.kv.PutKv(ctx, leader.batch(ops...), nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("ApplyChangelog", func(t *testing.T) {
		follower := newFixture(t, d, nil)
		put(up(int32(1), "a", nil, nil, nil))
		replicate(t, leader, follower, false)
		put(up(int32(1), "b", nil, nil, nil))
		replicate(t, leader, follower, true) // applies from offset 1; the KV is at 0
		follower.setHW(follower.log.LogEndOffset())
		follower.checkInvariant()
		if got := follower.lookupRow(int32(1)); got[1] != "b" {
			t.Fatalf("row 1: %v", got)
		}
	})
	t.Run("BecomeLeader", func(t *testing.T) {
		follower := newFixture(t, d, nil)
		replicate(t, leader, follower, false)
		put(up(int32(1), "c", nil, nil, nil))
		replicate(t, leader, follower, false)
		follower.setHW(1)
		if err := follower.kv.BecomeLeader(1); err != nil {
			t.Fatal(err)
		}
		info := follower.put(nil, up(int32(1), "d", nil, nil, nil))
		cts, rows := follower.changelog(info.FirstOffset, info.LastOffset+1)
		if got := changeString(cts, rows); !slices.Equal(got, []string{"-U[1 c null null null]", "+U[1 d null null null]"}) {
			t.Fatalf("new leader's changelog %v", got)
		}
		follower.checkInvariant()
	})
}

// A truncation below what Pebble holds (committed batches lost: an unclean
// leader election) rebuilds the KV from the log instead of leaving rows
// the log no longer has.
func TestTruncateBelowFlushedRebuilds(t *testing.T) {
	f := newFixture(t, testTable(t, testSchema(), nil), nil)
	f.put(nil, up(int32(1), "a", nil, nil, nil), up(int32(2), "b", nil, nil, nil))
	first := f.log.LogEndOffset()
	f.put(nil, up(int32(1), "a2", nil, nil, nil), up(int32(3), "c", nil, nil, nil))
	f.put(nil, del(int32(2), nil, nil, nil, nil))
	if err := f.log.TruncateTo(first); err != nil {
		t.Fatal(err)
	}
	if err := f.kv.TruncateTo(first); err != nil {
		t.Fatalf("TruncateTo(%d) below the flushed offset: %v", first, err)
	}
	f.checkInvariant()
	if st := f.kv.Stats(); st.FlushedOffset != first || st.AppliedOffset != first {
		t.Fatalf("after the rebuild: %+v, want flushed and applied %d", st, first)
	}
	if err := f.kv.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	info := f.put(nil, up(int32(2), "b2", nil, nil, nil))
	cts, rows := f.changelog(info.FirstOffset, info.LastOffset+1)
	if got := changeString(cts, rows); !slices.Equal(got, []string{"-U[2 b null null null]", "+U[2 b2 null null null]"}) {
		t.Fatalf("changelog after the rebuild %v", got)
	}
	f.reopen()
	f.checkInvariant()
	// A log that no longer starts at 0 cannot be refolded.
	if err := f.log.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if err := f.kv.TruncateTo(100); err != nil { // above what Pebble holds: nothing to drop
		t.Fatal(err)
	}
	if err := f.kv.TruncateTo(0); !errors.Is(err, ErrTruncateBelowFlushed) {
		t.Fatalf("TruncateTo(0) of a log starting at 100: %v", err)
	}
}

// VerifyFold finds a row that is not the changelog's fold, a row the fold
// lacks and a row missing from Pebble.
func TestVerifyFold(t *testing.T) {
	f := newFixture(t, testTable(t, testSchema(), nil), nil)
	f.put(nil, up(int32(1), "a", nil, nil, nil), up(int32(2), "b", nil, nil, nil))
	if err := f.kv.VerifyFold(); err != nil {
		t.Fatal(err)
	}
	key := func(id int32) []byte {
		k, err := f.keys.Append(nil, record.Row{id})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for name, damage := range map[string]func() error{
		"changed": func() error { return f.kv.db.Set(key(1), []byte{1, 0, 9}, pebble.Sync) },
		"extra":   func() error { return f.kv.db.Set(key(3), []byte{1, 0, 9}, pebble.Sync) },
		"missing": func() error { return f.kv.db.Delete(key(2), pebble.Sync) },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		if err := f.kv.VerifyFold(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s row: VerifyFold = %v, want ErrCorrupt", name, err)
		}
		f.reopen()
		if err := f.kv.TruncateTo(0); err != nil { // rebuild from the log
			t.Fatal(err)
		}
		if err := f.kv.VerifyFold(); err != nil {
			t.Fatalf("after the rebuild: %v", err)
		}
	}
}
