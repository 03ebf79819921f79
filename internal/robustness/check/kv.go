package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/anishathalye/porcupine"

	"strom/internal/robustness/history"
)

// kvInput is a KV operation's input; kvOutput is what a get returned.
type kvInput struct {
	kind  history.Kind
	value string // the value a put writes
}

type kvOutput struct {
	found bool
	value string
}

// kvState is one key's state: absent, or present with a value.
type kvState = kvOutput

// kvModel is a map, one key per partition.
var kvModel = porcupine.Model{
	Init: func() any { return kvState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(kvState), input.(kvInput)
		switch in.kind {
		case history.KVPut:
			return true, kvState{found: true, value: in.value}
		case history.KVDelete:
			return true, kvState{}
		default: // KVGet: only OK gets are checked
			return output.(kvOutput) == s, s
		}
	},
	DescribeOperation: func(input, output any) string {
		in := input.(kvInput)
		switch in.kind {
		case history.KVPut:
			return fmt.Sprintf("put %q", in.value)
		case history.KVDelete:
			return "delete"
		}
		if out := output.(kvOutput); out.found {
			return fmt.Sprintf("get -> %q", out.value)
		}
		return "get -> absent"
	},
	DescribeState: func(state any) string {
		if s := state.(kvState); s.found {
			return fmt.Sprintf("%q", s.value)
		}
		return "absent"
	},
	DescribeOperationMetadata: describeIndex,
}

// CheckKV checks that the primary-key operations of a history (KVPut,
// KVDelete, KVGet; others are ignored) are linearizable, per key of each
// table, as porcupine does: a map where a put sets the key's value, a
// delete removes it, and a get returns the value or absent.
//
// Failed operations are dropped (they did nothing) and so are gets whose
// outcome is unknown (they say nothing). A put or delete of unknown outcome
// may apply at any time after its invocation or never (its return is
// infinite). An unknown put whose value no OK get of its key returned is
// dropped first: if it applied, nothing observed it, so any linearization
// with it has one without it; this keeps the search small when a fault
// times many writes out.
//
// Each key is a partition of at most opts.MaxOpsPerPartition operations;
// a non-linearizable key is one anomaly listing the key's operations, with
// porcupine's visualisation in opts.Dir.
func CheckKV(h *history.History, opts Options) Result {
	opts = opts.withDefaults()
	r := &Result{Checker: "kv"}
	type key struct{ table, key string }
	read := map[key]map[string]bool{} // values OK gets returned, per key
	for _, op := range h.Ops {
		if op.Kind == history.KVGet && op.Outcome == history.OK && op.Found {
			k := key{op.Table, op.Key}
			if read[k] == nil {
				read[k] = map[string]bool{}
			}
			read[k][op.Value] = true
		}
	}
	byKey := map[key][]porcupine.Operation{}
	for i, op := range h.Ops {
		k := key{op.Table, op.Key}
		switch {
		case op.Outcome == history.Fail:
			continue
		case op.Kind == history.KVPut && (op.Outcome == history.OK || read[k][op.Value]):
			byKey[k] = append(byKey[k], operation(i, op, kvInput{kind: op.Kind, value: op.Value}, nil))
		case op.Kind == history.KVDelete:
			byKey[k] = append(byKey[k], operation(i, op, kvInput{kind: op.Kind}, nil))
		case op.Kind == history.KVGet && op.Outcome == history.OK:
			byKey[k] = append(byKey[k], operation(i, op, kvInput{kind: op.Kind}, kvOutput{found: op.Found, value: op.Value}))
		}
	}
	keys := slices.SortedFunc(maps.Keys(byKey), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.table, b.table), cmp.Compare(a.key, b.key))
	})
	parts := make([]partition, len(keys))
	for n, k := range keys {
		parts[n] = partition{name: fmt.Sprintf("table %s key %q", k.table, k.key), ops: byKey[k]}
	}
	checkLinearizable(r, kvModel, parts, opts)
	return r.finish()
}
