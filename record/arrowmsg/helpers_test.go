package arrowmsg

import (
	"bytes"
	"fmt"
	"math/rand/v2"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// tb is what the helpers need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

var codecs = []Codec{CodecNone, CodecLZ4Frame, CodecZSTD}

// flatTypes are the Arrow types Fluss's flat column types map to
// (FORMATS.md §4.3), each with its parameters drawn from r.
var flatTypes = []func(r *rand.Rand) arrow.DataType{
	func(*rand.Rand) arrow.DataType { return arrow.FixedWidthTypes.Boolean },
	func(*rand.Rand) arrow.DataType { return arrow.PrimitiveTypes.Int8 },
	func(*rand.Rand) arrow.DataType { return arrow.PrimitiveTypes.Int16 },
	func(*rand.Rand) arrow.DataType { return arrow.PrimitiveTypes.Int32 },
	func(*rand.Rand) arrow.DataType { return arrow.PrimitiveTypes.Int64 },
	func(*rand.Rand) arrow.DataType { return arrow.PrimitiveTypes.Float32 },
	func(*rand.Rand) arrow.DataType { return arrow.PrimitiveTypes.Float64 },
	func(*rand.Rand) arrow.DataType { return arrow.BinaryTypes.String },
	func(*rand.Rand) arrow.DataType { return arrow.BinaryTypes.Binary },
	func(r *rand.Rand) arrow.DataType { return &arrow.FixedSizeBinaryType{ByteWidth: 1 + r.IntN(24)} },
	func(r *rand.Rand) arrow.DataType {
		p := 1 + r.IntN(38)
		return &arrow.Decimal128Type{Precision: int32(p), Scale: int32(r.IntN(p + 1))}
	},
	func(*rand.Rand) arrow.DataType { return arrow.FixedWidthTypes.Date32 },
	func(*rand.Rand) arrow.DataType { return arrow.FixedWidthTypes.Time32s },
	func(*rand.Rand) arrow.DataType { return arrow.FixedWidthTypes.Time32ms },
	func(*rand.Rand) arrow.DataType { return arrow.FixedWidthTypes.Time64us },
	func(*rand.Rand) arrow.DataType { return arrow.FixedWidthTypes.Time64ns },
	func(*rand.Rand) arrow.DataType { return &arrow.TimestampType{Unit: arrow.Second} },
	func(*rand.Rand) arrow.DataType { return &arrow.TimestampType{Unit: arrow.Millisecond} },
	func(*rand.Rand) arrow.DataType { return &arrow.TimestampType{Unit: arrow.Microsecond} },
	func(*rand.Rand) arrow.DataType { return &arrow.TimestampType{Unit: arrow.Nanosecond} },
}

var words = []string{"", "a", "fluss", "strom", "arrow", "log", "kv", "bucket", "partition", "Ünïcødé ✓"}

// randomColumn builds a column of rows values of type dt; nullPct percent of
// them are null if nullable.
func randomColumn(mem memory.Allocator, r *rand.Rand, dt arrow.DataType, rows int, nullable bool, nullPct int) arrow.Array {
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	for range rows {
		if nullable && r.IntN(100) < nullPct {
			b.AppendNull()
			continue
		}
		switch b := b.(type) {
		case *array.BooleanBuilder:
			b.Append(r.IntN(2) == 1)
		case *array.Int8Builder:
			b.Append(int8(r.Uint32()))
		case *array.Int16Builder:
			b.Append(int16(r.Uint32()))
		case *array.Int32Builder:
			b.Append(int32(r.IntN(1000)) - 500) // compressible
		case *array.Int64Builder:
			b.Append(int64(r.Uint64()))
		case *array.Float32Builder:
			b.Append(float32(r.NormFloat64()))
		case *array.Float64Builder:
			b.Append(r.NormFloat64() * 1e6)
		case *array.StringBuilder:
			if r.IntN(2) == 0 {
				b.Append(words[r.IntN(len(words))])
			} else {
				b.Append(randomString(r, r.IntN(40)))
			}
		case *array.BinaryBuilder:
			b.Append(randomBytes(r, r.IntN(40)))
		case *array.FixedSizeBinaryBuilder:
			b.Append(randomBytes(r, dt.(*arrow.FixedSizeBinaryType).ByteWidth))
		case *array.Decimal128Builder:
			bound := int64(1)
			for range min(dt.(*arrow.Decimal128Type).Precision, 18) {
				bound *= 10
			}
			b.Append(decimal128.FromI64(r.Int64N(2*bound-1) - bound + 1))
		case *array.Date32Builder:
			b.Append(arrow.Date32(r.Int32N(40000)))
		case *array.Time32Builder:
			if dt.(*arrow.Time32Type).Unit == arrow.Second {
				b.Append(arrow.Time32(r.Int32N(86400)))
			} else {
				b.Append(arrow.Time32(r.Int32N(86400_000)))
			}
		case *array.Time64Builder:
			if dt.(*arrow.Time64Type).Unit == arrow.Microsecond {
				b.Append(arrow.Time64(r.Int64N(86400_000_000)))
			} else {
				b.Append(arrow.Time64(r.Int64N(86400_000_000_000)))
			}
		case *array.TimestampBuilder:
			b.Append(arrow.Timestamp(r.Int64N(1 << 50)))
		default:
			panic(fmt.Sprintf("no generator for %T", b))
		}
	}
	return b.NewArray()
}

func randomString(r *rand.Rand, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// newRecord builds a record of the given schema with random values.
func newRecord(mem memory.Allocator, r *rand.Rand, schema *arrow.Schema, rows, nullPct int) arrow.RecordBatch {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = randomColumn(mem, r, f.Type, rows, f.Nullable, nullPct)
		defer cols[i].Release()
	}
	return array.NewRecordBatch(schema, cols, int64(rows))
}

// projectRecord returns rec with only the columns cols.
func projectRecord(rec arrow.RecordBatch, cols []int) arrow.RecordBatch {
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		fields[i] = rec.Schema().Field(c)
		arrs[i] = rec.Column(c)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, rec.NumRows())
}

// arrowGoMessage writes rec with arrow-go's own IPC writer and cuts the
// RecordBatch message out of the stream: the form other Arrow writers
// produce, with a layout of the flatbuffer different from ours.
func arrowGoMessage(t tb, rec arrow.RecordBatch, codec Codec, minSavings float64) []byte {
	t.Helper()
	s := arrowGoStream(t, rec, codec, minSavings)
	schemaLen := 8 + int(le.Uint32(s[4:]))      // the Schema message has no body
	return bytes.Clone(s[schemaLen : len(s)-8]) // drop the end-of-stream marker
}

// arrowGoStream returns the IPC stream arrow-go's writer makes of rec.
func arrowGoStream(t tb, rec arrow.RecordBatch, codec Codec, minSavings float64) []byte {
	t.Helper()
	var buf bytes.Buffer
	opts := []ipc.Option{ipc.WithSchema(rec.Schema())}
	switch codec {
	case CodecLZ4Frame:
		opts = append(opts, ipc.WithLZ4(), ipc.WithMinSpaceSavings(minSavings))
	case CodecZSTD:
		opts = append(opts, ipc.WithZstd(), ipc.WithMinSpaceSavings(minSavings))
	}
	w := ipc.NewWriter(&buf, opts...)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// seedSchema is a small schema covering each buffer shape, used for seeds.
var seedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
	{Name: "blob", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
}, nil)

// seedMessages returns real messages of seedSchema: ours for every codec,
// arrow-go's for every codec, and an empty one.
func seedMessages(t tb) [][]byte {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var out [][]byte
	for _, rows := range []int{0, 3, 40} {
		rec := newRecord(memory.DefaultAllocator, r, seedSchema, rows, 30)
		for _, c := range codecs {
			msg, err := Encode(rec, c, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, msg)
			if rows > 0 {
				out = append(out, arrowGoMessage(t, rec, c, 0.5))
			}
		}
		rec.Release()
	}
	return out
}
