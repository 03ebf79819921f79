package raft

import (
	"testing"
	"time"
)

// TestVerifyLeaderIgnoresNonvoters is strom's test of its patch to
// verifyLeader: only voters' heartbeat replies count toward the quorum that
// confirms a leader. Three voters and one nonvoter; the leader is cut from
// both other voters but still reaches the nonvoter. Upstream counted the
// nonvoter's reply as a vote (2 of a quorum of 2) and VerifyLeader succeeded
// on a leader that a majority could already have replaced: a read barrier
// (Strom's raftmeta ReadIndex) then served a stale read.
func TestVerifyLeaderIgnoresNonvoters(t *testing.T) {
	conf := inmemConfig(t)
	// A lease long enough that the leader is still leader when VerifyLeader
	// asks: the answer must come from the vote count, not from a step-down.
	conf.HeartbeatTimeout = time.Second
	conf.ElectionTimeout = time.Second
	conf.LeaderLeaseTimeout = time.Second
	c := MakeCluster(3, t, conf)
	defer c.Close()
	nonvoter := MakeClusterNoBootstrap(1, t, conf)
	c.Merge(nonvoter)
	c.FullyConnect()

	leader := c.Leader()
	nv := nonvoter.rafts[0]
	if err := leader.AddNonvoter(nv.localID, nv.localAddr, 0, 0).Error(); err != nil {
		t.Fatalf("AddNonvoter: %v", err)
	}
	if err := leader.Apply([]byte("x"), 0).Error(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	c.WaitForReplication(1) // the nonvoter has the entry: its link works

	// Cut the leader from the two other voters, both ways; the nonvoter
	// stays connected to everyone.
	var leaderTrans LoopbackTransport
	for i, r := range c.rafts {
		if r == leader {
			leaderTrans = c.trans[i]
		}
	}
	for i, r := range c.rafts {
		if r == leader || r == nv {
			continue
		}
		leaderTrans.Disconnect(r.localAddr)
		c.trans[i].Disconnect(leader.localAddr)
	}

	// A voter's reply to a heartbeat sent before the cut may still arrive
	// and count for the first VerifyLeader (raft votes with the replies that
	// arrive after a verification is registered, whenever their RPC was sent;
	// see third_party/README.md). One such reply per voter at most, two
	// voters, and a VerifyLeader that fails makes the leader step down: so
	// the third attempt at the latest must fail.
	for attempt := 1; ; attempt++ {
		err := leader.VerifyLeader().Error()
		if err != nil {
			break
		}
		if attempt == 3 {
			t.Fatal("VerifyLeader succeeded three times on a leader that reaches only a nonvoter: the nonvoter's replies were counted as votes")
		}
	}
}
