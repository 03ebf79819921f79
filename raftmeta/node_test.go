package raftmeta

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
)

// fastTimings shortens Raft's timings for tests.
func fastTimings(c Config) Config {
	c.HeartbeatTimeout = 100 * time.Millisecond
	c.ElectionTimeout = 100 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SessionCheckInterval = 20 * time.Millisecond
	return c
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestSingleNodeTCPReopen runs one node over real TCP with boltdb and file
// snapshots, closes it, and reopens it from the same directory: first with
// only the log, then after a forced snapshot plus more log.
func TestSingleNodeTCPReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := fastTimings(DefaultConfig())
	cfg.NodeID = "solo"
	cfg.Dir = dir
	cfg.BindAddr = "127.0.0.1:0"
	cfg.Bootstrap = true
	cfg.Logger = testLogger(t, "solo")

	open := func() *Node {
		t.Helper()
		n, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		if err := n.WaitLeader(testCtx(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	// Reopen on the same address, which is the one in the Raft configuration.
	cfg.BindAddr = n.Addr()
	ctx := testCtx(t, 20*time.Second)

	if _, err := n.Create(ctx, "/strom", []byte("v1"), Persistent); err != nil {
		t.Fatal(err)
	}
	seq, err := n.Create(ctx, "/strom/seq-", nil, PersistentSequential)
	if err != nil || seq != "/strom/seq-0000000000" {
		t.Fatalf("sequential create: %q %v", seq, err)
	}
	sess, err := n.CreateSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Do(ctx, sess.ID, CreateOp("/strom/eph", []byte("e"), Ephemeral)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.SetData(ctx, "/strom", []byte("v2"), 0); err != nil {
		t.Fatal(err)
	}
	if err := n.Delete(ctx, "/strom/seq-0000000000", -1); err != nil {
		t.Fatal(err)
	}
	want := dumpTree(t, n)
	wantSessions := n.Sessions()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopen: the log in raft.db replays.
	n = open()
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := dumpTree(t, n); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen:\n got %v\nwant %v", got, want)
	}
	if got := n.Sessions(); !reflect.DeepEqual(got, wantSessions) {
		t.Fatalf("sessions after reopen: %+v, want %+v", got, wantSessions)
	}
	if e := n.Ephemerals(sess.ID); !slices.Equal(e, []string{"/strom/eph"}) {
		t.Fatalf("ephemerals after reopen: %v", e)
	}

	// Force a snapshot, write more, reopen: snapshot plus trailing log.
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Create(ctx, "/strom/after-snapshot", []byte("x"), Persistent); err != nil {
		t.Fatal(err)
	}
	want = dumpTree(t, n)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = open()
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := dumpTree(t, n); !reflect.DeepEqual(got, want) {
		t.Fatalf("after snapshot+reopen:\n got %v\nwant %v", got, want)
	}
	if _, err := n.Create(ctx, "/strom/still-writable", nil, Persistent); err != nil {
		t.Fatal(err)
	}
	servers, err := n.Servers()
	if err != nil || len(servers) != 1 || servers[0].ID != "solo" || !servers[0].Voter || !servers[0].Leader {
		t.Fatalf("servers = %+v, %v", servers, err)
	}
}

// TestNodeAPI covers the Node's write, read and watch surface on one node.
func TestNodeAPI(t *testing.T) {
	c := newTestCluster(t, 1)
	n := c.leader()
	ctx := testCtx(t, 20*time.Second)

	select {
	case v := <-n.Leadership():
		if !v {
			t.Fatal("first leadership notification is false")
		}
	case <-ctx.Done():
		t.Fatal("no leadership notification")
	}

	w := n.NewWatcher()
	if _, err := n.ExistsW("/w", w); !errors.Is(err, ErrNoNode) {
		t.Fatal(err)
	}
	if err := n.AddWatch("/", w, WatchPersistentRecursive); err != nil {
		t.Fatal(err)
	}
	p, err := n.Create(ctx, "/w", []byte("1"), Persistent)
	if err != nil || p != "/w" {
		t.Fatal(p, err)
	}
	st, err := n.SetData(ctx, "/w", []byte("2"), 0)
	if err != nil || st.Version != 1 {
		t.Fatal(st, err)
	}
	z := n.LastZxid()
	expectEvents(t, w,
		Event{Type: NodeCreated, Path: "/w"}, // one event: the recursive watch and the exists watch are one watcher
		Event{Type: NodeDataChanged, Path: "/w", Zxid: z},
	)
	if err := n.RemoveWatches("/", w, WatcherData); !errors.Is(err, ErrNoWatcher) {
		t.Fatal(err)
	}
	if err := n.RemoveWatches("/", w, WatcherPersistentRecursive); err != nil {
		t.Fatal(err)
	}

	data, _, err := n.GetW("/w", w)
	if err != nil || string(data) != "2" {
		t.Fatal(string(data), err)
	}
	kids, _, err := n.ChildrenW("/w", w)
	if err != nil || len(kids) != 0 {
		t.Fatal(kids, err)
	}
	if err := n.Delete(ctx, "/w", 5); !errors.Is(err, ErrBadVersion) {
		t.Fatal(err)
	}
	if err := n.Delete(ctx, "/w", 1); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, w, Event{Type: NodeDeleted, Path: "/w"})

	// Multi through Raft.
	res, err := n.Multi(ctx, 0, CreateOp("/m", nil, Persistent), CreateOp("/m", nil, Persistent))
	var me *MultiError
	if !errors.As(err, &me) || me.Index != 1 || len(res) != 2 || res[0].Err != nil || !errors.Is(res[1].Err, ErrNodeExists) {
		t.Fatalf("multi: %+v %v", res, err)
	}
	if _, err := n.Exists("/m"); !errors.Is(err, ErrNoNode) {
		t.Fatal("failed multi applied")
	}
	res, err = n.Multi(ctx, 0, CreateOp("/m", nil, Persistent), Op{Kind: 42, Path: "/x"})
	if !errors.As(err, &me) || me.Index != 1 || !errors.Is(res[1].Err, ErrBadArguments) {
		t.Fatalf("prevalidated multi: %+v %v", res, err)
	}
	if _, err := n.Do(ctx, 0, CreateOp("/e", nil, Ephemeral)); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("ephemeral without session: %v", err)
	}

	// Sessions.
	s, err := n.CreateSession(ctx, time.Minute)
	if err != nil || len(s.Password) != 16 || s.Timeout != time.Minute {
		t.Fatal(s, err)
	}
	if _, err := n.Do(ctx, s.ID, CreateOp("/e", nil, Ephemeral)); err != nil {
		t.Fatal(err)
	}
	if e := n.Ephemerals(s.ID); !slices.Equal(e, []string{"/e"}) {
		t.Fatal(e)
	}
	if err := n.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Exists("/e"); !errors.Is(err, ErrNoNode) {
		t.Fatal("ephemeral survived its session")
	}
	if err := n.CloseSession(ctx, s.ID); !errors.Is(err, ErrSessionExpired) {
		t.Fatal(err)
	}
	if _, err := n.CreateSession(ctx, 0); !errors.Is(err, ErrBadArguments) {
		t.Fatal(err)
	}

	// The leader reaps containers and TTL nodes.
	if _, err := n.Create(ctx, "/c", nil, Container); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Create(ctx, "/c/k", nil, Persistent); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Do(ctx, 0, CreateTTLOp("/ttl", nil, PersistentWithTTL, 50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := n.Delete(ctx, "/c/k", -1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "container and TTL node reaped", func() bool {
		_, e1 := n.Exists("/c")
		_, e2 := n.Exists("/ttl")
		return errors.Is(e1, ErrNoNode) && errors.Is(e2, ErrNoNode)
	})

	// A cancelled context is honoured.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := n.Create(cctx, "/never", nil, Persistent); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	w.Close()
	if _, ok := <-w.Events(); ok {
		t.Fatal("events after Close")
	}
	w2 := n.NewWatcher()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-w2.Events(); ok {
		t.Fatal("watcher open after node Close")
	}
	if _, err := n.Create(ctx, "/late", nil, Persistent); !errors.Is(err, ErrStopped) {
		t.Fatalf("write after Close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

// TestCloseStopsGoroutines checks that Close waits for everything the node
// started: after it returns, the goroutine count drops back to where it was.
func TestCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	cfg := fastTimings(DefaultConfig())
	cfg.NodeID = "leak"
	cfg.Dir = t.TempDir()
	cfg.BindAddr = "127.0.0.1:0"
	cfg.Bootstrap = true
	cfg.Logger = testLogger(t, "leak")
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	if err := n.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	w := n.NewWatcher()
	n.AddWatch("/", w, WatchPersistentRecursive)
	if _, err := n.Create(ctx, "/x", nil, Persistent); err != nil {
		t.Fatal(err)
	}
	s, err := n.CreateSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	n.Touch(s.ID)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}
