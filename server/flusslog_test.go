package server

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/logbatch"
	"strom/fluss/protocol"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// v0Batch rewrites a Strom V2 batch as the V0 batch the Fluss 0.9.1 client
// writes (no LeaderEpoch, no StatisticsLength), with its CRC.
func v0Batch(v2 []byte) []byte {
	le := binary.LittleEndian
	out := append([]byte(nil), v2[:21]...)
	out = append(out, 0, 0, 0, 0) // CRC, below
	out = append(out, v2[29:52]...)
	out = append(out, v2[56:]...)
	le.PutUint32(out[8:], uint32(len(out)-12))
	out[12] = 0
	le.PutUint32(out[21:], crc32.Checksum(out[25:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// decodeFluss reads a FETCH_LOG bucket's records, 0.9.1 V1 batches, as
// rows of schema s, checking each batch's CRC as the 0.9.1 client does; it
// returns the rows and the base offsets of the batches.
func decodeFluss(t *testing.T, records []byte, s record.Schema) ([]record.Row, []int64) {
	t.Helper()
	v2, err := logbatch.ToStrom(nil, records) // checks each CRC where the client does
	if err != nil {
		t.Fatal(err)
	}
	var rows []record.Row
	var bases []int64
	for len(v2) > 0 {
		b, rest, err := record.NextBatch(v2)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := record.DecodeArrowBatch(b, s, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < dec.Len(); i++ {
			rows = append(rows, dec.Row(i))
		}
		dec.Release()
		bases = append(bases, b.BaseOffset())
		v2 = rest
	}
	return rows, bases
}

// The log keys over the Fluss wire on a real node: INIT_WRITER's ids,
// PRODUCE_LOG of V0 batches (idempotent, a retry deduplicated, a corrupt
// batch refused for its bucket alone), FETCH_LOG full and projected in
// 0.9.1's V1 layout with the high watermark and log start, from -2, a
// long poll woken by a produce, LIST_OFFSETS, and the Connect API seeing
// the same log.
func TestFlussLogKeys(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	s := startServer(t, cfg)
	const ddl = "id BIGINT NOT NULL, name STRING, score DOUBLE"
	info := createTable(t, s, "fluss", "scores", ddl, 2)
	schema := schemaOf(t, ddl)
	c := dialFluss(t, cfg.FlussListen)

	var w1, w2 flusspb.InitWriterResponse
	if code := flussCall(t, c, protocol.InitWriter, &flusspb.InitWriterRequest{}, &w1); code != protocol.None {
		t.Fatalf("INIT_WRITER: %s", code)
	}
	flussCall(t, c, protocol.InitWriter, &flusspb.InitWriterRequest{}, &w2)
	if w1.GetWriterId() < 0 || w2.GetWriterId() == w1.GetWriterId() {
		t.Fatalf("writer ids %d, %d", w1.GetWriterId(), w2.GetWriterId())
	}

	rows := func(from, n int) []record.Row {
		var out []record.Row
		for i := from; i < from+n; i++ {
			out = append(out, record.Row{int64(i), "name", float64(i) / 2})
		}
		return out
	}
	batch := func(seq int32, rs []record.Row) []byte {
		b := record.Batch(buildBatch(t, schema, info.SchemaId, rs...))
		b.SetWriter(w1.GetWriterId(), seq)
		return v0Batch(b)
	}
	produce := func(bucket int32, records []byte) *flusspb.PbProduceLogRespForBucket {
		t.Helper()
		var resp flusspb.ProduceLogResponse
		if code := flussCall(t, c, protocol.ProduceLog, &flusspb.ProduceLogRequest{Acks: proto.Int32(-1), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(30000),
			BucketsReq: []*flusspb.PbProduceLogReqForBucket{{BucketId: proto.Int32(bucket), Records: records}}}, &resp); code != protocol.None {
			t.Fatalf("PRODUCE_LOG: %s", code)
		}
		return resp.BucketsResp[0]
	}
	first, second := batch(0, rows(0, 10)), batch(1, rows(10, 5))
	if r := produce(0, first); r.ErrorCode != nil || r.GetBaseOffset() != 0 {
		t.Fatalf("first batch: %v", r)
	}
	if r := produce(0, second); r.ErrorCode != nil || r.GetBaseOffset() != 10 {
		t.Fatalf("second batch: %v", r)
	}
	if r := produce(0, second); r.ErrorCode != nil || r.GetBaseOffset() != 10 {
		t.Fatalf("a retry of the second batch: %v, want its original offset 10", r)
	}
	bad := append([]byte(nil), first...)
	bad[len(bad)-1] ^= 1
	if r := produce(1, bad); protocol.ErrorCode(r.GetErrorCode()) != protocol.CorruptRecordException {
		t.Fatalf("a batch with a bad CRC: %v, want CORRUPT_RECORD_EXCEPTION", r)
	}

	fetch := func(offset int64, projected []int32, minBytes, waitMs int32) *flusspb.PbFetchLogRespForBucket {
		t.Helper()
		tr := &flusspb.PbFetchLogReqForTable{TableId: proto.Int64(info.TableId), ProjectionPushdownEnabled: proto.Bool(projected != nil), ProjectedFields: projected,
			BucketsReq: []*flusspb.PbFetchLogReqForBucket{{BucketId: proto.Int32(0), FetchOffset: proto.Int64(offset), MaxFetchBytes: proto.Int32(1 << 20)}}}
		var resp flusspb.FetchLogResponse
		if code := flussCall(t, c, protocol.FetchLog, &flusspb.FetchLogRequest{FollowerServerId: proto.Int32(-1), MaxBytes: proto.Int32(16 << 20),
			MinBytes: proto.Int32(minBytes), MaxWaitMs: proto.Int32(waitMs), TablesReq: []*flusspb.PbFetchLogReqForTable{tr}}, &resp); code != protocol.None {
			t.Fatalf("FETCH_LOG: %s", code)
		}
		return resp.TablesResp[0].BucketsResp[0]
	}
	for _, from := range []int64{0, -2} {
		r := fetch(from, nil, 1, 0)
		if r.ErrorCode != nil || r.GetHighWatermark() != 15 || r.GetLogStartOffset() != 0 {
			t.Fatalf("fetch from %d: %v", from, r)
		}
		for pos := 0; pos < len(r.Records); pos += int(binary.LittleEndian.Uint32(r.Records[pos+8:])) + 12 {
			if r.Records[pos+12] != byte(logbatch.MagicV1) {
				t.Fatalf("batch at %d has magic %d, want 0.9.1's V1", pos, r.Records[pos+12])
			}
		}
		got, bases := decodeFluss(t, r.Records, schema)
		if len(got) != 15 || len(bases) != 2 || bases[1] != 10 {
			t.Fatalf("fetch from %d: %d rows, batches at %v", from, len(got), bases)
		}
		for i, row := range got {
			if !row.Equal(rows(0, 15)[i]) {
				t.Fatalf("row %d: %v", i, row)
			}
		}
	}
	pr := fetch(5, []int32{0, 2}, 1, 0) // starts inside the first batch, as Fluss's answer does
	got, _ := decodeFluss(t, pr.Records, schema.Project([]int{0, 2}))
	if len(got) != 15 || !got[12].Equal(record.Row{int64(12), float64(6)}) {
		t.Fatalf("projected fetch: %d rows, row 12 %v", len(got), got[12])
	}
	if r := fetch(99, nil, 1, 0); protocol.ErrorCode(r.GetErrorCode()) != protocol.LogOffsetOutOfRangeException {
		t.Fatalf("fetch past the end: %v", r)
	}
	if r := fetch(0, []int32{2, 0}, 1, 0); protocol.ErrorCode(r.GetErrorCode()) != protocol.InvalidColumnProjection {
		t.Fatalf("projection out of order: %v", r)
	}

	// A long poll at the high watermark is answered when a produce arrives
	// on another connection (without the wake-up it would answer empty
	// after max_wait_ms).
	polled := make(chan *flusspb.PbFetchLogRespForBucket, 1)
	go func() { polled <- fetch(15, nil, 1, 60000) }()
	c2 := dialFluss(t, cfg.FlussListen)
	var presp flusspb.ProduceLogResponse
	c2code := flussCall(t, c2, protocol.ProduceLog, &flusspb.ProduceLogRequest{Acks: proto.Int32(1), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(30000),
		BucketsReq: []*flusspb.PbProduceLogReqForBucket{{BucketId: proto.Int32(0), Records: batch(2, rows(15, 3))}}}, &presp)
	if c2code != protocol.None || presp.BucketsResp[0].GetBaseOffset() != 15 {
		t.Fatalf("produce during the long poll: %s %v", c2code, presp.BucketsResp)
	}
	if r := <-polled; len(r.Records) == 0 || r.GetHighWatermark() != 18 {
		t.Fatalf("long poll: %v", r)
	} else if got, _ := decodeFluss(t, r.Records, schema); len(got) != 3 || !got[0].Equal(rows(15, 1)[0]) {
		t.Fatalf("long poll rows: %v", got)
	}

	list := func(typ int32, ts *int64) *flusspb.PbListOffsetsRespForBucket {
		t.Helper()
		var resp flusspb.ListOffsetsResponse
		if code := flussCall(t, c, protocol.ListOffsets, &flusspb.ListOffsetsRequest{FollowerServerId: proto.Int32(-1), OffsetType: proto.Int32(typ),
			TableId: proto.Int64(info.TableId), BucketId: []int32{0, 1}, StartTimestamp: ts}, &resp); code != protocol.None {
			t.Fatalf("LIST_OFFSETS: %s", code)
		}
		return resp.BucketsResp[0]
	}
	if r := list(0, nil); r.GetOffset() != 0 {
		t.Fatalf("earliest: %v", r)
	}
	if r := list(1, nil); r.GetOffset() != 18 {
		t.Fatalf("latest: %v", r)
	}
	if r := list(2, proto.Int64(0)); r.GetOffset() != 0 {
		t.Fatalf("timestamp 0: %v", r)
	}
	if r := list(2, proto.Int64(1<<62)); r.GetOffset() != 18 {
		t.Fatalf("a future timestamp: %v", r)
	}

	// The Connect API reads the same log.
	lo, err := tabletClient(s).ListOffsets(context.Background(), connect.NewRequest(&stromv1.ListOffsetsRequest{Database: "fluss", Table: "scores",
		Buckets: []int32{0}, Spec: stromv1.OffsetSpec_OFFSET_SPEC_LATEST}))
	if err != nil || lo.Msg.Buckets[0].Offset != 18 {
		t.Fatalf("Connect ListOffsets: %v %v", lo, err)
	}

	// A table id no table has fails the request.
	var none flusspb.ListOffsetsResponse
	if code := flussCall(t, c, protocol.ListOffsets, &flusspb.ListOffsetsRequest{FollowerServerId: proto.Int32(-1), OffsetType: proto.Int32(1),
		TableId: proto.Int64(info.TableId + 1000), BucketId: []int32{0}}, &none); code != protocol.TableNotExist {
		t.Fatalf("unknown table id: %s", code)
	}
	// Requests Strom does not take, each refused with Fluss's code.
	var pr2 flusspb.ProduceLogResponse
	if code := flussCall(t, c, protocol.ProduceLog, &flusspb.ProduceLogRequest{Acks: proto.Int32(2), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(1000),
		BucketsReq: []*flusspb.PbProduceLogReqForBucket{{BucketId: proto.Int32(0), Records: first}}}, &pr2); code != protocol.InvalidRequiredAcks {
		t.Fatalf("acks 2: %s", code)
	}
	if code := flussCall(t, c, protocol.ProduceLog, &flusspb.ProduceLogRequest{Acks: proto.Int32(-1), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(1000),
		BucketsReq: []*flusspb.PbProduceLogReqForBucket{{BucketId: proto.Int32(1), Records: first}, {BucketId: proto.Int32(1), Records: first},
			{PartitionId: proto.Int64(7), BucketId: proto.Int32(0), Records: first}}}, &pr2); code != protocol.None ||
		pr2.BucketsResp[0].ErrorCode != nil || protocol.ErrorCode(pr2.BucketsResp[1].GetErrorCode()) != protocol.InvalidTableException ||
		protocol.ErrorCode(pr2.BucketsResp[2].GetErrorCode()) != protocol.PartitionNotExists {
		t.Fatalf("a bucket twice and a partition: %s %v", code, pr2.BucketsResp)
	}
	var fr flusspb.FetchLogResponse
	if code := flussCall(t, c, protocol.FetchLog, &flusspb.FetchLogRequest{FollowerServerId: proto.Int32(3), MaxBytes: proto.Int32(1 << 20)}, &fr); code != protocol.ServerNotExistException {
		t.Fatalf("a follower's fetch: %s", code)
	}
}

// A FETCH_LOG bucket answered without an error carries records, empty when
// there is nothing to read, as Fluss's server always sets them: the 0.9.1
// client reads records unconditionally (getRecordsSlice throws for an unset
// field, CommonRpcMessageUtils.getFetchLogResultForBucket) inside a
// callback whose exception nobody sees, so one empty bucket without records
// dropped the whole answer, the other buckets' rows with it, at every
// fetch: FlussLogCheck's "scan sees no rows" whenever the writer had put
// all 1000 rows into one bucket.
func TestFlussFetchEmptyBucketHasRecords(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	s := startServer(t, cfg)
	const ddl = "id BIGINT NOT NULL, name STRING, score DOUBLE"
	info := createTable(t, s, "fluss", "one_full", ddl, 2)
	schema := schemaOf(t, ddl)
	c := dialFluss(t, cfg.FlussListen)

	var pr flusspb.ProduceLogResponse
	if code := flussCall(t, c, protocol.ProduceLog, &flusspb.ProduceLogRequest{Acks: proto.Int32(-1), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(30000),
		BucketsReq: []*flusspb.PbProduceLogReqForBucket{{BucketId: proto.Int32(1), Records: v0Batch(buildBatch(t, schema, info.SchemaId, record.Row{int64(1), "a", 0.5}))}}}, &pr); code != protocol.None || pr.BucketsResp[0].ErrorCode != nil {
		t.Fatalf("PRODUCE_LOG: %s %v", code, pr.BucketsResp)
	}
	// Both buckets from the log start, as the client's subscribeFromBeginning
	// asks; the second fetch from the high watermarks is the caught-up
	// answer after max_wait_ms.
	for _, c0 := range [][2]int64{{-2, -2}, {0, 1}} {
		var resp flusspb.FetchLogResponse
		req := &flusspb.FetchLogRequest{FollowerServerId: proto.Int32(-1), MaxBytes: proto.Int32(16 << 20), MinBytes: proto.Int32(1), MaxWaitMs: proto.Int32(0),
			TablesReq: []*flusspb.PbFetchLogReqForTable{{TableId: proto.Int64(info.TableId), ProjectionPushdownEnabled: proto.Bool(false),
				BucketsReq: []*flusspb.PbFetchLogReqForBucket{
					{BucketId: proto.Int32(0), FetchOffset: proto.Int64(c0[0]), MaxFetchBytes: proto.Int32(1 << 20)},
					{BucketId: proto.Int32(1), FetchOffset: proto.Int64(c0[1]), MaxFetchBytes: proto.Int32(1 << 20)}}}}}
		if code := flussCall(t, c, protocol.FetchLog, req, &resp); code != protocol.None {
			t.Fatalf("FETCH_LOG: %s", code)
		}
		for _, b := range resp.TablesResp[0].BucketsResp {
			if b.ErrorCode != nil || b.Records == nil { // proto2: nil is "not set"; a present empty field decodes non-nil
				t.Fatalf("fetch from %v: bucket %d answered %v: records must be set (empty when none)", c0, b.GetBucketId(), b)
			}
		}
		if got, _ := decodeFluss(t, resp.TablesResp[0].BucketsResp[1].Records, schema); c0[1] == -2 && len(got) != 1 {
			t.Fatalf("bucket 1 from the start: %d rows, want 1", len(got))
		}
	}
}

// A bucket id outside the table's buckets (2 of a 2-bucket table, and -1)
// answers UNKNOWN_TABLE_OR_BUCKET_EXCEPTION, Fluss's code for a bucket no
// server hosts, for that bucket alone (LIMIT_SCAN, which asks for one, in
// its response), on every key that names buckets; bucket 0 is served
// beside it.
func TestFlussUnknownBucket(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	s := startServer(t, cfg)
	logT := createTable(t, s, "fluss", "events", "id BIGINT", 2)
	const ddl = "tenant INT NOT NULL, id BIGINT NOT NULL, v STRING"
	pkT := createBucketKeyed(t, s, "users", ddl, 2, []string{"tenant"}, "tenant", "id")
	c := dialFluss(t, cfg.FlussListen)
	const unknown = protocol.UnknownTableOrBucketException
	type bucketAnswer interface {
		GetBucketId() int32
		GetErrorCode() int32
		GetErrorMessage() string
	}
	check := func(key protocol.APIKey, answers []bucketAnswer) {
		t.Helper()
		if len(answers) != 3 {
			t.Fatalf("%s: %d bucket answers, want 3", key, len(answers))
		}
		for _, a := range answers {
			code := protocol.ErrorCode(a.GetErrorCode())
			switch b := a.GetBucketId(); {
			case b == 0 && code == unknown:
				t.Errorf("%s bucket 0: %s %q", key, code, a.GetErrorMessage())
			case b != 0 && (code != unknown || !strings.Contains(a.GetErrorMessage(), "has buckets 0..1")):
				t.Errorf("%s bucket %d: %s %q, want UNKNOWN_TABLE_OR_BUCKET_EXCEPTION naming the buckets", key, b, code, a.GetErrorMessage())
			}
		}
	}
	ids := []int32{0, 2, -1}
	answers := func(n int, at func(int) bucketAnswer) []bucketAnswer {
		out := make([]bucketAnswer, n)
		for i := range out {
			out[i] = at(i)
		}
		return out
	}
	call := func(key protocol.APIKey, req, resp proto.Message) {
		t.Helper()
		if code := flussCall(t, c, key, req, resp); code != protocol.None {
			t.Fatalf("%s: %s", key, code)
		}
	}

	var produce flusspb.ProduceLogResponse
	preq := &flusspb.ProduceLogRequest{Acks: proto.Int32(-1), TableId: proto.Int64(logT.TableId), TimeoutMs: proto.Int32(30000)}
	var fetch flusspb.FetchLogResponse
	ft := &flusspb.PbFetchLogReqForTable{TableId: proto.Int64(logT.TableId), ProjectionPushdownEnabled: proto.Bool(false)}
	var put flusspb.PutKvResponse
	kreq := &flusspb.PutKvRequest{Acks: proto.Int32(-1), TableId: proto.Int64(pkT.TableId), TimeoutMs: proto.Int32(30000)}
	var lookup flusspb.LookupResponse
	lreq := &flusspb.LookupRequest{TableId: proto.Int64(pkT.TableId)}
	var prefix flusspb.PrefixLookupResponse
	xreq := &flusspb.PrefixLookupRequest{TableId: proto.Int64(pkT.TableId)}
	var stats flusspb.GetTableStatsResponse
	sreq := &flusspb.GetTableStatsRequest{TableId: proto.Int64(pkT.TableId)}
	for _, b := range ids {
		preq.BucketsReq = append(preq.BucketsReq, &flusspb.PbProduceLogReqForBucket{BucketId: proto.Int32(b), Records: []byte{1}})
		ft.BucketsReq = append(ft.BucketsReq, &flusspb.PbFetchLogReqForBucket{BucketId: proto.Int32(b), FetchOffset: proto.Int64(0), MaxFetchBytes: proto.Int32(1 << 20)})
		kreq.BucketsReq = append(kreq.BucketsReq, &flusspb.PbPutKvReqForBucket{BucketId: proto.Int32(b), Records: []byte{1}})
		lreq.BucketsReq = append(lreq.BucketsReq, &flusspb.PbLookupReqForBucket{BucketId: proto.Int32(b), Keys: [][]byte{{1}}})
		xreq.BucketsReq = append(xreq.BucketsReq, &flusspb.PbPrefixLookupReqForBucket{BucketId: proto.Int32(b), Keys: [][]byte{{1}}})
		sreq.BucketsReq = append(sreq.BucketsReq, &flusspb.PbTableStatsReqForBucket{BucketId: proto.Int32(b)})
	}
	call(protocol.ProduceLog, preq, &produce)
	check(protocol.ProduceLog, answers(len(produce.BucketsResp), func(i int) bucketAnswer { return produce.BucketsResp[i] }))
	call(protocol.FetchLog, &flusspb.FetchLogRequest{FollowerServerId: proto.Int32(-1), MaxBytes: proto.Int32(16 << 20),
		TablesReq: []*flusspb.PbFetchLogReqForTable{ft}}, &fetch)
	check(protocol.FetchLog, answers(len(fetch.TablesResp[0].BucketsResp), func(i int) bucketAnswer { return fetch.TablesResp[0].BucketsResp[i] }))
	var offsets flusspb.ListOffsetsResponse
	call(protocol.ListOffsets, &flusspb.ListOffsetsRequest{FollowerServerId: proto.Int32(-1), OffsetType: proto.Int32(1),
		TableId: proto.Int64(logT.TableId), BucketId: ids}, &offsets)
	check(protocol.ListOffsets, answers(len(offsets.BucketsResp), func(i int) bucketAnswer { return offsets.BucketsResp[i] }))
	call(protocol.PutKv, kreq, &put)
	check(protocol.PutKv, answers(len(put.BucketsResp), func(i int) bucketAnswer { return put.BucketsResp[i] }))
	call(protocol.Lookup, lreq, &lookup)
	check(protocol.Lookup, answers(len(lookup.BucketsResp), func(i int) bucketAnswer { return lookup.BucketsResp[i] }))
	call(protocol.PrefixLookup, xreq, &prefix)
	check(protocol.PrefixLookup, answers(len(prefix.BucketsResp), func(i int) bucketAnswer { return prefix.BucketsResp[i] }))
	call(protocol.GetTableStats, sreq, &stats)
	check(protocol.GetTableStats, answers(len(stats.BucketsResp), func(i int) bucketAnswer { return stats.BucketsResp[i] }))
	for _, table := range []int64{logT.TableId, pkT.TableId} {
		var ls flusspb.LimitScanResponse
		call(protocol.LimitScan, &flusspb.LimitScanRequest{TableId: proto.Int64(table), BucketId: proto.Int32(2), Limit: proto.Int32(10)}, &ls)
		if code := protocol.ErrorCode(ls.GetErrorCode()); code != unknown {
			t.Errorf("LIMIT_SCAN of table %d bucket 2: %s %q, want UNKNOWN_TABLE_OR_BUCKET_EXCEPTION", table, code, ls.GetErrorMessage())
		}
	}
}

// flussBatchSizes are the sizes of the 0.9.1 batches in records.
func flussBatchSizes(records []byte) []int {
	var sizes []int
	for pos := 0; pos < len(records); {
		n := int(binary.LittleEndian.Uint32(records[pos+8:])) + 12
		sizes = append(sizes, n)
		pos += n
	}
	return sizes
}

// A projected FETCH_LOG fills max_fetch_bytes with the pruned batches it
// sends, as Fluss's server does (issue 17): one column of a table about
// five times wider (as stored) returns every batch whose pruned bytes fit,
// not the few whose stored bytes do (5 of 30 before), and not one more;
// the request's max_bytes bounds it the same way. Of a table some fifty
// times wider it reads at most projectedReadFactor (16) times the limit.
func TestFlussProjectedFetchFillsMaxFetchBytes(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	s := startServer(t, cfg)
	const ddl = "id BIGINT NOT NULL, a STRING, b STRING, c STRING, d STRING, e STRING, f STRING, g STRING, h STRING"
	schema := schemaOf(t, ddl)
	c := dialFluss(t, cfg.FlussListen)
	const batches, rowsEach = 80, 10
	rnd := rand.New(rand.NewPCG(1, 2))
	fill := func(table string, value func() string) *stromv1.TableInfo {
		info := createTable(t, s, "fluss", table, ddl, 1)
		for req := range batches / 10 {
			var records []byte
			for i := req * 10; i < req*10+10; i++ {
				var rows []record.Row
				for j := range rowsEach {
					row := record.Row{int64(i*rowsEach + j)}
					for range 8 {
						row = append(row, value())
					}
					rows = append(rows, row)
				}
				records = append(records, v0Batch(buildBatch(t, schema, info.SchemaId, rows...))...)
			}
			var resp flusspb.ProduceLogResponse
			if code := flussCall(t, c, protocol.ProduceLog, &flusspb.ProduceLogRequest{Acks: proto.Int32(-1), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(30000),
				BucketsReq: []*flusspb.PbProduceLogReqForBucket{{BucketId: proto.Int32(0), Records: records}}}, &resp); code != protocol.None || resp.BucketsResp[0].ErrorCode != nil {
				t.Fatalf("PRODUCE_LOG: %s %v", code, resp.BucketsResp)
			}
		}
		return info
	}
	info := fill("wide", func() string { return strings.Repeat("w", 40) })
	wider := fill("wider", func() string {
		b := make([]byte, 100)
		for i := range b {
			b[i] = byte('a' + rnd.IntN(26))
		}
		return string(b)
	})

	fetch := func(info *stromv1.TableInfo, projected []int32, bucketMax, maxBytes int) *flusspb.PbFetchLogRespForBucket {
		t.Helper()
		tr := &flusspb.PbFetchLogReqForTable{TableId: proto.Int64(info.TableId), ProjectionPushdownEnabled: proto.Bool(projected != nil), ProjectedFields: projected,
			BucketsReq: []*flusspb.PbFetchLogReqForBucket{{BucketId: proto.Int32(0), FetchOffset: proto.Int64(0), MaxFetchBytes: proto.Int32(int32(bucketMax))}}}
		var resp flusspb.FetchLogResponse
		if code := flussCall(t, c, protocol.FetchLog, &flusspb.FetchLogRequest{FollowerServerId: proto.Int32(-1), MaxBytes: proto.Int32(int32(maxBytes)),
			MinBytes: proto.Int32(1), MaxWaitMs: proto.Int32(0), TablesReq: []*flusspb.PbFetchLogReqForTable{tr}}, &resp); code != protocol.None {
			t.Fatalf("FETCH_LOG: %s", code)
		}
		r := resp.TablesResp[0].BucketsResp[0]
		if r.ErrorCode != nil {
			t.Fatalf("FETCH_LOG: %s %s", protocol.ErrorCode(r.GetErrorCode()), r.GetErrorMessage())
		}
		return r
	}
	full := flussBatchSizes(fetch(info, nil, 1<<20, 1<<20).Records)
	pruned := flussBatchSizes(fetch(info, []int32{0}, 1<<20, 1<<20).Records)
	if len(full) != batches || len(pruned) != batches {
		t.Fatalf("%d batches, %d pruned; want %d", len(full), len(pruned), batches)
	}
	const fit = 30
	limit, stored := pruned[fit]/2, 0 // half of batch 30: batches 0..29 fit, not 30
	for i := range fit {
		limit += pruned[i]
		stored += full[i]
	}
	if stored > 16*limit {
		t.Fatalf("the test's rows are too wide: %d stored bytes for %d pruned ones", stored, limit)
	}
	t.Logf("%d batches: %d bytes stored, %d pruned to the column", fit, stored, limit-pruned[fit]/2)

	for _, tc := range []struct {
		name                string
		bucketMax, maxBytes int
	}{
		{"max_fetch_bytes", limit, 1 << 20},
		{"max_bytes", 1 << 20, limit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fetch(info, []int32{0}, tc.bucketMax, tc.maxBytes)
			got, bases := decodeFluss(t, r.Records, schema.Project([]int{0}))
			if len(bases) != fit || len(got) != fit*rowsEach || len(r.Records) > limit {
				t.Fatalf("%d batches, %d rows, %d bytes; want the %d batches (%d rows) whose pruned bytes fit in %d",
					len(bases), len(got), len(r.Records), fit, fit*rowsEach, limit)
			}
			for i, row := range got {
				if !row.Equal(record.Row{int64(i)}) {
					t.Fatalf("row %d: %v", i, row)
				}
			}
		})
	}

	// The wider table: the batches answered were read within 16 times the
	// limit (the last read may end one batch past it), which holds fewer
	// than fit pruned, but more than one read of the limit gives.
	full = flussBatchSizes(fetch(wider, nil, 1<<20, 1<<20).Records)
	pruned = flussBatchSizes(fetch(wider, []int32{0}, 1<<20, 1<<20).Records)
	limit, stored = 0, 0
	for i := range fit {
		limit += pruned[i]
		stored += full[i]
	}
	if stored <= 16*limit {
		t.Fatalf("the wider table is not wide enough: %d stored bytes for %d pruned ones", stored, limit)
	}
	r := fetch(wider, []int32{0}, limit, 1<<20)
	got := len(flussBatchSizes(r.Records))
	read := 0
	for i := range got - 1 {
		read += full[i] + 4 // as stored: Strom's header is 4 bytes longer
	}
	t.Logf("wider: %d batches of %d answered, %d bytes", got, fit, len(r.Records))
	if got >= fit || read > 16*limit || got*full[0] <= limit {
		t.Fatalf("wider: %d batches answered (%d bytes read before the last), want fewer than %d read within %d, more than %d",
			got, read, fit, 16*limit, limit/full[0])
	}
}
