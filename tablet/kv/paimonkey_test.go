package kv

import (
	"context"
	"errors"
	"testing"

	"strom/record"
)

// A table with table.datalake.format paimon is keyed as the Fluss 0.9.1
// client keys it (record.PrimaryKeyEncoder: Paimon BinaryRow keys): an
// upsert and a delete under Paimon keys are taken, a lookup by the Paimon
// key finds the row, also after a reopen that rebuilds the keys from the
// changelog, and a compacted key is refused as not its row's key. Before,
// the tablet wanted compacted keys and refused every write of the real
// client to a lake table ("the record's key ... is not the key of its
// row's primary key columns").
func TestPaimonKeyedTable(t *testing.T) {
	d := testTable(t, testSchema(), map[string]string{record.OptDatalakeFormat: "paimon"})
	f := newFixture(t, d, nil)
	pk, err := record.NewPaimonKeyCodec(d.Schema.Columns, d.Schema.PrimaryKey)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(key func(record.Row) []byte, rows ...record.Row) record.KvBatch {
		b := record.NewKvBatchBuilder(record.KvBatchHeader{SchemaID: 1, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence})
		for _, r := range rows {
			var val []byte
			if r[1] != "deleted" {
				if val, err = f.rows.Append(nil, r); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Append(key(r), val); err != nil {
				t.Fatal(err)
			}
		}
		return b.Build()
	}
	paimonKey := func(r record.Row) []byte {
		k, err := pk.AppendRow(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	compactedKey := func(r record.Row) []byte {
		k, err := f.keys.AppendRow(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	r1 := record.Row{int32(1), "one", int64(10), nil, nil}
	r2 := record.Row{int32(2), "two", int64(20), nil, nil}
	gone := record.Row{int32(2), "deleted", nil, nil, nil}
	for _, b := range []record.KvBatch{batch(paimonKey, r1, r2), batch(paimonKey, gone)} {
		if _, err := f.kv.PutKv(context.Background(), b, nil); err != nil {
			t.Fatalf("PutKv with Paimon keys: %v", err)
		}
		f.commit()
	}
	lookup := func(r record.Row) []byte {
		vals, err := f.kv.Lookup([][]byte{paimonKey(r)})
		if err != nil {
			t.Fatal(err)
		}
		return vals[0]
	}
	check := func(when string) {
		if lookup(r1) == nil || lookup(r2) != nil {
			t.Errorf("%s: lookup by Paimon key: 1 present %v, 2 absent %v", when, lookup(r1) != nil, lookup(r2) == nil)
		}
	}
	check("written")
	f.reopen()
	check("reopened")
	if _, err := f.kv.PutKv(context.Background(), batch(compactedKey, r1), nil); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("a compacted key on a Paimon-keyed table: %v, want ErrInvalidRecord", err)
	}
}
