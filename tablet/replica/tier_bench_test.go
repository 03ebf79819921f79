package replica

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"strom/internal/metatest"
	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/remote"
	"strom/remote/storetest"
)

// benchS3 opens a store on a fresh bucket of the server of
// scripts/versitygw.sh (STROM_S3_*), with the multipart threshold the
// server sets for tiering (5 GiB: one streamed PutObject per segment file),
// and returns the plain client too.
func benchS3(b *testing.B) (remote.Store, *s3.Client, string) {
	v := storetest.RequireEnv(b, "STROM_S3_ENDPOINT", "STROM_S3_ACCESS_KEY", "STROM_S3_SECRET_KEY")
	opts := remote.Options{MultipartThreshold: 5 << 30, S3: remote.S3Options{Endpoint: v[0], AccessKey: v[1], SecretKey: v[2]}}
	client, err := remote.NewS3Client(b.Context(), opts)
	if err != nil {
		b.Fatal(err)
	}
	bucket := fmt.Sprintf("bench-%d", rand.Uint64())
	if _, err := client.CreateBucket(b.Context(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		b.Fatal(err)
	}
	st, err := remote.Open(b.Context(), "s3://"+bucket+"/strom", opts)
	if err != nil {
		b.Fatal(err)
	}
	return st, client, bucket
}

// benchManager runs a manager of node 1 tiering to st (rounds only when
// the benchmark calls TierOnce), with segments of segBytes.
func benchManager(b *testing.B, st remote.Store, segBytes int64, cacheBytes int64) (*Manager, *raftmeta.Node) {
	meta := metatest.NewNode(b)
	dir := b.TempDir()
	m := startManager(b, meta, filepath.Join(dir, "data"), func(c *Config) {
		c.Log.SegmentBytes = segBytes
		c.Tier = TierConfig{Store: st, Interval: time.Hour, Committer: metaCommitter{meta}, CacheDir: filepath.Join(dir, "cache"), CacheBytes: cacheBytes}
	})
	return m, meta
}

// BenchmarkTierS3 measures tiering's upload of sealed segments (each
// segment's .index, .timeindex and .log, one streamed PutObject each:
// uploadSegment) against plain PutObject calls of the same files, on the
// server of scripts/versitygw.sh, alternating which goes first in every
// iteration. 8 segments of 16 MiB of incompressible batches; the metric
// ratio is plain time over tiering time (issue 14's target: at least 0.7):
//
//	eval "$(scripts/versitygw.sh start)"
//	go test -run '^$' -bench TierS3 -benchtime 6x ./tablet/replica/
func BenchmarkTierS3(b *testing.B) {
	st, client, bucket := benchS3(b)
	m, meta := benchManager(b, st, 16<<20, 1<<20)
	r := leadingReplica(b, m, TableBucket{createTable(b, meta, "t", 1, []int32{1}), 0})
	rng := rand.New(rand.NewPCG(1, 2))
	payload := make([]byte, 256<<10)
	for r.log.LogEndOffset() < 8*64+1 { // 64 batches of 256 KiB a segment
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		buf, _ := record.AppendBatch(nil, record.BatchHeader{SchemaID: 1, AppendOnly: true, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence}, 1, payload)
		if _, err := r.Append(b.Context(), buf, 1); err != nil {
			b.Fatal(err)
		}
	}
	tbl, err := m.table(r.tb.TableID)
	if err != nil {
		b.Fatal(err)
	}
	prefix := remoteLogPrefix(tbl, r.tb)
	var segs []string
	var size int64
	for _, s := range r.log.Segments() {
		if s.Sealed {
			base := strings.TrimSuffix(s.Path, ".log")
			for _, suffix := range []string{".index", ".timeindex", ".log"} {
				if fi, err := os.Stat(base + suffix); err == nil {
					segs, size = append(segs, base+suffix), size+fi.Size()
				}
			}
		}
	}
	b.Logf("%d sealed segment files, %.1f MiB", len(segs), float64(size)/(1<<20))
	ctx := context.Background()
	tier := func() time.Duration {
		start := time.Now()
		for _, s := range r.log.Segments() {
			if s.Sealed {
				if _, err := m.uploadSegment(ctx, prefix, s, 3); err != nil {
					b.Fatal(err)
				}
			}
		}
		return time.Since(start)
	}
	plain := func() time.Duration {
		start := time.Now()
		for i, path := range segs {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			fi, _ := f.Stat()
			key := fmt.Sprintf("raw/%d", i)
			if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: f, ContentLength: aws.Int64(fi.Size())}); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		return time.Since(start)
	}
	var tierT, plainT time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			tierT += tier()
			plainT += plain()
		} else {
			plainT += plain()
			tierT += tier()
		}
		b.StopTimer()
		for obj, err := range st.List(ctx, prefix) {
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Delete(ctx, obj.Key); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	mb := float64(size) * float64(b.N) / (1 << 20)
	b.ReportMetric(mb/tierT.Seconds(), "tier-MB/s")
	b.ReportMetric(mb/plainT.Seconds(), "putobject-MB/s")
	b.ReportMetric(plainT.Seconds()/tierT.Seconds(), "ratio")
}

// BenchmarkRemoteFetch reads the same batches of a 20-column table (1000
// rows of 20 BIGINTs a batch) from offset 0 as a consumer does
// (Replica.Read, 1 MiB a read), once from remote segments on the server of
// scripts/versitygw.sh (a replica whose tiered segments left its disk, with
// a segment cache of one segment, so every pass downloads every segment
// again) and once from a replica that holds them all locally, full and
// projected to 1 of the 20 columns (record.ProjectBatch, as the server
// does before sending), alternating which goes first in every iteration:
//
//	eval "$(scripts/versitygw.sh start)"
//	go test -run '^$' -bench RemoteFetch -benchtime 4x ./tablet/replica/
func BenchmarkRemoteFetch(b *testing.B) {
	st, _, _ := benchS3(b)
	m, meta := benchManager(b, st, 8<<20, 1)
	tiered := leadingReplica(b, m, TableBucket{createTable(b, meta, "tiered", 1, []int32{1}), 0})
	cols := make([]record.Column, 20)
	for i := range cols {
		cols[i] = record.Column{Name: fmt.Sprintf("c%d", i), Type: record.DataType{Root: record.BigInt}}
	}
	schema := record.Schema{Columns: cols}
	ab, err := record.NewArrowBuilder(schema, memory.DefaultAllocator)
	if err != nil {
		b.Fatal(err)
	}
	defer ab.Release()
	rng := rand.New(rand.NewPCG(3, 4))
	var batches [][]byte
	for n := 0; n < 64<<20; {
		for range 1000 {
			row := make(record.Row, 20)
			for i := range row {
				row[i] = rng.Int64N(1 << 40)
			}
			if err := ab.Append(row, record.AppendOnly); err != nil {
				b.Fatal(err)
			}
		}
		buf, _, err := ab.Build(nil, record.BatchHeader{SchemaID: 1, AppendOnly: true, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence}, record.DefaultArrowCompression)
		if err != nil {
			b.Fatal(err)
		}
		ab.Reset()
		batches, n = append(batches, buf), n+len(buf)
	}
	for _, buf := range batches {
		if _, err := tiered.Append(b.Context(), buf, 1); err != nil {
			b.Fatal(err)
		}
	}
	m.TierOnce(b.Context(), time.Now())
	man := manifestOf(b, m, tiered)
	// Below the local log start everything is read from remote segments
	// (the newest tiered ones stay local too: table.log.tiered.local-segments).
	end := tiered.log.LogStartOffset()
	if end == 0 || end > man.EndOffset() {
		b.Fatalf("remote log ends at %d, local log starts at %d: want a remote-only range", man.EndOffset(), end)
	}
	// The local copy comes after the tiering round, so it is never tiered.
	local := leadingReplica(b, m, TableBucket{createTable(b, meta, "local", 1, []int32{1}), 0})
	for _, buf := range batches {
		if _, err := local.Append(b.Context(), buf, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d records (%d batches) below the local log start, remote: %.1f MiB in %d segments", end, end/1000, float64(remoteBytes(man))/(1<<20), len(man.Segments))
	read := func(r *Replica, project bool) time.Duration {
		start := time.Now()
		var dst []byte
		for off := int64(0); off < end; {
			rr, err := r.Read(off, 1<<20)
			if err != nil {
				b.Fatalf("read at %d: %v", off, err)
			}
			for data := rr.Batches; len(data) > 0 && off < end; {
				bt, rest, err := record.NextBatch(data)
				if err != nil {
					b.Fatal(err)
				}
				if project {
					if dst, _, err = record.ProjectBatch(dst[:0], bt, schema, []int{0}); err != nil {
						b.Fatal(err)
					}
				}
				data, off = rest, bt.NextOffset()
			}
		}
		return time.Since(start)
	}
	var t [2][2]time.Duration // [remote, local][full, projected]
	b.ResetTimer()
	for i := range b.N {
		for p := range 2 {
			if i%2 == 0 {
				t[0][p] += read(tiered, p == 1)
				t[1][p] += read(local, p == 1)
			} else {
				t[1][p] += read(local, p == 1)
				t[0][p] += read(tiered, p == 1)
			}
		}
	}
	recs := float64(end) * float64(b.N)
	for p, name := range []string{"full", "1of20"} {
		b.ReportMetric(recs/t[0][p].Seconds(), "remote-"+name+"-rec/s")
		b.ReportMetric(recs/t[1][p].Seconds(), "local-"+name+"-rec/s")
		b.ReportMetric(t[1][p].Seconds()/t[0][p].Seconds(), "ratio-"+name)
	}
}

func remoteBytes(m catalog.RemoteLogManifest) (n int64) {
	for _, s := range m.Segments {
		n += s.SizeBytes
	}
	return n
}
