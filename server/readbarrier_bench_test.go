package server

import (
	"context"
	"testing"

	"strom/internal/benchcpu"
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
