package raftmeta

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"
)

// sessionTracker is the leader's view of session liveness: the last time
// each session was heard from. It is local state, never replicated; a new
// leader starts it afresh, which grants every session a full timeout.
type sessionTracker struct {
	mu struct {
		sync.Mutex
		last map[int64]time.Time
	}
}

func newSessionTracker() *sessionTracker {
	t := &sessionTracker{}
	t.mu.last = make(map[int64]time.Time)
	return t
}

func (t *sessionTracker) touch(id int64, now time.Time) {
	t.mu.Lock()
	t.mu.last[id] = now
	t.mu.Unlock()
}

func (t *sessionTracker) forget(id int64) {
	t.mu.Lock()
	delete(t.mu.last, id)
	t.mu.Unlock()
}

// grantAll restarts every session's timeout at now and forgets the rest.
func (t *sessionTracker) grantAll(sessions []Session, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.mu.last)
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
	return res.session, nil
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
