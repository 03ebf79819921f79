package raft

import (
	"io"
	"sync"
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

	// Every RPC sent after VerifyLeader registered its verification is sent
	// after the cut, so only the nonvoter can answer (replies to RPCs sent
	// before it do not count, patch 5).
	if err := leader.VerifyLeader().Error(); err == nil {
		t.Fatal("VerifyLeader succeeded on a leader that reaches only a nonvoter: the nonvoter's replies were counted as votes")
	}
}

// TestVerifyLeaderCountsOnlyRepliesSentAfter is strom's test of its patch to
// the votes of VerifyLeader (third_party/README.md, patch 5): a follower's
// reply votes only for the verifications registered before its RPC was sent.
// A heartbeat to one follower is answered but its reply held; the leader is
// then cut from both followers, a VerifyLeader is registered, and the held
// reply released. Upstream the reply voted for it (2 of a quorum of 2) and
// VerifyLeader confirmed a leader that reaches no one: the followers could
// have elected another leader and committed writes since the reply was
// written. With the patch only replies to RPCs sent after the registration
// count, none arrives, and VerifyLeader fails when the lease runs out.
func TestVerifyLeaderCountsOnlyRepliesSentAfter(t *testing.T) {
	conf := inmemConfig(t)
	// A lease long enough that the leader is still leader when the held
	// reply comes: the answer must come from the vote count.
	conf.HeartbeatTimeout = 500 * time.Millisecond
	conf.ElectionTimeout = 500 * time.Millisecond
	conf.LeaderLeaseTimeout = 500 * time.Millisecond
	c := newStromCluster(t, 3, conf)
	li := c.leader(t)
	leader := c.rafts[li]
	f1, f2 := c.other(li), c.other(li, c.other(li))
	if err := leader.Apply([]byte("x"), 0).Error(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	// Read after the apply, which the leader loop answered after it had set
	// up the replication: no race on replState.
	repl := leader.leaderState.replState[c.rafts[f1].localID]
	if err := leader.VerifyLeader().Error(); err != nil {
		t.Fatalf("VerifyLeader with every link up: %v", err)
	}

	leaderAddr, f1Addr := c.trans[li].LocalAddr(), c.trans[f1].LocalAddr()
	var mu sync.Mutex
	hold, cut := true, false
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	releaseOnce := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseOnce) // before the cluster's shutdown, which waits for the hook
	c.trans[li].setHook(func(target ServerAddress, req *AppendEntriesRequest, send func() error) error {
		mu.Lock()
		h := hold && target == f1Addr && isHeartbeat(req)
		hold = hold && !h
		drop := cut && !h
		mu.Unlock()
		if h {
			err := send() // f1 answers: the leader is its leader
			close(held)
			<-release
			return err
		}
		if drop {
			return errStromCut
		}
		return send()
	})
	for _, i := range []int{f1, f2} { // and no new leader reaches the old one
		c.trans[i].setHook(func(target ServerAddress, req *AppendEntriesRequest, send func() error) error {
			mu.Lock()
			drop := cut && target == leaderAddr
			mu.Unlock()
			if drop {
				return errStromCut
			}
			return send()
		})
	}
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("no heartbeat to f1 in a minute")
	}
	mu.Lock()
	cut = true
	mu.Unlock()

	// After the cut no RPC to a follower succeeds: every vote is a reply to
	// an RPC sent before VerifyLeader was called.
	verified := make(chan error, 1)
	go func() { verified <- leader.VerifyLeader().Error() }()
	registered := func() bool {
		repl.notifyLock.Lock()
		defer repl.notifyLock.Unlock()
		return len(repl.notify) > 0
	}
	for deadline := time.Now().Add(time.Minute); !registered(); {
		select {
		case err := <-verified:
			if err == nil {
				t.Fatal("VerifyLeader succeeded on a leader cut from both followers: a reply to an append sent before the cut was counted")
			}
			t.Fatalf("VerifyLeader failed before the held reply came, the test proves nothing: %v", err)
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("VerifyLeader not registered in a minute")
		}
	}
	if leader.State() != Leader {
		t.Fatal("the leader stepped down before the held reply came: the test proves nothing")
	}
	releaseOnce()
	if err := <-verified; err == nil {
		t.Fatal("VerifyLeader succeeded on a leader cut from both followers: a reply to a heartbeat sent before it was counted")
	}
}

// TestPipelinedReplyVotesOnlyForEarlierVerifications is patch 5's test of the
// pipelined path: the mark taken when a pipelined append is set up comes back
// with its reply (AppendEntriesRequest.notifyMark, unexported so not on the
// wire; a real TCP pipeline), and the reply votes only for the verifications
// registered before it. v1 is registered, then append A is set up (mark 0,
// before v1), then append B (mark 1), then v2 is registered. Upstream A's
// reply voted for both; with the patch B's votes for v1 and none for v2.
func TestPipelinedReplyVotesOnlyForEarlierVerifications(t *testing.T) {
	leader, err := NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	follower, err := NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	go func() { // a follower accepting every append
		for rpc := range follower.Consumer() {
			rpc.Respond(&AppendEntriesResponse{Term: 1, Success: true}, nil)
		}
	}()
	p, err := leader.AppendEntriesPipeline("f", follower.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	s := &followerReplication{
		peer:   Server{ID: "f", Address: follower.LocalAddr()},
		notify: make(map[*verifyFuture]uint64),
	}
	// The leader's own vote in, one to go; the channel kept apart, for vote
	// clears notifyCh.
	newVerify := func() (*verifyFuture, chan *verifyFuture) {
		ch := make(chan *verifyFuture, 1)
		return &verifyFuture{notifyCh: ch, quorumSize: 2, votes: 1}, ch
	}
	req := func() *AppendEntriesRequest {
		return &AppendEntriesRequest{RPCHeader: RPCHeader{ProtocolVersion: ProtocolVersionMax}, Term: 1, notifyMark: s.notifyMark()}
	}
	a := req()
	v1, decided := newVerify()
	s.register(v1)
	b := req()
	v2, _ := newVerify()
	s.register(v2)

	stopCh, finishCh := make(chan struct{}), make(chan struct{})
	go (&Raft{}).pipelineDecode(s, p, stopCh, finishCh)
	for _, r := range []*AppendEntriesRequest{a, b} {
		if _, err := p.AppendEntries(r, new(AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-decided:
	case <-time.After(30 * time.Second):
		t.Fatal("v1 got no vote from the replies to two appends")
	}
	close(stopCh)
	<-finishCh // the decoder is done voting

	v2.voteLock.Lock()
	votes := v2.votes
	v2.voteLock.Unlock()
	if votes != 1 {
		t.Fatal("a reply to an append set up before v2 was registered voted for it")
	}
	s.notifyLock.Lock()
	_, waiting := s.notify[v2]
	s.notifyLock.Unlock()
	if !waiting {
		t.Fatal("v2 no longer waits for a vote")
	}
}
