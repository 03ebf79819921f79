package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// scrape reads s's /metrics over HTTP, as Prometheus does.
func scrape(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value is the value of the series of family name with the given labels
// (name=value pairs), and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func mustValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	v, ok := value(fams, name, labels...)
	if !ok {
		t.Fatalf("no series %s%v in /metrics", name, labels)
	}
	return v
}

// Writing N rows through the client moves the bucket and node counters in
// by exactly N rows and by the bytes of the batches appended (the log's own
// bytes: the leader stores a batch as sent), and reading them all back
// moves the counters out by the same; the offsets, ISR and Raft gauges say
// what the node holds, and a dropped table's series go.
func TestMetricsCountWhatWasWrittenAndRead(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	const buckets = 2
	info := createTable(t, s, "demo", "m", "id BIGINT NOT NULL, name STRING", buckets)
	waitReplicas(t, s, info)
	ctx := t.Context()
	c, err := client.New(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Table(ctx, "demo", "m")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewAppendWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := range n {
		w.Append(ctx, record.Row{int64(i), fmt.Sprintf("row %d", i)})
		if i == n/2 {
			if err := w.Flush(ctx); err != nil { // two requests at least
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close(ctx)

	// What the server appended, bucket by bucket, read from the logs.
	rows, stored := map[string]int64{}, map[string]int64{}
	var totalBytes int64
	for b := range int32(buckets) {
		r, err := s.replicas.Replica(replicaTB(info.TableId, b))
		if err != nil {
			t.Fatal(err)
		}
		rr, err := r.Read(0, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		bs := strconv.Itoa(int(b))
		rows[bs], stored[bs] = rr.LogEndOffset, int64(len(rr.Batches))
		totalBytes += stored[bs]
	}
	if rows["0"]+rows["1"] != n {
		t.Fatalf("logs hold %d rows, want %d", rows["0"]+rows["1"], n)
	}

	fams := scrape(t, s)
	for b := range rows {
		lb := []string{"table", "demo.m", "bucket", b}
		for name, want := range map[string]int64{
			"strom_tablet_messages_in_total": rows[b], "strom_tablet_bytes_in_total": stored[b],
			"strom_tablet_messages_out_total": 0, "strom_tablet_bytes_out_total": 0,
			"strom_tablet_log_end_offset": rows[b], "strom_tablet_high_watermark": rows[b],
			"strom_tablet_log_size_bytes": stored[b], "strom_tablet_in_sync_replicas": 1,
			"strom_tablet_under_replicated": 0, "strom_tablet_leader": 1,
		} {
			if got := mustValue(t, fams, name, lb...); got != float64(want) {
				t.Errorf("%s{bucket=%s} = %v, want %d", name, b, got, want)
			}
		}
	}
	for name, want := range map[string]int64{
		"strom_tabletserver_messages_in_total": n, "strom_tabletserver_bytes_in_total": totalBytes,
		"strom_raft_leader": 1, "strom_gossip_members": 1, "strom_coordinator_buckets": buckets,
		"strom_coordinator_offline_buckets": 0, "strom_coordinator_active_tablet_servers": 1,
	} {
		if got := mustValue(t, fams, name); got != float64(want) {
			t.Errorf("%s = %v, want %d", name, got, want)
		}
	}
	if v := mustValue(t, fams, "strom_raft_state", "state", "Leader"); v != 1 {
		t.Errorf(`strom_raft_state{state="Leader"} = %v`, v)
	}
	for _, name := range []string{"strom_raft_term", "strom_raft_commit_index", "strom_raft_applied_index", "strom_raft_leader_changes_total"} {
		if v := mustValue(t, fams, name); v < 1 {
			t.Errorf("%s = %v, want at least 1", name, v)
		}
	}
	const produce = "/strom.v1.TabletService/ProduceLog"
	if v := mustValue(t, fams, "strom_rpc_requests_total", "procedure", produce, "code", "ok"); v < 2 {
		t.Errorf("ProduceLog requests counted ok: %v, want at least 2", v)
	}
	if v := mustValue(t, fams, "strom_rpc_request_duration_seconds", "procedure", produce); v < 2 {
		t.Errorf("ProduceLog requests timed: %v, want at least 2", v)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "strom_build_info"} {
		mustValue(t, fams, name)
	}

	sc, err := tbl.NewLogScanner(client.MaxWait(10 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for b := range int32(buckets) {
		if err := sc.Subscribe(ctx, b, client.Earliest()); err != nil {
			t.Fatal(err)
		}
	}
	for read := 0; read < n; {
		fs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Errors(); err != nil {
			t.Fatal(err)
		}
		read += len(fs.Records())
		fs.Release()
	}
	fams = scrape(t, s)
	for b := range rows {
		lb := []string{"table", "demo.m", "bucket", b}
		if got := mustValue(t, fams, "strom_tablet_messages_out_total", lb...); got != float64(rows[b]) {
			t.Errorf("rows out of bucket %s: %v, want %d", b, got, rows[b])
		}
		if got := mustValue(t, fams, "strom_tablet_bytes_out_total", lb...); got != float64(stored[b]) {
			t.Errorf("bytes out of bucket %s: %v, want %d", b, got, stored[b])
		}
	}
	if got := mustValue(t, fams, "strom_tabletserver_bytes_out_total"); got != float64(totalBytes) {
		t.Errorf("node bytes out %v, want %d", got, totalBytes)
	}

	// Dropping the table takes its series away; the node's totals stay.
	if _, err := adminClient(s).DropTable(context.Background(), connect.NewRequest(&stromv1.DropTableRequest{Database: "demo", Table: "m"})); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		fams = scrape(t, s)
		if _, ok := fams["strom_tablet_log_end_offset"]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("series of a dropped table still in /metrics: %v", fams["strom_tablet_log_end_offset"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := mustValue(t, fams, "strom_tabletserver_messages_in_total"); got != n {
		t.Errorf("node rows in after the drop: %v, want %d", got, n)
	}
}

// The calls the fast paths serve, outside Connect and so outside its
// interceptors, are counted as Connect's would be.
func TestFastPathsAreCounted(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	const ddl = "id BIGINT NOT NULL"
	info := createTable(t, s, "demo", "f", ddl, 1)
	waitReplicas(t, s, info)
	batch := buildBatch(t, schemaOf(t, ddl), info.SchemaId, record.Row{int64(1)})
	th, rh := &tabletHandler{s: s}, &replicaHandler{s: s}
	_, tablet := stromv1connect.NewTabletServiceHandler(th, s.connectOptions()...)
	_, replicas := stromv1connect.NewReplicaServiceHandler(rh, s.connectOptions()...)
	for _, tc := range []struct {
		path string
		h    http.Handler
		msg  proto.Message
	}{
		{produceLogPath, newProduceFastPath(th, s.ready.Load, tablet), &stromv1.ProduceLogRequest{Database: "demo", Table: "f",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: batch}}}},
		{fetchReplicaPath, newFetchFastPath(rh, s.ready.Load, replicas), &stromv1.FetchReplicaRequest{FollowerId: 2, MaxWaitMs: 1,
			Buckets: []*stromv1.FetchReplicaBucket{{TableId: 99, MaxBytes: 1 << 20}}}},
	} {
		body, err := proto.Marshal(tc.msg)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, tc.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/proto")
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.path, rec.Code, rec.Body)
		}
		fams := scrape(t, s)
		if v, _ := value(fams, "strom_rpc_requests_total", "procedure", tc.path, "code", "ok"); v != 1 {
			t.Errorf("%s counted %v times, want 1", tc.path, v)
		}
		if v, _ := value(fams, "strom_rpc_request_duration_seconds", "procedure", tc.path); v != 1 {
			t.Errorf("%s timed %v times, want 1", tc.path, v)
		}
	}
}

// A primary-key bucket's leader reports its newest KV snapshot: none
// before the first, then its size and offset as the metadata records them.
func TestMetricsShowTheKVSnapshot(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.RemoteDataDir = "file://" + t.TempDir()
	cfg.RemoteLogTaskInterval = 0
	cfg.KvSnapshotInterval = time.Hour // the test takes the snapshot
	s := startServer(t, cfg)
	info := createTable(t, s, "demo", "kv", "k BIGINT, v STRING", 1, "k")
	waitReplicas(t, s, info)
	if code, resp := postJSON(t, s, "PutKv", `{"database":"demo","table":"kv","rows":[{"k":1,"v":"a"},{"k":2,"v":"b"}]}`); code != 200 || strings.Contains(resp, `"error"`) {
		t.Fatalf("PutKv: %d %s", code, resp)
	}
	lb := []string{"table", "demo.kv", "bucket", "0"}
	fams := scrape(t, s)
	if v := mustValue(t, fams, "strom_tablet_messages_in_total", lb...); v != 2 {
		t.Errorf("KV records in: %v, want 2", v)
	}
	if _, ok := value(fams, "strom_kv_snapshot_age_seconds", lb...); ok {
		t.Fatal("a snapshot age before any snapshot")
	}
	mustValue(t, fams, "strom_kv_size_bytes", lb...)

	s.replicas.SnapshotOnce(t.Context(), time.Now())
	snaps, err := s.cat.KvSnapshots(info.TableId, 0)
	if err != nil {
		t.Fatal(err)
	}
	latest, ok := snaps.Latest()
	if !ok {
		t.Fatal("no snapshot taken")
	}
	fams = scrape(t, s)
	if v := mustValue(t, fams, "strom_kv_snapshot_log_offset", lb...); v != float64(latest.LogOffset) || v < 2 {
		t.Errorf("snapshot log offset %v, want %d (at least 2)", v, latest.LogOffset)
	}
	if v := mustValue(t, fams, "strom_kv_snapshot_size_bytes", lb...); v != float64(latest.Size()) || v == 0 {
		t.Errorf("snapshot size %v, want %d", v, latest.Size())
	}
	if v := mustValue(t, fams, "strom_kv_snapshot_age_seconds", lb...); v < 0 {
		t.Errorf("snapshot age %v", v)
	}
}

// A long-polling fetch that reads again after new data woke it counts what
// its answer carries, not every read: the rows and bytes out are those of
// the batches sent, once.
func TestLongPollFetchCountsWhatItAnswers(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	const ddl = "id BIGINT"
	info := createTable(t, s, "demo", "lp", ddl, 1)
	waitReplicas(t, s, info)
	ctx := t.Context()
	c := tabletClient(s)
	produce := func(rows ...record.Row) int {
		t.Helper()
		b := buildBatch(t, schemaOf(t, ddl), info.SchemaId, rows...)
		if _, err := c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "lp",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: b}}})); err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	sent := produce(record.Row{int64(1)}, record.Row{int64(2)})
	got := make(chan *stromv1.FetchLogResponse, 1)
	go func() {
		// More bytes than there will be: the fetch waits out its time.
		resp, err := c.FetchLog(ctx, connect.NewRequest(&stromv1.FetchLogRequest{
			Database: "demo", Table: "lp", MinBytes: 1 << 20, MaxWaitMs: 1000, Buckets: []*stromv1.FetchBucket{{Bucket: 0, Offset: 0}},
		}))
		if err != nil {
			t.Error(err)
			got <- nil
			return
		}
		got <- resp.Msg
	}()
	deadline := time.Now().Add(10 * time.Second)
	for s.longPolls.Load() == 0 { // the fetch has read the first batch and waits
		if time.Now().After(deadline) {
			t.Fatal("the fetch never waited")
		}
		time.Sleep(time.Millisecond)
	}
	sent += produce(record.Row{int64(3)}) // wakes it: it reads both batches again
	resp := <-got
	if resp == nil {
		t.FailNow()
	}
	if n := len(resp.Buckets[0].Records); n != sent {
		t.Fatalf("answer holds %d bytes of batches, want both batches' %d", n, sent)
	}
	fams := scrape(t, s)
	lb := []string{"table", "demo.lp", "bucket", "0"}
	if v := mustValue(t, fams, "strom_tablet_bytes_out_total", lb...); v != float64(sent) {
		t.Errorf("bytes out %v, want the %d sent", v, sent)
	}
	if v := mustValue(t, fams, "strom_tablet_messages_out_total", lb...); v != 3 {
		t.Errorf("rows out %v, want 3", v)
	}
}
