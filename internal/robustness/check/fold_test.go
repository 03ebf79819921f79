package check

import (
	"strings"
	"testing"

	"strom/record"
)

func TestFold(t *testing.T) {
	changelog := []Change{
		{record.Insert, "a", "1"},
		{record.Insert, "b", "1"},
		{record.UpdateBefore, "a", "1"},
		{record.UpdateAfter, "a", "2"},
		{record.Delete, "b", "1"},
		{record.Insert, "c", "1"},
	}
	for _, tc := range []struct {
		name      string
		contents  map[string]string
		changelog []Change
		want      string // in the anomaly's detail; "" for none
	}{
		{name: "equal", contents: map[string]string{"a": "2", "c": "1"}, changelog: changelog},
		{name: "empty", contents: map[string]string{}},
		{name: "a stale row", contents: map[string]string{"a": "1", "c": "1"}, changelog: changelog, want: `key "a": the store holds "1", the changelog folds to "2"`},
		{name: "a deleted row kept", contents: map[string]string{"a": "2", "b": "1", "c": "1"}, changelog: changelog, want: `key "b"`},
		{name: "a row missing", contents: map[string]string{"a": "2"}, changelog: changelog, want: `key "c": absent from the store`},
		{name: "an append-only row in a changelog", contents: map[string]string{}, changelog: []Change{{record.AppendOnly, "a", "1"}}, want: "change type +A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := CheckFold("db.t bucket 0 on n1", tc.contents, tc.changelog)
			if tc.want == "" {
				wantAnomalies(t, r, nil, nil)
				return
			}
			wantAnomalies(t, r, []string{AnomalyFold}, nil)
			if d := r.Anomalies[0].Detail; !strings.Contains(d, tc.want) || !strings.Contains(d, "db.t bucket 0 on n1") {
				t.Fatalf("detail %q, want it to name the bucket and contain %q", d, tc.want)
			}
		})
	}
}
