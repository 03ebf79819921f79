package coordinator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"strom/internal/metatest"
	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/record"
)

// runCoordinator runs a coordinator until stop is called or the test ends.
func runCoordinator(t *testing.T, meta *raftmeta.Node, cfg Config) (c *Coordinator, stop func()) {
	t.Helper()
	c = New(withDefaults(t, cfg), meta)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return c, stop
}

// startCoordinator runs a coordinator and waits until it is in office.
func startCoordinator(t *testing.T, meta *raftmeta.Node, cfg Config) *Coordinator {
	t.Helper()
	c, _ := runCoordinator(t, meta, cfg)
	waitFor(t, "coordinator in office", func() bool { return c.Epoch() > 0 })
	return c
}

// withDefaults fills in what a test's Config leaves out.
func withDefaults(t *testing.T, cfg Config) Config {
	cfg.Logger = metatest.Logger(t)
	if cfg.DefaultBucketNumber == 0 {
		cfg.DefaultBucketNumber = 1
	}
	if cfg.DefaultReplicationFactor == 0 {
		cfg.DefaultReplicationFactor = 1
	}
	return cfg
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// registerServers registers tablet servers with ids, each under its own
// session, and returns the sessions by id.
func registerServers(t *testing.T, meta *raftmeta.Node, ids ...int32) map[int32]int64 {
	t.Helper()
	sessions := map[int32]int64{}
	for _, id := range ids {
		sessions[id] = registerServer(t, meta, id, "")
	}
	return sessions
}

// registerServer registers tablet server id on rack under a new session,
// and returns the session.
func registerServer(t *testing.T, meta *raftmeta.Node, id int32, rack string) int64 {
	t.Helper()
	ctx := context.Background()
	sess, err := meta.CreateSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Do(ctx, sess.ID, catalog.RegisterTabletServerOp(id, catalog.TabletServerRegistration{Listeners: "CLIENT://x:1", Rack: rack})); err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

func logTable(cols ...string) record.TableDescriptor {
	var d record.TableDescriptor
	for _, c := range cols {
		d.Schema.Columns = append(d.Schema.Columns, record.Column{Name: c, Type: record.DataType{Root: record.Int, Nullable: true}})
	}
	return d
}

func TestCreateTableAssignsBucketsAcrossServers(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, APIAddress: "127.0.0.1:9123", ClusterID: "c1", DefaultBucketNumber: 6})
	registerServers(t, meta, 1, 2, 3)
	ctx := context.Background()
	if err := c.CreateDatabase(ctx, "db", "", nil, false); err != nil {
		t.Fatal(err)
	}
	desc := logTable("a", "b")
	desc.Properties = map[string]string{"table.replication.factor": "2"}
	tbl, err := c.CreateTable(ctx, "db", "t", desc, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(tbl.Assignment.Buckets) != 6 {
		t.Fatalf("buckets = %d, want the default 6", len(tbl.Assignment.Buckets))
	}
	leaders := map[int32]int{}
	for b, replicas := range tbl.Assignment.Buckets {
		if len(replicas) != 2 || replicas[0] == replicas[1] {
			t.Errorf("bucket %d replicas %v: want 2 distinct", b, replicas)
		}
		lisr := tbl.LeaderISR[b]
		if lisr.Leader != replicas[0] || len(lisr.ISR) != 2 || lisr.CoordinatorEpoch != c.Epoch() {
			t.Errorf("bucket %d leader_isr %+v", b, lisr)
		}
		leaders[lisr.Leader]++
	}
	for id, n := range leaders {
		if n != 2 {
			t.Errorf("node %d leads %d buckets, want 2 each (balanced)", id, n)
		}
	}
	if _, err := c.CreateTable(ctx, "db", "t2", func() record.TableDescriptor {
		d := logTable("a")
		d.Properties = map[string]string{"table.replication.factor": "4"}
		return d
	}(), false); !errors.Is(err, ErrNotEnoughServers) {
		t.Fatalf("replication 4 on 3 servers: %v, want ErrNotEnoughServers", err)
	}
	if _, err := catalog.New(meta).Table("db", "t2"); !errors.Is(err, catalog.ErrTableNotExist) {
		t.Fatalf("rejected table was written: %v", err)
	}
}

func TestDeposedCoordinatorCannotWrite(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, APIAddress: "127.0.0.1:9123", ClusterID: "c1"})
	cat := catalog.New(meta)
	ctx := context.Background()
	first := c.Epoch()

	// Another coordinator takes office behind this one's back.
	ops, epoch, _, err := cat.ElectOps(2, "127.0.0.1:9999")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Multi(ctx, 0, ops...); err != nil {
		t.Fatal(err)
	}
	err = c.CreateDatabase(ctx, "fenced", "", nil, false)
	if !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("write by deposed coordinator: %v, want ErrNotCoordinator", err)
	}
	if _, err := cat.Database("fenced"); !errors.Is(err, catalog.ErrDatabaseNotExist) {
		t.Fatalf("a deposed coordinator's write was applied: %v", err)
	}
	// Still the Raft leader, it takes office again with a newer epoch.
	waitFor(t, "a new term", func() bool { return c.Epoch() > epoch })
	if c.Epoch() <= first {
		t.Fatalf("epoch %d not after %d", c.Epoch(), first)
	}
	if err := c.CreateDatabase(ctx, "after", "", nil, false); err != nil {
		t.Fatalf("write in the new term: %v", err)
	}
}

func TestRequestsOffLeaderAreRefused(t *testing.T) {
	meta := metatest.NewNode(t)
	c := New(Config{NodeID: 1, Logger: metatest.Logger(t), DefaultBucketNumber: 1, DefaultReplicationFactor: 1}, meta)
	// Not running: not in office.
	err := c.CreateDatabase(context.Background(), "db", "", nil, false)
	if !errors.Is(err, ErrNotCoordinator) || !strings.Contains(err.Error(), "node 1") {
		t.Fatalf("err = %v, want ErrNotCoordinator naming the leader", err)
	}
}

func TestInvalidRequestsNeverReachTheTree(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, ClusterID: "c1"})
	registerServers(t, meta, 1)
	ctx := context.Background()
	if err := c.CreateDatabase(ctx, "db", "", nil, false); err != nil {
		t.Fatal(err)
	}
	before := meta.LastZxid()
	_, err := c.CreateTable(ctx, "db", "bad name", logTable("a", "a"), false)
	var inv *record.InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("err = %v, want *record.InvalidError", err)
	}
	if !strings.Contains(err.Error(), "table") || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("err %q should name both the table name and the duplicate column", err)
	}
	if meta.LastZxid() != before {
		t.Fatalf("zxid moved from %d to %d: an invalid request wrote", before, meta.LastZxid())
	}
}
