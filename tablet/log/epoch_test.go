package log

import (
	"os"
	"path/filepath"
	"testing"

	"strom/record"
)

func TestEpochCacheAssign(t *testing.T) {
	tests := []struct {
		name   string
		start  []EpochEntry
		assign EpochEntry
		want   []EpochEntry
	}{
		{"first", nil, EpochEntry{1, 0}, []EpochEntry{{1, 0}}},
		{"newer epoch", []EpochEntry{{1, 0}}, EpochEntry{3, 10}, []EpochEntry{{1, 0}, {3, 10}}},
		{"same epoch later offset", []EpochEntry{{1, 0}, {3, 10}}, EpochEntry{3, 15}, []EpochEntry{{1, 0}, {3, 10}}},
		{"same epoch earlier offset", []EpochEntry{{1, 0}, {3, 10}}, EpochEntry{3, 5}, []EpochEntry{{1, 0}, {3, 5}}},
		{"older epoch drops newer ones", []EpochEntry{{1, 0}, {3, 10}, {4, 20}}, EpochEntry{2, 12}, []EpochEntry{{1, 0}, {2, 12}}},
		{"newer epoch at an earlier offset", []EpochEntry{{1, 0}, {3, 10}}, EpochEntry{5, 8}, []EpochEntry{{1, 0}, {5, 8}}},
		{"newer epoch at the same offset", []EpochEntry{{1, 0}, {3, 10}}, EpochEntry{4, 10}, []EpochEntry{{1, 0}, {4, 10}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := epochCache{entries: append([]EpochEntry(nil), tc.start...)}
			c.assign(tc.assign)
			if !equalEpochs(c.entries, tc.want) {
				t.Fatalf("entries %v, want %v", c.entries, tc.want)
			}
		})
	}
}

func equalEpochs(a, b []EpochEntry) bool {
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

// epochLog appends batches under epochs 1 (offsets 0-9), 3 (10-24) and 6
// (25-34): epochs 2, 4 and 5 are gaps.
func epochLog(t *testing.T, cfg Config) (*Tablet, *model) {
	t.Helper()
	tb := openT(t, cfg)
	m := &model{}
	for _, p := range []struct {
		epoch int32
		n     int
	}{{1, 5}, {3, 5}, {6, 5}} {
		for i := range p.n {
			recs := 2
			if p.epoch == 3 {
				recs = 3
			}
			appendLeader(t, tb, m, p.epoch, t0, batchSpec{id: int64(len(m.batches)), records: recs, size: 100 + i})
		}
	}
	if tb.LogEndOffset() != 35 {
		t.Fatalf("log end %d, want 35", tb.LogEndOffset())
	}
	return tb, m
}

func TestEndOffsetForEpoch(t *testing.T) {
	cfg := testConfig(t)
	tb, _ := epochLog(t, cfg)
	if got := tb.Epochs(); !equalEpochs(got, []EpochEntry{{1, 0}, {3, 10}, {6, 25}}) {
		t.Fatalf("epochs %v", got)
	}
	tests := []struct {
		epoch     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{record.NoLeaderEpoch, record.NoLeaderEpoch, UndefinedOffset},
		{0, 0, 0}, // before the first epoch: the first epoch's start
		{1, 1, 10},
		{2, 1, 10}, // a gap: the largest epoch below and where it ended
		{3, 3, 25},
		{4, 3, 25},
		{5, 3, 25},
		{6, 6, 35}, // the latest: the log end
		{7, 6, 35}, // newer than the latest: the latest and the log end
	}
	check := func(t *testing.T, tb *Tablet) {
		for _, tc := range tests {
			e, o := tb.EndOffsetForEpoch(tc.epoch)
			if e != tc.wantEpoch || o != tc.wantEnd {
				t.Errorf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", tc.epoch, e, o, tc.wantEpoch, tc.wantEnd)
			}
		}
	}
	t.Run("live", func(t *testing.T) { check(t, tb) })
	tb.crash()
	t.Run("reopened", func(t *testing.T) { check(t, openT(t, cfg)) })
	t.Run("checkpoint lost", func(t *testing.T) {
		c := cfg
		c.Dir = copyDir(t, cfg.Dir)
		if err := os.Remove(filepath.Join(c.Dir, epochFile)); err != nil {
			t.Fatal(err)
		}
		tb := openT(t, c)
		if !tb.RecoveryInfo().EpochsRebuilt {
			t.Fatal("epochs not reported rebuilt")
		}
		check(t, tb)
	})
	t.Run("checkpoint garbage", func(t *testing.T) {
		c := cfg
		c.Dir = copyDir(t, cfg.Dir)
		if err := os.WriteFile(filepath.Join(c.Dir, epochFile), []byte("0\n3\n1 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		tb := openT(t, c)
		if !tb.RecoveryInfo().EpochsRebuilt {
			t.Fatal("epochs not reported rebuilt")
		}
		check(t, tb)
	})
}

func TestEpochsFollowTheLog(t *testing.T) {
	cfg := testConfig(t)
	tb, m := epochLog(t, cfg)

	// A deposed leader cannot append or start an older epoch.
	_, err := tb.AppendAsLeader(batchSpec{id: 1, records: 1, size: 1}.bytes(), 5, t0)
	mustErrIs(t, err, ErrFencedLeaderEpoch)
	mustErrIs(t, tb.AssignEpoch(4, 35), ErrFencedLeaderEpoch)
	mustErrIs(t, tb.AssignEpoch(9, 36), ErrOffsetOutOfRange)

	// A new leader's epoch starts at the log end before any append.
	if err := tb.AssignEpoch(8, 35); err != nil {
		t.Fatal(err)
	}
	if e, o := tb.EndOffsetForEpoch(6); e != 6 || o != 35 {
		t.Fatalf("EndOffsetForEpoch(6) = (%d, %d), want (6, 35)", e, o)
	}
	tb.crash()
	tb = openT(t, cfg)
	if got := tb.LatestEpoch(); got != 8 {
		t.Fatalf("latest epoch %d after reopen, want 8 (it may start at the log end)", got)
	}

	// Truncation drops the epochs that started at or after the cut.
	if err := tb.TruncateTo(13); err != nil {
		t.Fatal(err)
	}
	m.truncate(13)
	if got := tb.Epochs(); !equalEpochs(got, []EpochEntry{{1, 0}, {3, 10}}) {
		t.Fatalf("epochs after truncation to 13: %v", got)
	}
	if e, o := tb.EndOffsetForEpoch(3); e != 3 || o != tb.LogEndOffset() {
		t.Fatalf("EndOffsetForEpoch(3) = (%d, %d), want (3, %d)", e, o, tb.LogEndOffset())
	}
	readAll(t, tb, m, 1000)

	// Retention moves the first epoch's start with the log start.
	appendLeader(t, tb, m, 3, t0, batchSpec{id: 50, records: 40, size: 3000})
	appendLeader(t, tb, m, 3, t0, batchSpec{id: 51, records: 1, size: 3000})
	tb.SetHighWatermark(tb.LogEndOffset())
	if n, err := tb.DeleteSegmentsBefore(tb.LogEndOffset()); err != nil || n == 0 {
		t.Fatalf("DeleteSegmentsBefore: %d, %v", n, err)
	}
	start := tb.LogStartOffset()
	if got := tb.Epochs(); len(got) != 1 || got[0] != (EpochEntry{3, start}) {
		t.Fatalf("epochs after retention to %d: %v", start, got)
	}
}

func TestFollowerEpochs(t *testing.T) {
	f := openT(t, testConfig(t))
	// Batches from a leader: epoch 2 for offsets 0-3, epoch 4 from 4.
	var buf []byte
	for i, e := range []int32{2, 2, 4, 4} {
		b := batchSpec{id: int64(i), records: 2, size: 10}.bytes()
		record.Batch(b).SetBaseOffset(int64(2 * i))
		record.Batch(b).SetLeaderEpoch(e)
		buf = append(buf, b...)
	}
	if err := f.AppendAsFollower(buf); err != nil {
		t.Fatal(err)
	}
	if got := f.Epochs(); !equalEpochs(got, []EpochEntry{{2, 0}, {4, 4}}) {
		t.Fatalf("follower epochs %v", got)
	}
}

func TestParseEpochs(t *testing.T) {
	good := encodeEpochs([]EpochEntry{{1, 0}, {3, 10}})
	if es, err := parseEpochs(good); err != nil || !equalEpochs(es, []EpochEntry{{1, 0}, {3, 10}}) {
		t.Fatalf("parseEpochs(%q) = %v, %v", good, es, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\nx\n", "0\n2\n1 0\n", "0\n1\n1\n", "0\n2\n3 0\n1 5\n", "0\n2\n1 5\n3 0\n", "0\n1\n-1 0\n", "0\n1\n1 0\n2 3\n"} {
		if _, err := parseEpochs([]byte(bad)); err == nil {
			t.Errorf("parseEpochs(%q) accepted", bad)
		}
	}
}
