package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cockroachdb/pebble/v2"
	"github.com/spf13/cobra"

	"strom/client"
	"strom/record"
)

// The primary-key benchmarks. Each prints, beside its own figure, raw Pebble
// on the same keys and values in a temporary directory, measured in the
// same run: the baseline the targets are ratios of.

// kvRows makes n rows for s, their strings about 100 bytes of words (the
// size of TPC-H's customer comments, Fluss's walk-through table); a
// fraction updateRatio of them reuse the key of an earlier row (updates),
// the rest have new keys.
func kvRows(s record.Schema, n int, updateRatio float64, seed uint64) []record.Row {
	rng := rand.New(rand.NewPCG(seed, 11))
	pk := s.PrimaryKeyIndexes()
	rows := make([]record.Row, 0, n)
	for i := 0; i < n; i++ {
		row := genRow(rng, s, 100)
		if len(rows) > 0 && rng.Float64() < updateRatio {
			old := rows[rng.IntN(len(rows))]
			for _, k := range pk {
				row[k] = old[k]
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// pebbleBaseline writes rows as raw Pebble Sets (compacted key → KV value,
// in batches of batch rows, no fsync) into a temporary database and returns
// the database, the rows/s of the writes, and a cleanup.
func pebbleBaseline(s record.Schema, rows []record.Row, batch int) (*pebble.DB, float64, func(), error) {
	dir, err := os.MkdirTemp("", "strom-bench-pebble-*")
	if err != nil {
		return nil, 0, nil, err
	}
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		os.RemoveAll(dir)
		return nil, 0, nil, err
	}
	cleanup := func() { db.Close(); os.RemoveAll(dir) }
	pk, err := record.NewKeyCodec(s.Columns, s.PrimaryKey)
	if err != nil {
		cleanup()
		return nil, 0, nil, err
	}
	codec, err := record.NewCompactedRowCodec(s.Columns)
	if err != nil {
		cleanup()
		return nil, 0, nil, err
	}
	keys := make([][]byte, len(rows))
	values := make([][]byte, len(rows))
	for i, r := range rows {
		if keys[i], err = pk.AppendRow(nil, r); err == nil {
			values[i], err = codec.AppendKvValue(nil, 1, r)
		}
		if err != nil {
			cleanup()
			return nil, 0, nil, err
		}
	}
	start := time.Now()
	b := db.NewBatch()
	for i := range rows {
		if err := b.Set(keys[i], values[i], nil); err != nil {
			cleanup()
			return nil, 0, nil, err
		}
		if b.Count() >= uint32(batch) || i == len(rows)-1 {
			if err := b.Commit(pebble.NoSync); err != nil {
				cleanup()
				return nil, 0, nil, err
			}
			b = db.NewBatch()
		}
	}
	return db, float64(len(rows)) / time.Since(start).Seconds(), cleanup, nil
}

type upsertResult struct {
	Rows             int     `json:"rows"`
	Seconds          float64 `json:"seconds"`
	RecordsPerSec    float64 `json:"records_per_sec"`
	PebbleSetsPerSec float64 `json:"baseline_pebble_sets_per_sec"`
	Ratio            float64 `json:"ratio_to_pebble"`
	ChangelogZSTD    float64 `json:"changelog_zstd_ratio"`
}

func newBenchUpsertCmd(g *globals) *cobra.Command {
	var rows int
	var updateRatio float64
	cmd := &cobra.Command{
		Use:   "upsert DB.TABLE --rows N [--update-ratio R]",
		Short: "Upsert rows into a primary-key table; compare with raw Pebble Sets of the same data",
		Args:  exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			if rows < 1 || updateRatio < 0 || updateRatio > 1 {
				return fmt.Errorf("--rows must be ≥ 1 and --update-ratio within [0, 1]")
			}
			return g.callLong(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Table(ctx, db, name)
				if err != nil {
					return err
				}
				data := kvRows(t.Schema(), rows, updateRatio, uint64(time.Now().UnixNano()))
				// The baseline runs before and after the real thing (the
				// machine's speed drifts); their mean is compared.
				_, before, cleanup, err := pebbleBaseline(t.Schema(), data, 1000)
				if err != nil {
					return err
				}
				cleanup()
				ratio, err := changelogRatio(t, data)
				if err != nil {
					return err
				}
				w, err := t.NewUpsertWriter(ctx)
				if err != nil {
					return err
				}
				start := time.Now()
				for _, r := range data {
					if f := w.Upsert(ctx, r); isDone(f) && f.Err() != nil {
						return f.Err()
					}
				}
				if err := w.Close(ctx); err != nil {
					return err
				}
				secs := time.Since(start).Seconds()
				_, after, cleanup, err := pebbleBaseline(t.Schema(), data, 1000)
				if err != nil {
					return err
				}
				cleanup()
				pebbleRate := (before + after) / 2
				res := upsertResult{Rows: rows, Seconds: secs, RecordsPerSec: float64(rows) / secs, PebbleSetsPerSec: pebbleRate, ChangelogZSTD: ratio}
				res.Ratio = res.RecordsPerSec / pebbleRate
				if g.output == "json" {
					return json.NewEncoder(g.out).Encode(res)
				}
				fmt.Fprintf(g.out, "upserted %d rows (%.0f%% updates) in %.2fs: %.0f records/s\n", rows, updateRatio*100, secs, res.RecordsPerSec)
				fmt.Fprintf(g.out, "baseline: raw Pebble Sets of the same keys and values: %.0f/s (%.0f before, %.0f after); ratio %.2f\n",
					pebbleRate, before, after, res.Ratio)
				fmt.Fprintf(g.out, "changelog batches of these rows compress %.2f× with the table's codec\n", ratio)
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&rows, "rows", 200000, "rows to upsert")
	cmd.Flags().Float64Var(&updateRatio, "update-ratio", 0.3, "fraction of writes that update an existing key")
	return cmd
}

// changelogRatio encodes rows as changelog batches (+I) of about 2 MiB,
// uncompressed and with the table's codec, and returns the size ratio.
func changelogRatio(t *client.Table, rows []record.Row) (float64, error) {
	comp, err := record.CompressionOf(tableDescriptor(t))
	if err != nil {
		return 0, err
	}
	var raw, packed int
	for _, c := range []record.ArrowCompression{{Type: record.CompressionNone}, comp} {
		b, err := record.NewArrowBuilder(t.Schema(), memory.DefaultAllocator)
		if err != nil {
			return 0, err
		}
		size := 0
		for i, r := range rows {
			if err := b.Append(r, record.Insert); err != nil {
				return 0, err
			}
			if b.EstimatedSize() >= 2<<20 || i == len(rows)-1 {
				buf, _, err := b.Build(nil, record.BatchHeader{SchemaID: 1, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence}, c)
				if err != nil {
					return 0, err
				}
				size += len(buf)
			}
		}
		if c.Type == record.CompressionNone {
			raw = size
		} else {
			packed = size
		}
	}
	return float64(raw) / float64(packed), nil
}

type lookupResult struct {
	Keys             int     `json:"keys"`
	Batch            int     `json:"batch"`
	RecordsPerSec    float64 `json:"records_per_sec"`
	P50Ms            float64 `json:"p50_ms"`
	P99Ms            float64 `json:"p99_ms"`
	PebbleGetsPerSec float64 `json:"baseline_pebble_gets_per_sec"`
	Ratio            float64 `json:"ratio_to_pebble"`
}

func newBenchLookupCmd(g *globals) *cobra.Command {
	var batch, rounds int
	cmd := &cobra.Command{
		Use:   "lookup DB.TABLE [--batch N]",
		Short: "Look up every key of a primary-key table in batches; compare with raw Pebble Gets",
		Long: `Scans the table for its keys, then looks all of them up through the API in batches of --batch
keys (records/s, and p50/p99 per batch), and, as the baseline in the same run, loads the same rows
into a temporary Pebble database and Gets every key.`,
		Args: exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			if batch < 1 || rounds < 1 {
				return fmt.Errorf("--batch and --rounds must be ≥ 1")
			}
			return g.callLong(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Table(ctx, db, name)
				if err != nil {
					return err
				}
				var rows []record.Row
				for b := int32(0); b < t.Buckets(); b++ {
					got, err := t.Scan(ctx, b, 0)
					if err != nil {
						return err
					}
					rows = append(rows, got...)
				}
				if len(rows) == 0 {
					return fmt.Errorf("%s.%s is empty: load it first, e.g. strom bench upsert %s.%s", db, name, db, name)
				}
				rand.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
				pkIdx := t.Schema().PrimaryKeyIndexes()
				keys := make([]record.Row, len(rows))
				for i, r := range rows {
					for _, k := range pkIdx {
						keys[i] = append(keys[i], r[k])
					}
				}
				l, err := t.NewLookuper()
				if err != nil {
					return err
				}
				before, err := pebbleGets(t.Schema(), rows, rounds)
				if err != nil {
					return err
				}
				var lat []time.Duration
				start := time.Now()
				for r := 0; r < rounds; r++ {
					for i := 0; i < len(keys); i += batch {
						t0 := time.Now()
						got, err := l.Lookup(ctx, keys[i:min(i+batch, len(keys))]...)
						if err != nil {
							return err
						}
						lat = append(lat, time.Since(t0))
						for j, g := range got {
							if g == nil {
								return fmt.Errorf("key %v not found though the scan returned it", keys[i+j])
							}
						}
					}
				}
				secs := time.Since(start).Seconds()
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				after, err := pebbleGets(t.Schema(), rows, rounds)
				if err != nil {
					return err
				}
				pebbleRate := (before + after) / 2
				res := lookupResult{Keys: len(keys) * rounds, Batch: batch, RecordsPerSec: float64(len(keys)*rounds) / secs,
					P50Ms: ms(lat[len(lat)/2]), P99Ms: ms(lat[len(lat)*99/100]), PebbleGetsPerSec: pebbleRate}
				res.Ratio = res.RecordsPerSec / pebbleRate
				if g.output == "json" {
					return json.NewEncoder(g.out).Encode(res)
				}
				fmt.Fprintf(g.out, "looked up %d keys in batches of %d: %.0f records/s, p50 %.2f ms, p99 %.2f ms per batch\n",
					res.Keys, batch, res.RecordsPerSec, res.P50Ms, res.P99Ms)
				fmt.Fprintf(g.out, "baseline: raw Pebble Gets of the same keys: %.0f/s; ratio %.2f\n", pebbleRate, res.Ratio)
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&batch, "batch", 100, "keys per lookup request")
	cmd.Flags().IntVar(&rounds, "rounds", 1, "times every key is looked up")
	return cmd
}

// quietLogger keeps Pebble's informational logs out of the benchmark's output.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)         {}
func (quietLogger) Errorf(f string, args ...any) { fmt.Fprintf(os.Stderr, "pebble: "+f+"\n", args...) }
func (quietLogger) Fatalf(f string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+f+"\n", args...)
	os.Exit(1)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pebbleGets loads rows into a temporary Pebble database, then Gets every
// key rounds times, and returns the Gets per second.
func pebbleGets(s record.Schema, rows []record.Row, rounds int) (float64, error) {
	db, _, cleanup, err := pebbleBaseline(s, rows, 1000)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	pk, err := record.NewKeyCodec(s.Columns, s.PrimaryKey)
	if err != nil {
		return 0, err
	}
	keys := make([][]byte, len(rows))
	for i, r := range rows {
		if keys[i], err = pk.AppendRow(nil, r); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	for r := 0; r < rounds; r++ {
		for _, k := range keys {
			v, closer, err := db.Get(k)
			if err != nil {
				return 0, err
			}
			_ = v
			closer.Close()
		}
	}
	return float64(len(keys)*rounds) / time.Since(start).Seconds(), nil
}
