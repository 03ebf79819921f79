package client_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// allTypesColumns is a column of every type the client writes and reads,
// after a BIGINT NOT NULL id; all but the id are nullable.
func allTypesColumns() []*stromv1.Column {
	types := []string{"BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(10, 2)", "DECIMAL(30, 5)",
		"CHAR(5)", "STRING", "BINARY(4)", "BYTES", "DATE", "TIME(3)", "TIMESTAMP(3)", "TIMESTAMP(6)", "TIMESTAMP_LTZ(3)", "TIMESTAMP_LTZ(9)"}
	cols := []*stromv1.Column{{Name: "id", Type: "BIGINT NOT NULL"}}
	for i, t := range types {
		cols = append(cols, &stromv1.Column{Name: fmt.Sprintf("c%d", i), Type: t})
	}
	return cols
}

// allTypesRow is row id of allTypesColumns, with a NULL in every seventh
// value.
func allTypesRow(t testing.TB, id int64) record.Row {
	dec := func(unscaled int64, p, s int32) record.DecimalValue {
		d, err := record.DecimalFromInt64(unscaled, p, s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC).Add(time.Duration(id) * 1234567891)
	vals := []any{
		id%2 == 0, int8(id), int16(id * 7), int32(id * 1001), id * 1_000_003, float32(id) / 3, float64(id) / 7,
		dec(id*37, 10, 2), dec(id*1_000_000_007, 30, 5), fmt.Sprintf("%05d", id%100000), fmt.Sprint("row ", id, " of many"),
		[]byte{byte(id), byte(id >> 8), 1, 2}, []byte(fmt.Sprint("bytes ", id)), record.DateValue(id % 30000),
		record.TimeOfDay(id * 997 % 86_400_000), record.TimestampNTZ{Millis: at.UnixMilli()},
		record.TimestampNTZ{Millis: at.UnixMilli(), NanoOfMilli: int32(id%1000) * 1000}, record.Instant{EpochMillis: at.UnixMilli()},
		record.Instant{EpochMillis: at.UnixMilli(), NanoOfMilli: int32(id * 7919 % 1_000_000)},
	}
	row := record.Row{id}
	for c, v := range vals {
		if (id+int64(c))%7 == 0 {
			v = nil
		}
		row = append(row, v)
	}
	return row
}

// scanRecords reads n rows of every bucket of tbl from offset 0 with opts,
// and returns the records in bucket and offset order and the number of
// batches they came in.
func scanRecords(t *testing.T, tbl *client.Table, n int, opts ...client.ScanOption) ([]client.ScanRecord, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc, err := tbl.NewLogScanner(append([]client.ScanOption{client.MaxWait(10 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for b := range tbl.Buckets() {
		if err := sc.Subscribe(ctx, b, client.AtOffset(0)); err != nil {
			t.Fatal(err)
		}
	}
	var out []client.ScanRecord
	batches := 0
	for len(out) < n {
		fs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Errors(); err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			batches += len(f.Batches)
		}
		out = append(out, fs.Records()...)
		fs.Release()
	}
	slices.SortFunc(out, func(a, b client.ScanRecord) int {
		if a.Bucket != b.Bucket {
			return int(a.Bucket - b.Bucket)
		}
		return int(a.Offset - b.Offset)
	})
	return out, batches
}

// The batches of a fetch decoded at once (DecodeConcurrency above 1) give what decoding them one after another gives: the same
// records, every column type, NULLs, whole rows and projected ones.
func TestParallelDecodeMatchesSerial(t *testing.T) {
	ctx := context.Background()
	const n = 3000
	tbl := createTable(t, startNode(t), "demo", "types", 3, nil, allTypesColumns()...)
	w, err := tbl.NewAppendWriter(ctx, client.BatchSize(16<<10)) // many batches per fetch
	if err != nil {
		t.Fatal(err)
	}
	want := make([]record.Row, n)
	for i := range want {
		want[i] = allTypesRow(t, int64(i))
		w.Append(ctx, want[i])
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, cols := range [][]string{nil, {"id", "c2", "c7", "c8", "c10", "c12", "c16", "c18"}} {
		t.Run(fmt.Sprintf("columns=%d", len(cols)), func(t *testing.T) {
			opts := []client.ScanOption{client.Columns(cols...), client.FetchMaxBytes(16<<20, 1<<20)}
			serial, batches := scanRecords(t, tbl, n, append(opts, client.DecodeConcurrency(1))...)
			if batches < 3*4 {
				t.Fatalf("%d rows came in %d batches: too few to decode some at once", n, batches)
			}
			// The index of each column read in the table's rows.
			idx := []int{}
			for i, c := range allTypesColumns() {
				if len(cols) == 0 || slices.Contains(cols, c.Name) {
					idx = append(idx, i)
				}
			}
			seen := make([]bool, n)
			for _, r := range serial {
				id := r.Row[0].(int64)
				var exp record.Row
				for _, i := range idx {
					exp = append(exp, want[id][i])
				}
				if seen[id] || !r.Row.Equal(exp) {
					t.Fatalf("serial decode: row %d (seen before: %v) = %v, want %v", id, seen[id], r.Row, exp)
				}
				seen[id] = true
			}
			for _, k := range []int{2, 8, runtime.GOMAXPROCS(0)} {
				got, _ := scanRecords(t, tbl, n, append(opts, client.DecodeConcurrency(k))...)
				if len(got) != len(serial) {
					t.Fatalf("DecodeConcurrency(%d): %d records, serially %d", k, len(got), len(serial))
				}
				for i := range got {
					g, s := got[i], serial[i]
					if g.Bucket != s.Bucket || g.Offset != s.Offset || !g.Timestamp.Equal(s.Timestamp) || g.ChangeType != s.ChangeType || !g.Row.Equal(s.Row) {
						t.Fatalf("DecodeConcurrency(%d): record %d = %+v, serially %+v", k, i, g, s)
					}
				}
			}
		})
	}
}
