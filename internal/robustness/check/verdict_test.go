package check

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
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
