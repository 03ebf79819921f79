package testcluster

import (
	"context"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	"strom/raftmeta/catalog"
	"strom/record"
	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/server"
)

// isrConfig shortens log.replica.max-lag-time (and the followers' long
// poll, below it), and lengthens the session timeout well past it, so that
// a follower cut off from its leader leaves the ISR by lagging, not by
// dying; minISR is log.replica.min-in-sync-replicas-number.
func isrConfig(minISR int) func(int, *server.Config) {
	return func(_ int, cfg *server.Config) {
		cfg.ReplicaMaxLagTime = time.Second
		cfg.ReplicaFetchWaitMaxTime = 100 * time.Millisecond
		cfg.SessionTimeout = time.Minute
		cfg.MinInSyncReplicas = minISR
	}
}

// cutFollower starts three nodes with cfg, creates a one-bucket table of
// replication factor 3, writes to it with acks=-1, and cuts the bucket's
// leader off from one follower, both ways (both still reach the third
// node, so the metadata keeps its majority and the follower its session),
// never the coordinator's node.
// It returns the table, its leader and the follower cut off.
func cutFollower(ctx context.Context, t *testing.T, name string, cfg func(int, *server.Config)) (c *Cluster, tbl catalog.Table, leader, cut int32) {
	t.Helper()
	c = New(t, Options{Nodes: 3, Configure: cfg, Verbose: os.Getenv("VERBOSE") != ""})
	l, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tbl, err = createTable(ctx, l, "fluss", name, 1, 3); err != nil {
		t.Fatal(err)
	}
	leader = appendToLeader(ctx, t, c, tbl, 0, 20, 10, -1).ID
	// Every replica in the leader's ISR (a node a busy machine took for
	// dead for a moment rejoins it once caught up), and the coordinator
	// as it is now.
	lr := replicaOn(c.Node(int(leader)), bucket0(tbl))
	waitUntil(ctx, t, "three replicas in the leader's ISR", func() bool { return len(lr.ISR()) == 3 })
	if l, err = c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// Not the coordinator's node: the leader must still reach it.
	for _, n := range c.Nodes() {
		if n.ID != leader && n.ID != l.ID {
			cut = n.ID
			break
		}
	}
	c.Net().CutBoth(c.Node(int(leader)).Name, c.Node(int(cut)).Name)
	t.Cleanup(c.Heal)
	return c, tbl, leader, cut
}

// A follower cut off from its leader leaves the ISR once it has lagged for
// log.replica.max-lag-time, by the leader's request to the coordinator (its
// registration stays: it is alive), and acks=-1 writes go on with two of
// three; healed, it catches up and rejoins.
func TestCutOffFollowerLeavesAndRejoinsTheISR(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	c, tbl, leader, cut := cutFollower(ctx, t, "isr", isrConfig(1))
	isr := func() []int32 { return leaderISR(t, c.Node(int(leader)), tbl).ISR }
	waitUntil(ctx, t, "the cut-off follower leaves the ISR", func() bool {
		return len(isr()) == 2 && !slices.Contains(isr(), cut)
	})
	leader = appendToLeader(ctx, t, c, tbl, 20, 40, 10, -1).ID
	c.Heal()
	waitUntil(ctx, t, "the healed follower rejoins the ISR", func() bool { return len(isr()) == 3 })
	waitInSync(ctx, t, c, bucket0(tbl), leader)
}

// With log.replica.min-in-sync-replicas-number 3 and a follower out of the
// ISR, an acks=-1 produce fails at once with NOT_ENOUGH_REPLICAS (retriable)
// and appends nothing; acks=1 goes on.
func TestAcksAllBelowMinISRFails(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	c, tbl, leader, cut := cutFollower(ctx, t, "minisr", isrConfig(3))
	r := replicaOn(c.Node(int(leader)), bucket0(tbl))
	waitUntil(ctx, t, "the leader applies the ISR without the cut-off follower", func() bool {
		return len(r.ISR()) == 2 && !slices.Contains(r.ISR(), cut)
	})
	tablet := stromv1connect.NewTabletServiceClient(http.DefaultClient, "http://"+c.Node(int(leader)).API, connect.WithCodec(rpc.Codec{}))
	produce := func(acks int32) *stromv1.ProduceBucketResult {
		t.Helper()
		resp, err := tablet.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{
			Database: "fluss", Table: "minisr", Acks: &acks, TimeoutMs: 10_000,
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: batchOf(t, tbl, 100, 101, record.NoWriterID, record.NoBatchSequence)}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.Buckets[0]
	}
	end := r.Log().LogEndOffset()
	res := produce(-1)
	if e := res.Error; e == nil || e.Name != rpc.CodeNotEnoughReplicas.Name || e.Code != 29 || !e.Retriable || ctx.Err() != nil {
		t.Fatalf("acks=-1 with two in sync, min ISR 3: %+v, want NOT_ENOUGH_REPLICAS at once", res)
	}
	if got := r.Log().LogEndOffset(); got != end {
		t.Fatalf("the refused write was appended: log end %d, was %d", got, end)
	}
	if res := produce(1); res.Error != nil {
		t.Fatalf("acks=1: %+v", res.Error)
	}
}
