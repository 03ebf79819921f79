package check

import (
	"strings"
	"testing"

	"strom/record"
)

func TestFold(t *testing.T) {
	ins, before, after, del := record.Insert, record.UpdateBefore, record.UpdateAfter, record.Delete
	changelog := []Change{{ins, "a", "1"}, {ins, "b", "1"}, {before, "a", "1"}, {after, "a", "2"}, {del, "b", "1"}, {ins, "c", "1"}}
	for _, tc := range []struct {
		name      string
		contents  map[string]string
		changelog []Change
		want      []string // anomaly kinds
		details   []string // in the anomalies' details, in order
	}{
		{name: "equal", contents: map[string]string{"a": "2", "c": "1"}, changelog: changelog},
		{name: "empty", contents: map[string]string{}},
		{name: "a WAL-image changelog: +U without -U, for new keys too", contents: map[string]string{"a": "2"},
			changelog: []Change{{after, "a", "1"}, {after, "a", "2"}, {after, "b", "1"}, {del, "b", "1"}}},
		{name: "a stale row", contents: map[string]string{"a": "1", "c": "1"}, changelog: changelog,
			want: []string{AnomalyFold}, details: []string{`key "a": the store holds "1", the changelog folds to "2"`}},
		{name: "a deleted row kept", contents: map[string]string{"a": "2", "b": "1", "c": "1"}, changelog: changelog,
			want: []string{AnomalyFold}, details: []string{`key "b"`}},
		{name: "a row missing", contents: map[string]string{"a": "2"}, changelog: changelog,
			want: []string{AnomalyFold}, details: []string{`key "c": absent from the store`}},
		{name: "an append-only row in a changelog", contents: map[string]string{}, changelog: []Change{{record.AppendOnly, "a", "1"}},
			want: []string{AnomalyFold}, details: []string{"change type +A"}},
		{name: "+I of a present key", contents: map[string]string{"a": "2"}, changelog: []Change{{ins, "a", "1"}, {ins, "a", "2"}},
			want: []string{AnomalyChangelog}, details: []string{`row 1 (+I key "a"): inserts a key that holds "1"`}},
		{name: "a -U image that is not the row", contents: map[string]string{"a": "2"}, changelog: []Change{{ins, "a", "1"}, {before, "a", "9"}, {after, "a", "2"}},
			want: []string{AnomalyChangelog}, details: []string{`row 1 (-U key "a"): has the old image "9", the key holds "1"`}},
		{name: "a -D of an absent key, and a fold difference", contents: map[string]string{"z": "1"},
			changelog: []Change{{del, "a", "1"}, {del, "b", "1"}},
			want:      []string{AnomalyChangelog, AnomalyFold}, details: []string{`row 0 (-D key "a"): has the old image "1", the key holds nothing`, `key "z"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := CheckFold("db.t bucket 0 on n1", tc.contents, tc.changelog)
			wantAnomalies(t, r, tc.want, nil)
			for i, want := range tc.details {
				if i >= len(r.Anomalies) {
					break
				}
				if d := r.Anomalies[i].Detail; !strings.Contains(d, want) || !strings.Contains(d, "db.t bucket 0 on n1") {
					t.Errorf("anomaly %d: detail %q, want it to name the bucket and contain %q", i, d, want)
				}
			}
		})
	}
}
