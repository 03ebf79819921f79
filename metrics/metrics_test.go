package metrics

import (
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

const produce = "/strom.v1.TabletService/ProduceLog"

// The data path's updates take no allocation: the traffic counters, and
// the request metrics of a known procedure once its code has been seen.
func TestHotPathAllocatesNothing(t *testing.T) {
	var tr Traffic
	if n := testing.AllocsPerRun(1000, func() { tr.In(10, 1000); tr.Out(10, 1000) }); n != 0 {
		t.Errorf("Traffic.In and Out: %v allocations per call", n)
	}
	rpc := NewRPC([]string{produce})
	fail := connect.NewError(connect.CodeUnavailable, errors.New("x"))
	rpc.Observe(produce, nil, time.Millisecond)
	rpc.Observe(produce, fail, time.Millisecond)
	if n := testing.AllocsPerRun(1000, func() {
		rpc.Observe(produce, nil, time.Millisecond)
		rpc.Observe(produce, fail, time.Millisecond)
	}); n != 0 {
		t.Errorf("RPC.Observe: %v allocations per call", n)
	}
	if got := tr.Counts(); got != (TrafficCounts{MessagesIn: 10010, BytesIn: 1001000, MessagesOut: 10010, BytesOut: 1001000}) {
		t.Errorf("counts %+v", got)
	}
}

func gather(t *testing.T, cs ...prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cs...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// Requests are counted by procedure and code, resolved once or not.
func TestRPCCountsByProcedureAndCode(t *testing.T) {
	rpc := NewRPC([]string{produce})
	rpc.Observe(produce, nil, time.Millisecond)
	rpc.Observe(produce, nil, time.Millisecond)
	rpc.Observe(produce, connect.NewError(connect.CodeInvalidArgument, errors.New("x")), time.Millisecond)
	rpc.Observe("/other/Call", errors.New("plain"), time.Millisecond) // an unknown error is Connect's unknown
	want := map[[2]string]float64{{produce, "ok"}: 2, {produce, "invalid_argument"}: 1, {"/other/Call", "unknown"}: 1}
	fams := gather(t, rpc)
	got := map[[2]string]float64{}
	for _, m := range fams["strom_rpc_requests_total"].Metric {
		got[[2]string{m.Label[1].GetValue(), m.Label[0].GetValue()}] = m.Counter.GetValue() // labels sorted: code, procedure
	}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%v: %v, want %v", k, got[k], v)
		}
	}
	for _, m := range fams["strom_rpc_request_duration_seconds"].Metric {
		if p := m.Label[0].GetValue(); p == produce && m.Histogram.GetSampleCount() != 3 {
			t.Errorf("%s timed %d times, want 3", p, m.Histogram.GetSampleCount())
		}
	}
}

// A bucket's series come from the snapshot of each scrape: a bucket no
// longer hosted has none.
func TestCollectorFollowsTheSnapshot(t *testing.T) {
	snap := Snapshot{Buckets: []Bucket{
		{Table: "db.t", Bucket: 0, Leader: true, LogEndOffset: 7, ISR: 1, Replicas: 3, MinISR: 2, RemoteLogLag: -1,
			FollowerLag: map[int32]int64{2: 5}},
		{Table: "db.t", Bucket: 1, LogEndOffset: 3, RemoteLogLag: -1, KV: &KV{SizeBytes: 100, Snapshot: &KVSnapshot{AgeSeconds: 5}}},
		{Table: "db.k", Bucket: 0, RemoteLogLag: -1, KV: &KV{}},
	}}
	c := NewCollector(func() Snapshot { return snap })
	fams := gather(t, c)
	for _, tc := range []struct {
		name   string
		series int
	}{
		{"strom_tablet_log_end_offset", 3},
		{"strom_tablet_in_sync_replicas", 1}, // the leader's only
		{"strom_tablet_under_replicated", 1},
		{"strom_tablet_under_min_isr", 1},
		{"strom_tablet_follower_lag", 1},
		{"strom_kv_size_bytes", 2},
		{"strom_kv_snapshot_age_seconds", 1},
		{"strom_tablet_remote_log_lag", 0},
		{"strom_coordinator_buckets", 0}, // not the coordinator
	} {
		if got := len(fams[tc.name].GetMetric()); got != tc.series {
			t.Errorf("%s: %d series, want %d", tc.name, got, tc.series)
		}
	}
	if v := fams["strom_tablet_under_min_isr"].Metric[0].Gauge.GetValue(); v != 1 {
		t.Errorf("under min ISR: %v", v)
	}
	snap.Buckets = snap.Buckets[1:]
	fams = gather(t, c)
	if got := len(fams["strom_tablet_log_end_offset"].GetMetric()); got != 2 {
		t.Errorf("after bucket 0 went: %d series of log end, want 2", got)
	}
	if _, ok := fams["strom_tablet_follower_lag"]; ok {
		t.Error("bucket 0's follower lag outlived it")
	}
}
