package check

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"strom/internal/robustness/history"
)

// metaInput is a metadata operation: Table is a table ("db.t"), or a
// database for ListTables.
type metaInput struct {
	kind  history.Kind
	table string
}

// metaOutput is what an OK operation answered; unknown marks a create or
// drop of unknown outcome.
type metaOutput struct {
	found   bool
	tables  []string // sorted
	unknown bool
}

// metaState is the set of tables, sorted and joined by "\n", so states
// compare with ==.
type metaState = string

func tablesOf(s metaState) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func withTable(s metaState, table string, present bool) metaState {
	ts := tablesOf(s)
	i, has := slices.BinarySearch(ts, table)
	switch {
	case present && !has:
		ts = slices.Insert(ts, i, table)
	case !present && has:
		ts = slices.Delete(ts, i, i+1)
	}
	return strings.Join(ts, "\n")
}

// metaModel is the catalog: the set of tables.
var metaModel = porcupine.Model{
	Init: func() any { return metaState("") },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(metaState), input.(metaInput), output.(metaOutput)
		_, has := slices.BinarySearch(tablesOf(s), in.table)
		switch in.kind {
		case history.CreateTable:
			// OK: created (found false, the table was absent) or
			// "already exists" (found true); unknown: exists after.
			return out.unknown || out.found == has, withTable(s, in.table, true)
		case history.DropTable:
			return out.unknown || out.found == has, withTable(s, in.table, false)
		case history.TableExists:
			return out.found == has, s
		default: // ListTables
			var inDB []string
			for _, t := range tablesOf(s) {
				if strings.HasPrefix(t, in.table+".") {
					inDB = append(inDB, t)
				}
			}
			return slices.Equal(inDB, out.tables), s
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(metaInput), output.(metaOutput)
		switch {
		case in.kind == history.ListTables:
			return fmt.Sprintf("list %s -> %v", in.table, out.tables)
		case out.unknown:
			return fmt.Sprintf("%s %s -> ?", in.kind, in.table)
		}
		return fmt.Sprintf("%s %s -> found=%t", in.kind, in.table, out.found)
	},
	DescribeState:             func(state any) string { return fmt.Sprint(tablesOf(state.(metaState))) },
	DescribeOperationMetadata: describeIndex,
}

// CheckMetadata checks that the metadata operations of a history
// (CreateTable, DropTable, TableExists, ListTables; others are ignored)
// are linearizable against a catalog that is a set of tables: a create
// adds its table or answers "already exists" (Found), a drop removes it or
// answers "not found", exists and list read the set.
//
// Failed operations are dropped, and so are reads of unknown outcome; a
// create or drop of unknown outcome may apply at any time after its
// invocation, or never. Each table is its own partition, unless the
// history holds an OK ListTables, which reads every table: then the whole
// history is one partition (keep list operations out of long runs, or
// their histories short).
func CheckMetadata(h *history.History, opts Options) Result {
	opts = opts.withDefaults()
	r := &Result{Checker: "metadata"}
	byTable := map[string][]porcupine.Operation{}
	var all []porcupine.Operation
	listed := false
	for i, op := range h.Ops {
		if op.Outcome == history.Fail {
			continue
		}
		in, out := metaInput{kind: op.Kind, table: op.Table}, metaOutput{found: op.Found, unknown: op.Outcome == history.Unknown}
		switch op.Kind {
		case history.CreateTable, history.DropTable:
		case history.TableExists, history.ListTables:
			if out.unknown {
				continue
			}
			if op.Kind == history.ListTables {
				listed = true
				out.tables = slices.Sorted(slices.Values(op.Tables))
			}
		default:
			continue
		}
		o := operation(i, op, in, out)
		byTable[op.Table] = append(byTable[op.Table], o)
		all = append(all, o)
	}
	var parts []partition
	switch {
	case listed:
		parts = []partition{{name: "the catalog", ops: all}}
	default:
		for _, t := range slices.Sorted(maps.Keys(byTable)) {
			parts = append(parts, partition{name: "table " + t, ops: byTable[t]})
		}
	}
	checkLinearizable(r, metaModel, parts, opts)
	return r.finish()
}
