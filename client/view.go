package client

import (
	"iter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"strom/record"
)

// RowView is one record of a Poll's fetches, read in place from its Arrow
// batch: no row is built and nothing is copied. Columns are numbered as in
// the scanner's Schema (the columns read, in table order).
//
// String and Bytes alias the batch's buffers: they are valid until the
// fetches are released (Fetches.Release), which must be at the latest
// before the next Poll; copy them (strings.Clone, slices.Clone) to keep
// them longer. The other values are copies.
//
// Each typed accessor reads a column of one type, named in its comment,
// and panics on a column of another type (use Value for any column). At a
// NULL it returns the zero value: check IsNull for a nullable column.
type RowView struct {
	Bucket     int32
	Offset     int64
	Timestamp  time.Time
	ChangeType record.ChangeType

	batch *record.ArrowBatch
	cols  []arrow.Array
	row   int
}

// IsNull reports whether column col is NULL.
func (v RowView) IsNull(col int) bool { return v.cols[col].IsNull(v.row) }

// Bool reads a BOOLEAN column.
func (v RowView) Bool(col int) bool { return v.cols[col].(*array.Boolean).Value(v.row) }

// Int8 reads a TINYINT column.
func (v RowView) Int8(col int) int8 { return v.cols[col].(*array.Int8).Value(v.row) }

// Int16 reads a SMALLINT column.
func (v RowView) Int16(col int) int16 { return v.cols[col].(*array.Int16).Value(v.row) }

// Int32 reads an INT column.
func (v RowView) Int32(col int) int32 { return v.cols[col].(*array.Int32).Value(v.row) }

// Int64 reads a BIGINT column.
func (v RowView) Int64(col int) int64 { return v.cols[col].(*array.Int64).Value(v.row) }

// Float32 reads a FLOAT column.
func (v RowView) Float32(col int) float32 { return v.cols[col].(*array.Float32).Value(v.row) }

// Float64 reads a DOUBLE column.
func (v RowView) Float64(col int) float64 { return v.cols[col].(*array.Float64).Value(v.row) }

// String reads a STRING or CHAR column, aliasing the batch's buffer (see
// RowView).
func (v RowView) String(col int) string { return v.cols[col].(*array.String).Value(v.row) }

// Bytes reads a BYTES or BINARY column, aliasing the batch's buffer (see
// RowView). Do not modify it.
func (v RowView) Bytes(col int) []byte {
	switch a := v.cols[col].(type) {
	case *array.FixedSizeBinary:
		return a.Value(v.row)
	default:
		return a.(*array.Binary).Value(v.row)
	}
}

// Value reads any column as a record.Row value (nil for NULL), copied as
// record.ArrowBatch.Row copies it.
func (v RowView) Value(col int) any { return v.batch.Value(v.row, col) }

// Row builds the whole row, as Records does.
func (v RowView) Row() record.Row { return v.batch.Row(v.row) }

// Rows yields a view of every record of the fetches, in the order of
// Records, without building rows: the cheap way to read a Poll (see
// RowView for how long its strings and bytes stay valid).
func (fs Fetches) Rows() iter.Seq[RowView] {
	return func(yield func(RowView) bool) {
		for _, f := range fs {
			for i, b := range f.Batches {
				rec := b.Record()
				v := RowView{Bucket: f.Bucket, Timestamp: f.Timestamps[i], batch: b, cols: rec.Columns()}
				for r := 0; r < b.Len(); r++ {
					v.Offset = f.Offsets[i] + int64(r)
					if v.Offset < f.From {
						continue
					}
					v.row, v.ChangeType = r, b.ChangeType(r)
					if !yield(v) {
						return
					}
				}
			}
		}
	}
}
