package server

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/raftmeta/catalog"
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

// loggedBatches returns each bucket's batches of table tbl as its log holds
// them, with their offsets and times.
func loggedBatches(t testing.TB, h *tabletHandler, tbl catalog.Table) [2][]byte {
	var stored [2][]byte
	for b := range stored {
		r, err := h.replica(tbl, int32(b))
		if err != nil {
			t.Fatal(err)
		}
		rr, err := r.Read(0, 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		stored[b] = rr.Batches
	}
	return stored
}

// projectAll returns the batches of data, of a table of schema, each
// projected to cols.
func projectAll(t testing.TB, data []byte, schema record.Schema, cols []int) []byte {
	var out []byte
	for len(data) > 0 {
		b, rest, err := record.NextBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		if out, _, err = record.ProjectBatch(out, b, schema, cols); err != nil {
			t.Fatal(err)
		}
		data = rest
	}
	return out
}

// A projected fetch reads the log into a pooled buffer: a reply that came
// from it is not changed by the fetches after it (which reuse the buffer),
// and each is the projection of the stored batches. Whole batches are
// served as read.
func TestFetchBucketRepliesOutliveTheReadBuffer(t *testing.T) {
	h, _, schema, _ := fetchReadTable(t)
	tbl, err := h.table("demo", "wide")
	if err != nil {
		t.Fatal(err)
	}
	stored := loggedBatches(t, h, tbl)
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
		res, _, _ := h.fetchBucket(tbl, &stromv1.FetchBucket{Bucket: f.bucket, Offset: 0, MaxBytes: 16 << 20}, f.cols, proj, false, 16<<20, 0, new(int))
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
			want = projectAll(t, want, schema, f.cols)
		}
		if !bytes.Equal(got[i], want) {
			t.Fatalf("fetch %d (%+v): the reply is not the stored batches projected (changed by a later fetch?)", i, f)
		}
	}
}

// A projected fetch reads on past its first read of a bucket's limit (1 of
// 20 columns is a few KB of a MiB stored), up to the bucket's bytes served
// and fetch.max.bytes read in a pass; what it serves is the stored batches
// projected.
func TestProjectedFetchReadsOn(t *testing.T) {
	h, _, schema, _ := fetchReadTable(t)
	tbl, err := h.table("demo", "wide")
	if err != nil {
		t.Fatal(err)
	}
	stored := loggedBatches(t, h, tbl)
	var sizes []int // bucket 0's stored batches
	for data := stored[0]; len(data) > 0; {
		b, rest, err := record.NextBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		sizes, data = append(sizes, b.Size()), rest
	}
	fetch := func(cols []string, bucketMax int) *stromv1.FetchLogResponse {
		t.Helper()
		var buckets []*stromv1.FetchBucket
		for b := range int32(2) {
			buckets = append(buckets, &stromv1.FetchBucket{Bucket: b, Offset: 0, MaxBytes: int32(bucketMax)})
		}
		resp, err := h.FetchLog(context.Background(), connect.NewRequest(&stromv1.FetchLogRequest{Database: "demo", Table: "wide", Buckets: buckets, Columns: cols}))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range resp.Msg.Buckets {
			if b.Error != nil {
				t.Fatalf("bucket %d: %v", b.Bucket, b.Error)
			}
		}
		return resp.Msg
	}
	nexts := func(resp *stromv1.FetchLogResponse) []int64 {
		return []int64{resp.Buckets[0].NextOffset, resp.Buckets[1].NextOffset}
	}
	// Each read of one stored batch's bytes returns one batch; the
	// projection of c00 is a small part of it, so the fetch reads on to
	// the end of both buckets.
	one := fetch([]string{"c00"}, sizes[0])
	if got := nexts(one); got[0] != 1500 || got[1] != 1500 {
		t.Fatalf("1 column, a stored batch's bytes a bucket: next offsets %v, want [1500 1500] (the fetch did not read on)", got)
	}
	for b := range 2 {
		want := projectAll(t, stored[b], schema, []int{0})
		if got := one.Buckets[b].Records; !bytes.Equal(got, want) {
			t.Fatalf("bucket %d: %d bytes served, not the 3 stored batches projected (%d bytes)", b, len(got), len(want))
		}
	}
	t.Logf("stored batches %v bytes, projected to c00 %d bytes a bucket", sizes, len(one.Buckets[0].Records))
	// The projection of 19 columns is about a stored batch's size: a
	// bucket of that many bytes holds one, and the read on ends there.
	var most []string
	for i := 1; i < 20; i++ {
		most = append(most, fmt.Sprintf("c%02d", i))
	}
	if got := nexts(fetch(most, sizes[0])); got[0] != 500 || got[1] != 500 {
		t.Fatalf("19 columns, a stored batch's bytes a bucket: next offsets %v, want [500 500]", got)
	}
	// fetch.max.bytes bounds what a pass reads: at a batch and a half,
	// bucket 0 reads on once (a read returns at least a batch), bucket 1
	// makes only its first read.
	h.s.cfg.FetchMaxBytes = int64(sizes[0] + sizes[0]/2)
	if got := nexts(fetch([]string{"c00"}, sizes[0])); got[0] != 1000 || got[1] != 500 {
		t.Fatalf("1 column, fetch.max.bytes a batch and a half: next offsets %v, want [1000 500]", got)
	}
}
