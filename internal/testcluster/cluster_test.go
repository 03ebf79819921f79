package testcluster

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"strom/client"
	"strom/raftmeta"
	"strom/raftmeta/catalog"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/server"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createTable creates db.table through node n's API (n must be the
// coordinator, until admin calls are routed) and returns it as the
// catalog on n holds it.
func createTable(ctx context.Context, n *Node, db, table string, buckets, rf int) (catalog.Table, error) {
	cl, err := client.New(n.API, client.WithRetryTimeout(2*time.Second))
	if err != nil {
		return catalog.Table{}, err
	}
	if _, err := cl.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: db, IgnoreIfExists: true}); err != nil {
		return catalog.Table{}, err
	}
	if _, err := cl.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: db, Table: table, Descriptor_: &stromv1.TableDescriptor{
		Schema: &stromv1.Schema{Columns: []*stromv1.Column{
			{Name: "id", Type: "BIGINT NOT NULL"}, {Name: "v", Type: "STRING"},
		}},
		BucketCount: int32(buckets),
		Properties:  map[string]string{"table.replication.factor": strconv.Itoa(rf)},
	}}); err != nil {
		return catalog.Table{}, err
	}
	meta := n.Server().Metadata()
	if err := meta.Sync(ctx); err != nil {
		return catalog.Table{}, err
	}
	return catalog.New(meta).Table(db, table)
}

func TestThreeNodesFormOneCluster(t *testing.T) {
	c := New(t, Options{Nodes: 3})
	l, err := c.WaitLeader(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	servers, err := l.Server().Metadata().Servers()
	if err != nil {
		t.Fatal(err)
	}
	var voters []string
	for _, s := range servers {
		if s.Voter {
			voters = append(voters, s.ID)
		}
	}
	sort.Strings(voters)
	if !slices.Equal(voters, []string{"1", "2", "3"}) {
		t.Fatalf("voters = %v, want 1, 2, 3 (servers %+v)", voters, servers)
	}
	for _, n := range c.Nodes() {
		if got := n.Server().ClusterID(); got != l.Server().ClusterID() {
			t.Fatalf("node %d is in cluster %s, the leader in %s", n.ID, got, l.Server().ClusterID())
		}
	}
}

// TestPartitionedCoordinatorIsFenced cuts the coordinator off from the two
// other nodes: they elect a new one, which takes office with a new epoch;
// a write fenced by the old coordinator's epoch, made through the old node
// once the partition heals, is refused and changes nothing.
func TestPartitionedCoordinatorIsFenced(t *testing.T) {
	c := New(t, Options{Nodes: 3})
	ctx := ctxFor(t, 60*time.Second)
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldMeta := old.Server().Metadata()
	_, oldEpoch, oldVersion, err := catalog.New(oldMeta).Coordinator()
	if err != nil {
		t.Fatal(err)
	}

	var rest []int
	for _, n := range c.Nodes() {
		if n != old {
			rest = append(rest, int(n.ID))
		}
	}
	c.Partition([]int{int(old.ID)}, rest)
	nl, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if nl == old {
		t.Fatal("the partitioned node is still the coordinator")
	}
	if _, err := createTable(ctx, nl, "fluss", "during_partition", 1, 1); err != nil {
		t.Fatalf("create a table on the majority's coordinator: %v", err)
	}
	// The old node cannot change the catalog while cut off (no split brain).
	cut, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = createTable(cut, old, "fluss", "on_the_old_side", 1, 1)
	cancel()
	if err == nil {
		t.Fatal("the partitioned old coordinator created a table")
	}
	_, newEpoch, _, err := catalog.New(nl.Server().Metadata()).Coordinator()
	if err != nil || newEpoch <= oldEpoch {
		t.Fatalf("new coordinator epoch %d, old %d (%v)", newEpoch, oldEpoch, err)
	}

	c.Heal()
	// The old node catches up (it forwards its writes to the new leader).
	if err := oldMeta.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	probe := "/strom/fenced-write-probe"
	_, err = oldMeta.Multi(ctx, 0, catalog.EpochCheck(oldVersion), raftmeta.CreateOp(probe, nil, raftmeta.Persistent))
	if !errors.Is(err, raftmeta.ErrBadVersion) {
		t.Fatalf("a write fenced by the old epoch: %v, want a bad-version refusal", err)
	}
	for _, n := range c.Nodes() {
		meta := n.Server().Metadata()
		if err := meta.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := meta.Exists(probe); !errors.Is(err, raftmeta.ErrNoNode) {
			t.Fatalf("node %d has the fenced write's znode (%v)", n.ID, err)
		}
		if _, err := catalog.New(meta).Table("fluss", "on_the_old_side"); err == nil {
			t.Fatalf("node %d has the table the old coordinator was asked to create", n.ID)
		}
	}
}

// TestKillTheLeader kills the coordinator's node; the others elect a new one
// and table creation works again. The time it takes is logged.
func TestKillTheLeader(t *testing.T) {
	c := New(t, Options{Nodes: 3})
	ctx := ctxFor(t, 60*time.Second)
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Kill(int(old.ID))
	var nl *Node
	for {
		if nl, err = c.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err = createTable(ctx, nl, "fluss", "after_kill", 1, 1); err == nil {
			break
		}
		if errors.Is(err, ctx.Err()) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("node %d killed; node %d took office and created a table in %v", old.ID, nl.ID, time.Since(start))
	c.Restart(int(old.ID))
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestBalancedLeaders: 6 buckets, replication factor 3, on 3 nodes: each
// node holds every bucket and leads two.
func TestBalancedLeaders(t *testing.T) {
	c := New(t, Options{Nodes: 3})
	ctx := ctxFor(t, 60*time.Second)
	l, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := createTable(ctx, l, "fluss", "balanced", 6, 3)
	if err != nil {
		t.Fatal(err)
	}
	leads := map[int32]int{}
	for b, li := range tb.LeaderISR {
		leads[li.Leader]++
		if n := len(tb.Assignment.Buckets[b]); n != 3 {
			t.Errorf("bucket %d has %d replicas, want 3", b, n)
		}
	}
	for _, n := range c.Nodes() {
		if leads[n.ID] != 2 {
			t.Errorf("node %d leads %d buckets, want 2 (%v)", n.ID, leads[n.ID], leads)
		}
	}
}

// TestStopEveryNode stops the nodes one after the other, as an operator
// stops a whole cluster: the last one, left without a metadata quorum, gives
// up handing over after a few seconds instead of waiting out its
// shutdown.timeout (90 s here).
func TestStopEveryNode(t *testing.T) {
	c := New(t, Options{Nodes: 3, Configure: func(_ int, cfg *server.Config) {
		cfg.ShutdownTimeout = 90 * time.Second
	}})
	if _, err := c.WaitLeader(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	c.Stop(2)
	done := make(chan struct{})
	go func() {
		c.Stop(3)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the last node's stop still waits for its shutdown.timeout after a minute")
	}
}

// TestRestartWaitsForEveryRegistration: Restart returns only once every
// live node's metadata holds the restarted node's registration of its new
// run. server.Start returns once its own registration is committed, which
// a follower the metadata leader reaches late applies later: before, that
// follower's catalog right after Restart still held the registration of
// the node's earlier run (New and PowerOff wait the same way).
func TestRestartWaitsForEveryRegistration(t *testing.T) {
	c := New(t, Options{Nodes: 3})
	if missing := c.unregistered(); missing != "" {
		t.Fatalf("after New: %s", missing)
	}
	ctx := ctxFor(t, 60*time.Second)
	l, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var f, late *Node // the node restarted; the follower the leader reaches late
	for _, n := range c.Nodes() {
		switch {
		case n == l:
		case f == nil:
			f = n
		default:
			late = n
		}
	}
	c.Kill(int(f.ID))
	c.Net().Delay(l.Name, late.Name, 300*time.Millisecond)
	t.Cleanup(func() { c.Net().Delay(l.Name, late.Name, 0) })
	c.Restart(int(f.ID))
	if missing := c.unregistered(); missing != "" {
		t.Fatalf("after Restart(%d): %s", f.ID, missing)
	}
}
