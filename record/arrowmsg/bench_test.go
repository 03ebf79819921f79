package arrowmsg

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// benchRows rows of benchSchema: 20 columns, about 2 KB a row, like the
// OpenMessaging-Benchmark-style table Fluss measured projection pushdown on:
// INT, BIGINT and STRING columns in turn (7 INT, 7 BIGINT, 6 STRING of about
// 300 characters).
const benchRows = 1000

var benchSchema = func() *arrow.Schema {
	fields := make([]arrow.Field, 20)
	for i := range fields {
		var t arrow.DataType
		switch i % 3 {
		case 0:
			t = arrow.PrimitiveTypes.Int32
		case 1:
			t = arrow.PrimitiveTypes.Int64
		default:
			t = arrow.BinaryTypes.String
		}
		fields[i] = arrow.Field{Name: fmt.Sprintf("f%d", i), Type: t, Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}()

func benchRecord() arrow.RecordBatch {
	mem := memory.DefaultAllocator
	r := rand.New(rand.NewPCG(10, 20))
	b := array.NewRecordBuilder(mem, benchSchema)
	defer b.Release()
	for row := range benchRows {
		for i, fb := range b.Fields() {
			switch fb := fb.(type) {
			case *array.Int32Builder:
				fb.Append(int32(r.IntN(100_000)))
			case *array.Int64Builder:
				fb.Append(int64(row)*1_000 + int64(i))
			case *array.StringBuilder:
				fb.Append(randomString(r, 280+r.IntN(40)))
			}
		}
	}
	return b.NewRecordBatch()
}

// benchProjections are the projected columns: 1, 5, 10 and 20 of them,
// spread over the three types.
var benchProjections = [][]int{
	{2},
	{0, 4, 8, 12, 16},
	{0, 2, 4, 6, 8, 10, 12, 14, 16, 18},
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19},
}

// BenchmarkProject: the cost of a projection is copying the chosen buffers,
// whatever the codec, since nothing is decompressed. SetBytes is the input
// message's size, so MB/s compares codecs over the same rows.
func BenchmarkProject(b *testing.B) {
	rec := benchRecord()
	defer rec.Release()
	layouts, err := LayoutsOf(benchSchema)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range codecs {
		msg, err := Encode(rec, c, 3, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, cols := range benchProjections {
			b.Run(fmt.Sprintf("%s/cols=%d", c, len(cols)), func(b *testing.B) {
				dst, err := Project(nil, msg, layouts, cols)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(msg)))
				b.ReportAllocs()
				for b.Loop() {
					if dst, err = Project(dst[:0], msg, layouts, cols); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(msg)), "in-bytes")
				b.ReportMetric(float64(len(dst)), "out-bytes")
			})
		}
	}
}

// BenchmarkDecode decodes the same full messages, for contrast: here the
// codec's decompression is the cost.
func BenchmarkDecode(b *testing.B) {
	rec := benchRecord()
	defer rec.Release()
	for _, c := range codecs {
		msg, err := Encode(rec, c, 3, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				got, err := Decode(msg, benchSchema, nil)
				if err != nil {
					b.Fatal(err)
				}
				got.Release()
			}
			b.ReportMetric(float64(len(msg)), "in-bytes")
		})
	}
}

// BenchmarkEncode encodes the same record, for reference. SetBytes is the
// uncompressed message's size.
func BenchmarkEncode(b *testing.B) {
	rec := benchRecord()
	defer rec.Release()
	plain, err := Encode(rec, CodecNone, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range codecs {
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(rec, c, 3, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
