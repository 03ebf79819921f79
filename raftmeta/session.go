package raftmeta

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"
)

// sessionTracker is the leader's view of session liveness: the last time
// each session was heard from, and the node that holds its connection (its
// owner, ZooKeeper's SessionTrackerImpl owner). It is local state, never
// replicated; a new leader starts it afresh, which grants every session a
// full timeout and leaves owners unknown until each session's next claim
// or write.
type sessionTracker struct {
	mu struct {
		sync.Mutex
		last  map[int64]time.Time
		owner map[int64]string // node id
	}
}

func newSessionTracker() *sessionTracker {
	t := &sessionTracker{}
	t.mu.last = make(map[int64]time.Time)
	t.mu.owner = make(map[int64]string)
	return t
}

// claim makes node the owner of session id.
func (t *sessionTracker) claim(id int64, node string) {
	t.mu.Lock()
	t.mu.owner[id] = node
	t.mu.Unlock()
}

// checkOwner reports ErrSessionMoved when session id is owned by a node
// other than node; a session without a known owner becomes node's, as
// ZooKeeper's checkSession sets a null owner.
func (t *sessionTracker) checkOwner(id int64, node string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	owner, ok := t.mu.owner[id]
	if !ok {
		t.mu.owner[id] = node
		return nil
	}
	if owner != node {
		return fmt.Errorf("%w: session 0x%x is connected through node %s, not %s", ErrSessionMoved, id, owner, node)
	}
	return nil
}

func (t *sessionTracker) touch(id int64, now time.Time) {
	t.mu.Lock()
	t.mu.last[id] = now
	t.mu.Unlock()
}

func (t *sessionTracker) forget(id int64) {
	t.mu.Lock()
	delete(t.mu.last, id)
	delete(t.mu.owner, id)
	t.mu.Unlock()
}

// grantAll restarts every session's timeout at now and forgets the rest.
func (t *sessionTracker) grantAll(sessions []Session, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.mu.last)
	clear(t.mu.owner)
	for _, s := range sessions {
		t.mu.last[s.ID] = now
	}
}

// expired returns the sessions silent for longer than their timeout. A
// session seen for the first time (created through another leader, or
// applied after grantAll) starts its timeout now. Entries of sessions that
// no longer exist are dropped.
func (t *sessionTracker) expired(sessions []Session, now time.Time) []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	live := make(map[int64]struct{}, len(sessions))
	var out []int64
	for _, s := range sessions {
		live[s.ID] = struct{}{}
		last, ok := t.mu.last[s.ID]
		if !ok {
			t.mu.last[s.ID] = now
			continue
		}
		if now.Sub(last) > s.Timeout {
			out = append(out, s.ID)
		}
	}
	for id := range t.mu.last {
		if _, ok := live[id]; !ok {
			delete(t.mu.last, id)
		}
	}
	for id := range t.mu.owner {
		if _, ok := live[id]; !ok {
			delete(t.mu.owner, id)
		}
	}
	return out
}

// CreateSession creates a session with the given timeout through Raft and
// returns it, with a random 16-byte password chosen here. The leader starts
// its timeout now. Errors: ErrBadArguments for a timeout under 1ms, a
// *NotLeaderError, ErrStopped, or ctx's error.
func (n *Node) CreateSession(ctx context.Context, timeout time.Duration) (Session, error) {
	if timeout < time.Millisecond {
		return Session{}, fmt.Errorf("%w: session timeout %s is below 1ms", ErrBadArguments, timeout)
	}
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return Session{}, fmt.Errorf("raftmeta: session password: %w", err)
	}
	c := newCommand(CmdCreateSession)
	c.Timeout = timeout.Milliseconds()
	c.Password = pw
	res, err := n.propose(ctx, c)
	if err != nil {
		return Session{}, err
	}
	if res.err != nil {
		return Session{}, res.err
	}
	n.tracker.touch(res.session.ID, time.Now())
	if n.IsLeader() { // a forwarded create was claimed by the leader for this node
		n.tracker.claim(res.session.ID, n.cfg.NodeID)
	}
	return res.session, nil
}

// ClaimSession records that this node now holds the connection of session
// id (a client connected with it here), as a ZooKeeper server revalidates
// a session a client brings: from then on the leader refuses writes of the
// session made through any other node with ErrSessionMoved. A follower
// with forwarding asks the leader; without forwarding it does nothing.
// Errors: a *NotLeaderError (no leader reached before ctx ended), ErrStopped.
func (n *Node) ClaimSession(ctx context.Context, id int64) error {
	if n.IsLeader() {
		n.tracker.claim(id, n.cfg.NodeID)
		return nil
	}
	if !n.forwarding() {
		return nil
	}
	e := &encoder{}
	e.u8(fwdClaim)
	e.i64(id)
	d, err := n.forwardCall(ctx, e.b)
	if errors.Is(err, errLocalLeader) {
		n.tracker.claim(id, n.cfg.NodeID)
		return nil
	}
	if err != nil {
		return err
	}
	d.end("claim reply")
	return d.err
}

// CheckSessionOwner reports ErrSessionMoved when this node leads and the
// connection of session id is held by another node (its client connected
// there since, ClaimSession). ZooKeeper's leader checks every request of a
// session but its writes (checked when proposed), auth and closeSession
// this way (PrepRequestProcessor → SessionTrackerImpl.checkSession): reads,
// sync, ping and the watch ops; a follower serves them unchecked, as
// ZooKeeper's followers do. A session with no known owner (a new leader)
// becomes this node's.
func (n *Node) CheckSessionOwner(id int64) error {
	if !n.IsLeader() {
		return nil
	}
	return n.tracker.checkOwner(id, n.cfg.NodeID)
}

// CloseSession closes a session through Raft, deleting its ephemerals (each
// deletion fires watches). ErrSessionExpired if it does not exist.
func (n *Node) CloseSession(ctx context.Context, id int64) error {
	c := newCommand(CmdCloseSession)
	c.Session = id
	res, err := n.propose(ctx, c)
	if err != nil {
		return err
	}
	n.tracker.forget(id)
	return res.err
}

// Touch records a heartbeat of session id; ids unknown to this replica are
// ignored. Only the leader's record counts for expiry: a follower with
// forwarding (Config.ForwardAddr) queues the heartbeat for the leader,
// batched with others and sent at once. It does not block.
func (n *Node) Touch(id int64) {
	if !n.fsm.hasSession(id) {
		return
	}
	n.tracker.touch(id, time.Now())
	if n.forwarding() && !n.IsLeader() {
		n.queueTouch(id)
	}
}

// Sessions returns the sessions in this replica's FSM, by id.
func (n *Node) Sessions() []Session { return n.fsm.sessions() }

// leaderProposeTimeout bounds each proposal the leader loop makes.
const leaderProposeTimeout = 10 * time.Second

// expireSessions proposes the expiry of every silent session.
func (n *Node) expireSessions(ctx context.Context) {
	for _, id := range n.tracker.expired(n.fsm.sessions(), time.Now()) {
		c := newCommand(CmdExpireSession)
		c.Session = id
		pctx, cancel := context.WithTimeout(ctx, leaderProposeTimeout)
		res, err := n.propose(pctx, c)
		cancel()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				n.lg.Warn("session expiry failed", "session", id, "err", err)
			}
			return
		case res.err != nil:
			n.lg.Debug("session expiry not applied", "session", id, "err", res.err)
		default:
			n.lg.Info("session expired", "session", id)
		}
		n.tracker.forget(id)
	}
}

// reapNodes proposes the deletion of empty containers and expired TTL nodes.
// The FSM checks the conditions again when it applies each deletion.
func (n *Node) reapNodes(ctx context.Context) {
	for _, p := range n.fsm.reapable(time.Now().UnixMilli()) {
		c := newCommand(CmdDeleteContainer)
		c.Path = p
		pctx, cancel := context.WithTimeout(ctx, leaderProposeTimeout)
		res, err := n.propose(pctx, c)
		cancel()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				n.lg.Warn("node reap failed", "path", p, "err", err)
			}
			return
		case res.err != nil:
			n.lg.Debug("node reap not applied", "path", p, "err", res.err)
		default:
			n.lg.Debug("node reaped", "path", p)
		}
	}
}

// SessionEnded returns a channel that is closed once this replica no
// longer holds session id: when it applies the session's close or expiry
// (or restores a snapshot without it), or at once if it does not hold it
// now.
func (n *Node) SessionEnded(id int64) <-chan struct{} { return n.fsm.sessionEnded(id) }

// Session returns session id as this replica's FSM holds it (with its
// password), or false when it does not exist here.
func (n *Node) Session(id int64) (Session, bool) { return n.fsm.session(id) }
