package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// describedTable is what `strom table describe --output json` prints that
// this test reads (protojson writes int64 as strings).
type describedTable struct {
	Buckets []struct {
		Leader int32   `json:"leader"`
		Isr    []int32 `json:"isr"`
	} `json:"buckets"`
	BucketStates []struct {
		Error         *struct{ Name string } `json:"error"`
		HighWatermark int64                  `json:"highWatermark,string"`
		LogEndOffset  int64                  `json:"logEndOffset,string"`
		Replicas      []struct {
			Node         int32 `json:"node"`
			LogEndOffset int64 `json:"logEndOffset,string"`
			Lag          int64 `json:"lag,string"`
			InSync       bool  `json:"inSync"`
		} `json:"replicas"`
	} `json:"bucketStates"`
}

// TestDescribeShowsReplicaLag: three real processes, a table of
// replication factor 3. `strom table describe` shows each replica's log
// end and lag as the bucket's leader knows them, and `strom cluster
// describe` counts the bucket under-replicated: a follower SIGKILLed falls
// behind as writes go on (its lag grows with them) and, after
// log.replica.max-lag-time, leaves the ISR; restarted, it catches up (lag
// 0) and rejoins, and the count is back to 0.
func TestDescribeShowsReplicaLag(t *testing.T) {
	bin := buildStrom(t)
	t.Setenv("STROM_LOG_REPLICA_MAX_LAG_TIME", "3s")
	pc := newProcCluster(t, bin, 3)
	pc.start(3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pc.waitFormed(ctx, []int32{1, 2, 3})
	var apis []string
	for _, id := range pc.ids() {
		apis = append(apis, pc.nodes[id].api)
	}
	servers := strings.Join(apis, ",")
	c, err := client.New(servers, client.WithRetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "e2e", IgnoreIfExists: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "e2e", Table: "lag", Descriptor_: &stromv1.TableDescriptor{
		Schema:      &stromv1.Schema{Columns: []*stromv1.Column{{Name: "id", Type: "BIGINT NOT NULL"}, {Name: "v", Type: "STRING"}}},
		BucketCount: 1,
		Properties:  map[string]string{"table.replication.factor": "3"},
	}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Table(ctx, "e2e", "lag")
	if err != nil {
		t.Fatal(err)
	}
	var written int64
	write := func(n int64) { // n rows with acks=1: they go on without the ISR
		t.Helper()
		w, err := tbl.NewAppendWriter(ctx, client.Acks(1), client.BatchTimeout(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			w.Append(ctx, record.Row{written, fmt.Sprintf("v%d", written)})
			written++
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	describe := func() (describedTable, *stromv1.DescribeClusterResponse) {
		t.Helper()
		var d describedTable
		mustJSON(t, strom(t, bin, servers, "table", "describe", "e2e.lag", "--output", "json"), &d)
		if len(d.Buckets) != 1 || len(d.BucketStates) != 1 {
			t.Fatalf("table describe: %d buckets, %d bucket states, want 1 each", len(d.Buckets), len(d.BucketStates))
		}
		cl, err := c.Admin().DescribeCluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return d, cl
	}
	// waitFor polls describe until cond holds, printing the last state on
	// failure.
	waitFor := func(what string, cond func(describedTable, *stromv1.DescribeClusterResponse) bool) describedTable {
		t.Helper()
		for {
			d, cl := describe()
			if cond(d, cl) {
				return d
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: not by the deadline; last: %+v, cluster under-replicated %d, offline %d",
					what, d, cl.UnderReplicatedBuckets, cl.OfflineBuckets)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	inSync := func(d describedTable, cl *stromv1.DescribeClusterResponse) bool {
		st := d.BucketStates[0]
		if st.Error != nil || st.HighWatermark != written || len(st.Replicas) != 3 || cl.UnderReplicatedBuckets != 0 || cl.Buckets != 1 {
			return false
		}
		for _, r := range st.Replicas {
			if r.LogEndOffset != written || r.Lag != 0 || !r.InSync {
				return false
			}
		}
		return true
	}

	write(100)
	d := waitFor("every replica holds the 100 rows, none lagging", inSync)
	leader := d.Buckets[0].Leader
	var follower int32
	for _, r := range d.BucketStates[0].Replicas {
		if r.Node != leader {
			follower = r.Node
			break
		}
	}
	n := pc.nodes[int(follower)]
	if err := n.kill(syscall.SIGKILL); err == nil {
		t.Fatal("SIGKILL: the process exited cleanly")
	}
	n.node = nil
	t.Logf("SIGKILLed node %d, a follower of leader %d", follower, leader)
	write(300)
	lagOf := func(d describedTable) int64 {
		for _, r := range d.BucketStates[0].Replicas {
			if r.Node == follower {
				return r.Lag
			}
		}
		return -1
	}
	d = waitFor(fmt.Sprintf("node %d lags by the 300 rows and leaves the ISR: one bucket under-replicated", follower),
		func(d describedTable, cl *stromv1.DescribeClusterResponse) bool {
			return lagOf(d) >= 300 && !slices.Contains(d.Buckets[0].Isr, follower) && cl.UnderReplicatedBuckets == 1
		})
	t.Logf("node %d: lag %d, ISR %v", follower, lagOf(d), d.Buckets[0].Isr)
	if text := strom(t, bin, servers, "cluster", "describe"); !strings.Contains(text, "Under-replicated buckets:  1") {
		t.Errorf("cluster describe does not count the bucket under-replicated:\n%s", text)
	}
	text := strom(t, bin, servers, "table", "describe", "e2e.lag")
	if want := fmt.Sprintf("%d:%d", follower, lagOf(d)); !strings.Contains(text, "LAG") || !strings.Contains(text, want) {
		t.Errorf("table describe does not show node %d's lag (%q):\n%s", follower, want, text)
	}

	pc.launch(int(follower))
	pc.nodes[int(follower)].waitReady()
	waitFor(fmt.Sprintf("node %d caught up and rejoined the ISR", follower), inSync)
}
