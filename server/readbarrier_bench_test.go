package server

import (
	"context"
	"os"
	"slices"
	"testing"

	"strom/fluss/listener"
	"strom/internal/benchcpu"
	"strom/raftmeta/catalog"
	"strom/record"
)

// BenchmarkLookupReadBarrier measures what the metadata read barrier adds
// to a lookup of one key on a single node (docs/benchmarks.md, "Lookup
// read barrier"): the KV read as before it (the replica's own view of its
// leadership), the same read through kvOf (ReadIndex, then the leader_isr
// check), each one caller at a time and with parallel callers (whose
// barriers coalesce). Run with -benchtime and -count to compare; the
// ratios are the result, not the absolute numbers.
func BenchmarkLookupReadBarrier(b *testing.B) {
	s := startServer(b, testConfig(b, b.TempDir()))
	createTable(b, s, "shop", "things", "id BIGINT NOT NULL, v STRING", 1, "id")
	h := &tabletHandler{s: s}
	kt, err := h.kvTable("shop", "things")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	key, err := kt.pk.AppendRow(nil, record.Row{int64(1), "one"})
	if err != nil {
		b.Fatal(err)
	}
	row, err := kt.rows.Append(nil, record.Row{int64(1), "one"})
	if err != nil {
		b.Fatal(err)
	}
	bb := record.NewKvBatchBuilder(record.KvBatchHeader{SchemaID: int16(kt.SchemaID), WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence})
	if err := bb.Append(key, row); err != nil {
		b.Fatal(err)
	}
	r, err := h.replica(kt.Table, 0)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.PutKv(ctx, bb.Build(), nil, -1); err != nil {
		b.Fatal(err)
	}
	keys := [][]byte{key}
	without := func() error {
		r, err := h.replica(kt.Table, 0)
		if err != nil {
			return err
		}
		tab, err := r.KV(ctx)
		if err != nil {
			return err
		}
		_, err = tab.Lookup(keys)
		return err
	}
	with := func() error {
		tab, err := h.kvOf(ctx, &readBarrier{}, kt.Table, 0)
		if err != nil {
			return err
		}
		_, err = tab.Lookup(keys)
		return err
	}
	for _, bc := range []struct {
		name string
		fn   func() error
	}{{"without", without}, {"with", with}} {
		benchcpu.Run(b, bc.name, bc.fn)
	}
}

// BenchmarkFlussLookupBarriers measures the Fluss listener's LOOKUP read
// of one key in each of 8 buckets on a single node (docs/benchmarks.md,
// "Fluss LOOKUP: one read barrier a request"): "per-bucket" runs a read
// barrier for every bucket, as the listener did before, "shared" one for
// the request (flussKV.NewRead). STROM_BENCH_REVERSE=1 runs them in the
// other order.
func BenchmarkFlussLookupBarriers(b *testing.B) {
	s := startServer(b, testConfig(b, b.TempDir()))
	const buckets = 8
	createTable(b, s, "shop", "wide", "id BIGINT NOT NULL, v STRING", buckets, "id")
	h := &tabletHandler{s: s}
	kt, err := h.kvTable("shop", "wide")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	keys := make([][][]byte, buckets) // one key in each bucket
	for id, found := int64(0), 0; found < buckets; id++ {
		row := record.Row{id, "v"}
		bucket, err := kt.bucketOf(row)
		if err != nil {
			b.Fatal(err)
		}
		if keys[bucket] != nil {
			continue
		}
		key, err := kt.pk.AppendRow(nil, row)
		if err != nil {
			b.Fatal(err)
		}
		keys[bucket] = [][]byte{key}
		found++
	}
	f := flussKV{h: h}
	read := func(next func() listener.KVRead) func() error {
		return func() error {
			budget := f.LookupMaxBytes()
			rd := next()
			for bucket := range int32(buckets) {
				if _, err := rd.Lookup(ctx, kt.Table, bucket, keys[bucket], &budget); err != nil {
					return err
				}
			}
			return nil
		}
	}
	cases := []struct {
		name string
		fn   func() error
	}{
		{"per-bucket", read(func() listener.KVRead { return perBucketRead{f} })},
		{"shared", read(f.NewRead)},
	}
	if os.Getenv("STROM_BENCH_REVERSE") == "1" { // as client/bench_test.go's variants
		slices.Reverse(cases)
	}
	for _, bc := range cases {
		benchcpu.Run(b, bc.name, bc.fn)
	}
}

// perBucketRead is the listener's read before flussKV.NewRead: a read
// barrier for every bucket.
type perBucketRead struct{ f flussKV }

func (r perBucketRead) Lookup(ctx context.Context, t catalog.Table, bucket int32, keys [][]byte, budget *int) ([][]byte, error) {
	return r.f.NewRead().Lookup(ctx, t, bucket, keys, budget)
}

func (r perBucketRead) PrefixLookup(ctx context.Context, t catalog.Table, bucket int32, prefixes [][]byte, budget *int) ([][][]byte, error) {
	return r.f.NewRead().PrefixLookup(ctx, t, bucket, prefixes, budget)
}
