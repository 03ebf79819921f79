package check

import (
	"slices"
	"testing"

	"strom/internal/robustness/history"
)

// hist builds a history from ops, giving each one that has no times the
// interval [2i, 2i+1], so ops in a literal list run one after another.
func hist(ops ...history.Op) *history.History {
	for i := range ops {
		if ops[i].Invoke == 0 && ops[i].Return == 0 {
			ops[i].Invoke, ops[i].Return = int64(2*i), int64(2*i+1)
		}
		if ops[i].Outcome == "" {
			ops[i].Outcome = history.OK
		}
	}
	return &history.History{Ops: ops}
}

// recs makes the records of a read from offset from.
func recs(from int64, values ...string) []history.Record {
	rs := make([]history.Record, len(values))
	for i, v := range values {
		rs[i] = history.Record{Offset: from + int64(i), Value: v}
	}
	return rs
}

// wantAnomalies fails t unless r found exactly the anomaly kinds want (in
// any order, with repeats), each with the ops of wantOps[kind] if given.
func wantAnomalies(t *testing.T, r Result, want []string, wantOps map[string][]int) {
	t.Helper()
	var got []string
	for _, a := range r.Anomalies {
		got = append(got, a.Kind)
		if ops, ok := wantOps[a.Kind]; ok && !slices.Equal(a.Ops, ops) {
			t.Errorf("%s anomaly names ops %v, want %v (%s)", a.Kind, a.Ops, ops, a.Detail)
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("anomalies %v, want %v: %+v", got, want, r.Anomalies)
	}
	if r.Total != len(r.Anomalies) {
		t.Errorf("Total = %d, listed %d", r.Total, len(r.Anomalies))
	}
	if r.OK != (len(want) == 0 && r.Error == "") {
		t.Errorf("OK = %v with anomalies %v and error %q", r.OK, got, r.Error)
	}
}
