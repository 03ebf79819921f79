package check

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"strom/internal/robustness/history"
)

// The verdict file reads back as written; one failed checker fails it.
func TestVerdictWriteFile(t *testing.T) {
	dir := t.TempDir()
	v := Verdict{Seed: 7, Results: []Result{
		{Checker: "queue", OK: true, Ops: 3},
		{Checker: "kv", Ops: 2, Total: 1, Anomalies: []Anomaly{{Kind: AnomalyNonLinearizable, Ops: []int{0, 1}, Detail: "d"}}},
	}}
	if v.OK() {
		t.Fatal("OK with a failed checker")
	}
	if err := v.WriteFile(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, VerdictFile))
	if err != nil {
		t.Fatal(err)
	}
	var got Verdict
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("read back %+v, want %+v", got, v)
	}
	if !(Verdict{Results: v.Results[:1]}).OK() {
		t.Fatal("not OK with every checker passing")
	}
	if err := v.WriteFile(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("WriteFile to a missing directory: no error")
	}
}

// CheckHistory runs the three history checkers, each on its own kinds.
func TestCheckHistory(t *testing.T) {
	h := hist(
		app(1, "a", history.OK, 0),
		rd(3, 0, 1, true, "a"),
		kvOp(0, history.KVPut, "k", "v", false, history.OK, 10, 11),
		kvOp(0, history.KVGet, "k", "", false, history.OK, 12, 13), // a lost KV write
	)
	var got []string
	for _, r := range CheckHistory(h, Options{}) {
		got = append(got, fmt.Sprintf("%s ok=%v ops=%d", r.Checker, r.OK, r.Ops))
	}
	want := []string{"queue ok=true ops=2", "kv ok=false ops=2", "metadata ok=true ops=0"}
	if !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
}
