package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/tablet/replica"
)

func tabletClient(s *Server, opts ...connect.ClientOption) stromv1connect.TabletServiceClient {
	return stromv1connect.NewTabletServiceClient(h2cClient(), "http://"+s.Addr(), opts...)
}

// createTable creates db.table from a DDL column list and returns its info.
func createTable(t testing.TB, s *Server, db, table, ddl string, buckets int32, pk ...string) *stromv1.TableInfo {
	t.Helper()
	return createTableFull(t, s, db, table, ddl, buckets, nil, pk...)
}

// createTableWithOptions creates a one-bucket log table with table options.
func createTableWithOptions(t testing.TB, s *Server, db, table, ddl string, options map[string]string) *stromv1.TableInfo {
	t.Helper()
	return createTableFull(t, s, db, table, ddl, 1, options)
}

func createTableFull(t testing.TB, s *Server, db, table, ddl string, buckets int32, options map[string]string, pk ...string) *stromv1.TableInfo {
	t.Helper()
	c := adminClient(s)
	_, _ = c.CreateDatabase(context.Background(), connect.NewRequest(&stromv1.CreateDatabaseRequest{Database: db, IgnoreIfExists: true}))
	cols, err := record.ParseColumns(ddl)
	if err != nil {
		t.Fatal(err)
	}
	desc := &stromv1.TableDescriptor{Schema: &stromv1.Schema{PrimaryKey: pk}, BucketCount: buckets, Properties: options}
	for _, col := range cols {
		desc.Schema.Columns = append(desc.Schema.Columns, &stromv1.Column{Name: col.Name, Type: col.Type.String()})
	}
	resp, err := c.CreateTable(context.Background(), connect.NewRequest(&stromv1.CreateTableRequest{Database: db, Table: table, Descriptor_: desc}))
	if err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, s, resp.Msg.Table)
	return resp.Msg.Table
}

// waitReplicas waits until this node hosts every bucket of the table.
func waitReplicas(t testing.TB, s *Server, info *stromv1.TableInfo) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b := int32(0); b < info.Descriptor_.BucketCount; b++ {
		for {
			r, err := s.replicas.Replica(replicaTB(info.TableId, b))
			if err == nil && r.IsLeader() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("bucket %d of table %d not hosted: %v", b, info.TableId, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func buildBatch(t testing.TB, s record.Schema, schemaID int32, rows ...record.Row) []byte {
	t.Helper()
	b, err := record.NewArrowBuilder(s, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(r, record.AppendOnly); err != nil {
			t.Fatal(err)
		}
	}
	buf, _, err := b.Build(nil, record.BatchHeader{SchemaID: int16(schemaID), AppendOnly: true, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence},
		record.DefaultArrowCompression)
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

func schemaOf(t testing.TB, ddl string) record.Schema {
	t.Helper()
	cols, err := record.ParseColumns(ddl)
	if err != nil {
		t.Fatal(err)
	}
	return record.Schema{Columns: cols}
}

func TestProduceFetchProjectOverEveryProtocol(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	const ddl = "id BIGINT NOT NULL, name STRING, score DOUBLE"
	info := createTable(t, s, "demo", "scores", ddl, 2)
	schema := schemaOf(t, ddl)
	next := int64(0)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := tabletClient(s, p.opts...)
			batch := buildBatch(t, schema, info.SchemaId, record.Row{int64(1), "a", 1.5}, record.Row{int64(2), nil, 2.5})
			resp, err := c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{
				Database: "demo", Table: "scores", Buckets: []*stromv1.ProduceBucket{{Bucket: 1, Records: batch}},
			}))
			if err != nil {
				t.Fatal(err)
			}
			r := resp.Msg.Buckets[0]
			defer func() { next += 2 }()
			if r.Error != nil || r.BaseOffset != next || r.NextOffset != next+2 {
				t.Fatalf("produce result %v, want offsets %d..%d", r, next, next+2)
			}
			fetch, err := c.FetchLog(ctx, connect.NewRequest(&stromv1.FetchLogRequest{
				Database: "demo", Table: "scores", Columns: []string{"score", "id"},
				Buckets: []*stromv1.FetchBucket{{Bucket: 1, Offset: next}},
			}))
			if err != nil {
				t.Fatal(err)
			}
			fb := fetch.Msg.Buckets[0]
			if fb.Error != nil || fb.HighWatermark != next+2 || fb.NextOffset != next+2 {
				t.Fatalf("fetch result %+v", fb)
			}
			if got := strings.Join(fetch.Msg.Columns, ","); got != "id,score" {
				t.Fatalf("projected columns %s, want id,score (table order)", got)
			}
			if p.name == "connect-json" {
				// A JSON request gets rows as JSON objects.
				if len(fb.Rows) != 2 || fb.Rows[1].Fields["score"].GetNumberValue() != 2.5 || fb.Rows[1].Fields["name"] != nil {
					t.Fatalf("JSON rows: %v", fb.Rows)
				}
				return
			}
			b, _, err := record.NextBatch(fb.Records)
			if err != nil || b.Validate() != nil {
				t.Fatalf("fetched batch: %v / %v", err, b.Validate())
			}
			dec, err := record.DecodeArrowBatch(b, schema.Project([]int{0, 2}), memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			defer dec.Release()
			if dec.Len() != 2 || !dec.Row(1).Equal(record.Row{int64(2), 2.5}) {
				t.Fatalf("projected rows: %v", dec.Row(1))
			}
		})
	}
}

func TestJSONProduceAndFetch(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	createTable(t, s, "demo", "clicks", "user_id BIGINT NOT NULL, url STRING, ts TIMESTAMP_LTZ(3)", 3)
	post := func(method, body string) (int, string) {
		resp, err := http.Post("http://"+s.Addr()+"/strom.v1.TabletService/"+method, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("ProduceLog", `{"database":"demo","table":"clicks","rows":[
		{"user_id":1,"url":"/a","ts":"2026-11-30T10:00:00.000Z"},{"user_id":"2","url":null}]}`)
	if code != 200 || strings.Contains(body, "error") {
		t.Fatalf("produce: %d %s", code, body)
	}
	// The rows went to one bucket; find it.
	var rows []string
	for b := 0; b < 3; b++ {
		code, body = post("FetchLog", `{"database":"demo","table":"clicks","columns":["url"],"buckets":[{"bucket":`+string(rune('0'+b))+`,"offset":0}]}`)
		if code != 200 {
			t.Fatalf("fetch: %d %s", code, body)
		}
		if strings.Contains(body, `"rows"`) {
			rows = append(rows, body)
		}
	}
	if len(rows) != 1 || !strings.Contains(rows[0], `"url":"/a"`) || !strings.Contains(rows[0], `"_change_type":"+A"`) ||
		!strings.Contains(rows[0], `"_offset":1`) || strings.Contains(rows[0], "user_id") {
		t.Fatalf("fetched JSON rows: %v", rows)
	}
	// Bad rows: every problem named, nothing written.
	code, body = post("ProduceLog", `{"database":"demo","table":"clicks","rows":[{"user_id":null},{"user_id":1,"nope":2},{"user_id":"x"}]}`)
	if code != 400 || !strings.Contains(body, "rows[0].user_id") || !strings.Contains(body, "nope") || !strings.Contains(body, "rows[2].user_id") {
		t.Fatalf("bad rows: %d %s", code, body)
	}
	code, body = post("ListOffsets", `{"database":"demo","table":"clicks","spec":"OFFSET_SPEC_LATEST"}`)
	if code != 200 || strings.Count(body, `"offset":"2"`)+strings.Count(body, `"offset":2`) != 1 {
		t.Fatalf("offsets after a rejected produce: %d %s", code, body)
	}
}

func TestProduceBadBatchesFailOnlyTheirBucket(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "demo", "events", ddl, 4)
	createTable(t, s, "demo", "users", "id BIGINT NOT NULL, name STRING", 1, "id")
	schema := schemaOf(t, ddl)
	good := buildBatch(t, schema, info.SchemaId, record.Row{int64(1), "a"})

	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	wrongSchemaID := buildBatch(t, schema, info.SchemaId+1, record.Row{int64(1), "a"})
	otherColumns := buildBatch(t, schemaOf(t, "id BIGINT NOT NULL, name STRING, extra INT"), info.SchemaId, record.Row{int64(1), "a", int32(3)})
	nullable := schema
	nullable.Columns = append([]record.Column(nil), schema.Columns...)
	nullable.Columns[0].Type = nullable.Columns[0].Type.WithNullable(true)
	nullInNotNull := buildBatch(t, nullable, info.SchemaId, record.Row{nil, "a"})

	c := tabletClient(s)
	resp, err := c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{
		Database: "demo", Table: "events", Buckets: []*stromv1.ProduceBucket{
			{Bucket: 0, Records: badCRC},
			{Bucket: 1, Records: append(append([]byte(nil), good...), wrongSchemaID...)},
			{Bucket: 2, Records: good},
			{Bucket: 3, Records: otherColumns},
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	wants := []string{"CRC", "schema id", "", "column"}
	for i, r := range resp.Msg.Buckets {
		if wants[i] == "" {
			if r.Error != nil {
				t.Errorf("bucket %d: %v", i, r.Error)
			}
			continue
		}
		if r.Error == nil || !strings.Contains(r.Error.Message, wants[i]) {
			t.Errorf("bucket %d: error %v, want one mentioning %q", i, r.Error, wants[i])
		}
	}
	resp, err = c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{
		Database: "demo", Table: "events", Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: nullInNotNull}, {Bucket: 9, Records: good}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.Msg.Buckets[0].Error; e == nil || !strings.Contains(e.Message, "id") || !strings.Contains(e.Message, "NULL") && !strings.Contains(e.Message, "null") {
		t.Errorf("NULL in NOT NULL column: %v", e)
	}
	if e := resp.Msg.Buckets[1].Error; e == nil || !strings.Contains(e.Message, "bucket 9") {
		t.Errorf("bucket out of range: %v", e)
	}
	// Only bucket 2's batch was appended.
	offs, err := c.ListOffsets(ctx, connect.NewRequest(&stromv1.ListOffsetsRequest{Database: "demo", Table: "events", Spec: stromv1.OffsetSpec_OFFSET_SPEC_LATEST}))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range offs.Msg.Buckets {
		want := int64(0)
		if b.Bucket == 2 {
			want = 1
		}
		if b.Offset != want {
			t.Errorf("bucket %d end %d, want %d", b.Bucket, b.Offset, want)
		}
	}
	// A fetch outside the log says where the log is.
	f, err := c.FetchLog(ctx, connect.NewRequest(&stromv1.FetchLogRequest{Database: "demo", Table: "events", Buckets: []*stromv1.FetchBucket{{Bucket: 2, Offset: 99}}}))
	if err != nil {
		t.Fatal(err)
	}
	if e := f.Msg.Buckets[0].Error; e == nil || e.Name != "LOG_OFFSET_OUT_OF_RANGE_EXCEPTION" {
		t.Errorf("fetch out of range: %v", e)
	}
	// Log-table calls on a primary-key table are refused.
	_, err = c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "users", Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: good}}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "primary-key") {
		t.Errorf("produce to a primary-key table: %v", err)
	}
}

func TestFetchLongPollWakesOnProduce(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	const ddl = "id BIGINT"
	info := createTable(t, s, "demo", "t", ddl, 1)
	c := tabletClient(s)
	got := make(chan *stromv1.FetchLogResponse, 1)
	go func() {
		resp, err := c.FetchLog(ctx, connect.NewRequest(&stromv1.FetchLogRequest{
			Database: "demo", Table: "t", MaxWaitMs: 20000, Buckets: []*stromv1.FetchBucket{{Bucket: 0, Offset: 0}},
		}))
		if err != nil {
			t.Error(err)
		}
		got <- resp.Msg
	}()
	time.Sleep(100 * time.Millisecond) // the fetch is waiting (not a condition wait: the fetch must not return early)
	select {
	case r := <-got:
		t.Fatalf("fetch returned before any data: %v", r)
	default:
	}
	start := time.Now()
	if _, err := c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "t",
		Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: buildBatch(t, schemaOf(t, ddl), info.SchemaId, record.Row{int64(7)})}}})); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if len(r.Buckets[0].Records) == 0 || time.Since(start) > 10*time.Second {
		t.Fatalf("long poll: %v after %s", r, time.Since(start))
	}
}

func replicaTB(tableID int64, bucket int32) replica.TableBucket {
	return replica.TableBucket{TableID: tableID, Bucket: bucket}
}

func TestProduceTooLargeAndOutOfRange(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.SegmentBytes = 64 << 10
	s := startServer(t, cfg)
	ctx := context.Background()
	const ddl = "id BIGINT NOT NULL, blob STRING"
	info := createTable(t, s, "demo", "big", ddl, 2)
	schema := schemaOf(t, ddl)
	var rows []record.Row
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 50; i++ {
		b := make([]byte, 4000)
		for j := range b {
			b[j] = byte('a' + rng.IntN(26))
		}
		rows = append(rows, record.Row{int64(i), string(b)})
	}
	large := buildBatch(t, schema, info.SchemaId, rows...)
	if len(large) <= 64<<10 {
		t.Fatalf("test batch is only %d bytes", len(large))
	}
	small := buildBatch(t, schema, info.SchemaId, record.Row{int64(1), "x"})
	c := tabletClient(s)
	resp, err := c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "big",
		Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: large}, {Bucket: 1, Records: small}}}))
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.Msg.Buckets[0].Error; e == nil || e.Name != "RECORD_TOO_LARGE_EXCEPTION" || !strings.Contains(e.Message, "segment size") {
		t.Errorf("too large batch: %v", e)
	}
	if e := resp.Msg.Buckets[1].Error; e != nil {
		t.Errorf("the other bucket failed too: %v", e)
	}
	f, err := c.FetchLog(ctx, connect.NewRequest(&stromv1.FetchLogRequest{Database: "demo", Table: "big",
		Buckets: []*stromv1.FetchBucket{{Bucket: 1, Offset: 5}, {Bucket: 0, Offset: 0}}}))
	if err != nil {
		t.Fatal(err)
	}
	if e := f.Msg.Buckets[0].Error; e == nil || e.Name != "LOG_OFFSET_OUT_OF_RANGE_EXCEPTION" || !strings.Contains(e.Message, "[0, 1)") {
		t.Errorf("fetch past the end: %v, want the log's range in the message", e)
	}
	if e := f.Msg.Buckets[1].Error; e != nil || len(f.Msg.Buckets[1].Records) != 0 {
		t.Errorf("empty bucket: %v", f.Msg.Buckets[1])
	}
}

// A long-poll fetch does not hold up a stop: it is answered (with what
// there is) as soon as the node begins stopping, and Stop returns cleanly
// rather than when shutdown.timeout runs out with an error.
func TestStopEndsLongPollFetch(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.ShutdownTimeout = 5 * time.Minute
	s := startServer(t, cfg)
	createTable(t, s, "demo", "t", "id BIGINT", 1)
	c := tabletClient(s)
	type result struct {
		resp *connect.Response[stromv1.FetchLogResponse]
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := c.FetchLog(context.Background(), connect.NewRequest(&stromv1.FetchLogRequest{
			Database: "demo", Table: "t", MaxWaitMs: int32((4 * time.Minute).Milliseconds()),
			Buckets: []*stromv1.FetchBucket{{Bucket: 0, Offset: 0}},
		}))
		got <- result{resp, err}
	}()
	// Stop only once the fetch is in its wait: the API then has it in
	// flight.
	for s.longPolls.Load() == 0 {
		select {
		case r := <-got:
			t.Fatalf("fetch returned before any data: %v %v", r.resp, r.err)
		case <-time.After(time.Millisecond):
		}
	}
	// Far below shutdown.timeout and the fetch's wait: only a stop that
	// ends the wait meets it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("fetch during stop: %v", r.err)
		}
		if b := r.resp.Msg.Buckets; len(b) != 1 || b[0].Error != nil || len(b[0].Records) != 0 {
			t.Fatalf("fetch during stop answered %v", b)
		}
	default:
		t.Fatal("Stop returned with the fetch still waiting")
	}
}

// FetchLog answers at most fetch.max.bytes whatever max_bytes asks (a
// bucket's first batch excepted, as in Kafka), and as JSON at most
// fetch.json.max-rows rows; a batch larger than that alone is refused with
// LIMIT_EXCEEDED naming the key, and the bucket's other batches are served.
func TestFetchLimits(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FetchMaxBytes = 4 << 10
	cfg.FetchJSONMaxRows = 50
	s := startServer(t, cfg)
	const ddl = "id BIGINT, s STRING"
	info := createTable(t, s, "demo", "t", ddl, 1)
	waitReplicas(t, s, info)
	c := tabletClient(s)
	ctx := context.Background()
	produce := func(from, n int) {
		rows := make([]record.Row, n)
		for i := range rows {
			rows[i] = record.Row{int64(from + i), fmt.Sprintf("%x", uint64(from+i)*0x9e3779b97f4a7c15)}
		}
		if _, err := c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "t",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: buildBatch(t, schemaOf(t, ddl), info.SchemaId, rows...)}}})); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		produce(i*20, 20) // 20 batches of 20 rows, about 1 KiB each
	}
	produce(400, 60) // one batch of more rows than fetch.json.max-rows
	fetch := func(offset int64, asJSON bool) *stromv1.FetchBucketResult {
		resp, err := c.FetchLog(ctx, connect.NewRequest(&stromv1.FetchLogRequest{Database: "demo", Table: "t", MaxBytes: 1 << 30, JsonRows: asJSON,
			Buckets: []*stromv1.FetchBucket{{Bucket: 0, Offset: offset, MaxBytes: 1 << 30}}}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.Buckets[0]
	}
	if res := fetch(0, false); res.Error != nil || len(res.Records) > 6<<10 || res.NextOffset >= 400 {
		t.Fatalf("Arrow fetch: %d bytes up to offset %d (%v); fetch.max.bytes is 4 KiB", len(res.Records), res.NextOffset, res.Error)
	}
	res := fetch(0, true)
	if res.Error != nil || len(res.Rows) != 40 || res.NextOffset != 40 {
		t.Fatalf("JSON fetch: %d rows up to offset %d (%v); want the 2 batches of 20 within 50 rows", len(res.Rows), res.NextOffset, res.Error)
	}
	res = fetch(400, true)
	if res.Error.GetName() != "LIMIT_EXCEEDED" || !strings.Contains(res.Error.GetMessage(), "fetch.json.max-rows") || res.NextOffset != 400 {
		t.Fatalf("JSON fetch of a 60-row batch: %v, next offset %d", res.Error, res.NextOffset)
	}
	if res := fetch(400, false); res.Error != nil || len(res.Records) == 0 {
		t.Fatalf("the same batch as Arrow: %v", res.Error)
	}
}

// A writer idle for longer than server.writer-id.expiration-time is
// forgotten by the bucket: its next batch is refused at once (no earlier
// batch of it can still arrive, so retrying cannot help), and the writer
// goes on under a new writer id.
func TestWriterIdlePastExpirationStartsOver(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.WriterIDExpirationTime = time.Millisecond
	cfg.WriterIDExpirationCheckInterval = time.Hour // the test runs the check
	s := startServer(t, cfg)
	info := createTable(t, s, "demo", "t", "id BIGINT", 1)
	waitReplicas(t, s, info)
	ctx := t.Context()
	c, err := client.New(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Table(ctx, "demo", "t")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewAppendWriter(ctx, client.DeliveryTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	write := func(i int64) error {
		w.Append(ctx, record.Row{i})
		return w.Flush(ctx)
	}
	if err := write(0); err != nil {
		t.Fatal(err)
	}
	r, err := s.replicas.Replica(replicaTB(info.TableId, 0))
	if err != nil {
		t.Fatal(err)
	}
	for r.Log().RemoveExpiredWriters() == 0 { // once a millisecond has passed
		time.Sleep(time.Millisecond)
	}
	err = write(1)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Name != "OUT_OF_ORDER_SEQUENCE_EXCEPTION" || !strings.Contains(err.Error(), "after 1 attempts") {
		t.Fatalf("first batch after the writer expired: %v, want OUT_OF_ORDER_SEQUENCE at the first attempt", err)
	}
	if err := write(2); err != nil {
		t.Fatalf("batch under the new writer id: %v", err)
	}
	if end := r.Log().LogEndOffset(); end != 2 {
		t.Fatalf("log end %d, want 2 (rows 0 and 2)", end)
	}
}
