package server

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/fluss/wire"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// flussPruningTable creates FlussBench's pruning table on s (20 columns
// c00..c19 cycling INT, BIGINT, STRING, STRING, about 2 KB a row, ZSTD 3,
// as Strom's `bench pruning`) with buckets buckets, and writes batches
// batches of 500 rows (about 1 MB each before ZSTD) into each through
// PRODUCE_LOG on c. It returns the table and the bytes stored.
func flussPruningTable(tb testing.TB, s *Server, c net.Conn, buckets int32, batches int) (*stromv1.TableInfo, int) {
	var ddl []string
	for i := range 20 {
		ddl = append(ddl, fmt.Sprintf("c%02d %s", i, []string{"INT", "BIGINT", "STRING", "STRING"}[i%4]))
	}
	schema := schemaOf(tb, strings.Join(ddl, ", "))
	info := createTable(tb, s, "bench", "pruning", strings.Join(ddl, ", "), buckets)
	rng := rand.New(rand.NewPCG(1, 2))
	row := func() record.Row {
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
		return r
	}
	stored := 0
	for bucket := range buckets {
		for sent := 0; sent < batches; {
			var records []byte
			for ; sent < batches && len(records) < 4<<20; sent++ {
				rows := make([]record.Row, 500)
				for i := range rows {
					rows[i] = row()
				}
				records = append(records, v0Batch(buildBatch(tb, schema, info.SchemaId, rows...))...)
			}
			stored += len(records)
			var resp flusspb.ProduceLogResponse
			if code := flussCall(tb, c, protocol.ProduceLog, &flusspb.ProduceLogRequest{Acks: proto.Int32(-1), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(30000),
				BucketsReq: []*flusspb.PbProduceLogReqForBucket{{BucketId: proto.Int32(bucket), Records: records}}}, &resp); code != protocol.None || resp.BucketsResp[0].ErrorCode != nil {
				tb.Fatalf("PRODUCE_LOG: %s %v", code, resp.BucketsResp)
			}
		}
	}
	return info, stored
}

// flussFetcher sends one FETCH_LOG request again and again on c, as the
// Fluss 0.9.1 Java client sends it in FlussBench's scans: every bucket of
// the table from offset 0, 1 MiB a bucket
// (client.scanner.log.fetch.max-bytes-for-bucket), 16 MiB the request
// (client.scanner.log.fetch.max-bytes), the first cols columns projected
// (all 20: no projection). fetch reads each answer into one reused buffer,
// allocating nothing; answered is the records' bytes in the first answer,
// checked to have every bucket's records and no error.
type flussFetcher struct {
	tb       testing.TB
	c        net.Conn
	req, buf []byte
	answered int
}

func newFlussFetcher(tb testing.TB, c net.Conn, info *stromv1.TableInfo, buckets int32, cols int) *flussFetcher {
	tr := &flusspb.PbFetchLogReqForTable{TableId: proto.Int64(info.TableId), ProjectionPushdownEnabled: proto.Bool(cols < 20)}
	if cols < 20 {
		for i := range int32(cols) {
			tr.ProjectedFields = append(tr.ProjectedFields, i)
		}
	}
	for bucket := range buckets {
		tr.BucketsReq = append(tr.BucketsReq, &flusspb.PbFetchLogReqForBucket{BucketId: proto.Int32(bucket), FetchOffset: proto.Int64(0), MaxFetchBytes: proto.Int32(1 << 20)})
	}
	req, err := wire.AppendRequest(nil, wire.RequestHeader{APIKey: protocol.FetchLog, RequestID: 1}, &flusspb.FetchLogRequest{
		FollowerServerId: proto.Int32(-1), MaxBytes: proto.Int32(16 << 20), MinBytes: proto.Int32(1), MaxWaitMs: proto.Int32(0),
		TablesReq: []*flusspb.PbFetchLogReqForTable{tr}})
	if err != nil {
		tb.Fatal(err)
	}
	f := &flussFetcher{tb: tb, c: c, req: req}
	resp, err := wire.ParseResponse(f.fetch())
	var fr flusspb.FetchLogResponse
	if err == nil {
		err = proto.Unmarshal(resp.Body, &fr)
	}
	if err != nil || resp.Type != wire.SuccessResponse {
		tb.Fatalf("FETCH_LOG: %+v %v", resp, err)
	}
	for _, br := range fr.TablesResp[0].BucketsResp {
		if br.ErrorCode != nil || len(br.Records) == 0 {
			tb.Fatalf("FETCH_LOG bucket %d: %s %s, %d bytes", br.GetBucketId(), protocol.ErrorCode(br.GetErrorCode()), br.GetErrorMessage(), len(br.Records))
		}
		f.answered += len(br.Records)
	}
	return f
}

// fetch sends the request and returns the response frame, in f's buffer.
func (f *flussFetcher) fetch() []byte {
	if _, err := f.c.Write(f.req); err != nil {
		f.tb.Fatal(err)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(f.c, hdr[:]); err != nil {
		f.tb.Fatal(err)
	}
	size := int(binary.BigEndian.Uint32(hdr[:]))
	if cap(f.buf) < size {
		f.buf = make([]byte, size)
	}
	f.buf = f.buf[:size]
	if _, err := io.ReadFull(f.c, f.buf); err != nil {
		f.tb.Fatal(err)
	}
	return f.buf
}

// BenchmarkFlussFetchLog measures a FETCH_LOG through the Fluss listener
// of a real node, over loopback TCP, as the Fluss 0.9.1 Java client sends
// it in FlussBench's scans (flussFetcher): two buckets of the pruning table
// (40 batches, about 9 MB, in each), all columns or the first 10, 5 or 1.
// The client side decodes nothing, so the time is the listener's and the
// node's; cpu-ns/op is the process's CPU per fetch.
func BenchmarkFlussFetchLog(b *testing.B) {
	cfg := testConfig(b, b.TempDir())
	cfg.FlussListen = freeAddr(b)
	s := startServer(b, cfg)
	c := dialFluss(b, cfg.FlussListen)
	c.SetDeadline(time.Time{})
	const buckets = 2
	info, stored := flussPruningTable(b, s, c, buckets, 40)
	b.Logf("%d bytes stored in %d buckets", stored, buckets)
	for _, cols := range []int{20, 10, 5, 1} {
		f := newFlussFetcher(b, c, info, buckets, cols)
		b.Run(fmt.Sprintf("cols=%d", cols), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(f.answered))
			start := processCPU(b)
			for b.Loop() {
				f.fetch()
			}
			b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the process's user and system CPU time in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
