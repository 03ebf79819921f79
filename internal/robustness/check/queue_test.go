package check

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"strom/internal/robustness/history"
)

// app is an append of value by client, acknowledged at offset of bucket 0
// when outcome is OK.
func app(client int, value string, outcome history.Outcome, offset int64) history.Op {
	return history.Op{Client: client, Kind: history.LogAppend, Table: "db.t", Value: value, Offset: offset, Outcome: outcome}
}

// rd is an OK read of bucket 0 by client from offset from, reporting high
// watermark hw, returning values at from, from+1, ...
func rd(client int, from, hw int64, final bool, values ...string) history.Op {
	return history.Op{Client: client, Kind: history.LogRead, Table: "db.t", Offset: from, HighWatermark: hw,
		Records: recs(from, values...), Final: final}
}

func TestQueue(t *testing.T) {
	ok, fail, unknown := history.OK, history.Fail, history.Unknown
	for _, tc := range []struct {
		name    string
		ops     []history.Op
		want    []string
		wantOps map[string][]int
	}{
		{name: "good: an unknown append absent, a failed one absent, reads in steps and a final drain", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "b", ok, 1), app(1, "c", unknown, 0), app(1, "d", fail, 0), app(1, "e", ok, 2),
			rd(2, 0, 2, false, "a", "b"), rd(2, 2, 3, false, "e"), rd(2, 3, 3, false), rd(2, 0, 3, false, "a"),
			rd(3, 0, 3, true, "a", "b", "e"),
		}},
		{name: "good: an unknown append present once", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "c", unknown, 0), app(1, "e", ok, 2),
			rd(3, 0, 3, true, "a", "c", "e"),
		}},
		{name: "lost acknowledged record", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "b", ok, 1), app(1, "e", ok, 2),
			rd(2, 0, 3, false, "a", "b", "e"), // read, then lost
			rd(3, 0, 2, true, "a", "b"),
		}, want: []string{AnomalyLost}, wantOps: map[string][]int{AnomalyLost: {2}}},
		{name: "duplicate: a retried append written twice", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "b", ok, 1),
			rd(3, 0, 3, true, "a", "b", "a"),
		}, want: []string{AnomalyDuplicate}, wantOps: map[string][]int{AnomalyDuplicate: {2}}},
		{name: "duplicate of an unknown append", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "c", unknown, 0),
			rd(2, 0, 2, false, "a", "c"),
			rd(3, 0, 3, true, "a", "c", "c"),
		}, want: []string{AnomalyDuplicate}, wantOps: map[string][]int{AnomalyDuplicate: {2, 3}}},
		{name: "two values at one offset: read, then truncated and overwritten", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "c", unknown, 0), app(1, "e", ok, 1),
			rd(2, 0, 2, false, "a", "c"),
			rd(3, 0, 2, true, "a", "e"),
		}, want: []string{AnomalyConflict}, wantOps: map[string][]int{AnomalyConflict: {3, 4}}},
		{name: "gap inside a read", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "b", ok, 1), app(1, "e", ok, 2),
			{Client: 2, Kind: history.LogRead, Table: "db.t", HighWatermark: 3, Records: []history.Record{{Offset: 0, Value: "a"}, {Offset: 2, Value: "e"}}},
			rd(3, 0, 3, true, "a", "b", "e"),
		}, want: []string{AnomalyGap}, wantOps: map[string][]int{AnomalyGap: {3}}},
		{name: "offsets going back inside a read", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "b", ok, 1),
			{Client: 2, Kind: history.LogRead, Table: "db.t", HighWatermark: 3, Records: []history.Record{{Offset: 0, Value: "a"}, {Offset: 1, Value: "b"}, {Offset: 1, Value: "b"}}},
			rd(3, 0, 2, true, "a", "b"),
		}, want: []string{AnomalyGap}},
		{name: "gap between a client's reads", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "b", ok, 1), app(1, "e", ok, 2),
			rd(2, 0, 3, false, "a"), rd(2, 2, 3, false, "e"),
			rd(3, 0, 3, true, "a", "b", "e"),
		}, want: []string{AnomalyGap}, wantOps: map[string][]int{AnomalyGap: {3, 4}}},
		{name: "read at the high watermark", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "b", ok, 1),
			rd(2, 0, 1, false, "a", "b"),
			rd(3, 0, 2, true, "a", "b"),
		}, want: []string{AnomalyAboveHW}, wantOps: map[string][]int{AnomalyAboveHW: {2}}},
		{name: "phantom: a value never appended", ops: []history.Op{
			app(1, "a", ok, 0),
			rd(3, 0, 2, true, "a", "ghost"),
		}, want: []string{AnomalyPhantom}, wantOps: map[string][]int{AnomalyPhantom: {1}}},
		{name: "phantom: the value of a failed append", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "d", fail, 0),
			rd(3, 0, 2, true, "a", "d"),
		}, want: []string{AnomalyPhantom}, wantOps: map[string][]int{AnomalyPhantom: {1, 2}}},
		{name: "acknowledged at one offset, read at another", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "b", ok, 2), app(1, "c", ok, 1),
			rd(3, 0, 3, true, "a", "b", "c"),
		}, want: []string{AnomalyOffsetMismatch, AnomalyOffsetMismatch}},
		{name: "malformed: appends but no final read", ops: []history.Op{
			app(1, "a", ok, 0), app(1, "b", ok, 1),
			rd(2, 0, 2, false, "a", "b"),
		}, want: []string{AnomalyMalformed}, wantOps: map[string][]int{AnomalyMalformed: {0}}},
		{name: "malformed: one value appended twice", ops: []history.Op{
			app(1, "a", ok, 0), app(2, "a", ok, 1),
			rd(3, 0, 2, true, "a"),
		}, want: []string{AnomalyMalformed}, wantOps: map[string][]int{AnomalyMalformed: {0, 1}}},
		{name: "reads that failed or timed out say nothing", ops: []history.Op{
			app(1, "a", ok, 0),
			{Client: 2, Kind: history.LogRead, Table: "db.t", HighWatermark: 0, Records: recs(5, "x"), Outcome: unknown},
			{Client: 2, Kind: history.LogRead, Table: "db.t", Records: recs(7, "y"), Outcome: fail},
			rd(3, 0, 1, true, "a"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantAnomalies(t, CheckQueue(hist(tc.ops...), Options{}), tc.want, tc.wantOps)
		})
	}
}

// MaxAnomalies caps the list, Total counts all.
func TestQueueMaxAnomalies(t *testing.T) {
	var ops []history.Op
	for i := range 10 {
		ops = append(ops, app(1, fmt.Sprint(i), history.OK, int64(i)))
	}
	ops = append(ops, rd(3, 0, 0, true))
	r := CheckQueue(hist(ops...), Options{MaxAnomalies: 3})
	if r.OK || r.Total != 10 || len(r.Anomalies) != 3 {
		t.Fatalf("OK %v, Total %d, listed %d; want false, 10, 3", r.OK, r.Total, len(r.Anomalies))
	}
}

// simLog is a sequential log system: buckets of values, each append
// applied at once and committed (the high watermark is the end).
type simLog struct {
	rng     *rand.Rand
	buckets [][]string
	ops     []history.Op
	now     int64
	next    int
}

func (s *simLog) tick() int64 { s.now += 1 + s.rng.Int64N(3); return s.now }

// append appends a new value with a random outcome; an unknown one may or
// may not have been applied.
func (s *simLog) append(client int) {
	b := s.rng.IntN(len(s.buckets))
	v := fmt.Sprintf("v%d", s.next)
	s.next++
	op := history.Op{Client: client, Kind: history.LogAppend, Table: "db.t", Value: v, Invoke: s.tick()}
	switch p := s.rng.IntN(10); {
	case p < 7:
		op.Outcome, op.Bucket, op.Offset = history.OK, int32(b), int64(len(s.buckets[b]))
		s.buckets[b] = append(s.buckets[b], v)
	case p < 8:
		op.Outcome = history.Fail
	default:
		op.Outcome = history.Unknown
		if p == 9 {
			s.buckets[b] = append(s.buckets[b], v)
		}
	}
	op.Return = s.tick()
	s.ops = append(s.ops, op)
}

// read reads a random range of a bucket from its start or where the
// client's last read of it ended.
func (s *simLog) read(client, b int, from int64, final bool) int64 {
	hw := int64(len(s.buckets[b]))
	to := min(hw, from+s.rng.Int64N(5))
	var vs []string
	for o := from; o < to; o++ {
		vs = append(vs, s.buckets[b][o])
	}
	s.ops = append(s.ops, history.Op{Client: client, Kind: history.LogRead, Table: "db.t", Bucket: int32(b), Offset: from,
		HighWatermark: hw, Records: recs(from, vs...), Final: final, Invoke: s.tick(), Return: s.tick(), Outcome: history.OK})
	return to
}

// Random histories of a correct log pass.
func TestQueueRandomValidHistories(t *testing.T) {
	for seed := range uint64(50) {
		s := &simLog{rng: rand.New(rand.NewPCG(seed, 1)), buckets: make([][]string, 3)}
		pos := map[[2]int]int64{} // (reader client, bucket) -> next offset
		for range 300 {
			switch c := s.rng.IntN(4); {
			case c < 2:
				s.append(c)
			default:
				b := s.rng.IntN(3)
				if s.rng.IntN(10) == 0 {
					pos[[2]int{c, b}] = 0 // a rewind: a new scanner from the start
				}
				pos[[2]int{c, b}] = s.read(c, b, pos[[2]int{c, b}], false)
			}
		}
		for b := range s.buckets {
			for from := int64(0); from < int64(len(s.buckets[b])); {
				from = s.read(9, b, from, true)
			}
		}
		if r := CheckQueue(&history.History{Ops: s.ops}, Options{}); !r.OK {
			t.Fatalf("seed %d: %+v", seed, r)
		}
	}
}

// BenchmarkCheckQueue checks a history of about a million operations: half
// appends, half reads of ten records each (one final read per record).
func BenchmarkCheckQueue(b *testing.B) {
	const appends = 500_000
	ops := make([]history.Op, 0, appends+appends/10+appends/10)
	for i := range appends {
		ops = append(ops, history.Op{Client: i % 8, Kind: history.LogAppend, Table: "db.t", Bucket: int32(i % 4),
			Value: fmt.Sprint(i), Offset: int64(i / 4), Outcome: history.OK})
	}
	for _, final := range []bool{false, true} {
		for bucket := range 4 {
			for from := 0; from < appends/4; from += 10 {
				rs := make([]history.Record, 10)
				for k := range rs {
					rs[k] = history.Record{Offset: int64(from + k), Value: fmt.Sprint((from+k)*4 + bucket)}
				}
				ops = append(ops, history.Op{Client: 8, Kind: history.LogRead, Table: "db.t", Bucket: int32(bucket),
					Offset: int64(from), HighWatermark: appends / 4, Records: rs, Final: final, Outcome: history.OK})
			}
		}
	}
	h := &history.History{Ops: ops}
	b.ResetTimer()
	for b.Loop() {
		if r := CheckQueue(h, Options{}); !r.OK {
			b.Fatalf("%+v", r.Anomalies[:1])
		}
	}
	b.ReportMetric(float64(len(ops)), "ops")
}
