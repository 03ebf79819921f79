package check

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"strom/internal/robustness/history"
)

// metaOp is a metadata operation on table (a database for ListTables).
func metaOp(client int, kind history.Kind, table string, found bool, outcome history.Outcome, invoke, ret int64, tables ...string) history.Op {
	return history.Op{Client: client, Kind: kind, Table: table, Found: found, Tables: tables, Outcome: outcome, Invoke: invoke, Return: ret}
}

func TestMetadata(t *testing.T) {
	ok, fail, unknown := history.OK, history.Fail, history.Unknown
	create, drop, exists, list := history.CreateTable, history.DropTable, history.TableExists, history.ListTables
	for _, tc := range []struct {
		name string
		ops  []history.Op
		bad  bool
	}{
		{name: "create, exists, drop, gone", ops: []history.Op{
			metaOp(0, create, "db.a", false, ok, 1, 2), metaOp(1, exists, "db.a", true, ok, 3, 4),
			metaOp(1, drop, "db.a", true, ok, 5, 6), metaOp(0, exists, "db.a", false, ok, 7, 8),
			metaOp(0, drop, "db.a", false, ok, 9, 10),
		}},
		{name: "two concurrent creates: one creates, one finds it", ops: []history.Op{
			metaOp(0, create, "db.a", true, ok, 1, 5), metaOp(1, create, "db.a", false, ok, 2, 6),
		}},
		{name: "an unknown create applied late", ops: []history.Op{
			metaOp(0, create, "db.a", false, unknown, 1, 2), metaOp(1, exists, "db.a", false, ok, 3, 4),
			metaOp(1, exists, "db.a", true, ok, 5, 6), metaOp(1, create, "db.a", true, ok, 7, 8),
		}},
		{name: "lists see every table of their database", ops: []history.Op{
			metaOp(0, create, "db.a", false, ok, 1, 2), metaOp(0, create, "db.b", false, ok, 3, 4),
			metaOp(0, create, "other.c", false, ok, 5, 6), metaOp(1, list, "db", false, ok, 7, 8, "db.b", "db.a"),
			metaOp(1, drop, "db.a", true, ok, 9, 10), metaOp(1, list, "db", false, ok, 11, 12, "db.b"),
			metaOp(1, list, "db", false, fail, 13, 14, "nonsense"),
		}},
		{name: "a failed create says nothing", ops: []history.Op{
			metaOp(0, create, "db.a", false, fail, 1, 2), metaOp(1, exists, "db.a", false, ok, 3, 4),
		}},
		{name: "a create that vanished", bad: true, ops: []history.Op{
			metaOp(0, create, "db.a", false, ok, 1, 2), metaOp(1, exists, "db.a", false, ok, 3, 4),
		}},
		{name: "two creates both created", bad: true, ops: []history.Op{
			metaOp(0, create, "db.a", false, ok, 1, 5), metaOp(1, create, "db.a", false, ok, 2, 6),
		}},
		{name: "a dropped table still exists", bad: true, ops: []history.Op{
			metaOp(0, create, "db.a", false, ok, 1, 2), metaOp(0, drop, "db.a", true, ok, 3, 4),
			metaOp(1, exists, "db.a", true, ok, 5, 6),
		}},
		{name: "a list missing a created table", bad: true, ops: []history.Op{
			metaOp(0, create, "db.a", false, ok, 1, 2), metaOp(0, create, "db.b", false, ok, 3, 4),
			metaOp(1, list, "db", false, ok, 5, 6, "db.a"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := CheckMetadata(&history.History{Ops: tc.ops}, Options{Dir: dir})
			if !tc.bad {
				wantAnomalies(t, r, nil, nil)
				return
			}
			wantAnomalies(t, r, []string{AnomalyNonLinearizable}, nil)
			if _, err := os.Stat(filepath.Join(dir, "metadata-1.html")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Random histories of a linearizable catalog pass, with and without lists.
func TestMetadataRandomValidHistories(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 3))
		withLists := seed%2 == 0
		tables := map[string]bool{}
		kinds := []history.Kind{history.CreateTable, history.DropTable, history.TableExists}
		if withLists {
			kinds = append(kinds, history.ListTables)
		}
		ops := simulateLinearizable(rng, 3, 60, func(int) history.Op {
			op := history.Op{Kind: kinds[rng.IntN(len(kinds))], Table: fmt.Sprint("db.t", rng.IntN(3))}
			op.Outcome = []history.Outcome{history.OK, history.OK, history.Fail, history.Unknown}[rng.IntN(4)]
			if op.Kind == history.ListTables {
				op.Table = "db"
			}
			return op
		}, func(op *history.Op) {
			applied := op.Outcome == history.OK || (op.Outcome == history.Unknown && rng.IntN(2) == 0)
			switch op.Kind {
			case history.CreateTable:
				op.Found = tables[op.Table]
				if applied {
					tables[op.Table] = true
				}
			case history.DropTable:
				op.Found = tables[op.Table]
				if applied {
					delete(tables, op.Table)
				}
			case history.TableExists:
				op.Found = tables[op.Table]
			case history.ListTables:
				op.Tables = slices.Collect(maps.Keys(tables)) // any order
			}
		})
		if r := CheckMetadata(&history.History{Ops: ops}, Options{}); !r.OK {
			t.Fatalf("seed %d (lists %v): %+v", seed, withLists, r)
		}
	}
}
