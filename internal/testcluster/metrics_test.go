package testcluster

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scraped is one node's /metrics.
type scraped map[string]*dto.MetricFamily

// scrapeAll reads every running node's /metrics, by node id.
func scrapeAll(t *testing.T, c *Cluster) map[int32]scraped {
	t.Helper()
	out := map[int32]scraped{}
	for _, n := range c.Nodes() {
		resp, err := http.Get("http://" + n.Server().Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s /metrics: %v", n.Name, err)
		}
		out[n.ID] = fams
	}
	return out
}

// get returns the value of the series name with the given labels
// (name=value pairs), and whether there is one.
func (s scraped) get(name string, labels ...string) (float64, bool) {
next:
	for _, m := range s[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

// On three nodes, the bucket's leader alone reports its ISR, each
// follower's lag and whether it is under-replicated, the coordinator's node
// alone the cluster's bucket counts, and every node its gossip members and
// the bucket's log end; a follower cut off from the leader shows as an
// under-replicated bucket until it is healed and back in the ISR. (The cut
// may move the bucket's leadership: each check finds the leader anew.)
func TestReplicationMetrics(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	c, tbl, _, _ := cutFollower(ctx, t, "metrics", isrConfig(1))
	lb := []string{"table", "fluss.metrics", "bucket", "0"}
	// state checks the cluster as its metrics show it: one leader with
	// isr in-sync replicas (and whether it is under-replicated), the
	// coordinator's count, and with healed, each follower's lag 0, three
	// gossip members everywhere and the same log end on every node.
	var last string
	state := func(isr int, healed bool) bool {
		all := scrapeAll(t, c)
		leaders, isrReports, coordReports := 0, 0, 0
		var leader int32
		var underCount float64 = -1
		for id, s := range all {
			if v, _ := s.get("strom_tablet_leader", lb...); v == 1 {
				leaders, leader = leaders+1, id
			}
			if _, ok := s.get("strom_tablet_in_sync_replicas", lb...); ok {
				isrReports++
			}
			if v, ok := s.get("strom_coordinator_under_replicated_buckets"); ok {
				coordReports, underCount = coordReports+1, v
			}
		}
		st := fmt.Sprintf("leaders %d (node %d), ISR reports %d, coordinator reports %d (under-replicated %v)", leaders, leader, isrReports, coordReports, underCount)
		ok := leaders == 1 && isrReports == 1 && coordReports == 1
		if ok {
			s := all[leader]
			got, _ := s.get("strom_tablet_in_sync_replicas", lb...)
			under, _ := s.get("strom_tablet_under_replicated", lb...)
			want := 0.0
			if isr < 3 {
				want = 1
			}
			st += fmt.Sprintf("; leader's ISR %v, under-replicated %v", got, under)
			ok = got == float64(isr) && under == want && underCount == want
			if healed {
				end, _ := s.get("strom_tablet_log_end_offset", lb...)
				for id, o := range all {
					g, _ := o.get("strom_gossip_members")
					e, _ := o.get("strom_tablet_log_end_offset", lb...)
					st += fmt.Sprintf("; node %d: gossip %v, log end %v", id, g, e)
					ok = ok && g == 3 && e == end && end >= 20
					if id != leader {
						lag, has := s.get("strom_tablet_follower_lag", append(lb, "follower", strconv.Itoa(int(id)))...)
						st += fmt.Sprintf(" lag %v (%v)", lag, has)
						ok = ok && has && lag == 0
					}
				}
			}
		}
		if st != last {
			t.Log(st)
			last = st
		}
		return ok
	}
	waitUntil(ctx, t, "an under-replicated bucket, its ISR 2, in the metrics", func() bool { return state(2, false) })
	c.Heal()
	waitUntil(ctx, t, "the healed follower back in the ISR and caught up, in the metrics", func() bool { return state(3, true) })
	waitInSync(ctx, t, c, bucket0(tbl), leaderISR(t, c.Node(1), tbl).Leader)
}

// A leader counts the batch bytes it serves its followers, and each
// follower those it fetched: at least what the follower's log holds.
func TestReplicationBytesMetrics(t *testing.T) {
	ctx := ctxFor(t, 90*time.Second)
	c, tbl := newReplicated(t, ctx, "replbytes")
	leader := appendToLeader(ctx, t, c, tbl, 0, 100, 10, -1).ID
	waitInSync(ctx, t, c, bucket0(tbl), leader)
	lb := []string{"table", "fluss.replbytes", "bucket", "0"}
	all := scrapeAll(t, c)
	var followersHold float64
	for id, s := range all {
		if id == leader {
			continue
		}
		size, _ := s.get("strom_tablet_log_size_bytes", lb...)
		in, ok := s.get("strom_tabletserver_replication_bytes_in_total")
		if !ok || size == 0 || in < size {
			t.Errorf("node %d fetched %v bytes (reported: %v) and holds %v", id, in, ok, size)
		}
		followersHold += size
	}
	if out, ok := all[leader].get("strom_tabletserver_replication_bytes_out_total"); !ok || out < followersHold {
		t.Errorf("leader served %v bytes (reported: %v), its followers hold %v", out, ok, followersHold)
	}
}
