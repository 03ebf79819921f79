package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// every is a snapshot with every optional part present, so that every
// series is produced.
var every = Snapshot{
	Raft:        Raft{State: "Leader", Term: 2},
	Coordinator: &Coordinator{TabletServers: 1},
	Buckets:     []Bucket{{Table: "db.t", Leader: true, FollowerLag: map[int32]int64{2: 1}, RemoteLogLag: 3, KV: &KV{Snapshot: &KVSnapshot{}}}},
}

// metricNames is every series name a node's registry serves (a
// histogram's _bucket, _sum and _count).
func metricNames(t *testing.T) map[string]bool {
	t.Helper()
	rpc := NewRPC(nil)
	rpc.Observe("/p/Q", nil, time.Millisecond)
	fams, err := Registry(Build{}, rpc, NewCollector(func() Snapshot { return every })).Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

var metricName = regexp.MustCompile(`\b(?:strom|go|process)_[a-zA-Z0-9_]+`)

// The Grafana dashboard is valid JSON and every query in it names metrics
// a node serves.
func TestDashboardNamesExistingMetrics(t *testing.T) {
	data, err := os.ReadFile("../deploy/grafana/strom.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name  string
				Query any
			}
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("deploy/grafana/strom.json: %v", err)
	}
	names := metricNames(t)
	var exprs []string
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
		}
	}
	checked := 0
	for _, e := range exprs {
		found := metricName.FindAllString(e, -1)
		if len(found) == 0 && e != "prometheus" {
			t.Errorf("query %q names no Strom, Go or process metric", e)
		}
		for _, n := range found {
			checked++
			if !names[n] {
				t.Errorf("query %q: no metric %s", e, n)
			}
		}
	}
	if checked < 40 {
		t.Fatalf("only %d metric names checked in %d queries", checked, len(exprs))
	}
}
