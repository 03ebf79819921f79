package raftmeta

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// applyResult is what the FSM returns for a command; the proposer receives it
// through the waits registry (and raft's ApplyFuture.Response).
type applyResult struct {
	results []OpResult // CmdOp (one), CmdMulti
	session Session    // CmdCreateSession
	err     error      // CmdOp: the op's error; CmdMulti: *MultiError; others: their error
}

// commandHandler applies one decoded command inside x. It returns the result;
// when the result carries an error for an all-or-nothing command the fsm
// rolls x back.
type commandHandler func(x *txn, c *command) applyResult

// commandHandlers is the apply dispatch table (codecs are in command.go).
var commandHandlers = map[CommandType]commandHandler{
	CmdNoop:            func(*txn, *command) applyResult { return applyResult{} },
	CmdCreateSession:   applyCreateSession,
	CmdCloseSession:    applyKillSession,
	CmdExpireSession:   applyKillSession,
	CmdOp:              applyOp,
	CmdMulti:           applyMulti,
	CmdDeleteContainer: applyDeleteContainer,
}

func applyCreateSession(x *txn, c *command) applyResult {
	id := x.zxid
	if _, exists := x.t.sessions[id]; exists {
		// Ids are log indexes, so this cannot happen on a sound log.
		panic(fmt.Sprintf("raftmeta: session 0x%x already exists", id))
	}
	s := &sessionState{id: id, timeoutMs: c.Timeout, password: c.Password}
	x.t.sessions[id] = s
	t := x.t
	x.undo = append(x.undo, func() { delete(t.sessions, id) })
	return applyResult{session: s.public()}
}

func applyKillSession(x *txn, c *command) applyResult {
	return applyResult{err: x.killSession(c.Session)}
}

func applyOp(x *txn, c *command) applyResult {
	x.session = c.Session
	r := x.apply(&c.Ops[0])
	return applyResult{results: []OpResult{r}, err: r.Err}
}

func applyMulti(x *txn, c *command) applyResult {
	x.session = c.Session
	results := make([]OpResult, len(c.Ops))
	for i := range c.Ops {
		r := x.apply(&c.Ops[i])
		if r.Err == nil {
			results[i] = r
			continue
		}
		// ZooKeeper's multi results: earlier ops OK, this one its error,
		// later ones RUNTIMEINCONSISTENCY. Nothing is applied.
		for j := range i {
			results[j] = OpResult{Path: results[j].Path}
		}
		results[i] = OpResult{Path: r.Path, Err: r.Err}
		for j := i + 1; j < len(c.Ops); j++ {
			results[j] = OpResult{Path: c.Ops[j].Path, Err: ErrRuntimeInconsistency}
		}
		return applyResult{results: results, err: &MultiError{Index: i, Results: results}}
	}
	return applyResult{results: results}
}

func applyDeleteContainer(x *txn, c *command) applyResult {
	return applyResult{err: x.deleteContainer(c.Path)}
}

// fsm is the raft.FSM. Apply and Restore take mu for writing; reads and watch
// registrations take it for reading, which makes "read then register a watch"
// atomic with respect to apply.
type fsm struct {
	lg       *slog.Logger
	watches  *watchManager
	onResult func(nonce uint64, res applyResult) // set before raft starts; may be nil

	lastZxid atomic.Int64 // mirrors mu.t.lastZxid for lock-free reads

	mu struct {
		sync.RWMutex
		t *tree
		// ended holds a channel per session someone waits on
		// (sessionEnded), closed and dropped when the session leaves the
		// tree.
		ended map[int64]chan struct{}
	}
}

func newFSM(lg *slog.Logger, wm *watchManager) *fsm {
	f := &fsm{lg: lg, watches: wm}
	f.mu.t = newTree()
	f.mu.ended = make(map[int64]chan struct{})
	return f
}

var _ raft.FSM = (*fsm)(nil)

// Apply implements raft.FSM. It panics on an entry it cannot decode that
// lacks the ignore flag: the log is then unusable, a broken invariant.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	c, err := decodeCommand(l.Data)
	var unknown errUnknownCommand
	if errors.As(err, &unknown) && c.Type&IgnoreUnknownFlag != 0 {
		f.lg.Warn("ignoring unknown command", "index", l.Index, "type", uint8(c.Type))
		f.mu.Lock()
		f.setLastZxidLocked(int64(l.Index))
		f.mu.Unlock()
		if f.onResult != nil {
			f.onResult(c.Nonce, applyResult{err: errIgnoredCommand})
		}
		return applyResult{err: errIgnoredCommand}
	}
	if err != nil {
		panic(fmt.Sprintf("raftmeta: cannot apply log entry %d: %v", l.Index, err))
	}
	res := f.applyCommand(int64(l.Index), c)
	if f.onResult != nil && c.Nonce != 0 {
		f.onResult(c.Nonce, res)
	}
	return res
}

// applyCommand applies a decoded command at zxid and fires its watches.
func (f *fsm) applyCommand(zxid int64, c *command) applyResult {
	handler := commandHandlers[c.Type&^IgnoreUnknownFlag]
	f.mu.Lock()
	defer f.mu.Unlock()
	x := &txn{t: f.mu.t, zxid: zxid, now: c.Time}
	res := handler(x, c)
	if res.err != nil {
		x.rollback()
	}
	if res.err == nil && (c.Type == CmdCloseSession || c.Type == CmdExpireSession) {
		f.endSessionLocked(c.Session)
	}
	f.setLastZxidLocked(zxid)
	// Fire under the lock so that no reader can observe the new state and
	// register a watch before these events are queued (queuing never blocks).
	f.watches.fire(x.triggers, zxid)
	return res
}

func (f *fsm) setLastZxidLocked(zxid int64) {
	f.mu.t.lastZxid = zxid
	f.lastZxid.Store(zxid)
}

// Snapshot implements raft.FSM. It encodes the whole state under the read
// lock (the metadata tree is small), so Persist only writes bytes.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	b := encodeSnapshot(f.mu.t)
	f.mu.RUnlock()
	return &fsmSnapshot{b: b}, nil
}

// Restore implements raft.FSM: it decodes into a new tree and swaps it in.
// Watches are kept but nothing fires for the difference.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("raftmeta: read snapshot: %w", err)
	}
	t, err := decodeSnapshot(b)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.mu.t = t
	f.lastZxid.Store(t.lastZxid)
	for id := range f.mu.ended {
		if _, ok := t.sessions[id]; !ok {
			f.endSessionLocked(id)
		}
	}
	f.mu.Unlock()
	f.lg.Info("restored snapshot", "last_zxid", t.lastZxid, "nodes", len(t.nodes), "sessions", len(t.sessions))
	return nil
}

// snapshotBytes returns the current state's snapshot encoding.
func (f *fsm) snapshotBytes() []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return encodeSnapshot(f.mu.t)
}

type fsmSnapshot struct{ b []byte }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.b); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftmeta: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// Reads. Each returns copies, so callers own what they get.

func (f *fsm) get(path string, w *Watcher) ([]byte, Stat, error) {
	if err := validatePath(path); err != nil {
		return nil, Stat{}, err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := f.mu.t.nodes[path]
	if n == nil {
		return nil, Stat{}, pathErr(ErrNoNode, path)
	}
	if w != nil {
		f.watches.add(tableData, path, w, modeStandard)
	}
	return slices.Clone(n.data), n.stat(), nil
}

func (f *fsm) children(path string, w *Watcher) ([]string, Stat, error) {
	return f.childrenOrdered(path, w, false)
}

// childrenOrdered returns the children sorted, or with zkOrder in
// ZooKeeper's order.
func (f *fsm) childrenOrdered(path string, w *Watcher, zkOrder bool) ([]string, Stat, error) {
	if err := validatePath(path); err != nil {
		return nil, Stat{}, err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := f.mu.t.nodes[path]
	if n == nil {
		return nil, Stat{}, pathErr(ErrNoNode, path)
	}
	if w != nil {
		f.watches.add(tableChild, path, w, modeStandard)
	}
	if zkOrder {
		return n.zkChildren(), n.stat(), nil
	}
	return n.sortedChildren(), n.stat(), nil
}

func (f *fsm) exists(path string, w *Watcher) (Stat, error) {
	if err := validatePath(path); err != nil {
		return Stat{}, err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if w != nil {
		// ZooKeeper registers an exists watch even when the node is absent.
		f.watches.add(tableData, path, w, modeStandard)
	}
	n := f.mu.t.nodes[path]
	if n == nil {
		return Stat{}, pathErr(ErrNoNode, path)
	}
	return n.stat(), nil
}

func (f *fsm) getACL(path string) ([]ACL, Stat, error) {
	if err := validatePath(path); err != nil {
		return nil, Stat{}, err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := f.mu.t.nodes[path]
	if n == nil {
		return nil, Stat{}, pathErr(ErrNoNode, path)
	}
	return slices.Clone(n.acl), n.stat(), nil
}

func (f *fsm) addWatch(path string, w *Watcher, mode WatchMode) error {
	if err := validatePath(path); err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	switch mode {
	case WatchPersistent:
		f.watches.add(tableData, path, w, modePersistent)
		f.watches.add(tableChild, path, w, modePersistent)
	case WatchPersistentRecursive:
		f.watches.add(tableData, path, w, modeRecursive)
	default:
		return fmt.Errorf("%w: unknown watch mode %d", ErrBadArguments, mode)
	}
	return nil
}

func (f *fsm) ephemerals(session int64) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.mu.t.ephemeralPaths(session)
}

func (f *fsm) sessions() []Session {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ss := f.mu.t.sortedSessions()
	out := make([]Session, len(ss))
	for i, s := range ss {
		out[i] = s.public()
	}
	return out
}

func (f *fsm) hasSession(id int64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.mu.t.sessions[id]
	return ok
}

func (f *fsm) reapable(nowMs int64) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.mu.t.reapable(nowMs)
}

// sessionEnded returns a channel closed once session id is not in the
// tree (at once if it is not there now).
func (f *fsm) sessionEnded(id int64) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.mu.ended[id]
	if !ok {
		ch = make(chan struct{})
		if _, live := f.mu.t.sessions[id]; !live {
			close(ch)
			return ch
		}
		f.mu.ended[id] = ch
	}
	return ch
}

func (f *fsm) endSessionLocked(id int64) {
	if ch, ok := f.mu.ended[id]; ok {
		close(ch)
		delete(f.mu.ended, id)
	}
}

func (f *fsm) session(id int64) (Session, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.mu.t.sessions[id]
	if !ok {
		return Session{}, false
	}
	return s.public(), true
}

func (f *fsm) nodeCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.mu.t.nodes)
}

// descendants counts the nodes below path (not path itself).
func (f *fsm) descendants(path string) (int, error) {
	if err := validatePath(path); err != nil {
		return 0, err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.mu.t.nodes[path]
	if !ok {
		return 0, pathErr(ErrNoNode, path)
	}
	var count func(p string, n *znode) int
	count = func(p string, n *znode) int {
		c := 0
		for name := range n.children {
			cp := p + "/" + name
			if p == "/" {
				cp = "/" + name
			}
			c += 1 + count(cp, f.mu.t.nodes[cp])
		}
		return c
	}
	return count(path, n), nil
}
