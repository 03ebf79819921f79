package record

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// ArrowType returns the Arrow type a column of type t is stored as in ARROW
// log batches, as Fluss's ArrowUtils.toArrowSchema maps it (FORMATS.md §4.3):
// integers to signed Int8..Int64, BOOLEAN Bool, FLOAT Float32, DOUBLE
// Float64, CHAR and STRING Utf8, BYTES Binary, BINARY(n) FixedSizeBinary(n),
// DECIMAL(p, s) Decimal128(p, s), DATE Date32, TIME(p) Time32[s] (p 0),
// Time32[ms] (1–3), Time64[µs] (4–6), Time64[ns] (7–9), and TIMESTAMP(p) and
// TIMESTAMP_LTZ(p) Timestamp with the same units by precision and no time
// zone. Nullability is the column's, on the arrow.Field.
func ArrowType(t DataType) (arrow.DataType, error) {
	if reason := t.problem(); reason != "" {
		return nil, &InvalidError{Field: "type", Reason: reason}
	}
	switch t.Root {
	case Boolean:
		return arrow.FixedWidthTypes.Boolean, nil
	case TinyInt:
		return arrow.PrimitiveTypes.Int8, nil
	case SmallInt:
		return arrow.PrimitiveTypes.Int16, nil
	case Int:
		return arrow.PrimitiveTypes.Int32, nil
	case BigInt:
		return arrow.PrimitiveTypes.Int64, nil
	case Float:
		return arrow.PrimitiveTypes.Float32, nil
	case Double:
		return arrow.PrimitiveTypes.Float64, nil
	case Decimal:
		return &arrow.Decimal128Type{Precision: int32(t.Precision), Scale: int32(t.Scale)}, nil
	case Char, String:
		return arrow.BinaryTypes.String, nil
	case Binary:
		return &arrow.FixedSizeBinaryType{ByteWidth: t.Length}, nil
	case Bytes:
		return arrow.BinaryTypes.Binary, nil
	case Date:
		return arrow.FixedWidthTypes.Date32, nil
	case Time:
		switch unit := timeUnit(t.Precision); unit {
		case arrow.Second, arrow.Millisecond:
			return &arrow.Time32Type{Unit: unit}, nil
		default:
			return &arrow.Time64Type{Unit: unit}, nil
		}
	case Timestamp, TimestampLTZ:
		return &arrow.TimestampType{Unit: timeUnit(t.Precision)}, nil
	}
	return nil, &InvalidError{Field: "type", Reason: fmt.Sprintf("type %s has no Arrow mapping", t)}
}

// timeUnit is the Arrow unit of TIME(p), TIMESTAMP(p) and TIMESTAMP_LTZ(p).
func timeUnit(precision int) arrow.TimeUnit {
	switch {
	case precision == 0:
		return arrow.Second
	case precision <= 3:
		return arrow.Millisecond
	case precision <= 6:
		return arrow.Microsecond
	}
	return arrow.Nanosecond
}

// ArrowSchema returns the Arrow schema of ARROW log batches of s: one field
// per column, named as the column, nullable as the column, typed by
// ArrowType. The primary key is not represented. Errors name the column
// ("schema.columns[i].type").
func ArrowSchema(s Schema) (*arrow.Schema, error) {
	fields := make([]arrow.Field, len(s.Columns))
	var p problems
	for i, c := range s.Columns {
		t, err := ArrowType(c.Type)
		if err != nil {
			p.add(fmt.Sprintf("schema.columns[%d].type", i), "column %q: %s", c.Name, err.(*InvalidError).Reason)
			continue
		}
		fields[i] = arrow.Field{Name: c.Name, Type: t, Nullable: c.Type.Nullable}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

// CheckProjection reports whether cols selects columns of s: at least one,
// each in range and none twice. The error is an *InvalidError with Field
// "projection".
func (s Schema) CheckProjection(cols []int) error {
	if len(cols) == 0 {
		return &InvalidError{Field: "projection", Reason: "selects no columns"}
	}
	seen := make(map[int]bool, len(cols))
	for _, c := range cols {
		if c < 0 || c >= len(s.Columns) {
			return &InvalidError{Field: "projection", Reason: fmt.Sprintf("column index %d is out of range; the table has %d columns", c, len(s.Columns))}
		}
		if seen[c] {
			return &InvalidError{Field: "projection", Reason: fmt.Sprintf("column index %d (%q) is selected twice", c, s.Columns[c].Name)}
		}
		seen[c] = true
	}
	return nil
}

// Project returns the schema of the columns cols of s, in the order of cols.
// The primary key is kept when every one of its columns is; otherwise the
// projected schema has none. It panics on an index out of range (check
// untrusted projections with CheckProjection).
func (s Schema) Project(cols []int) Schema {
	out := Schema{Columns: make([]Column, len(cols))}
	for i, c := range cols {
		out.Columns[i] = s.Columns[c]
	}
	for _, name := range s.PrimaryKey {
		if _, _, ok := out.Column(name); !ok {
			return out
		}
	}
	out.PrimaryKey = slices.Clone(s.PrimaryKey)
	return out
}

// ArrowCompressionType is table.log.arrow.compression.type.
type ArrowCompressionType uint8

// The compression types of Arrow log batches.
const (
	CompressionNone ArrowCompressionType = iota
	CompressionLZ4Frame
	CompressionZSTD
)

var compressionNames = [...]string{"NONE", "LZ4_FRAME", "ZSTD"}

// String returns the option's spelling: "NONE", "LZ4_FRAME", "ZSTD".
func (c ArrowCompressionType) String() string {
	if int(c) >= len(compressionNames) {
		return "ArrowCompressionType(" + strconv.Itoa(int(c)) + ")"
	}
	return compressionNames[c]
}

// ParseArrowCompressionType reads the option's value, case-insensitively.
func ParseArrowCompressionType(s string) (ArrowCompressionType, error) {
	for i, n := range compressionNames {
		if strings.EqualFold(n, s) {
			return ArrowCompressionType(i), nil
		}
	}
	return 0, &InvalidError{Field: "options." + OptLogArrowCompressionType,
		Reason: fmt.Sprintf("%q is not one of %s (case-insensitive)", s, strings.Join(compressionNames[:], ", "))}
}

// ArrowCompression is how the buffers of an Arrow log batch are compressed.
type ArrowCompression struct {
	Type ArrowCompressionType
	// ZstdLevel is the ZSTD level, 1 to 22; used only with CompressionZSTD.
	ZstdLevel int
}

// DefaultArrowCompression is Fluss's default: ZSTD at level 3.
var DefaultArrowCompression = ArrowCompression{Type: CompressionZSTD, ZstdLevel: 3}

// String returns "ZSTD(3)", "LZ4_FRAME", "NONE".
func (c ArrowCompression) String() string {
	if c.Type == CompressionZSTD {
		return fmt.Sprintf("ZSTD(%d)", c.ZstdLevel)
	}
	return c.Type.String()
}

// CompressionOf returns the Arrow compression a table's options choose
// (table.log.arrow.compression.type, table.log.arrow.compression.zstd.level,
// with Fluss's defaults ZSTD and 3). It fails only on values Normalize would
// have rejected.
func CompressionOf(d TableDescriptor) (ArrowCompression, error) {
	out := DefaultArrowCompression
	if v, ok := d.Option(OptLogArrowCompressionType); ok {
		t, err := ParseArrowCompressionType(v)
		if err != nil {
			return ArrowCompression{}, err
		}
		out.Type = t
	}
	if v, ok := d.Option(OptLogArrowZstdLevel); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 22 {
			return ArrowCompression{}, &InvalidError{Field: "options." + OptLogArrowZstdLevel,
				Reason: fmt.Sprintf("%q is not a ZSTD level from 1 to 22", v)}
		}
		out.ZstdLevel = n
	}
	return out, nil
}
