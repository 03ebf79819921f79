package client_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// Fetches.Rows yields the records Records returns, in the same order, and
// each typed accessor reads the value Records built; with the scan starting
// inside a batch (the writer sends the 300 rows as one) and with a
// projection.
func TestRowViewReadsWhatRecordsBuilds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startNode(t)
	tbl := createTable(t, c, "demo", "typed", 1, nil,
		&stromv1.Column{Name: "b", Type: "BOOLEAN"}, &stromv1.Column{Name: "i8", Type: "TINYINT"},
		&stromv1.Column{Name: "i16", Type: "SMALLINT"}, &stromv1.Column{Name: "i32", Type: "INT"},
		&stromv1.Column{Name: "i64", Type: "BIGINT"}, &stromv1.Column{Name: "f32", Type: "FLOAT"},
		&stromv1.Column{Name: "f64", Type: "DOUBLE"}, &stromv1.Column{Name: "s", Type: "STRING"},
		&stromv1.Column{Name: "by", Type: "BYTES"}, &stromv1.Column{Name: "bin", Type: "BINARY(2)"},
		&stromv1.Column{Name: "d", Type: "DATE"})
	w, err := tbl.NewAppendWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		row := record.Row{i%2 == 0, int8(i), int16(i), int32(i), int64(i), float32(i) / 2, float64(i) / 4,
			fmt.Sprint("s", i), []byte{byte(i), 1}, []byte{byte(i), 2}, record.DateValue(i)}
		if i%7 == 0 {
			row = make(record.Row, len(row)) // all NULL
		}
		w.Append(ctx, row)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, cols := range [][]string{nil, {"i64", "s", "bin"}} {
		sc, err := tbl.NewLogScanner(client.Columns(cols...), client.MaxWait(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.Subscribe(ctx, 0, client.AtOffset(3)); err != nil { // inside the first batch
			t.Fatal(err)
		}
		schema := sc.Schema()
		seen := 0
		for seen < n-3 {
			fs, err := sc.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			recs := fs.Records()
			j := 0
			for v := range fs.Rows() {
				if j >= len(recs) {
					t.Fatalf("Rows yields more than the %d records", len(recs))
				}
				r := recs[j]
				if v.Bucket != r.Bucket || v.Offset != r.Offset || !v.Timestamp.Equal(r.Timestamp) || v.ChangeType != r.ChangeType {
					t.Fatalf("view %d: bucket %d offset %d ts %v %v, record: %d %d %v %v", j, v.Bucket, v.Offset, v.Timestamp, v.ChangeType, r.Bucket, r.Offset, r.Timestamp, r.ChangeType)
				}
				if !reflect.DeepEqual(v.Row(), r.Row) {
					t.Fatalf("offset %d: view row %v, record %v", r.Offset, v.Row(), r.Row)
				}
				for col, c := range schema.Columns {
					want := r.Row[col]
					if v.IsNull(col) != (want == nil) {
						t.Fatalf("offset %d column %s: IsNull %v, value %v", r.Offset, c.Name, v.IsNull(col), want)
					}
					if !reflect.DeepEqual(v.Value(col), want) {
						t.Fatalf("offset %d column %s: Value %v, want %v", r.Offset, c.Name, v.Value(col), want)
					}
					if want == nil {
						continue
					}
					var got any
					switch c.Name {
					case "b":
						got = v.Bool(col)
					case "i8":
						got = v.Int8(col)
					case "i16":
						got = v.Int16(col)
					case "i32":
						got = v.Int32(col)
					case "i64":
						got = v.Int64(col)
					case "f32":
						got = v.Float32(col)
					case "f64":
						got = v.Float64(col)
					case "s":
						got = v.String(col)
					case "by", "bin":
						got = v.Bytes(col)
					default:
						continue
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("offset %d column %s: typed %v, want %v", r.Offset, c.Name, got, want)
					}
				}
				j++
			}
			if j != len(recs) {
				t.Fatalf("Rows yielded %d views for %d records", j, len(recs))
			}
			seen += j
			fs.Release()
		}
		if seen != n-3 {
			t.Fatalf("columns %v: read %d rows, want %d", cols, seen, n-3)
		}
	}
}
