package check

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strom/internal/robustness/history"
)

// kvOp is an operation on key k of table db.t over [invoke, ret].
func kvOp(client int, kind history.Kind, k, v string, found bool, outcome history.Outcome, invoke, ret int64) history.Op {
	return history.Op{Client: client, Kind: kind, Table: "db.t", Key: k, Value: v, Found: found, Outcome: outcome, Invoke: invoke, Return: ret}
}

func TestKV(t *testing.T) {
	ok, fail, unknown := history.OK, history.Fail, history.Unknown
	put, del, get := history.KVPut, history.KVDelete, history.KVGet
	for _, tc := range []struct {
		name string
		ops  []history.Op
		bad  bool
	}{
		{name: "sequential put, get, delete, get", ops: []history.Op{
			kvOp(0, put, "k", "a", false, ok, 1, 2), kvOp(0, get, "k", "a", true, ok, 3, 4),
			kvOp(1, del, "k", "", false, ok, 5, 6), kvOp(1, get, "k", "", false, ok, 7, 8),
		}},
		{name: "a get concurrent with a put may see either value", ops: []history.Op{
			kvOp(0, put, "k", "a", false, ok, 1, 2), kvOp(0, put, "k", "b", false, ok, 3, 10),
			kvOp(1, get, "k", "b", true, ok, 4, 5), kvOp(2, get, "k", "b", true, ok, 6, 7),
		}},
		{name: "an unknown put seen long after it timed out", ops: []history.Op{
			kvOp(0, put, "k", "a", false, unknown, 1, 2), kvOp(1, get, "k", "", false, ok, 3, 4),
			kvOp(1, get, "k", "a", true, ok, 100, 101),
		}},
		{name: "an unknown put never seen", ops: []history.Op{
			kvOp(0, put, "k", "a", false, unknown, 1, 2), kvOp(1, get, "k", "", false, ok, 3, 4),
		}},
		{name: "keys are independent", ops: []history.Op{
			kvOp(0, put, "k", "a", false, ok, 1, 2), kvOp(1, get, "j", "", false, ok, 3, 4),
			{Client: 1, Kind: put, Table: "db.u", Key: "k", Value: "z", Outcome: ok, Invoke: 5, Return: 6},
			kvOp(1, get, "k", "a", true, ok, 7, 8),
		}},
		{name: "a failed put, a failed get and an unknown get say nothing", ops: []history.Op{
			kvOp(0, put, "k", "x", false, fail, 1, 2), kvOp(1, get, "k", "y", true, fail, 3, 4),
			kvOp(1, get, "k", "z", true, unknown, 5, 6), kvOp(1, get, "k", "", false, ok, 7, 8),
		}},
		{name: "stale read: the old value after a newer write was acknowledged", bad: true, ops: []history.Op{
			kvOp(0, put, "k", "a", false, ok, 1, 2), kvOp(0, put, "k", "b", false, ok, 3, 4),
			kvOp(1, get, "k", "a", true, ok, 5, 6),
		}},
		{name: "lost write: absent after an acknowledged put", bad: true, ops: []history.Op{
			kvOp(0, put, "k", "a", false, ok, 1, 2), kvOp(1, get, "k", "", false, ok, 3, 4),
		}},
		{name: "a deleted key read back", bad: true, ops: []history.Op{
			kvOp(0, put, "k", "a", false, ok, 1, 2), kvOp(0, del, "k", "", false, ok, 3, 4),
			kvOp(1, get, "k", "a", true, ok, 5, 6),
		}},
		{name: "a failed put read", bad: true, ops: []history.Op{
			kvOp(0, put, "k", "x", false, fail, 1, 2), kvOp(1, get, "k", "x", true, ok, 3, 4),
		}},
		{name: "an unknown put seen, then gone", bad: true, ops: []history.Op{
			kvOp(0, put, "k", "a", false, unknown, 1, 2), kvOp(1, get, "k", "a", true, ok, 3, 4),
			kvOp(1, get, "k", "", false, ok, 5, 6),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := CheckKV(&history.History{Ops: tc.ops}, Options{Dir: dir})
			if !tc.bad {
				wantAnomalies(t, r, nil, nil)
				return
			}
			var keyOps []int
			for i, op := range tc.ops {
				if op.Key == "k" && op.Table == "db.t" && op.Outcome != history.Fail && (op.Kind != get || op.Outcome == ok) {
					keyOps = append(keyOps, i)
				}
			}
			wantAnomalies(t, r, []string{AnomalyNonLinearizable}, map[string][]int{AnomalyNonLinearizable: keyOps})
			html, err := os.ReadFile(filepath.Join(dir, "kv-1.html"))
			if err != nil || !strings.Contains(string(html), "<html") {
				t.Fatalf("visualisation: %v, %d bytes", err, len(html))
			}
		})
	}
}

// A key above MaxOpsPerPartition is refused by name; the others are still
// checked (here a lost write on "cold").
func TestKVRefusesAboveTheLimit(t *testing.T) {
	var ops []history.Op
	for i := range 5 {
		ops = append(ops, kvOp(0, history.KVPut, "hot", fmt.Sprint(i), false, history.OK, int64(2*i), int64(2*i+1)))
	}
	ops = append(ops, kvOp(0, history.KVPut, "cold", "a", false, history.OK, 20, 21),
		kvOp(0, history.KVGet, "cold", "", false, history.OK, 22, 23))
	r := CheckKV(&history.History{Ops: ops}, Options{MaxOpsPerPartition: 4})
	if r.OK || !strings.Contains(r.Error, `"hot"`) || !strings.Contains(r.Error, "MaxOpsPerPartition") {
		t.Fatalf("OK %v, error %q: want a refusal naming the key and the limit", r.OK, r.Error)
	}
	if len(r.Anomalies) != 1 || !slices.Equal(r.Anomalies[0].Ops, []int{5, 6}) {
		t.Fatalf("anomalies %+v, want one naming ops 5 and 6", r.Anomalies)
	}
}

// simulateLinearizable runs clients against a sequential system: each
// operation takes effect at a random point of its interval, in order of
// those points; step applies operation i at its point. Clients' intervals
// overlap; each client's are in sequence.
func simulateLinearizable(rng *rand.Rand, clients, n int, newOp func(client int) history.Op, step func(op *history.Op)) []history.Op {
	free := make([]int64, clients)
	ops := make([]history.Op, n)
	points := make([]int64, n)
	for i := range ops {
		c := rng.IntN(clients)
		ops[i] = newOp(c)
		ops[i].Client = c
		ops[i].Invoke = free[c] + rng.Int64N(5)
		ops[i].Return = ops[i].Invoke + 1 + rng.Int64N(20)
		points[i] = ops[i].Invoke + rng.Int64N(ops[i].Return-ops[i].Invoke+1)
		free[c] = ops[i].Return + 1
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(points[a] - points[b]) })
	for _, i := range order {
		step(&ops[i])
	}
	return ops
}

// Random histories of a linearizable map pass, with unknown and failed
// writes among them.
func TestKVRandomValidHistories(t *testing.T) {
	for seed := range uint64(30) {
		ops := randomKV(rand.New(rand.NewPCG(seed, 2)), 4, 400, 3)
		if r := CheckKV(&history.History{Ops: ops}, Options{}); !r.OK {
			t.Fatalf("seed %d: %+v", seed, r)
		}
	}
}

// randomKV is a history of n operations by clients on keys of a
// linearizable map, a fifth of them failed and a fifth unknown.
func randomKV(rng *rand.Rand, clients, n, keys int) []history.Op {
	state := map[string]string{}
	next := 0
	return simulateLinearizable(rng, clients, n, func(int) history.Op {
		op := history.Op{Table: "db.t", Key: fmt.Sprint("k", rng.IntN(keys)), Kind: []history.Kind{history.KVPut, history.KVDelete, history.KVGet, history.KVGet}[rng.IntN(4)]}
		op.Outcome = []history.Outcome{history.OK, history.OK, history.OK, history.Fail, history.Unknown}[rng.IntN(5)]
		if op.Kind == history.KVPut {
			op.Value = fmt.Sprint(next)
			next++
		}
		return op
	}, func(op *history.Op) {
		applied := op.Outcome == history.OK || (op.Outcome == history.Unknown && rng.IntN(2) == 0)
		switch {
		case op.Kind == history.KVGet:
			op.Value, op.Found = state[op.Key]
		case !applied:
		case op.Kind == history.KVPut:
			state[op.Key] = op.Value
		default:
			delete(state, op.Key)
		}
	})
}

// BenchmarkCheckKV checks a million operations by 8 clients on 100 keys
// (10,000 a key).
func BenchmarkCheckKV(b *testing.B) {
	h := &history.History{Ops: randomKV(rand.New(rand.NewPCG(1, 2)), 8, 1_000_000, 100)}
	b.ResetTimer()
	for b.Loop() {
		if r := CheckKV(h, Options{}); !r.OK {
			b.Fatalf("%+v", r)
		}
	}
	b.ReportMetric(float64(len(h.Ops)), "ops")
}
