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
	stromv1 "strom/rpc/gen/strom/v1"
)

// replicated is a three-node cluster of real processes for the failover
// tests: min ISR 2 (log.replica.min-in-sync-replicas-number), a follower
// out of the ISR after 4 s behind (log.replica.max-lag-time), database e2e,
// and a client that knows every node.
type replicated struct {
	*procCluster
	c *client.Client
}

// startReplicated starts the cluster; opts configure its client.
func startReplicated(ctx context.Context, t *testing.T, bin string, opts ...client.Option) *replicated {
	t.Helper()
	t.Setenv("STROM_LOG_REPLICA_MIN_IN_SYNC_REPLICAS_NUMBER", "2")
	t.Setenv("STROM_LOG_REPLICA_MAX_LAG_TIME", "4s")
	pc := newProcCluster(t, bin, 3)
	pc.start(3)
	pc.waitFormed(ctx, []int32{1, 2, 3})
	var servers []string
	for _, id := range pc.ids() {
		servers = append(servers, pc.nodes[id].api)
	}
	c, err := client.New(strings.Join(servers, ","), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "e2e", IgnoreIfExists: true}); err != nil {
		t.Fatal(err)
	}
	return &replicated{procCluster: pc, c: c}
}

// createTable creates e2e.name with replication factor 3 and opens it.
func (r *replicated) createTable(ctx context.Context, name string, schema *stromv1.Schema, buckets int32) *client.Table {
	t := r.t
	t.Helper()
	if _, err := r.c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "e2e", Table: name, Descriptor_: &stromv1.TableDescriptor{
		Schema: schema, BucketCount: buckets, Properties: map[string]string{"table.replication.factor": "3"},
	}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := r.c.Table(ctx, "e2e", name)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// waitInSync waits until every bucket of e2e.table has a leader and all
// three replicas in its ISR, and returns the buckets' leaders.
func (r *replicated) waitInSync(ctx context.Context, table string) []int32 {
	t := r.t
	t.Helper()
	var last string
	for {
		ti, err := r.c.Admin().GetTable(ctx, "e2e", table)
		if err == nil {
			leaders := make([]int32, len(ti.Buckets))
			ok := true
			for _, b := range ti.Buckets {
				ok = ok && b.Leader > 0 && len(b.Isr) == 3
				leaders[b.Bucket] = b.Leader
			}
			if ok {
				return leaders
			}
			last = fmt.Sprint(ti.Buckets)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the buckets of e2e.%s did not get 3 in-sync replicas: %s", table, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitLeaderOtherThan waits until bucket of e2e.table has a leader other
// than old, and returns it.
func (r *replicated) waitLeaderOtherThan(ctx context.Context, table string, bucket, old int32) int32 {
	t := r.t
	t.Helper()
	for {
		ti, err := r.c.Admin().GetTable(ctx, "e2e", table)
		if err == nil {
			if i := slices.IndexFunc(ti.Buckets, func(b *stromv1.BucketAssignment) bool { return b.Bucket == bucket }); i >= 0 {
				if l := ti.Buckets[i].Leader; l > 0 && l != old {
					return l
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("bucket %d of e2e.%s has no leader other than node %d: %v", bucket, table, old, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sigkill kills node id with SIGKILL; it stays down until restart.
func (r *replicated) sigkill(id int32) {
	n := r.nodes[int(id)]
	if err := n.kill(syscall.SIGKILL); err == nil {
		r.t.Fatalf("SIGKILL of node %d: the process exited cleanly", id)
	}
	n.node = nil
}

// restart starts node id again on its directory and waits until it is ready.
func (r *replicated) restart(id int32) {
	r.launch(int(id))
	r.nodes[int(id)].waitReady()
}
