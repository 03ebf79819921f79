package raft

import (
	"sync"
	"testing"
	"time"
)

// TestReplicationResumesSoonAfterFailures is strom's test of its patch to
// replicateTo's failure backoff (third_party/README.md, patch 4): capped at
// half the heartbeat timeout, and ended by a heartbeat that gets through
// after failures. The leader's appends to a follower fail until the
// replication goroutine has failed 11 times; the link heals at that moment.
// Upstream the next attempt then waited 10 ms * 2^9 = 5.12 s, and the
// follower got no entries for that long although it answered heartbeats: a
// node whose metadata lags acts on stale bucket leadership. With the patch
// the follower applies an entry committed after the heal within a few
// heartbeat timeouts.
//
// "partition" drops the heartbeats too (a cut link, the robustness run's
// case): either half of the patch ends the wait there, the cap or the
// heartbeat's notification. "appends only" lets the heartbeats through (a
// follower whose appends time out on a stalled disk; heartbeats skip the
// disk): no heartbeat fails, so only the cap ends the wait.
func TestReplicationResumesSoonAfterFailures(t *testing.T) {
	for _, tc := range []struct {
		name           string
		dropHeartbeats bool
	}{
		{"partition", true},
		{"appends only", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := inmemConfig(t)
			conf.HeartbeatTimeout = 200 * time.Millisecond
			conf.ElectionTimeout = 200 * time.Millisecond
			conf.LeaderLeaseTimeout = 200 * time.Millisecond // the leader's lease must not run out on a loaded machine
			c := newStromCluster(t, 3, conf)
			li := c.leader(t)
			leader, fi := c.rafts[li], c.other(li)
			if err := leader.Apply([]byte("before"), 0).Error(); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if c.waitApplied(fi, "before", 10*time.Second); !c.applied(fi, "before") {
				t.Fatal("the follower never applied the first entry")
			}
			term := leader.getCurrentTerm()

			const failures = 11 // upstream's next backoff: 10 ms * 2^9
			fAddr := c.trans[fi].LocalAddr()
			healed := make(chan struct{})
			var mu sync.Mutex
			cut, dropped := true, 0
			c.trans[li].setHook(func(target ServerAddress, req *AppendEntriesRequest, send func() error) error {
				mu.Lock()
				drop := cut && target == fAddr && (tc.dropHeartbeats || !isHeartbeat(req))
				if drop && !isHeartbeat(req) {
					if dropped++; dropped == failures {
						cut = false // heal now: the next append waits the full backoff
						close(healed)
					}
				}
				mu.Unlock()
				if drop {
					return errStromCut
				}
				return send()
			})
			select {
			case <-healed:
			case <-time.After(time.Minute):
				t.Fatalf("the leader's replication did not fail %d times in a minute", failures)
			}
			healedAt := time.Now()

			if err := leader.Apply([]byte("after"), 0).Error(); err != nil {
				t.Fatalf("Apply after the heal: %v", err) // committed with the third node
			}
			c.waitApplied(fi, "after", 30*time.Second)
			took := time.Since(healedAt)
			if !c.applied(fi, "after") {
				t.Fatalf("the follower did not apply an entry committed after the heal in %v", took)
			}
			if leader.State() != Leader || leader.getCurrentTerm() != term {
				t.Fatal("the leadership changed: the test needs the replication goroutine that failed")
			}
			if bound := 5 * conf.HeartbeatTimeout; took > bound {
				t.Fatalf("the follower applied an entry committed after the heal %v after it, want at most %v (5 heartbeat timeouts)", took, bound)
			}
			t.Logf("applied %v after the heal", took)
		})
	}
}

// TestReplicationBackoffEndsOnHeartbeat is strom's test of the second half of
// patch 4: when a heartbeat gets through after failures, replicateTo's
// failure backoff ends at once. The heartbeat timeout is 4 s, so the cap
// (2 s) is above the backoff of 9 failures (10 ms * 2^7 = 1.28 s). The
// leader's appends to a follower fail while its heartbeats get through; at
// the 9th failure the appends heal and the next heartbeat is dropped, and
// then heartbeats are asked for at once (VerifyLeader sends them). Without
// the notification the entries wait out the 1.28 s backoff; with it they
// follow the heartbeat that gets through, within a heartbeat interval.
func TestReplicationBackoffEndsOnHeartbeat(t *testing.T) {
	conf := inmemConfig(t)
	// The lease (not reloadable, at most the heartbeat timeout) long enough
	// not to run out on a loaded machine.
	conf.HeartbeatTimeout = 500 * time.Millisecond
	conf.ElectionTimeout = 500 * time.Millisecond
	conf.LeaderLeaseTimeout = 500 * time.Millisecond
	c := newStromCluster(t, 3, conf)
	li := c.leader(t)
	leader, fi := c.rafts[li], c.other(li)
	// The followers first, so that none times out on the leader's sparser
	// heartbeats.
	for _, i := range []int{fi, c.other(li, fi), li} {
		rc := c.rafts[i].ReloadableConfig()
		rc.HeartbeatTimeout = 4 * time.Second
		rc.ElectionTimeout = 4 * time.Second
		if err := c.rafts[i].ReloadConfig(rc); err != nil {
			t.Fatalf("ReloadConfig: %v", err)
		}
	}
	if err := leader.Apply([]byte("before"), 0).Error(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if c.waitApplied(fi, "before", 10*time.Second); !c.applied(fi, "before") {
		t.Fatal("the follower never applied the first entry")
	}
	term := leader.getCurrentTerm()

	const failures = 9
	fAddr := c.trans[fi].LocalAddr()
	healed, heartbeatDropped := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	appendsCut, dropHeartbeat, dropped := true, false, 0
	c.trans[li].setHook(func(target ServerAddress, req *AppendEntriesRequest, send func() error) error {
		if target != fAddr {
			return send()
		}
		mu.Lock()
		drop := false
		if isHeartbeat(req) {
			if drop = dropHeartbeat; drop {
				dropHeartbeat = false
				close(heartbeatDropped)
			}
		} else if drop = appendsCut; drop {
			if dropped++; dropped == failures {
				appendsCut, dropHeartbeat = false, true
				close(healed)
			}
		}
		mu.Unlock()
		if drop {
			return errStromCut
		}
		return send()
	})
	wait := func(ch chan struct{}, what string) {
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatalf("%s: not within a minute", what)
		}
	}
	wait(healed, "the appends failing 9 times")
	healedAt := time.Now()
	if err := leader.VerifyLeader().Error(); err != nil { // the heartbeat to drop
		t.Fatalf("VerifyLeader: %v", err)
	}
	wait(heartbeatDropped, "a heartbeat dropped")
	if err := leader.VerifyLeader().Error(); err != nil { // the one that gets through
		t.Fatalf("VerifyLeader: %v", err)
	}
	if err := leader.Apply([]byte("after"), 0).Error(); err != nil {
		t.Fatalf("Apply after the heal: %v", err)
	}
	c.waitApplied(fi, "after", 30*time.Second)
	took := time.Since(healedAt)
	if !c.applied(fi, "after") {
		t.Fatalf("the follower did not apply an entry committed after the heal in %v", took)
	}
	if leader.State() != Leader || leader.getCurrentTerm() != term {
		t.Fatal("the leadership changed: the test needs the replication goroutine that failed")
	}
	if bound := leader.ReloadableConfig().HeartbeatTimeout / 10; took > bound {
		t.Fatalf("the follower applied an entry committed after the heal %v after it, want at most %v (the heartbeat interval): the backoff outlasted the heartbeat that got through", took, bound)
	}
	t.Logf("applied %v after the heal", took)
}
