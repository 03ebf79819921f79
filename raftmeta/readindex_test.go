package raftmeta

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestReadIndexDeposedLeader: a leader cut off from the other voters goes
// on answering reads of its replica, but never returns from ReadIndex
// without the write the majority committed after the cut; a follower on the
// majority side sees that write after ReadIndex. ReadBarrier on the cut
// off node, for contrast, returns at once while it still believes it leads.
// The first leader (n0) keeps its leadership 5 s without a quorum
// (LeaderLeaseTimeout), so the cut off node is still leader, in its own
// view, when it is asked: only the heartbeat round can tell it otherwise.
func TestReadIndexDeposedLeader(t *testing.T) {
	const lease = 5 * time.Second
	c := newForwardingClusterWith(t, 3, func(i int, cfg *Config) {
		if i == 0 {
			cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = lease, lease, lease
		}
	})
	old := c.leader()
	if old != c.nodes[0] {
		t.Fatalf("leader n%d, want n0 (the bootstrap node)", c.index(old))
	}
	ctx := testCtx(t, 30*time.Second)
	if _, err := old.Create(ctx, "/x", []byte("1"), Persistent); err != nil {
		t.Fatal(err)
	}
	if err := old.ReadIndex(ctx); err != nil {
		t.Fatalf("ReadIndex on the leader: %v", err)
	}
	i := c.index(old)
	c.isolate(i)
	t.Cleanup(c.heal)
	nl := c.leader(i)
	if _, err := nl.SetData(ctx, "/x", []byte("2"), -1); err != nil {
		t.Fatal(err)
	}
	if !old.IsLeader() {
		t.Fatal("the cut off leader stepped down before its lease ended")
	}
	if err := old.ReadBarrier(ctx); err != nil {
		t.Fatalf("ReadBarrier on the cut off leader: %v", err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	err := old.ReadIndex(rctx)
	cancel()
	if err == nil {
		data, _, _ := old.Get("/x")
		t.Fatalf("ReadIndex on the cut off leader returned nil; it reads /x = %q, the majority wrote 2", data)
	}
	if !errors.Is(err, ErrNotLeader) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadIndex on the cut off leader: %v, want ErrNotLeader or a deadline", err)
	}
	for _, n := range c.nodes {
		if n == old || n == nl {
			continue
		}
		if err := n.ReadIndex(ctx); err != nil {
			t.Fatalf("ReadIndex on a follower of the majority: %v", err)
		}
		if data, _, err := n.Get("/x"); err != nil || string(data) != "2" {
			t.Fatalf("a follower of the majority after ReadIndex: /x = %q, %v; want 2", data, err)
		}
	}
	if err := nl.ReadIndex(ctx); err != nil {
		t.Fatalf("ReadIndex on the new leader: %v", err)
	}
	c.heal()
	waitFor(t, 10*time.Second, "the old leader reads again", func() bool {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := old.ReadIndex(rctx); err != nil {
			return false
		}
		data, _, _ := old.Get("/x")
		if string(data) != "2" {
			t.Fatalf("the healed old leader after ReadIndex: /x = %q, want 2", data)
		}
		return true
	})
}

// TestReadRoundsCoalesce: calls made while a round runs share the next
// round, and none gets the answer of a round that began before it.
func TestReadRoundsCoalesce(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	started := make(chan int64, 10)
	var mu sync.Mutex
	rounds := int64(0)
	g := &readRounds{wg: &wg, fn: func() (int64, error) {
		mu.Lock()
		rounds++
		n := rounds
		mu.Unlock()
		started <- n
		<-release
		return n, nil
	}}
	ctx := testCtx(t, 10*time.Second)
	first := make(chan int64, 1)
	go func() {
		z, _ := g.do(ctx)
		first <- z
	}()
	if n := <-started; n != 1 {
		t.Fatalf("round %d started first", n)
	}
	// Round 1 runs: these join round 2, whatever round 1 answers.
	const waiters = 20
	got := make(chan int64, waiters)
	var joined sync.WaitGroup
	for range waiters {
		joined.Add(1)
		go func() {
			defer joined.Done()
			z, err := g.do(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- z
		}()
	}
	waitFor(t, 5*time.Second, "every waiter joined the next round", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.next != nil && g.next.callers == waiters
	})
	close(release)
	if z := <-first; z != 1 {
		t.Fatalf("the first call got round %d, want 1", z)
	}
	joined.Wait()
	close(got)
	for z := range got {
		if z < 2 {
			t.Fatalf("a call made while round 1 ran got round %d's answer", z)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if rounds != 2 {
		t.Fatalf("%d rounds for a call and %d made during its round, want 2", rounds, waiters)
	}
	g.stop()
	if _, err := g.do(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("after stop: %v, want ErrStopped", err)
	}
	wg.Wait()
}
