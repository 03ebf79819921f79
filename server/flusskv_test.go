package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// kvCodecs encodes rows, keys and bucket keys of a primary-key table as
// the Fluss 0.9.1 client does (CompactedKeyEncoder keys, compacted rows).
type kvCodecs struct {
	t          testing.TB
	schemaID   int16
	buckets    int
	pk, bucket *record.KeyCodec
	rows       *record.CompactedRowCodec
}

func newKvCodecs(t testing.TB, s record.Schema, schemaID int32, buckets int, bucketKey []string) kvCodecs {
	t.Helper()
	c := kvCodecs{t: t, schemaID: int16(schemaID), buckets: buckets}
	var err error
	if c.pk, err = record.NewKeyCodec(s.Columns, s.PrimaryKey); err != nil {
		t.Fatal(err)
	}
	if c.bucket, err = record.NewKeyCodec(s.Columns, bucketKey); err != nil {
		t.Fatal(err)
	}
	if c.rows, err = record.NewCompactedRowCodec(s.Columns); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c kvCodecs) key(row record.Row) []byte {
	k, err := c.pk.AppendRow(nil, row)
	if err != nil {
		c.t.Fatal(err)
	}
	return k
}

func (c kvCodecs) bucketKey(row record.Row) []byte {
	k, err := c.bucket.AppendRow(nil, row)
	if err != nil {
		c.t.Fatal(err)
	}
	return k
}

func (c kvCodecs) bucketOf(row record.Row) int32 {
	return int32(record.BucketOf(c.bucketKey(row), c.buckets))
}

// batches builds one KV batch per bucket of upserts (and deletes: rows
// with del set, whose key alone is written), stamped with writer and
// the sequence seq of every bucket's batch.
func (c kvCodecs) batches(writer int64, seq int32, rows []record.Row, del func(record.Row) bool) map[int32][]byte {
	c.t.Helper()
	builders := map[int32]*record.KvBatchBuilder{}
	for _, r := range rows {
		b := c.bucketOf(r)
		if builders[b] == nil {
			builders[b] = record.NewKvBatchBuilder(record.KvBatchHeader{SchemaID: c.schemaID, WriterID: writer, BatchSequence: seq})
		}
		var value []byte
		if del == nil || !del(r) {
			var err error
			if value, err = c.rows.Append(nil, r); err != nil {
				c.t.Fatal(err)
			}
		}
		if err := builders[b].Append(c.key(r), value); err != nil {
			c.t.Fatal(err)
		}
	}
	out := map[int32][]byte{}
	for b, bb := range builders {
		out[b] = bb.Build()
	}
	return out
}

// putKvRows upserts rows through PUT_KV on c (no writer id, acks=-1), one
// batch per bucket, and fails on any bucket's error.
func putKvRows(t testing.TB, c net.Conn, kc kvCodecs, tableID int64, rows []record.Row) {
	t.Helper()
	req := &flusspb.PutKvRequest{Acks: proto.Int32(-1), TableId: proto.Int64(tableID), TimeoutMs: proto.Int32(30000)}
	for b, batch := range kc.batches(record.NoWriterID, record.NoBatchSequence, rows, nil) {
		req.BucketsReq = append(req.BucketsReq, &flusspb.PbPutKvReqForBucket{BucketId: proto.Int32(b), Records: batch})
	}
	var put flusspb.PutKvResponse
	if code := flussCall(t, c, protocol.PutKv, req, &put); code != protocol.None {
		t.Fatalf("PUT_KV: %s", code)
	}
	for _, r := range put.BucketsResp {
		if r.ErrorCode != nil {
			t.Fatalf("PUT_KV bucket %d: %s", r.GetBucketId(), r.GetErrorMessage())
		}
	}
}

// lookupRequest is a LOOKUP of the keys of rows, grouped by bucket as the
// Fluss client groups them, with where each key went: its bucket and its
// index among that bucket's keys.
func (c kvCodecs) lookupRequest(tableID int64, rows []record.Row) (*flusspb.LookupRequest, [][2]int) {
	req := &flusspb.LookupRequest{TableId: proto.Int64(tableID)}
	byBucket := map[int32]*flusspb.PbLookupReqForBucket{}
	var order [][2]int
	for _, r := range rows {
		b := c.bucketOf(r)
		br := byBucket[b]
		if br == nil {
			br = &flusspb.PbLookupReqForBucket{BucketId: proto.Int32(b)}
			byBucket[b] = br
			req.BucketsReq = append(req.BucketsReq, br)
		}
		order = append(order, [2]int{int(b), len(br.Keys)})
		br.Keys = append(br.Keys, c.key(r))
	}
	return req, order
}

// value decodes a KV value (schema id int16 LE + compacted row).
func (c kvCodecs) value(v []byte) record.Row {
	c.t.Helper()
	id, row, err := record.ParseKvValue(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if id != c.schemaID {
		c.t.Fatalf("value of schema %d, want %d", id, c.schemaID)
	}
	r, err := c.rows.Decode(row)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// valueBatch reads a LIMIT_SCAN value batch as Fluss 0.9.1's
// DefaultValueRecordBatch does.
func valueBatch(t *testing.T, b []byte) [][]byte {
	t.Helper()
	le := binary.LittleEndian
	if len(b) < 9 || int(le.Uint32(b))+4 != len(b) || b[4] != 0 {
		t.Fatalf("value batch header % x (%d bytes)", b[:min(len(b), 9)], len(b))
	}
	n := int(le.Uint32(b[5:]))
	var out [][]byte
	for p := 9; len(out) < n; {
		l := int(le.Uint32(b[p:]))
		out = append(out, b[p+4:p+4+l])
		p += 4 + l
		if len(out) == n && p != len(b) {
			t.Fatalf("value batch: %d bytes after its %d records", len(b)-p, n)
		}
	}
	return out
}

// The primary-key keys over the Fluss wire on a real node: PUT_KV of KV
// batches as the 0.9.1 client writes them (idempotent: a retry answers the
// same log end offset and changes nothing; a partial update; deletes; a
// corrupt batch refused CORRUPT_MESSAGE for its bucket alone), LOOKUP of
// present and absent keys, PREFIX_LOOKUP on a bucket key that prefixes the
// primary key, LIMIT_SCAN of a primary-key table (a value batch) and of a
// log table (0.9.1 log batches), the error answers, and the Connect API
// seeing the same rows.
func TestFlussKvKeys(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	s := startServer(t, cfg)
	const ddl = "id BIGINT NOT NULL, name STRING, score INT"
	info := createTable(t, s, "fluss", "users", ddl, 2, "id")
	schema := schemaOf(t, ddl)
	schema.PrimaryKey = []string{"id"}
	kc := newKvCodecs(t, schema, info.SchemaId, 2, []string{"id"})
	c := dialFluss(t, cfg.FlussListen)

	var w flusspb.InitWriterResponse
	if code := flussCall(t, c, protocol.InitWriter, &flusspb.InitWriterRequest{}, &w); code != protocol.None {
		t.Fatalf("INIT_WRITER: %s", code)
	}
	put := func(req *flusspb.PutKvRequest) map[int32]*flusspb.PbPutKvRespForBucket {
		t.Helper()
		var resp flusspb.PutKvResponse
		if code := flussCall(t, c, protocol.PutKv, req, &resp); code != protocol.None {
			t.Fatalf("PUT_KV: %s", code)
		}
		out := map[int32]*flusspb.PbPutKvRespForBucket{}
		for _, r := range resp.BucketsResp {
			out[r.GetBucketId()] = r
		}
		return out
	}
	putReq := func(batches map[int32][]byte, targets ...int32) *flusspb.PutKvRequest {
		req := &flusspb.PutKvRequest{Acks: proto.Int32(-1), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(30000), TargetColumns: targets}
		for _, b := range slices.Sorted(func(yield func(int32) bool) {
			for b := range batches {
				if !yield(b) {
					return
				}
			}
		}) {
			req.BucketsReq = append(req.BucketsReq, &flusspb.PbPutKvReqForBucket{BucketId: proto.Int32(b), Records: batches[b]})
		}
		return req
	}
	want := map[int64]record.Row{}
	var rows []record.Row
	for i := range int64(100) {
		r := record.Row{i, "user", int32(i * 10)}
		rows = append(rows, r)
		want[i] = r
	}
	first := kc.batches(w.GetWriterId(), 0, rows, nil)
	if len(first) != 2 {
		t.Fatalf("100 keys in %d buckets, want both", len(first))
	}
	ends := map[int32]int64{}
	for b, r := range put(putReq(first)) {
		if r.ErrorCode != nil || r.LogEndOffset == nil {
			t.Fatalf("bucket %d: %v", b, r)
		}
		ends[b] = r.GetLogEndOffset()
	}
	for b, r := range put(putReq(first)) {
		if r.ErrorCode != nil || r.GetLogEndOffset() != ends[b] {
			t.Fatalf("a retry of bucket %d's batch: %v, want its log end offset %d", b, r, ends[b])
		}
	}

	// A partial update of score (id is the key), then deletes.
	var partial []record.Row
	for i := int64(0); i < 100; i += 10 {
		partial = append(partial, record.Row{i, nil, int32(-1)})
		want[i] = record.Row{i, "user", int32(-1)}
	}
	for b, r := range put(putReq(kc.batches(w.GetWriterId(), 1, partial, nil), 0, 2)) {
		if r.ErrorCode != nil {
			t.Fatalf("partial update, bucket %d: %v", b, r)
		}
	}
	var dels []record.Row
	for i := int64(5); i < 100; i += 10 {
		dels = append(dels, record.Row{i, nil, nil})
		delete(want, i)
	}
	for b, r := range put(putReq(kc.batches(w.GetWriterId(), 2, dels, func(record.Row) bool { return true }))) {
		if r.ErrorCode != nil {
			t.Fatalf("deletes, bucket %d: %v", b, r)
		}
	}

	// A corrupt batch fails its bucket alone; the other is written.
	more := kc.batches(record.NoWriterID, record.NoBatchSequence, []record.Row{{int64(200), "x", int32(1)}, {int64(201), "y", int32(2)}}, nil)
	if len(more) != 2 {
		t.Fatalf("keys 200, 201 in %d buckets, want 2", len(more))
	}
	want[200], want[201] = record.Row{int64(200), "x", int32(1)}, record.Row{int64(201), "y", int32(2)}
	badBucket := kc.bucketOf(want[201])
	more[badBucket][len(more[badBucket])-1] ^= 1
	delete(want, 201)
	for b, r := range put(putReq(more)) {
		switch {
		case b == badBucket && protocol.ErrorCode(r.GetErrorCode()) != protocol.CorruptMessage:
			t.Fatalf("corrupt batch of bucket %d: %v, want CORRUPT_MESSAGE", b, r)
		case b != badBucket && r.ErrorCode != nil:
			t.Fatalf("bucket %d beside a corrupt one: %v", b, r)
		}
	}

	// LOOKUP: every key written, a deleted one and one never written.
	lookup := func(keys []record.Row) []*flusspb.PbValue {
		t.Helper()
		req, order := kc.lookupRequest(info.TableId, keys)
		var resp flusspb.LookupResponse
		if code := flussCall(t, c, protocol.Lookup, req, &resp); code != protocol.None {
			t.Fatalf("LOOKUP: %s", code)
		}
		results := map[int32]*flusspb.PbLookupRespForBucket{}
		for _, r := range resp.BucketsResp {
			if r.ErrorCode != nil {
				t.Fatalf("LOOKUP bucket %d: %s", r.GetBucketId(), r.GetErrorMessage())
			}
			results[r.GetBucketId()] = r
		}
		var out []*flusspb.PbValue
		for _, o := range order {
			out = append(out, results[int32(o[0])].Values[o[1]])
		}
		return out
	}
	var keys []record.Row
	for i := int64(0); i < 202; i++ {
		keys = append(keys, record.Row{i, nil, nil})
	}
	for i, v := range lookup(keys) {
		w, ok := want[int64(i)]
		switch {
		case !ok && v.Values != nil:
			t.Fatalf("key %d: %v, want absent (no values field)", i, kc.value(v.Values))
		case ok && v.Values == nil:
			t.Fatalf("key %d absent, want %v", i, w)
		case ok && !slices.Equal(kc.value(v.Values), w):
			t.Fatalf("key %d: %v, want %v", i, kc.value(v.Values), w)
		}
	}

	// LIMIT_SCAN of the primary-key table: a value batch per bucket.
	seen := 0
	for b := int32(0); b < 2; b++ {
		var resp flusspb.LimitScanResponse
		if code := flussCall(t, c, protocol.LimitScan, &flusspb.LimitScanRequest{TableId: proto.Int64(info.TableId), BucketId: proto.Int32(b), Limit: proto.Int32(1000)}, &resp); code != protocol.None || resp.ErrorCode != nil {
			t.Fatalf("LIMIT_SCAN bucket %d: %s %s", b, code, resp.GetErrorMessage())
		}
		if resp.GetIsLogTable() {
			t.Fatal("LIMIT_SCAN of a primary-key table says is_log_table")
		}
		for _, v := range valueBatch(t, resp.Records) {
			r := kc.value(v)
			if w := want[r[0].(int64)]; !slices.Equal(r, w) || kc.bucketOf(r) != b {
				t.Fatalf("LIMIT_SCAN bucket %d: %v, want %v in bucket %d", b, r, w, kc.bucketOf(r))
			}
			seen++
		}
	}
	if seen != len(want) {
		t.Fatalf("LIMIT_SCAN saw %d rows, want %d", seen, len(want))
	}
	var limited flusspb.LimitScanResponse
	flussCall(t, c, protocol.LimitScan, &flusspb.LimitScanRequest{TableId: proto.Int64(info.TableId), BucketId: proto.Int32(0), Limit: proto.Int32(3)}, &limited)
	if n := len(valueBatch(t, limited.Records)); n != 3 {
		t.Fatalf("LIMIT_SCAN limit 3: %d rows", n)
	}

	// The Connect API sees the rows Fluss wrote.
	got, err := tabletClient(s).Lookup(context.Background(), connect.NewRequest(&stromv1.LookupRequest{Database: "fluss", Table: "users",
		Keys: []*structpb.Struct{{Fields: map[string]*structpb.Value{"id": structpb.NewNumberValue(10)}}}}))
	if err != nil || len(got.Msg.Rows) != 1 || got.Msg.Rows[0].Fields["score"].GetNumberValue() != -1 || got.Msg.Rows[0].Fields["name"].GetStringValue() != "user" {
		t.Fatalf("Connect Lookup of id 10: %v, %v", got, err)
	}

	// The error answers.
	var resp flusspb.PutKvResponse
	if code := flussCall(t, c, protocol.PutKv, &flusspb.PutKvRequest{Acks: proto.Int32(-1), TableId: proto.Int64(12345), TimeoutMs: proto.Int32(1000)}, &resp); code != protocol.TableNotExist {
		t.Fatalf("PUT_KV of a missing table: %s, want TABLE_NOT_EXIST", code)
	}
	if code := flussCall(t, c, protocol.PutKv, &flusspb.PutKvRequest{Acks: proto.Int32(2), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(1000)}, &resp); code != protocol.InvalidRequiredAcks {
		t.Fatalf("PUT_KV acks 2: %s, want INVALID_REQUIRED_ACKS", code)
	}
	if code := flussCall(t, c, protocol.PutKv, putReq(nil, 0, 7), &resp); code != protocol.InvalidTargetColumn {
		t.Fatalf("PUT_KV target column 7 of 3: %s, want INVALID_TARGET_COLUMN", code)
	}
	if r := put(putReq(kc.batches(record.NoWriterID, record.NoBatchSequence, []record.Row{{int64(1), nil, int32(5)}}, nil), 2)); protocol.ErrorCode(r[kc.bucketOf(record.Row{int64(1), nil, nil})].GetErrorCode()) != protocol.InvalidTargetColumn {
		t.Fatalf("PUT_KV of target columns without the key: %v, want INVALID_TARGET_COLUMN", r)
	}
	if r := put(&flusspb.PutKvRequest{Acks: proto.Int32(-1), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(1000),
		BucketsReq: []*flusspb.PbPutKvReqForBucket{{BucketId: proto.Int32(7), Records: first[0]}}}); protocol.ErrorCode(r[7].GetErrorCode()) != protocol.UnknownTableOrBucketException || !strings.Contains(r[7].GetErrorMessage(), "buckets 0..1") {
		t.Fatalf("PUT_KV to bucket 7 of 2: %v, want UNKNOWN_TABLE_OR_BUCKET_EXCEPTION naming the buckets", r[7])
	}
	// agg_mode: OVERWRITE (1) on a table without a merge engine is the
	// same write; past a merge engine, or 2, it is refused.
	over := putReq(kc.batches(record.NoWriterID, record.NoBatchSequence, []record.Row{want[1]}, nil))
	over.AggMode = proto.Int32(1)
	for b, r := range put(over) {
		if r.ErrorCode != nil {
			t.Fatalf("PUT_KV agg_mode 1 (OVERWRITE), bucket %d: %v", b, r)
		}
	}
	over.AggMode = proto.Int32(2)
	if code := flussCall(t, c, protocol.PutKv, over, &resp); code == protocol.None {
		t.Fatal("PUT_KV agg_mode 2 (LOCAL_AGGREGATE) answered")
	}
	firstRow := createTableFull(t, s, "fluss", "first_row", ddl, 1, map[string]string{"table.merge-engine": "FIRST_ROW"}, "id")
	over.TableId, over.AggMode = proto.Int64(firstRow.TableId), proto.Int32(1)
	if code := flussCall(t, c, protocol.PutKv, over, &resp); code == protocol.None {
		t.Fatal("PUT_KV agg_mode 1 (OVERWRITE) past a FIRST_ROW merge engine answered")
	}
	var lr flusspb.LookupResponse
	if code := flussCall(t, c, protocol.Lookup, &flusspb.LookupRequest{TableId: proto.Int64(12345)}, &lr); code != protocol.TableNotExist {
		t.Fatalf("LOOKUP of a missing table: %s, want TABLE_NOT_EXIST", code)
	}
	logInfo := createTable(t, s, "fluss", "events", ddl, 1)
	if code := flussCall(t, c, protocol.Lookup, &flusspb.LookupRequest{TableId: proto.Int64(logInfo.TableId)}, &lr); code != protocol.NonPrimaryKeyTableException {
		t.Fatalf("LOOKUP of a log table: %s, want NON_PRIMARY_KEY_TABLE_EXCEPTION", code)
	}
	var pr flusspb.PrefixLookupResponse
	if code := flussCall(t, c, protocol.PrefixLookup, &flusspb.PrefixLookupRequest{TableId: proto.Int64(info.TableId)}, &pr); code != protocol.None {
		t.Fatalf("PREFIX_LOOKUP where the bucket key is the primary key: %s", code)
	}
	var ls flusspb.LimitScanResponse
	flussCall(t, c, protocol.LimitScan, &flusspb.LimitScanRequest{TableId: proto.Int64(12345), BucketId: proto.Int32(0), Limit: proto.Int32(1)}, &ls)
	if protocol.ErrorCode(ls.GetErrorCode()) != protocol.TableNotExist {
		t.Fatalf("LIMIT_SCAN of a missing table: %v, want TABLE_NOT_EXIST in the body", &ls)
	}

	// LIMIT_SCAN of a log table: the batches of its last records, in 0.9.1's layout.
	var logRows []record.Row
	for i := range int64(30) {
		logRows = append(logRows, record.Row{i, "e", int32(i)})
	}
	var pl flusspb.ProduceLogResponse
	for _, part := range [][]record.Row{logRows[:10], logRows[10:20], logRows[20:]} {
		req := &flusspb.ProduceLogRequest{Acks: proto.Int32(-1), TableId: proto.Int64(logInfo.TableId), TimeoutMs: proto.Int32(30000),
			BucketsReq: []*flusspb.PbProduceLogReqForBucket{{BucketId: proto.Int32(0), Records: v0Batch(buildBatch(t, schema, logInfo.SchemaId, part...))}}}
		if code := flussCall(t, c, protocol.ProduceLog, req, &pl); code != protocol.None || pl.BucketsResp[0].ErrorCode != nil {
			t.Fatalf("PRODUCE_LOG: %s %v", code, pl.BucketsResp)
		}
	}
	ls.Reset()
	if code := flussCall(t, c, protocol.LimitScan, &flusspb.LimitScanRequest{TableId: proto.Int64(logInfo.TableId), BucketId: proto.Int32(0), Limit: proto.Int32(15)}, &ls); code != protocol.None || ls.ErrorCode != nil {
		t.Fatalf("LIMIT_SCAN of a log table: %s %s", code, ls.GetErrorMessage())
	}
	logSchema := schemaOf(t, ddl)
	got2, bases := decodeFluss(t, ls.Records, logSchema)
	if !ls.GetIsLogTable() || !slices.Equal(bases, []int64{10, 20}) || len(got2) != 20 {
		t.Fatalf("LIMIT_SCAN 15 of 30 records: is_log_table %v, batches at %v, %d rows; want true, [10 20], 20 (the client keeps the last 15)", ls.GetIsLogTable(), bases, len(got2))
	}
	for i, r := range got2 {
		if !slices.Equal(r, logRows[10+i]) {
			t.Fatalf("LIMIT_SCAN row %d: %v, want %v", i, r, logRows[10+i])
		}
	}
	ls.Reset()
	flussCall(t, c, protocol.LimitScan, &flusspb.LimitScanRequest{TableId: proto.Int64(logInfo.TableId), BucketId: proto.Int32(0), Limit: proto.Int32(0)}, &ls)
	if ls.ErrorCode == nil {
		t.Fatal("LIMIT_SCAN limit 0 answered without an error")
	}
}

// PREFIX_LOOKUP on a table whose bucket key (tenant) is a prefix of its
// primary key (tenant, id): every row of each tenant asked for, in key
// order; a tenant with none answers an empty list; a table whose bucket
// key is not a prefix is refused.
func TestFlussPrefixLookup(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	s := startServer(t, cfg)
	const ddl = "tenant INT NOT NULL, id BIGINT NOT NULL, v STRING"
	info := createBucketKeyed(t, s, "orders", ddl, 3, []string{"tenant"}, "tenant", "id")
	schema := schemaOf(t, ddl)
	schema.PrimaryKey = []string{"tenant", "id"}
	kc := newKvCodecs(t, schema, info.SchemaId, 3, []string{"tenant"})
	c := dialFluss(t, cfg.FlussListen)

	var rows []record.Row
	for tenant := range int32(4) {
		for id := range int64(tenant * 3) { // tenant 0 has none
			rows = append(rows, record.Row{tenant, id, "v"})
		}
	}
	putKvRows(t, c, kc, info.TableId, rows)
	for tenant := range int32(4) {
		p := record.Row{tenant, nil, nil}
		b := kc.bucketOf(p)
		var resp flusspb.PrefixLookupResponse
		if code := flussCall(t, c, protocol.PrefixLookup, &flusspb.PrefixLookupRequest{TableId: proto.Int64(info.TableId),
			BucketsReq: []*flusspb.PbPrefixLookupReqForBucket{{BucketId: proto.Int32(b), Keys: [][]byte{kc.bucketKey(p)}}}}, &resp); code != protocol.None {
			t.Fatalf("PREFIX_LOOKUP: %s", code)
		}
		br := resp.BucketsResp[0]
		if br.ErrorCode != nil || len(br.ValueLists) != 1 {
			t.Fatalf("PREFIX_LOOKUP tenant %d: %v", tenant, br)
		}
		var got []record.Row
		for _, v := range br.ValueLists[0].Values {
			got = append(got, kc.value(v))
		}
		if len(got) != int(tenant*3) {
			t.Fatalf("tenant %d: %d rows, want %d", tenant, len(got), tenant*3)
		}
		for i, r := range got {
			if w := (record.Row{tenant, int64(i), "v"}); !slices.Equal(r, w) {
				t.Fatalf("tenant %d row %d: %v, want %v", tenant, i, r, w)
			}
		}
	}

	other := createBucketKeyed(t, s, "by_id", ddl, 2, []string{"id"}, "tenant", "id")
	var resp flusspb.PrefixLookupResponse
	if code := flussCall(t, c, protocol.PrefixLookup, &flusspb.PrefixLookupRequest{TableId: proto.Int64(other.TableId)}, &resp); code == protocol.None {
		t.Fatal("PREFIX_LOOKUP where the bucket key (id) is not a prefix of the primary key (tenant, id) answered")
	}
}

// createBucketKeyed creates a primary-key table in the database fluss with
// the given bucket key.
func createBucketKeyed(t *testing.T, s *Server, table, ddl string, buckets int32, bucketKeys []string, pk ...string) *stromv1.TableInfo {
	t.Helper()
	cols, err := record.ParseColumns(ddl)
	if err != nil {
		t.Fatal(err)
	}
	desc := &stromv1.TableDescriptor{Schema: &stromv1.Schema{PrimaryKey: pk}, BucketCount: buckets, BucketKeys: bucketKeys}
	for _, col := range cols {
		desc.Schema.Columns = append(desc.Schema.Columns, &stromv1.Column{Name: col.Name, Type: col.Type.String()})
	}
	resp, err := adminClient(s).CreateTable(context.Background(), connect.NewRequest(&stromv1.CreateTableRequest{Database: "fluss", Table: table, Descriptor_: desc}))
	if err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, s, resp.Msg.Table)
	return resp.Msg.Table
}

// A bucket another node leads answers each primary-key key with
// NOT_LEADER_OR_FOLLOWER (which makes the Fluss client refresh its
// metadata), for that bucket alone; the bucket this node leads is served.
func TestFlussKvNotLeader(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	s := startServer(t, cfg)
	registerFakeNode(t, s, 2, "127.0.0.1:1")
	created, err := adminClient(s).CreateTable(context.Background(), connect.NewRequest(&stromv1.CreateTableRequest{Database: "fluss", Table: "t",
		Descriptor_: &stromv1.TableDescriptor{Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "k", Type: "INT NOT NULL"}, {Name: "v", Type: "STRING"}}, PrimaryKey: []string{"k"}}, BucketCount: 2}}))
	if err != nil {
		t.Fatal(err)
	}
	var mine, theirs int32 = -1, -1
	for _, b := range created.Msg.Table.Buckets {
		switch b.Leader {
		case 1:
			mine = b.Bucket
		case 2:
			theirs = b.Bucket
		}
	}
	if mine < 0 || theirs < 0 {
		t.Fatalf("buckets %v: want one led by each node", created.Msg.Table.Buckets)
	}
	schema := schemaOf(t, "k INT NOT NULL, v STRING")
	schema.PrimaryKey = []string{"k"}
	kc := newKvCodecs(t, schema, created.Msg.Table.SchemaId, 2, []string{"k"})
	keyIn := func(b int32) record.Row {
		for k := int32(0); ; k++ {
			if r := (record.Row{k, "v"}); kc.bucketOf(r) == b {
				return r
			}
		}
	}
	rm, rt := keyIn(mine), keyIn(theirs)
	c := dialFluss(t, cfg.FlussListen)
	id := created.Msg.Table.TableId
	notLeader := func(what string, code *int32, msg string) {
		t.Helper()
		if protocol.ErrorCode(code2(code)) != protocol.NotLeaderOrFollower {
			t.Errorf("%s of node 2's bucket: %d %s, want NOT_LEADER_OR_FOLLOWER", what, code2(code), msg)
		}
	}

	batches := kc.batches(record.NoWriterID, record.NoBatchSequence, []record.Row{rm, rt}, nil)
	var put flusspb.PutKvResponse
	poll(t, "this node's bucket served", func() bool {
		put.Reset()
		flussCall(t, c, protocol.PutKv, &flusspb.PutKvRequest{Acks: proto.Int32(-1), TableId: proto.Int64(id), TimeoutMs: proto.Int32(30000),
			BucketsReq: []*flusspb.PbPutKvReqForBucket{{BucketId: proto.Int32(mine), Records: batches[mine]}, {BucketId: proto.Int32(theirs), Records: batches[theirs]}}}, &put)
		return put.BucketsResp[0].ErrorCode == nil
	})
	notLeader("PUT_KV", put.BucketsResp[1].ErrorCode, put.BucketsResp[1].GetErrorMessage())

	var lr flusspb.LookupResponse
	flussCall(t, c, protocol.Lookup, &flusspb.LookupRequest{TableId: proto.Int64(id), BucketsReq: []*flusspb.PbLookupReqForBucket{
		{BucketId: proto.Int32(mine), Keys: [][]byte{kc.key(rm)}}, {BucketId: proto.Int32(theirs), Keys: [][]byte{kc.key(rt)}}}}, &lr)
	if v := lr.BucketsResp[0].GetValues(); lr.BucketsResp[0].ErrorCode != nil || len(v) != 1 || !slices.Equal(kc.value(v[0].Values), rm) {
		t.Errorf("LOOKUP of this node's bucket: %v", lr.BucketsResp[0])
	}
	notLeader("LOOKUP", lr.BucketsResp[1].ErrorCode, lr.BucketsResp[1].GetErrorMessage())

	var pr flusspb.PrefixLookupResponse
	flussCall(t, c, protocol.PrefixLookup, &flusspb.PrefixLookupRequest{TableId: proto.Int64(id), BucketsReq: []*flusspb.PbPrefixLookupReqForBucket{
		{BucketId: proto.Int32(theirs), Keys: [][]byte{kc.key(rt)}}}}, &pr)
	notLeader("PREFIX_LOOKUP", pr.BucketsResp[0].ErrorCode, pr.BucketsResp[0].GetErrorMessage())

	var ls flusspb.LimitScanResponse
	flussCall(t, c, protocol.LimitScan, &flusspb.LimitScanRequest{TableId: proto.Int64(id), BucketId: proto.Int32(theirs), Limit: proto.Int32(10)}, &ls)
	notLeader("LIMIT_SCAN", ls.ErrorCode, ls.GetErrorMessage())
}

func code2(c *int32) int32 {
	if c == nil {
		return 0
	}
	return *c
}

// The Connect API's LimitScan of a log table reads through logTail, as
// LIMIT_SCAN does: the whole batches holding the last limit records, and
// as JSON exactly those records.
func TestLimitScanLogTail(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "demo", "events", ddl, 1)
	schema := schemaOf(t, ddl)
	tc := tabletClient(s)
	ctx := context.Background()
	for from := int64(0); from < 30; from += 10 {
		var rows []record.Row
		for i := from; i < from+10; i++ {
			rows = append(rows, record.Row{i, "e"})
		}
		if _, err := tc.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "events", Acks: proto.Int32(-1),
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: buildBatch(t, schema, info.SchemaId, rows...)}}})); err != nil {
			t.Fatal(err)
		}
	}
	bin, err := tc.LimitScan(ctx, connect.NewRequest(&stromv1.LimitScanRequest{Database: "demo", Table: "events", Bucket: 0, Limit: 15}))
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for data := bin.Msg.Records; len(data) > 0; {
		b, rest, err := record.NextBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		bases, data = append(bases, b.BaseOffset()), rest
	}
	if !slices.Equal(bases, []int64{10, 20}) {
		t.Fatalf("LimitScan 15 of 30: batches at %v, want [10 20]", bases)
	}
	js, err := tc.LimitScan(ctx, connect.NewRequest(&stromv1.LimitScanRequest{Database: "demo", Table: "events", Bucket: 0, Limit: 15, JsonRows: true}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(js.Msg.Rows); n != 15 || js.Msg.Rows[0].Fields["id"].GetNumberValue() != 15 || js.Msg.Rows[14].Fields["id"].GetNumberValue() != 29 {
		t.Fatalf("LimitScan 15 of 30 as JSON: %d rows, %v", n, js.Msg.Rows)
	}
}

// A LOOKUP (Fluss's and the Connect API's) whose values pass
// kv.lookup.max-bytes fails rather than make the node build the reply:
// over the Fluss wire the bucket answers RECORD_TOO_LARGE_EXCEPTION naming
// the key (PREFIX_LOOKUP past kv.prefix-lookup.max-bytes too), over
// Connect LIMIT_EXCEEDED (HTTP 429, gRPC RESOURCE_EXHAUSTED); a lookup
// within the cap is served by both.
func TestLookupMaxBytes(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	cfg.LookupMaxBytes, cfg.PrefixLookupMaxBytes = 1<<10, 1<<10
	s := startServer(t, cfg)
	const ddl = "tenant INT NOT NULL, id BIGINT NOT NULL, v STRING"
	info := createBucketKeyed(t, s, "big", ddl, 1, []string{"tenant"}, "tenant", "id")
	schema := schemaOf(t, ddl)
	schema.PrimaryKey = []string{"tenant", "id"}
	kc := newKvCodecs(t, schema, info.SchemaId, 1, []string{"tenant"})
	c := dialFluss(t, cfg.FlussListen)

	var rows []record.Row
	var keys [][]byte
	for id := range int64(100) { // 100 values of over 40 bytes: more than 1 KiB
		r := record.Row{int32(1), id, strings.Repeat("v", 40)}
		rows = append(rows, r)
		keys = append(keys, kc.key(r))
	}
	req := &flusspb.PutKvRequest{Acks: proto.Int32(-1), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(30000)}
	for b, batch := range kc.batches(record.NoWriterID, record.NoBatchSequence, rows, nil) {
		req.BucketsReq = append(req.BucketsReq, &flusspb.PbPutKvReqForBucket{BucketId: proto.Int32(b), Records: batch})
	}
	var put flusspb.PutKvResponse
	if code := flussCall(t, c, protocol.PutKv, req, &put); code != protocol.None || put.BucketsResp[0].ErrorCode != nil {
		t.Fatalf("PUT_KV: %s %v", code, put.BucketsResp)
	}
	lookup := func(keys [][]byte) *flusspb.PbLookupRespForBucket {
		var resp flusspb.LookupResponse
		if code := flussCall(t, c, protocol.Lookup, &flusspb.LookupRequest{TableId: proto.Int64(info.TableId),
			BucketsReq: []*flusspb.PbLookupReqForBucket{{BucketId: proto.Int32(0), Keys: keys}}}, &resp); code != protocol.None {
			t.Fatalf("LOOKUP: %s", code)
		}
		return resp.BucketsResp[0]
	}
	if br := lookup(keys); protocol.ErrorCode(br.GetErrorCode()) != protocol.RecordTooLargeException ||
		!strings.Contains(br.GetErrorMessage(), "kv.lookup.max-bytes") || len(br.Values) != 0 {
		t.Fatalf("LOOKUP of 100 keys over 1 KiB: want RECORD_TOO_LARGE_EXCEPTION naming kv.lookup.max-bytes and no values, got %d %q (%d values)",
			br.GetErrorCode(), br.GetErrorMessage(), len(br.Values))
	}
	if br := lookup(keys[:5]); br.ErrorCode != nil || len(br.Values) != 5 || br.Values[4].Values == nil {
		t.Fatalf("LOOKUP of 5 keys: %v", br)
	}
	var pre flusspb.PrefixLookupResponse
	if code := flussCall(t, c, protocol.PrefixLookup, &flusspb.PrefixLookupRequest{TableId: proto.Int64(info.TableId),
		BucketsReq: []*flusspb.PbPrefixLookupReqForBucket{{BucketId: proto.Int32(0), Keys: [][]byte{kc.bucketKey(record.Row{int32(1), nil, nil})}}}}, &pre); code != protocol.None {
		t.Fatalf("PREFIX_LOOKUP: %s", code)
	}
	if br := pre.BucketsResp[0]; protocol.ErrorCode(br.GetErrorCode()) != protocol.RecordTooLargeException || !strings.Contains(br.GetErrorMessage(), "kv.prefix-lookup.max-bytes") {
		t.Fatalf("PREFIX_LOOKUP of 100 rows over 1 KiB: want RECORD_TOO_LARGE_EXCEPTION, got %d %q", br.GetErrorCode(), br.GetErrorMessage())
	}

	var all []string
	for id := range 100 {
		all = append(all, fmt.Sprintf(`{"tenant":1,"id":%d}`, id))
	}
	code, out := postJSON(t, s, "Lookup", `{"database":"fluss","table":"big","keys":[`+strings.Join(all, ",")+`]}`)
	if code != http.StatusTooManyRequests || !strings.Contains(out, "LIMIT_EXCEEDED") || !strings.Contains(out, "kv.lookup.max-bytes") {
		t.Fatalf("Connect Lookup of 100 keys over 1 KiB: want 429 LIMIT_EXCEEDED naming kv.lookup.max-bytes, got %d %s", code, out)
	}
	if code, out := postJSON(t, s, "Lookup", `{"database":"fluss","table":"big","keys":[{"tenant":1,"id":3}]}`); code != 200 || !strings.Contains(out, `"vvvv`) {
		t.Fatalf("Connect Lookup of 1 key: %d %s", code, out)
	}
}

// A LOOKUP or PREFIX_LOOKUP of several buckets runs one metadata read
// barrier, shared by its buckets, as the Connect API's Lookup does. Before,
// the Fluss listener ran one per bucket, one after another (4 here; a
// Fluss client's request names every bucket of the table the node leads).
func TestFlussLookupOneReadBarrier(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	s := startServer(t, cfg)
	const ddl = "id BIGINT NOT NULL, name STRING"
	const buckets = 4
	info := createTable(t, s, "fluss", "barriers", ddl, buckets, "id")
	schema := schemaOf(t, ddl)
	schema.PrimaryKey = []string{"id"}
	kc := newKvCodecs(t, schema, info.SchemaId, buckets, []string{"id"})
	c := dialFluss(t, cfg.FlussListen)

	lookup := &flusspb.LookupRequest{TableId: proto.Int64(info.TableId)}
	prefix := &flusspb.PrefixLookupRequest{TableId: proto.Int64(info.TableId)}
	seen := map[int32]bool{}
	for id := int64(0); len(seen) < buckets; id++ {
		k := record.Row{id, nil}
		if b := kc.bucketOf(k); !seen[b] {
			seen[b] = true
			lookup.BucketsReq = append(lookup.BucketsReq, &flusspb.PbLookupReqForBucket{BucketId: proto.Int32(b), Keys: [][]byte{kc.key(k)}})
			prefix.BucketsReq = append(prefix.BucketsReq, &flusspb.PbPrefixLookupReqForBucket{BucketId: proto.Int32(b), Keys: [][]byte{kc.bucketKey(k)}})
		}
	}
	var barriers atomic.Int32
	readBarrierHook = func() { barriers.Add(1) }
	t.Cleanup(func() { readBarrierHook = nil })

	var lr flusspb.LookupResponse
	if code := flussCall(t, c, protocol.Lookup, lookup, &lr); code != protocol.None {
		t.Fatalf("LOOKUP: %s", code)
	}
	for _, r := range lr.BucketsResp {
		if r.ErrorCode != nil || len(r.Values) != 1 || r.Values[0].Values != nil {
			t.Fatalf("LOOKUP bucket %d: %v, want one absent key", r.GetBucketId(), r)
		}
	}
	if n := barriers.Swap(0); n != 1 {
		t.Fatalf("LOOKUP of %d buckets ran %d read barriers, want 1", buckets, n)
	}
	var pr flusspb.PrefixLookupResponse
	if code := flussCall(t, c, protocol.PrefixLookup, prefix, &pr); code != protocol.None {
		t.Fatalf("PREFIX_LOOKUP: %s", code)
	}
	for _, r := range pr.BucketsResp {
		if r.ErrorCode != nil || len(r.ValueLists) != 1 {
			t.Fatalf("PREFIX_LOOKUP bucket %d: %v", r.GetBucketId(), r)
		}
	}
	if n := barriers.Load(); n != 1 {
		t.Fatalf("PREFIX_LOOKUP of %d buckets ran %d read barriers, want 1", buckets, n)
	}
}
