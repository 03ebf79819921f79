package server

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// fetchReadTable creates a ZSTD log table of 20 columns (the pruning
// benchmark's shape) with batches of 500 rows in buckets 0 and 1, the
// second bucket's rows other than the first's, and returns its handler,
// table, schema and the stored batches per bucket.
func fetchReadTable(t testing.TB) (*tabletHandler, *Server, record.Schema, [2][]byte) {
	s := startServer(t, testConfig(t, t.TempDir()))
	var ddl []string
	for i := range 20 {
		ddl = append(ddl, fmt.Sprintf("c%02d %s", i, []string{"INT", "BIGINT", "STRING", "STRING"}[i%4]))
	}
	schema := schemaOf(t, strings.Join(ddl, ", "))
	info := createTableFull(t, s, "demo", "wide", strings.Join(ddl, ", "), 2, map[string]string{record.OptLogArrowCompressionType: "ZSTD"})
	waitReplicas(t, s, info)
	var stored [2][]byte
	for bucket := range 2 {
		for k := range 3 {
			bld, err := record.NewArrowBuilder(schema, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 500 {
				r := make(record.Row, 20)
				for j := range r {
					v := (bucket*7+k)*1000 + i*20 + j
					switch j % 4 {
					case 0:
						r[j] = int32(v)
					case 1:
						r[j] = int64(v)
					default:
						r[j] = strings.Repeat(fmt.Sprintf("w%d ", v%97), 20)
					}
				}
				if err := bld.Append(r, record.AppendOnly); err != nil {
					t.Fatal(err)
				}
			}
			batch, _, err := bld.Build(nil, record.BatchHeader{SchemaID: int16(info.SchemaId), AppendOnly: true, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence}, record.ArrowCompression{Type: record.CompressionZSTD, ZstdLevel: 3})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tabletClient(s).ProduceLog(context.Background(), connect.NewRequest(&stromv1.ProduceLogRequest{
				Database: "demo", Table: "wide", Buckets: []*stromv1.ProduceBucket{{Bucket: int32(bucket), Records: batch}},
			})); err != nil {
				t.Fatal(err)
			}
			stored[bucket] = append(stored[bucket], batch...)
		}
	}
	return &tabletHandler{s: s}, s, schema, stored
}

// A projected fetch reads the log into a pooled buffer: a reply that came
// from it is not changed by the fetches after it (which reuse the buffer),
// and each is the projection of the stored batches. Whole batches are
// served as read.
func TestFetchBucketRepliesOutliveTheReadBuffer(t *testing.T) {
	h, _, schema, stored := fetchReadTable(t)
	tbl, err := h.table("demo", "wide")
	if err != nil {
		t.Fatal(err)
	}
	project := func(data []byte, cols []int) []byte {
		var out []byte
		for len(data) > 0 {
			var b record.Batch
			if b, data, err = record.NextBatch(data); err != nil {
				t.Fatal(err)
			}
			if out, _, err = record.ProjectBatch(out, b, schema, cols); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	for bucket := range 2 { // as stored: with their offsets and times
		r, err := h.replica(tbl, int32(bucket))
		if err != nil {
			t.Fatal(err)
		}
		rr, err := r.Read(0, 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		stored[bucket] = rr.Batches
	}
	type fetch struct {
		bucket int32
		cols   []int
	}
	var fetches []fetch
	for range 20 { // the pool is per P and may be emptied by a GC: try often
		fetches = append(fetches, fetch{0, []int{0, 2}}, fetch{1, []int{1, 3, 4}}, fetch{0, []int{5}}, fetch{1, nil}, fetch{0, nil}, fetch{1, []int{2, 3, 6, 7, 10}})
	}
	var got [][]byte
	for _, f := range fetches {
		proj := schema
		if f.cols != nil {
			proj = schema.Project(f.cols)
		}
		res, _, _ := h.fetchBucket(tbl, &stromv1.FetchBucket{Bucket: f.bucket, Offset: 0, MaxBytes: 16 << 20}, f.cols, proj, false, 16<<20, 0)
		if res.Error != nil {
			t.Fatalf("fetch %+v: %v", f, res.Error)
		}
		if res.NextOffset != 1500 {
			t.Fatalf("fetch %+v: next offset %d, want 1500", f, res.NextOffset)
		}
		got = append(got, res.Records)
	}
	for i, f := range fetches {
		want := stored[f.bucket]
		if f.cols != nil {
			want = project(want, f.cols)
		}
		if !bytes.Equal(got[i], want) {
			t.Fatalf("fetch %d (%+v): the reply is not the stored batches projected (changed by a later fetch?)", i, f)
		}
	}
}
