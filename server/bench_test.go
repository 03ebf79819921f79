package server

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/record"
	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
)

// BenchmarkFetchPath measures the server's fetch path (read from the log,
// prune columns, no decoding) for each codec and for 1, 5 and 20 of 20
// columns. Nothing on this path decompresses: the time follows the bytes
// copied, not the codec, and allocations are the same for every codec.
func BenchmarkFetchPath(b *testing.B) {
	s := startServer(b, testConfig(b, b.TempDir()))
	var ddl []string
	for i := 0; i < 20; i++ {
		ddl = append(ddl, fmt.Sprintf("c%02d %s", i, []string{"INT", "BIGINT", "STRING", "STRING"}[i%4]))
	}
	schema := schemaOf(b, strings.Join(ddl, ", "))
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]record.Row, 1000)
	for i := range rows {
		r := make(record.Row, 20)
		for j := range r {
			switch j % 4 {
			case 0:
				r[j] = rng.Int32N(100000)
			case 1:
				r[j] = rng.Int64N(1e9)
			default:
				var sb strings.Builder
				for sb.Len() < 190 {
					fmt.Fprintf(&sb, "word%d ", rng.IntN(50))
				}
				r[j] = sb.String()[:190]
			}
		}
		rows[i] = r
	}
	for _, codec := range []string{"NONE", "LZ4_FRAME", "ZSTD"} {
		name := "t_" + strings.ToLower(codec)
		info := createTableWithOptions(b, s, "bench", name, strings.Join(ddl, ", "), map[string]string{record.OptLogArrowCompressionType: codec})
		comp, err := record.CompressionOf(record.TableDescriptor{Properties: map[string]string{record.OptLogArrowCompressionType: codec}})
		if err != nil {
			b.Fatal(err)
		}
		bld, err := record.NewArrowBuilder(schema, memory.DefaultAllocator)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rows {
			if err := bld.Append(r, record.AppendOnly); err != nil {
				b.Fatal(err)
			}
		}
		batch, _, err := bld.Build(nil, record.BatchHeader{SchemaID: int16(info.SchemaId), AppendOnly: true, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence}, comp)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tabletClient(s).ProduceLog(context.Background(), connect.NewRequest(&stromv1.ProduceLogRequest{
			Database: "bench", Table: name, Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: batch}},
		})); err != nil {
			b.Fatal(err)
		}
		h := &tabletHandler{s: s}
		t, err := h.table("bench", name)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 5, 20} {
			var cols []int
			if n < 20 {
				for i := 0; i < n; i++ {
					cols = append(cols, i)
				}
			}
			proj := schema
			if cols != nil {
				proj = schema.Project(cols)
			}
			b.Run(fmt.Sprintf("%s/cols=%d", codec, n), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(batch)))
				for i := 0; i < b.N; i++ {
					res, _, _ := h.fetchBucket(t, &stromv1.FetchBucket{Bucket: 0, Offset: 0}, cols, proj, false, 16<<20, 0, new(int))
					if res.Error != nil || len(res.Records) == 0 {
						b.Fatalf("fetch: %v", res.Error)
					}
				}
			})
		}
	}
}

// BenchmarkReadBody measures the fast path's read of a ProduceLog body
// from a connection that delivers it in 64 KiB reads.
func BenchmarkReadBody(b *testing.B) {
	for _, n := range []int{64 << 10, 1<<20 + 100, 4 << 20} {
		data := make([]byte, n)
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				buf, err := readBody(&chunkReader{data: data, chunk: 64 << 10}, n)
				if err != nil {
					b.Fatal(err)
				}
				rpc.PutBuffer(buf)
			}
		})
	}
}

// chunkReader returns data at most chunk bytes a read, as a socket does.
type chunkReader struct {
	data  []byte
	chunk int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.chunk)], r.data)
	r.data = r.data[n:]
	return n, nil
}
