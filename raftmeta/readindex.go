package raftmeta

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ReadIndex: linearizable reads of the local replica without a Raft write
// (the Raft thesis's ReadIndex, §6.4). The leader notes its last log index,
// confirms with a heartbeat round that a quorum of voters still follows it
// (raft.VerifyLeader: nothing is written, on any disk), and answers the
// zxid of the last command at or below that index; the caller waits until
// its own FSM has applied that zxid. A write committed before the call is
// in the leader's log by then (Leader Completeness), so at or below the
// index, and the caller sees it. A deposed leader, or a node that cannot
// reach the leader, cannot complete the round.
//
// Concurrent calls on one node share rounds (readRounds): at most one round
// is in flight, and a call joins the next one to start, so each round a
// call gets an answer from began after the call did.

// readRoundTimeout bounds one round (a leader that lost its quorum, or a
// leader that cannot be reached); a caller with more time left joins the
// next round.
const readRoundTimeout = time.Second

// ReadIndex returns once local reads (Get, Children, Exists) see every write
// committed before the call, on any node, or an error when ctx ends first:
// the leader (this node or, with forwarding, the one this node forwards
// to) confirms its leadership with a quorum of voters, and this node waits
// until its FSM has applied the leader's log as of the call. Unlike Sync it
// commits nothing; unlike ReadBarrier it is linearizable on the leader too:
// a leader cut off from the quorum cannot complete it (raft steps it down
// after LeaderLeaseTimeout), nor can a follower that reaches no leader, so
// a node cut off from the quorum never returns nil from it. A follower
// without forwarding gets ErrNotLeader.
func (n *Node) ReadIndex(ctx context.Context) error {
	backoff := 5 * time.Millisecond
	for {
		var zxid int64
		var err error
		switch {
		case n.IsLeader():
			zxid, err = n.leaderReads.do(ctx)
		case n.forwarding():
			zxid, err = n.forwardReads.do(ctx)
		default:
			return n.notLeaderErr(errors.New("a linearizable read on a follower needs forwarding to the leader"))
		}
		if err == nil {
			return n.waitZxid(ctx, zxid)
		}
		if errors.Is(err, ErrStopped) || ctx.Err() != nil {
			return err
		}
		// The round failed (leadership moved, the leader was not
		// reachable within readRoundTimeout): try another.
		select {
		case <-ctx.Done():
			return n.notLeaderErr(err)
		case <-n.stop:
			return ErrStopped
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// readIndexLocal is one round on the leader: the zxid a reader must have
// applied to see every write committed before the round began, once a
// quorum of voters has confirmed this node's leadership. errNotProposed:
// this node does not lead.
func (n *Node) readIndexLocal() (int64, error) {
	if !n.IsLeader() {
		return 0, errNotProposed
	}
	// Noted before the heartbeat round: the round proves this node led
	// when it ended, so no other leader committed anything before then
	// that is not in this log at or below last.
	last := n.raft.LastIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return 0, n.mapRaftErr(err)
	}
	// The last command at or below last that this FSM may not have
	// applied yet (entries of this term may still be committing), else
	// what it has applied (which holds every command at or below last).
	if z := n.lastCommandAtOrBelow(last); z > 0 {
		return z, nil
	}
	return n.fsm.lastZxid.Load(), nil
}

// forwardReadIndex is one round on a follower: the leader's read zxid
// (forward kind read, which a leader answers with readIndexLocal's).
func (n *Node) forwardReadIndex() (int64, error) {
	ctx, cancel := context.WithTimeout(n.baseCtx, readRoundTimeout)
	defer cancel()
	d, err := n.forwardCall(ctx, []byte{fwdRead})
	if errors.Is(err, errLocalLeader) {
		return n.leaderReads.do(ctx)
	}
	if err != nil {
		return 0, err
	}
	zxid := d.i64("zxid")
	d.end("read reply")
	return zxid, d.err
}

// readRounds runs fn for many callers, one round at a time: a caller joins
// the round that starts next (never one already running), so the answer it
// gets comes from a round that began after it called.
type readRounds struct {
	fn func() (int64, error)
	wg *sync.WaitGroup // the node's: Close waits for a running round

	mu      sync.Mutex
	running bool
	stopped bool
	next    *readRound // callers waiting for the next round; nil: none
}

type readRound struct {
	done    chan struct{}
	callers int // guarded by readRounds.mu until the round starts
	zxid    int64
	err     error
}

// do joins the next round and waits for its answer, or for ctx.
func (g *readRounds) do(ctx context.Context) (int64, error) {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return 0, ErrStopped
	}
	r := g.next
	if r == nil {
		r = &readRound{done: make(chan struct{})}
		g.next = r
	}
	r.callers++
	if !g.running {
		g.running = true
		g.wg.Add(1)
		go g.run()
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.zxid, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// run runs rounds while callers wait for one.
func (g *readRounds) run() {
	defer g.wg.Done()
	for {
		g.mu.Lock()
		r := g.next
		g.next = nil
		if r == nil || g.stopped {
			g.running = false
			g.mu.Unlock()
			if r != nil {
				r.err = ErrStopped
				close(r.done)
			}
			return
		}
		g.mu.Unlock()
		r.zxid, r.err = g.fn()
		close(r.done)
	}
}

// stop makes later calls fail with ErrStopped; a running round ends on its
// own (raft shut down, the node's base context cancelled).
func (g *readRounds) stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
}
