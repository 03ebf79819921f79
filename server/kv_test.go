package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	stromv1 "strom/rpc/gen/strom/v1"
)

// postJSON calls a TabletService method with a JSON body.
func postJSON(t *testing.T, s *Server, method, body string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+s.Addr()+"/strom.v1.TabletService/"+method, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPrimaryKeyTableOverJSON(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	createTable(t, s, "shop", "customers", "cust_key BIGINT, region STRING, name STRING, balance DECIMAL(10, 2)", 3, "cust_key")
	info, err := adminClient(s).CreateTable(context.Background(), connect.NewRequest(&stromv1.CreateTableRequest{Database: "shop", Table: "orders",
		Descriptor_: &stromv1.TableDescriptor{
			Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "region", Type: "STRING"}, {Name: "id", Type: "BIGINT"}, {Name: "amount", Type: "BIGINT"}},
				PrimaryKey: []string{"region", "id"}},
			BucketKeys: []string{"region"}, BucketCount: 2,
		}}))
	if err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, s, info.Msg.Table)

	put := func(body string) {
		t.Helper()
		code, resp := postJSON(t, s, "PutKv", body)
		if code != 200 || strings.Contains(resp, `"error"`) {
			t.Fatalf("PutKv %s: %d %s", body, code, resp)
		}
	}
	lookup := func(keys string) []map[string]any {
		t.Helper()
		code, resp := postJSON(t, s, "Lookup", `{"database":"shop","table":"customers","keys":`+keys+`}`)
		if code != 200 {
			t.Fatalf("Lookup: %d %s", code, resp)
		}
		var out struct{ Rows []map[string]any }
		if err := json.Unmarshal([]byte(resp), &out); err != nil {
			t.Fatal(err)
		}
		return out.Rows
	}
	put(`{"database":"shop","table":"customers","rows":[
		{"cust_key":1,"region":"eu","name":"Ada","balance":"10.50"},
		{"cust_key":2,"region":"us","name":"Bo","balance":"3.00"}]}`)
	rows := lookup(`[{"cust_key":1},{"cust_key":3},{"cust_key":2}]`)
	if len(rows) != 2 || rows[0]["name"] != "Ada" || rows[1]["balance"] != "3.00" {
		t.Fatalf("lookup after insert: %v", rows)
	}
	// Update, partial update, delete.
	put(`{"database":"shop","table":"customers","rows":[{"cust_key":1,"region":"eu","name":"Ada L.","balance":"11.00"}]}`)
	put(`{"database":"shop","table":"customers","targetColumns":["cust_key","balance"],"rows":[{"cust_key":2,"balance":"4.25"}]}`)
	rows = lookup(`[{"cust_key":1},{"cust_key":2}]`)
	if rows[0]["name"] != "Ada L." || rows[1]["name"] != "Bo" || rows[1]["balance"] != "4.25" {
		t.Fatalf("lookup after updates: %v", rows)
	}
	put(`{"database":"shop","table":"customers","deletes":[{"cust_key":1}]}`)
	if rows = lookup(`[{"cust_key":1}]`); len(rows) != 0 {
		t.Fatalf("lookup after delete: %v", rows)
	}

	// The changelog of the buckets holds +I, -U, +U, -D.
	var changes []string
	for b := 0; b < 3; b++ {
		code, resp := postJSON(t, s, "FetchLog", `{"database":"shop","table":"customers","buckets":[{"bucket":`+string(rune('0'+b))+`,"offset":0}]}`)
		if code != 200 {
			t.Fatalf("FetchLog: %d %s", code, resp)
		}
		var out struct {
			Buckets []struct{ Rows []map[string]any }
		}
		if err := json.Unmarshal([]byte(resp), &out); err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Buckets[0].Rows {
			if r["cust_key"].(float64) == 1 {
				changes = append(changes, r["_change_type"].(string))
			}
		}
	}
	if got := strings.Join(changes, " "); got != "+I -U +U -D" {
		t.Fatalf("changelog of key 1: %q, want +I -U +U -D", got)
	}

	// Scan and prefix lookup.
	put(`{"database":"shop","table":"orders","rows":[{"region":"eu","id":1,"amount":5},{"region":"eu","id":2,"amount":7},{"region":"us","id":3,"amount":1}]}`)
	code, resp := postJSON(t, s, "PrefixLookup", `{"database":"shop","table":"orders","prefixes":[{"region":"eu"}]}`)
	if code != 200 || strings.Count(resp, `"region":"eu"`) != 2 || strings.Contains(resp, `"us"`) {
		t.Fatalf("prefix lookup: %d %s", code, resp)
	}
	total := 0
	for b := 0; b < 2; b++ {
		code, resp = postJSON(t, s, "ScanKv", `{"database":"shop","table":"orders","bucket":`+string(rune('0'+b))+`}`)
		if code != 200 {
			t.Fatalf("scan: %d %s", code, resp)
		}
		total += strings.Count(resp, `"amount"`)
	}
	if total != 3 {
		t.Fatalf("scan found %d rows, want 3", total)
	}

	// Bad input: named, nothing written.
	code, resp = postJSON(t, s, "PutKv", `{"database":"shop","table":"customers","rows":[{"region":"eu"},{"cust_key":"x"}]}`)
	if code != 400 || !strings.Contains(resp, "rows[0].cust_key") || !strings.Contains(resp, "rows[1].cust_key") {
		t.Fatalf("bad rows: %d %s", code, resp)
	}
	code, resp = postJSON(t, s, "PrefixLookup", `{"database":"shop","table":"orders","prefixes":[{"id":1}]}`)
	if code != 400 || !strings.Contains(resp, "region") {
		t.Fatalf("prefix with the wrong columns: %d %s", code, resp)
	}
	code, resp = postJSON(t, s, "ProduceLog", `{"database":"shop","table":"customers","rows":[{"cust_key":5}]}`)
	if code != 400 || !strings.Contains(resp, "primary-key") {
		t.Fatalf("ProduceLog to a primary-key table: %d %s", code, resp)
	}
}

func TestAggregationMergeEngineFromTableOptions(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	c := adminClient(s)
	ctx := context.Background()
	mustCreateDB(t, c, "agg")
	desc := func(fn string) *stromv1.TableDescriptor {
		return &stromv1.TableDescriptor{
			Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "k", Type: "BIGINT"}, {Name: "total", Type: "BIGINT"}, {Name: "seen", Type: "STRING"}},
				PrimaryKey: []string{"k"}},
			Properties:       map[string]string{"table.merge-engine": "aggregation"},
			CustomProperties: map[string]string{"fields.total.agg": fn, "fields.seen.agg": "listagg", "fields.seen.listagg.delimiter": "|"},
		}
	}
	_, err := c.CreateTable(ctx, connect.NewRequest(&stromv1.CreateTableRequest{Database: "agg", Table: "bad", Descriptor_: desc("median")}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "median") {
		t.Fatalf("unknown aggregate function: %v", err)
	}
	resp, err := c.CreateTable(ctx, connect.NewRequest(&stromv1.CreateTableRequest{Database: "agg", Table: "totals", Descriptor_: desc("sum")}))
	if err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, s, resp.Msg.Table)
	for _, body := range []string{
		`{"database":"agg","table":"totals","rows":[{"k":1,"total":5,"seen":"a"}]}`,
		`{"database":"agg","table":"totals","rows":[{"k":1,"total":7,"seen":"b"}]}`,
	} {
		if code, out := postJSON(t, s, "PutKv", body); code != 200 || strings.Contains(out, `"error"`) {
			t.Fatalf("PutKv: %d %s", code, out)
		}
	}
	code, out := postJSON(t, s, "Lookup", `{"database":"agg","table":"totals","keys":[{"k":1}]}`)
	if code != 200 || !strings.Contains(out, `"total":12`) || !strings.Contains(out, `"seen":"a|b"`) {
		t.Fatalf("aggregated row: %d %s", code, out)
	}
}

func TestScanKvPagesAndExpires(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.ScannerTTL = time.Second
	s := startServer(t, cfg)
	createTable(t, s, "shop", "items", "id BIGINT, name STRING", 1, "id")
	if code, out := postJSON(t, s, "PutKv", `{"database":"shop","table":"items","rows":[{"id":1,"name":"a"},{"id":2,"name":"b"},{"id":3,"name":"c"}]}`); code != 200 || strings.Contains(out, `"error"`) {
		t.Fatalf("PutKv: %d %s", code, out)
	}
	c := tabletClient(s)
	ctx := context.Background()
	seen := 0
	var id []byte
	for page := 0; ; page++ {
		resp, err := c.ScanKv(ctx, connect.NewRequest(&stromv1.ScanKvRequest{Database: "shop", Table: "items", Bucket: 0, ScannerId: id, BatchSizeBytes: 1}))
		if err != nil {
			t.Fatal(err)
		}
		seen += len(resp.Msg.Values)
		if page == 0 && (len(resp.Msg.Values) != 1 || resp.Msg.LogOffset != 3) {
			t.Fatalf("first page: %d values at log offset %d, want 1 at 3", len(resp.Msg.Values), resp.Msg.LogOffset)
		}
		if !resp.Msg.HasMore {
			break
		}
		id = resp.Msg.ScannerId
	}
	if seen != 3 {
		t.Fatalf("scanned %d rows, want 3", seen)
	}
	resp, err := c.ScanKv(ctx, connect.NewRequest(&stromv1.ScanKvRequest{Database: "shop", Table: "items", Bucket: 0, BatchSizeBytes: 1}))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // let the scanner outlive kv.scanner.ttl
	_, err = c.ScanKv(ctx, connect.NewRequest(&stromv1.ScanKvRequest{Database: "shop", Table: "items", Bucket: 0, ScannerId: resp.Msg.ScannerId}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired scanner: %v", err)
	}
}

func TestPutKvBadInput(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	createTable(t, s, "shop", "events", "id BIGINT, name STRING", 1)
	info, err := adminClient(s).CreateTable(context.Background(), connect.NewRequest(&stromv1.CreateTableRequest{Database: "shop", Table: "ledger",
		Descriptor_: &stromv1.TableDescriptor{
			Schema:     &stromv1.Schema{Columns: []*stromv1.Column{{Name: "id", Type: "BIGINT"}, {Name: "amount", Type: "BIGINT NOT NULL"}}, PrimaryKey: []string{"id"}},
			Properties: map[string]string{"table.delete.behavior": "DISABLE"},
		}}))
	if err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, s, info.Msg.Table)
	for _, tc := range []struct{ name, method, body, want string }{
		{"PutKv to a log table", "PutKv", `{"database":"shop","table":"events","rows":[{"id":1}]}`, "log table"},
		{"NULL in a NOT NULL column", "PutKv", `{"database":"shop","table":"ledger","rows":[{"id":1,"amount":null}]}`, "rows[0].amount"},
		{"type mismatch", "PutKv", `{"database":"shop","table":"ledger","rows":[{"id":1,"amount":"lots"}]}`, "rows[0].amount"},
		{"partial update without the key", "PutKv", `{"database":"shop","table":"ledger","targetColumns":["amount"],"rows":[{"id":1,"amount":1}]}`, "key"},
		{"delete with deletes disabled", "PutKv", `{"database":"shop","table":"ledger","deletes":[{"id":1}]}`, "DELETION_DISABLED"},
		{"lookup on a log table", "Lookup", `{"database":"shop","table":"events","keys":[{"id":1}]}`, "log table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := postJSON(t, s, tc.method, tc.body)
			if code == 200 && !strings.Contains(out, `"error"`) || !strings.Contains(out, tc.want) {
				t.Fatalf("%d %s: want an error mentioning %q", code, out, tc.want)
			}
		})
	}
	// Nothing was written.
	code, out := postJSON(t, s, "ListOffsets", `{"database":"shop","table":"ledger","spec":"OFFSET_SPEC_LATEST"}`)
	if code != 200 || strings.Contains(out, `"offset"`) && !strings.Contains(out, `"offset":"0"`) {
		t.Fatalf("ledger's changelog after rejected writes: %s", out)
	}
}

func TestAbandonedScannersExpire(t *testing.T) {
	sc := scanners{ttl: time.Second, maxPerBucket: 1, maxPerServer: 1}
	s := startServer(t, testConfig(t, t.TempDir()))
	info := createTable(t, s, "shop", "things", "id BIGINT, name STRING", 1, "id")
	h := &tabletHandler{s: s}
	kt, err := h.kvTable("shop", "things")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := h.kvOf(t.Context(), &readBarrier{}, kt.Table, 0)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tab.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	b := scanBucket{info.TableId, 0}
	if err := sc.reserve(b); err != nil {
		t.Fatal(err)
	}
	sc.put("x", &scanner{snap: snap, table: b.table, bucket: b.bucket})
	sc.expire(time.Now().Add(2 * time.Second))
	if sc.take("x") != nil {
		t.Fatal("a scanner unused past its TTL was kept")
	}
	if err := sc.reserve(b); err != nil {
		t.Fatalf("the expired scanner's place was not freed: %v", err)
	}
	if _, err := snap.Next(1, 1); err == nil {
		t.Fatal("the expired scanner's snapshot is still open")
	}
}

// Scanners over kv.scanner.max-per-bucket or kv.scanner.max-per-server are
// refused with TOO_MANY_SCANNERS naming the key; a closed scanner frees its
// place, and other calls are served meanwhile. A response holds at most
// kv.scanner.max-batch-size, whatever batch_size_bytes asks.
func TestScanKvLimits(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.ScannerMaxPerBucket = 2
	cfg.ScannerMaxPerServer = 3
	cfg.ScannerMaxBatchBytes = 1 << 10
	s := startServer(t, cfg)
	info := createTable(t, s, "shop", "items", "id BIGINT, name STRING", 2, "id")
	waitReplicas(t, s, info)
	var rows []string
	for i := range 200 {
		rows = append(rows, fmt.Sprintf(`{"id":%d,"name":"%s"}`, i, strings.Repeat("n", 40)))
	}
	if code, out := postJSON(t, s, "PutKv", `{"database":"shop","table":"items","rows":[`+strings.Join(rows, ",")+`]}`); code != 200 || strings.Contains(out, `"error"`) {
		t.Fatalf("PutKv: %d %s", code, out)
	}
	c := tabletClient(s)
	ctx := context.Background()
	open := func(bucket int32) (*stromv1.ScanKvResponse, error) {
		resp, err := c.ScanKv(ctx, connect.NewRequest(&stromv1.ScanKvRequest{Database: "shop", Table: "items", Bucket: bucket, BatchSizeBytes: 1 << 30}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	tooMany := func(err error, key string) {
		t.Helper()
		if connect.CodeOf(err) != connect.CodeResourceExhausted || errDetail(err).GetName() != "TOO_MANY_SCANNERS" || !strings.Contains(err.Error(), key) {
			t.Fatalf("want TOO_MANY_SCANNERS naming %s, got %v", key, err)
		}
	}
	first, err := open(0)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, v := range first.Values {
		size += len(v)
	}
	if !first.HasMore || size > 1<<10+200 {
		t.Fatalf("first page: %d bytes in %d values (more %t); kv.scanner.max-batch-size is 1 KiB", size, len(first.Values), first.HasMore)
	}
	if _, err := open(0); err != nil {
		t.Fatal(err)
	}
	_, err = open(0)
	tooMany(err, "kv.scanner.max-per-bucket")
	if _, err := open(1); err != nil {
		t.Fatalf("another bucket: %v", err)
	}
	_, err = open(1)
	tooMany(err, "kv.scanner.max-per-server")
	// Other calls are served; a closed scanner frees its place.
	if code, out := postJSON(t, s, "Lookup", `{"database":"shop","table":"items","keys":[{"id":7}]}`); code != 200 || !strings.Contains(out, `"id":"7"`) && !strings.Contains(out, `"id":7`) {
		t.Fatalf("Lookup while scanners are full: %d %s", code, out)
	}
	if _, err := c.ScanKv(ctx, connect.NewRequest(&stromv1.ScanKvRequest{Database: "shop", Table: "items", Bucket: 0, ScannerId: first.ScannerId, Close: true})); err != nil {
		t.Fatal(err)
	}
	if _, err := open(1); err != nil {
		t.Fatalf("after a close: %v", err)
	}
}

// A PrefixLookup whose rows pass kv.prefix-lookup.max-bytes fails with
// LIMIT_EXCEEDED naming the key, rather than return part of them; a
// smaller one is served.
func TestPrefixLookupLimit(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.PrefixLookupMaxBytes = 1 << 10
	s := startServer(t, cfg)
	createTable(t, s, "shop", "other", "id BIGINT", 1) // creates the database
	info, err := adminClient(s).CreateTable(context.Background(), connect.NewRequest(&stromv1.CreateTableRequest{Database: "shop", Table: "orders",
		Descriptor_: &stromv1.TableDescriptor{
			Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "region", Type: "STRING"}, {Name: "id", Type: "BIGINT"}, {Name: "note", Type: "STRING"}},
				PrimaryKey: []string{"region", "id"}},
			BucketKeys: []string{"region"}, BucketCount: 1,
		}}))
	if err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, s, info.Msg.Table)
	var rows []string
	for i := range 100 {
		rows = append(rows, fmt.Sprintf(`{"region":"eu","id":%d,"note":"%s"}`, i, strings.Repeat("n", 40)))
	}
	rows = append(rows, `{"region":"us","id":1,"note":"x"}`)
	if code, out := postJSON(t, s, "PutKv", `{"database":"shop","table":"orders","rows":[`+strings.Join(rows, ",")+`]}`); code != 200 || strings.Contains(out, `"error"`) {
		t.Fatalf("PutKv: %d %s", code, out)
	}
	code, out := postJSON(t, s, "PrefixLookup", `{"database":"shop","table":"orders","prefixes":[{"region":"eu"}]}`)
	if code != http.StatusTooManyRequests || !strings.Contains(out, "LIMIT_EXCEEDED") || !strings.Contains(out, "kv.prefix-lookup.max-bytes") {
		t.Fatalf("prefix of 100 rows over 1 KiB: want LIMIT_EXCEEDED naming the key, got %d %s", code, out)
	}
	if code, out := postJSON(t, s, "PrefixLookup", `{"database":"shop","table":"orders","prefixes":[{"region":"us"}]}`); code != 200 || !strings.Contains(out, `"us"`) {
		t.Fatalf("small prefix: %d %s", code, out)
	}
}
