package kv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"strom/record"
)

// The benchmark table is shaped like the seed's fluss_customer (TPC-H's
// customer): a BIGINT key and seven columns of names, addresses, phone
// numbers, money and comments.
func benchSchema() record.Schema {
	col := func(name string, root record.TypeRoot) record.Column {
		return record.Column{Name: name, Type: record.DataType{Root: root, Nullable: name != "cust_key"}}
	}
	dec := col("acctbal", record.Decimal)
	dec.Type.Precision, dec.Type.Scale = 15, 2
	return record.Schema{Columns: []record.Column{
		col("cust_key", record.BigInt), col("name", record.String), col("address", record.String),
		col("nation_key", record.Int), col("phone", record.String), dec,
		col("mktsegment", record.String), col("comment", record.String),
	}, PrimaryKey: []string{"cust_key"}}
}

var benchWords = strings.Fields("furiously special foxes haggle carefully final requests ironic deposits " +
	"sleep quickly blithely regular accounts boost slyly express packages cajole even theodolites " +
	"pending instructions wake bold pinto beans nag silent platelets detect unusual courts")

func benchRow(rng *rand.Rand, key int64) record.Row {
	bal, _ := record.DecimalFromInt64(rng.Int64N(1_100_000)-100_000, 15, 2)
	nation := rng.IntN(25)
	var comment strings.Builder
	for i := range 6 + rng.IntN(8) {
		if i > 0 {
			comment.WriteByte(' ')
		}
		comment.WriteString(benchWords[rng.IntN(len(benchWords))])
	}
	addr := make([]byte, 10+rng.IntN(15))
	for i := range addr {
		addr[i] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789,"[rng.IntN(63)]
	}
	return record.Row{
		key,
		fmt.Sprintf("Customer#%09d", key),
		string(addr),
		int32(nation),
		fmt.Sprintf("%02d-%03d-%03d-%04d", 10+nation, rng.IntN(1000), rng.IntN(1000), rng.IntN(10000)),
		bal,
		[]string{"AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"}[rng.IntN(5)],
		comment.String(),
	}
}

const benchBatch = 100 // rows per PutKv

// benchKeys returns the keys and KV values of n rows, and the KV batches
// writing them benchBatch at a time.
func benchData(b *testing.B, f *fixture, n int, seed uint64) ([][]byte, [][]byte, []record.KvBatch) {
	rng := rand.New(rand.NewPCG(seed, 2))
	keys := make([][]byte, n)
	vals := make([][]byte, n)
	var batches []record.KvBatch
	var ops []op
	for i := range n {
		row := benchRow(rng, int64(i))
		var err error
		if keys[i], err = f.keys.AppendRow(nil, row); err != nil {
			b.Fatal(err)
		}
		if vals[i], err = f.rows.AppendKvValue(nil, 1, row); err != nil {
			b.Fatal(err)
		}
		ops = append(ops, up(row...))
		if len(ops) == benchBatch {
			batches = append(batches, f.batch(ops...))
			ops = ops[:0]
		}
	}
	return keys, vals, batches
}

// benchCacheSize is the block cache of every benchmark database, the
// tablet's and the raw baselines' alike: a node shares one cache of this
// order among its buckets.
const benchCacheSize = 256 << 20

func benchFixture(b *testing.B) *fixture {
	return benchFixtureWAL(b, true)
}

// benchFixtureWAL is benchFixture with Pebble's own WAL on or off.
func benchFixtureWAL(b *testing.B, wal bool) *fixture {
	d := testTable(b, benchSchema(), nil)
	cache := pebble.NewCache(benchCacheSize)
	b.Cleanup(cache.Unref)
	return newFixture(b, d, func(c *Config) { c.Logger = testLogger(b); c.Cache = cache; c.DisableWAL = !wal })
}

// rawPebble opens a bare Pebble database with the same block cache and
// memtable sizes as the tablet's.
func rawPebble(b *testing.B) *pebble.DB {
	cache := pebble.NewCache(benchCacheSize)
	defer cache.Unref()
	db, err := pebble.Open(filepath.Join(b.TempDir(), "raw"), &pebble.Options{Cache: cache, MemTableSize: DefaultMemTableSize, Logger: pebbleLogger{testLogger(b)}})
	if err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkPutKv measures the leader write path per row: merge (a read of
// the current row), the ZSTD Arrow changelog, the log append, the commit
// (FlushTo into Pebble). insert writes new keys; update rewrites existing
// ones (-U and +U in the changelog). nowal variants turn Pebble's own WAL
// off (Config.DisableWAL).
func BenchmarkPutKv(b *testing.B) {
	for _, mode := range []string{"insert", "update", "insert/nowal", "update/nowal"} {
		b.Run(mode, func(b *testing.B) {
			f := benchFixtureWAL(b, !strings.HasSuffix(mode, "/nowal"))
			mode = strings.TrimSuffix(mode, "/nowal")
			ctx := context.Background()
			_, _, batches := benchData(b, f, 100_000, 1)
			if mode == "update" {
				for _, kb := range batches {
					if _, err := f.kv.PutKv(ctx, append(record.KvBatch(nil), kb...), nil); err != nil {
						b.Fatal(err)
					}
				}
				f.commit()
			}
			var logBytes int64
			start := f.log.LogEndOffset()
			_ = start
			b.ResetTimer()
			for i := range b.N {
				if _, err := f.kv.PutKv(ctx, batches[i%len(batches)], nil); err != nil {
					b.Fatal(err)
				}
				hw := f.log.SetHighWatermark(f.log.LogEndOffset())
				if err := f.kv.FlushTo(hw); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			for _, s := range f.log.Segments() {
				logBytes += s.Size
			}
			b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/row")
		})
	}
}

// BenchmarkPebbleSet is PutKv's baseline: raw Pebble Sets of the same keys
// and values, benchBatch per Pebble batch, unsynced, on a database opened
// as the tablet opens its own.
func BenchmarkPebbleSet(b *testing.B) {
	f := benchFixture(b)
	keys, vals, _ := benchData(b, f, 100_000, 1)
	db := rawPebble(b)
	defer db.Close()
	b.ResetTimer()
	for i := range b.N {
		batch := db.NewBatch()
		for j := range benchBatch {
			k := (i*benchBatch + j) % len(keys)
			if err := batch.Set(keys[k], vals[k], nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := batch.Commit(pebble.NoSync); err != nil {
			b.Fatal(err)
		}
		batch.Close()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/row")
}

const lookupRows = 100_000

// BenchmarkLookup measures batched lookups (benchBatch random keys per
// call) of a bucket of 100 000 committed rows.
func BenchmarkLookup(b *testing.B) {
	f := benchFixture(b)
	ctx := context.Background()
	keys, _, batches := benchData(b, f, lookupRows, 1)
	for _, kb := range batches {
		if _, err := f.kv.PutKv(ctx, kb, nil); err != nil {
			b.Fatal(err)
		}
	}
	f.commit()
	rng := rand.New(rand.NewPCG(3, 3))
	req := make([][]byte, benchBatch)
	b.ResetTimer()
	for range b.N {
		for j := range req {
			req[j] = keys[rng.IntN(len(keys))]
		}
		vals, err := f.kv.Lookup(req)
		if err != nil || vals[0] == nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/key")
}

// BenchmarkPebbleGet is Lookup's baseline: raw Pebble Gets of the same keys
// from a database holding the same rows.
func BenchmarkPebbleGet(b *testing.B) {
	f := benchFixture(b)
	keys, vals, _ := benchData(b, f, lookupRows, 1)
	db := rawPebble(b)
	defer db.Close()
	batch := db.NewBatch()
	for i := range keys {
		batch.Set(keys[i], vals[i], nil)
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		b.Fatal(err)
	}
	batch.Close()
	rng := rand.New(rand.NewPCG(3, 3))
	b.ResetTimer()
	for range b.N {
		for range benchBatch {
			v, closer, err := db.Get(keys[rng.IntN(len(keys))])
			if err != nil {
				b.Fatal(err)
			}
			_ = append([]byte(nil), v...) // Lookup returns copies too
			closer.Close()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/key")
}

// BenchmarkChangelogCompression reports how much ZSTD (level 3, the
// default) shrinks the changelog batches PutKv writes for the benchmark's
// rows: inserts (+I) and updates (-U, +U), with 100 and 1000 rows per
// PutKv. The addresses are random characters, as in TPC-H, and do not
// compress; the other columns do.
func BenchmarkChangelogCompression(b *testing.B) {
	s := benchSchema()
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]record.Row, 10_000)
	for i := range rows {
		rows[i] = benchRow(rng, int64(i))
	}
	build := func(c record.ArrowCompression, update bool, per int) int {
		ab, err := record.NewArrowBuilder(s, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ab.Release()
		total := 0
		for i := 0; i < len(rows); i += per {
			for _, r := range rows[i : i+per] {
				if update {
					ab.Append(r, record.UpdateBefore)
					ab.Append(r, record.UpdateAfter)
				} else {
					ab.Append(r, record.Insert)
				}
			}
			buf, _, err := ab.Build(nil, record.BatchHeader{SchemaID: 1, WriterID: -1, BatchSequence: -1}, c)
			if err != nil {
				b.Fatal(err)
			}
			total += len(buf)
		}
		return total
	}
	for _, per := range []int{benchBatch, 1000} {
		for _, update := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/rows=%d", map[bool]string{false: "insert", true: "update"}[update], per), func(b *testing.B) {
				var raw, zstd int
				for range b.N {
					raw = build(record.ArrowCompression{Type: record.CompressionNone}, update, per)
					zstd = build(record.DefaultArrowCompression, update, per)
				}
				b.ReportMetric(float64(raw)/float64(zstd), "zstd-ratio")
				b.ReportMetric(float64(raw)/float64(len(rows)), "raw-B/row")
			})
		}
	}
}
