package kv

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"

	"pgregory.net/rapid"

	"strom/record"
)

// engineCase is a table configuration the property test draws.
type engineCase struct {
	name    string
	props   map[string]string
	aggs    map[string]string
	partial bool // the merge engine supports partial updates
}

var engineCases = []engineCase{
	{name: "default", partial: true},
	{name: "default-wal", props: map[string]string{record.OptChangelogImage: "WAL"}, partial: true},
	{name: "default-delete-ignore", props: map[string]string{record.OptDeleteBehavior: "IGNORE"}, partial: true},
	{name: "default-delete-disable", props: map[string]string{record.OptDeleteBehavior: "DISABLE"}, partial: true},
	{name: "first_row", props: map[string]string{record.OptMergeEngine: "FIRST_ROW"}},
	{name: "versioned", props: map[string]string{record.OptMergeEngine: "VERSIONED", record.OptMergeEngineVersionColumn: "ver"}},
	{name: "aggregation", props: map[string]string{record.OptMergeEngine: "AGGREGATION", record.OptDeleteBehavior: "ALLOW"},
		aggs: map[string]string{"name": "listagg", "v": "sum", "ver": "max", "flag": "bool_or"}, partial: true},
	{name: "aggregation-lz4", props: map[string]string{record.OptMergeEngine: "AGGREGATION",
		record.OptLogArrowCompressionType: "LZ4_FRAME"}, aggs: map[string]string{"v": "min"}, partial: true},
}

func drawRow(rt *rapid.T) record.Row {
	id := rapid.Int32Range(0, 7).Draw(rt, "id")
	row := record.Row{id, nil, nil, nil, nil}
	if rapid.Bool().Draw(rt, "name?") {
		row[1] = rapid.SampledFrom([]string{"", "a", "bb", "ccc"}).Draw(rt, "name")
	}
	if rapid.Bool().Draw(rt, "v?") {
		row[2] = rapid.Int64Range(-5, 5).Draw(rt, "v")
	}
	if rapid.IntRange(0, 4).Draw(rt, "ver?") > 0 {
		row[3] = rapid.Int64Range(0, 4).Draw(rt, "ver")
	}
	if rapid.Bool().Draw(rt, "flag?") {
		row[4] = rapid.Bool().Draw(rt, "flag")
	}
	return row
}

// TestChangelogInvariant is DESIGN.md §8 invariant 4 as a property: after
// every step of random upserts, partial updates, deletes, partial commits,
// restarts and truncations of the uncommitted tail, under every merge
// engine, folding the bucket's changelog from offset 0 up to the high
// watermark gives exactly the rows a full scan returns, and every lookup
// agrees.
func TestChangelogInvariant(t *testing.T) {
	root := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		ec := rapid.SampledFrom(engineCases).Draw(rt, "engine")
		d, err := record.TableDescriptor{Schema: testSchema(), Properties: ec.props}.Normalize(1)
		if err != nil {
			rt.Fatal(err)
		}
		dir, err := os.MkdirTemp(root, "prop")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		f := newFixtureIn(rt, dir, slog.New(slog.DiscardHandler), d, func(c *Config) { c.Aggregations = ec.aggs })
		defer f.close()
		ctx := context.Background()
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for range steps {
			switch action := rapid.IntRange(0, 9).Draw(rt, "action"); {
			case action < 6: // a PutKv
				var target []int
				if ec.partial && rapid.IntRange(0, 3).Draw(rt, "partial?") == 0 {
					target = []int{0}
					for c := 1; c < 5; c++ {
						if rapid.Bool().Draw(rt, "target") {
							target = append(target, c)
						}
					}
				}
				n := rapid.IntRange(1, 5).Draw(rt, "records")
				ops := make([]op, n)
				hasDelete := false
				for i := range ops {
					ops[i] = op{row: drawRow(rt), delete: rapid.IntRange(0, 3).Draw(rt, "delete?") == 0}
					hasDelete = hasDelete || ops[i].delete
				}
				end := f.log.LogEndOffset()
				_, err := f.kv.PutKv(ctx, f.batch(ops...), target)
				switch {
				case errors.Is(err, ErrDeletionDisabled) && hasDelete:
					if f.log.LogEndOffset() != end {
						rt.Fatal("a rejected batch was appended")
					}
				case err != nil:
					rt.Fatalf("PutKv: %v", err)
				}
			case action < 8: // commit, fully or part of the way
				end := f.log.LogEndOffset()
				hw := f.log.HighWatermark()
				if end > hw {
					hw = rapid.Int64Range(hw, end).Draw(rt, "hw")
				}
				f.log.SetHighWatermark(hw)
				if err := f.kv.FlushTo(hw); err != nil {
					rt.Fatal(err)
				}
			case action == 8: // restart
				f.reopen()
			default: // a leader change drops the uncommitted tail
				to := f.log.HighWatermark()
				if to > 0 && rapid.IntRange(0, 3).Draw(rt, "unclean?") == 0 {
					// An unclean election: committed batches go too, and
					// the KV is rebuilt from the log.
					to = rapid.Int64Range(0, to-1).Draw(rt, "truncate to")
				}
				if err := f.log.TruncateTo(to); err != nil {
					rt.Fatal(err)
				}
				if err := f.kv.TruncateTo(to); err != nil {
					rt.Fatal(err)
				}
			}
			f.checkInvariant()
		}
		f.commit()
		f.checkInvariant()
	})
}
