package record

import (
	"errors"
	"fmt"
)

// The compacted row (FORMATS.md §3.1), Fluss's CompactedRowWriter and
// CompactedRowReader, and the KV value built on it (§3.2), Fluss's
// ValueEncoder and ValueDecoder:
//
//	row:      null bitset, ceil(n/8) bytes, bit i&7 of byte i>>3 set = column i
//	          is null | each non-null column's field, in column order
//	KV value: schema id, int16 little-endian | row
//
// A row carries no length, count or schema: the reader knows the columns
// from the schema id.

// ErrCorruptRow marks bytes that are not a compacted row (or KV value) of the
// columns they were decoded with.
var ErrCorruptRow = errors.New("record: corrupt row")

// kvValueHeaderSize is the schema id in front of a row in a KV value.
const kvValueHeaderSize = 2

// CompactedRowCodec encodes and decodes the rows of one schema in Fluss's
// compacted row format. Values have the Go types Row documents. It is
// immutable and safe for concurrent use.
type CompactedRowCodec struct {
	cols []Column
}

// NewCompactedRowCodec returns the codec of rows with the given columns. The
// error joins an *InvalidError per invalid column type.
func NewCompactedRowCodec(cols []Column) (*CompactedRowCodec, error) {
	if err := checkCodecColumns(cols); err != nil {
		return nil, err
	}
	return &CompactedRowCodec{cols: append([]Column(nil), cols...)}, nil
}

// checkCodecColumns reports every column whose type a codec cannot handle.
func checkCodecColumns(cols []Column) error {
	var p problems
	for i, c := range cols {
		if reason := c.Type.problem(); reason != "" {
			p.add(fmt.Sprintf("columns[%d].type", i), "%s", reason)
		}
	}
	return p.err()
}

// Columns returns the codec's columns; the caller must not modify them.
func (c *CompactedRowCodec) Columns() []Column { return c.cols }

// Append appends the encoding of row to dst and returns the extended slice.
// row must have one value per column: nil (null) only in a nullable column,
// otherwise a value of the column's Go type; a DECIMAL must have the
// column's precision and scale, a TIME be within the day, a nano-of-milli
// within 0..999999. Beyond that Append writes what Fluss writes and checks no
// more than Fluss does (Schema.CheckRow checks the rest): CHAR(n) and
// BINARY(n) are neither padded nor length-checked, a TIMESTAMP(p ≤ 3) or
// TIMESTAMP_LTZ(p ≤ 3) drops its sub-millisecond digits, and FLOAT and DOUBLE
// NaNs are written as Java's canonical NaN (so a NaN key matches a Java
// client's).
//
// On error dst is returned at its original length and the error joins an
// *InvalidError per offending column, its Field the column name.
func (c *CompactedRowCodec) Append(dst []byte, row Row) ([]byte, error) {
	if len(row) != len(c.cols) {
		return dst, &InvalidError{Field: "row", Reason: fmt.Sprintf("row has %d values, the schema has %d columns", len(row), len(c.cols))}
	}
	start := len(dst)
	for range (len(c.cols) + 7) / 8 {
		dst = append(dst, 0)
	}
	var p problems
	for i, col := range c.cols {
		v := row[i]
		if v == nil {
			if !col.Type.Nullable {
				p.add(col.Name, "null in a %s column", col.Type)
			}
			dst[start+(i>>3)] |= 1 << (i & 7)
			continue
		}
		var reason string
		if dst, reason = appendCompactedField(dst, col.Type, v); reason != "" {
			p.add(col.Name, "%s", reason)
		}
	}
	if err := p.err(); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// Decode decodes a whole row. It never panics: bytes that are not exactly a
// row of the codec's columns give an error wrapping ErrCorruptRow that names
// the column and byte offset. Decoding is strict, so that a decoded row
// re-encodes to the same bytes: varints must be in shortest form, unused
// bitset bits zero, BOOLEAN bytes 0 or 1, strings valid UTF-8, values within
// their type (TIME within the day, DECIMAL within its precision, nanoseconds
// within the millisecond), no null in a NOT NULL column, no trailing bytes.
// Decoded values never alias b.
func (c *CompactedRowCodec) Decode(b []byte) (Row, error) {
	n := len(c.cols)
	nb := (n + 7) / 8
	if len(b) < nb {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the null bitset of %d columns", ErrCorruptRow, len(b), n)
	}
	if n%8 != 0 && b[nb-1]>>(n%8) != 0 {
		return nil, fmt.Errorf("%w: null bitset %x sets bits past column %d", ErrCorruptRow, b[:nb], n-1)
	}
	row := make(Row, n)
	r := fieldReader{b: b, pos: nb}
	for i, col := range c.cols {
		if b[i>>3]&(1<<(i&7)) != 0 {
			if !col.Type.Nullable {
				return nil, fmt.Errorf("%w: column %d %q (%s): null in a NOT NULL column", ErrCorruptRow, i, col.Name, col.Type)
			}
			continue
		}
		at := r.pos
		v, reason := r.field(col.Type)
		if reason != "" {
			return nil, fmt.Errorf("%w: column %d %q (%s) at byte %d: %s", ErrCorruptRow, i, col.Name, col.Type, at, reason)
		}
		row[i] = v
	}
	if r.pos != len(b) {
		return nil, fmt.Errorf("%w: %d bytes after the last column", ErrCorruptRow, len(b)-r.pos)
	}
	return row, nil
}

// AppendKvValue appends the KV value of row — the schema id, little-endian,
// then the row — to dst, as Fluss's ValueEncoder; it is what the KV store
// keeps and what lookups return. Errors are Append's.
func (c *CompactedRowCodec) AppendKvValue(dst []byte, schemaID int16, row Row) ([]byte, error) {
	start := len(dst)
	dst = le.AppendUint16(dst, uint16(schemaID))
	dst, err := c.Append(dst, row)
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// ParseKvValue splits a KV value into its schema id and row bytes (aliasing
// v), as Fluss's ValueDecoder; the row is then decoded with the codec of that
// schema. The error wraps ErrCorruptRow when v is too short for a schema id.
func ParseKvValue(v []byte) (schemaID int16, row []byte, err error) {
	if len(v) < kvValueHeaderSize {
		return 0, nil, fmt.Errorf("%w: KV value of %d bytes has no schema id", ErrCorruptRow, len(v))
	}
	return int16(le.Uint16(v)), v[kvValueHeaderSize:], nil
}
