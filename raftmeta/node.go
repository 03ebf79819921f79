package raftmeta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Node is one member of the metadata Raft group: it holds a replica of the
// znode tree, serves local reads and watches, and, when leader, accepts
// writes and runs session expiry and node reaping. All methods are safe for
// concurrent use.
type Node struct {
	cfg     Config
	lg      *slog.Logger
	raft    *raft.Raft
	fsm     *fsm
	watches *watchManager
	waits   *waits
	tracker *sessionTracker
	trans   raft.Transport
	logs    raft.LogStore
	closers []io.Closer // owned stores and transport (Open only)

	notifyCh   chan bool // raft.Config.NotifyCh
	leadership chan bool // Leadership()
	ready      atomic.Bool
	nonce      atomic.Uint64

	// Forwarding to the leader (forward.go); httpc is nil without it.
	httpc        *http.Client
	touchMu      sync.Mutex
	touchPending map[int64]struct{} // guarded by touchMu
	touchNotify  chan struct{}      // capacity 1
	baseCtx      context.Context    // cancelled by Close
	baseCancel   context.CancelFunc

	// Rounds of ReadIndex (readindex.go): on the leader, and forwarded.
	leaderReads, forwardReads *readRounds

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open starts a node with a TCP transport on cfg.BindAddr and its log,
// stable store and snapshots under cfg.Dir. With cfg.Bootstrap and no
// existing state, it bootstraps a single-voter cluster of itself.
func Open(cfg Config) (*Node, error) {
	if err := cfg.validateForOpen(); err != nil {
		return nil, err
	}
	lg := cfg.logger()
	hl := newHCLogger(lg.With("component", "raft"))
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftmeta: create dir: %w", err)
	}
	store, err := raftboltdb.NewBoltStore(filepath.Join(cfg.Dir, "raft.db"))
	if err != nil {
		return nil, fmt.Errorf("raftmeta: open raft.db: %w", err)
	}
	logs, err := raft.NewLogCache(512, store)
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("raftmeta: log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hl)
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("raftmeta: snapshot store: %w", err)
	}
	var advertise net.Addr
	if cfg.AdvertiseAddr != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr)
		if err != nil {
			_ = store.Close()
			return nil, fmt.Errorf("raftmeta: resolve AdvertiseAddr: %w", err)
		}
		advertise = a
	}
	stream, err := listenStream(cfg.BindAddr, advertise, cfg.dialer())
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("raftmeta: listen on %s: %w", cfg.BindAddr, err)
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: hl,
	})
	n, err := open(cfg, trans, logs, store, snaps, []io.Closer{trans, store})
	if err != nil {
		_ = trans.Close()
		_ = store.Close()
		return nil, err
	}
	return n, nil
}

// OpenWith starts a node on the given transport and stores (tests use
// raft.NewInmemTransport and raft.NewInmemStore). The caller keeps
// ownership of them: Close does not close them. cfg.Dir and cfg.BindAddr are
// unused.
func OpenWith(cfg Config, trans raft.Transport, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return open(cfg, trans, logs, stable, snaps, nil)
}

func open(cfg Config, trans raft.Transport, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore, closers []io.Closer) (*Node, error) {
	lg := cfg.logger().With("component", "raftmeta")
	n := &Node{
		cfg:        cfg,
		lg:         lg,
		watches:    newWatchManager(),
		waits:      newWaits(),
		tracker:    newSessionTracker(),
		trans:      trans,
		logs:       logs,
		closers:    closers,
		notifyCh:   make(chan bool, 16),
		leadership: make(chan bool),
		stop:       make(chan struct{}),

		touchPending: make(map[int64]struct{}),
		touchNotify:  make(chan struct{}, 1),
	}
	n.baseCtx, n.baseCancel = context.WithCancel(context.Background())
	n.leaderReads = &readRounds{fn: n.readIndexLocal, wg: &n.wg}
	n.forwardReads = &readRounds{fn: n.forwardReadIndex, wg: &n.wg}
	if n.forwarding() {
		n.httpc = &http.Client{Transport: &http.Transport{
			DialContext:         cfg.dialer().DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     time.Minute,
		}}
	}
	n.nonce.Store(rand.Uint64())
	n.fsm = newFSM(lg, n.watches)
	n.fsm.onResult = n.waits.deliver

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.NotifyCh = n.notifyCh
	// Buffer applyCh (MaxAppendEntries entries) so that proposers do not
	// wait for the leader's disk write in progress: the next batch then
	// holds every write proposed meanwhile (group commit). It gives up
	// raft.Apply's enqueue timeout, which propose does not use (its waits
	// are bounded by ctx).
	rc.BatchApplyCh = true
	rc.Logger = newHCLogger(cfg.logger().With("component", "raft"))
	// A removed node keeps its Raft instance (as a non-member follower)
	// instead of shutting it down behind the Node's back.
	rc.ShutdownOnRemove = false
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("raftmeta: raft config: %w", err)
	}

	hasState, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return nil, fmt.Errorf("raftmeta: inspect raft state: %w", err)
	}
	r, err := raft.NewRaft(rc, n.fsm, logs, stable, snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("raftmeta: start raft: %w", err)
	}
	n.raft = r
	if cfg.Bootstrap && !hasState {
		conf := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(cfg.NodeID),
			Address:  trans.LocalAddr(),
		}}}
		if err := r.BootstrapCluster(conf).Error(); err != nil {
			_ = r.Shutdown().Error()
			return nil, fmt.Errorf("raftmeta: bootstrap: %w", err)
		}
		lg.Info("bootstrapped cluster", "addr", string(trans.LocalAddr()))
	}
	n.wg.Add(1)
	go n.monitor()
	if n.forwarding() {
		n.wg.Add(1)
		go n.touchLoop()
	}
	lg.Info("node started", "addr", string(trans.LocalAddr()), "existing_state", hasState)
	return n, nil
}

// Close shuts the node down: pending writes fail with ErrStopped, Raft stops,
// watchers are closed, and every goroutine the node started has exited when
// it returns. Owned stores and transport (Open) are closed. Safe to call
// more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.leaderReads.stop()
		n.forwardReads.stop()
		n.waits.stop()
		var errs []error
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raftmeta: raft shutdown: %w", err))
		}
		close(n.stop)
		n.baseCancel()
		n.wg.Wait()
		if n.httpc != nil {
			n.httpc.CloseIdleConnections()
		}
		n.watches.closeAll()
		for _, c := range n.closers {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("raftmeta: close: %w", err))
			}
		}
		n.closeErr = errors.Join(errs...)
		n.lg.Info("node closed")
	})
	return n.closeErr
}

// monitor follows raft's leadership notifications: it feeds Leadership(),
// opens and closes the waits registry, and runs the leader loop while this
// node leads. Notifications are queued without bound so raft never waits.
func (n *Node) monitor() {
	defer n.wg.Done()
	defer close(n.leadership)
	var queue []bool
	var cancelLeader context.CancelFunc
	var leaderDone chan struct{}
	stopLeader := func() {
		if cancelLeader != nil {
			cancelLeader()
			<-leaderDone
			cancelLeader, leaderDone = nil, nil
		}
		n.ready.Store(false)
	}
	for {
		var out chan<- bool
		var head bool
		if len(queue) > 0 {
			out, head = n.leadership, queue[0]
		}
		select {
		case leader := <-n.notifyCh:
			queue = append(queue, leader)
			if leader {
				n.lg.Info("became leader")
				n.waits.setLeader(true)
				if cancelLeader == nil {
					ctx, cancel := context.WithCancel(context.Background())
					cancelLeader, leaderDone = cancel, make(chan struct{})
					go func(done chan struct{}) {
						defer close(done)
						n.leaderLoop(ctx)
					}(leaderDone)
				}
			} else {
				n.lg.Info("lost leadership")
				n.waits.setLeader(false)
				stopLeader()
			}
		case out <- head:
			queue = queue[1:]
		case <-n.stop:
			n.waits.setLeader(false)
			stopLeader()
			return
		}
	}
}

// leaderLoop runs while this node leads (nomad's establishLeadership): grant
// every session a fresh timeout, commit a barrier so the FSM holds every
// earlier entry, then periodically expire sessions and reap containers and
// TTL nodes.
func (n *Node) leaderLoop(ctx context.Context) {
	n.tracker.grantAll(n.fsm.sessions(), time.Now())
	for {
		bctx, cancel := context.WithTimeout(ctx, leaderProposeTimeout)
		err := n.barrier(bctx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		n.lg.Warn("leader barrier failed", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.cfg.SessionCheckInterval):
		}
	}
	// Sessions applied before the barrier but unknown at grantAll start
	// their timeouts when first seen, which is now or later.
	n.ready.Store(true)
	n.lg.Info("leadership established", "last_zxid", n.fsm.lastZxid.Load())
	if n.cfg.Autopilot.Peers != nil {
		done := make(chan struct{})
		defer func() { <-done }() // runs after ctx is cancelled: it ends then
		go func() {
			defer close(done)
			n.autopilot(ctx)
		}()
	}
	t := time.NewTicker(n.cfg.SessionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.expireSessions(ctx)
			n.reapNodes(ctx)
		}
	}
}

func (n *Node) nextNonce() uint64 {
	for {
		if v := n.nonce.Add(1); v != 0 {
			return v
		}
	}
}

// notLeaderErr names the current leader.
func (n *Node) notLeaderErr(cause error) error {
	addr, id := n.raft.LeaderWithID()
	return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr), Cause: cause}
}

// errNotProposed: proposeLocal found this node not leading; nothing was
// proposed.
var errNotProposed = errors.New("raftmeta: not leader, not proposed")

// forwardable reports whether a follower may forward commands of type t.
func forwardable(t CommandType) bool {
	switch t {
	case CmdOp, CmdMulti, CmdCreateSession, CmdCloseSession:
		return true
	}
	return false
}

// propose proposes c here when this node leads, else (with forwarding
// configured and for client commands) through the leader; see proposeLocal.
func (n *Node) propose(ctx context.Context, c *command) (applyResult, error) {
	for {
		res, err := n.proposeLocal(ctx, c)
		if !errors.Is(err, errNotProposed) {
			return res, err
		}
		if !n.forwarding() || !forwardable(c.Type) {
			return applyResult{}, n.notLeaderErr(nil)
		}
		res, err = n.forwardPropose(ctx, c)
		if !errors.Is(err, errLocalLeader) {
			return res, err
		}
	}
}

// proposeLocal appends c to the Raft log and waits for this node's FSM to
// apply it, for ctx, or for shutdown. The error is about the proposal
// (errNotProposed, lost leadership, stopped, ctx); the command's own
// outcome is in the result.
func (n *Node) proposeLocal(ctx context.Context, c *command) (applyResult, error) {
	p, err := n.proposeStart(ctx, c)
	if err != nil {
		return applyResult{}, err
	}
	return p.wait()
}

// checkWrite applies Config.CheckWrite to an op or multi.
func (n *Node) checkWrite(c *command) error {
	if n.cfg.CheckWrite == nil || (c.Type != CmdOp && c.Type != CmdMulti) {
		return nil
	}
	from := c.from
	if from == "" {
		from = n.cfg.NodeID
	}
	if err := n.cfg.CheckWrite(from, c.Session, c.Ops); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return nil
}

// checkLevel refuses a command of a type above the cluster's active
// feature level (Config.FeatureLevel).
func (n *Node) checkLevel(c *command) error {
	need := commandLevel(c.Type)
	if need == 0 || n.cfg.FeatureLevel == nil {
		return nil // the first release's commands: no lookup on the write path
	}
	if active := n.cfg.FeatureLevel(); need > active {
		return fmt.Errorf("%w: %s needs feature level %d, the cluster is at %d", ErrFeatureNotActive, c.Type, need, active)
	}
	return nil
}

// checkOwner refuses, on the leader, an op or multi of a session made
// through a node other than the one that holds its connection (ZooKeeper's
// SessionMoved).
func (n *Node) checkOwner(c *command) error {
	if c.Session == 0 || (c.Type != CmdOp && c.Type != CmdMulti) {
		return nil
	}
	from := c.from
	if from == "" {
		from = n.cfg.NodeID
	}
	return n.tracker.checkOwner(c.Session, from)
}

// inflight is a command handed to raft whose outcome is awaited by wait,
// which must be called exactly once (it releases the registration).
type inflight struct {
	n   *Node
	ctx context.Context
	c   *command
	ch  <-chan waitOutcome
}

// proposeStart registers c and hands it to raft; it returns once raft has
// accepted the entry (so entries started one after the other from one
// goroutine are logged in that order) or failed: ErrRefused (by
// Config.CheckWrite, checked on every node), ErrFeatureNotActive (by
// Config.FeatureLevel, checked on every node), ErrSessionMoved (checked on
// the leader), errNotProposed when this node does not lead, ctx's error,
// ErrStopped.
func (n *Node) proposeStart(ctx context.Context, c *command) (*inflight, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := n.checkWrite(c); err != nil {
		return nil, err
	}
	if err := n.checkLevel(c); err != nil {
		return nil, err
	}
	c.Nonce = n.nextNonce()
	ch, err := n.waits.register(c.Nonce)
	if err != nil {
		if errors.Is(err, ErrNotLeader) {
			return nil, errNotProposed
		}
		return nil, err
	}
	if err := n.checkOwner(c); err != nil {
		n.waits.cancel(c.Nonce)
		return nil, err
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			n.waits.cancel(c.Nonce)
			return nil, ctx.Err()
		}
	}
	// The future is not waited on: the outcome arrives through ch (see
	// waits). An enqueue failure surfaces as ctx expiry or shutdown.
	_ = n.raft.Apply(encodeCommand(c), timeout)
	return &inflight{n: n, ctx: ctx, c: c, ch: ch}, nil
}

func (p *inflight) wait() (applyResult, error) {
	n := p.n
	defer n.waits.cancel(p.c.Nonce)
	select {
	case out := <-p.ch:
		switch {
		case errors.Is(out.err, errLeadershipChanged):
			return applyResult{}, n.notLeaderErr(raft.ErrLeadershipLost)
		case out.err != nil:
			return applyResult{}, out.err
		}
		return out.res, nil
	case <-p.ctx.Done():
		return applyResult{}, p.ctx.Err()
	case <-n.stop:
		return applyResult{}, ErrStopped
	}
}

// Proposal is a write (DoAsync, MultiAsync) whose outcome is not known yet.
// Call Wait exactly once.
type Proposal struct {
	fl    *inflight // nil when the outcome was known at once
	multi bool
	ops   []Op
	res   applyResult
	err   error
}

// DoAsync is Do split in two: it returns once the operation is in the
// leader's Raft log queue, so that operations started one after the other
// from one goroutine are applied in that order while their commits
// overlap (pipelining). Wait returns what Do would. On a follower (with
// forwarding) it forwards synchronously and Wait returns at once.
func (n *Node) DoAsync(ctx context.Context, session int64, op Op) *Proposal {
	if err := prevalidate(&op); err != nil {
		return &Proposal{ops: []Op{op}, res: applyResult{results: []OpResult{{Path: op.Path, Err: err}}, err: err}}
	}
	c := newCommand(CmdOp)
	c.Session = session
	c.Ops = []Op{op}
	return n.startProposal(ctx, c, false)
}

// MultiAsync is Multi split like DoAsync; Wait returns what Multi would.
func (n *Node) MultiAsync(ctx context.Context, session int64, ops ...Op) *Proposal {
	for i := range ops {
		if err := prevalidate(&ops[i]); err != nil {
			res, merr := n.Multi(ctx, session, ops...)
			return &Proposal{multi: true, ops: ops, res: applyResult{results: res, err: merr}}
		}
	}
	c := newCommand(CmdMulti)
	c.Session = session
	c.Ops = ops
	return n.startProposal(ctx, c, true)
}

func (n *Node) startProposal(ctx context.Context, c *command, multi bool) *Proposal {
	p := &Proposal{multi: multi, ops: c.Ops}
	fl, err := n.proposeStart(ctx, c)
	switch {
	case err == nil:
		p.fl = fl
	case errors.Is(err, errNotProposed):
		p.res, p.err = n.propose(ctx, c)
	default:
		p.err = err
	}
	return p
}

// Wait returns the outcome: for DoAsync one result and the op's or the
// proposal's error (as Do); for MultiAsync the results and a *MultiError or
// the proposal's error (as Multi).
func (p *Proposal) Wait() ([]OpResult, error) {
	res, err := p.res, p.err
	if p.fl != nil {
		res, err = p.fl.wait()
		p.fl = nil
	}
	if err != nil {
		if p.multi {
			return nil, err
		}
		path := ""
		if len(p.ops) > 0 {
			path = p.ops[0].Path
		}
		return []OpResult{{Path: path, Err: err}}, err
	}
	return res.results, res.err
}

// barrier commits a no-op entry; once this node's FSM applies it, the FSM
// holds every entry before it.
func (n *Node) barrier(ctx context.Context) error {
	_, err := n.propose(ctx, newCommand(CmdNoop))
	return err
}

// barrierLocal is barrier without the conversion of errNotProposed.
func (n *Node) barrierLocal(ctx context.Context) error {
	_, err := n.proposeLocal(ctx, newCommand(CmdNoop))
	return err
}

// mapRaftErr turns raft's errors into this package's.
func (n *Node) mapRaftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return n.notLeaderErr(nil)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return n.notLeaderErr(err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrStopped
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return err
}

// raftTimeout is the enqueue timeout for raft calls bounded by ctx.
func raftTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 {
			return d
		}
		return time.Nanosecond
	}
	return 0
}

// WaitLeader returns once a leader is known and, if it is this node, has
// committed its leadership barrier (so its FSM holds every earlier write and
// it accepts writes). It polls; ctx bounds the wait.
func (n *Node) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		_, id := n.raft.LeaderWithID()
		if id != "" && (string(id) != n.cfg.NodeID || n.ready.Load()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.stop:
			return ErrStopped
		case <-t.C:
		}
	}
}

// IsLeader reports whether this node leads and accepts writes.
func (n *Node) IsLeader() bool {
	return n.raft.State() == raft.Leader && n.waits.isLeader()
}

// Leader returns the leader's server id and Raft address, "" when unknown.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// Addr returns this node's Raft address.
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }

// Leadership returns a channel that receives true when this node becomes
// leader and false when it loses leadership, in order and without loss. It
// has a single consumer; undelivered values wait in an unbounded queue. It
// is closed when the node is closed.
func (n *Node) Leadership() <-chan bool { return n.leadership }

// Barrier waits until every write committed before the call is applied to
// this node's FSM. Leader only (else a *NotLeaderError). It writes a no-op
// entry to the log.
func (n *Node) Barrier(ctx context.Context) error { return n.barrier(ctx) }

// Raft returns the underlying raft instance, for tests and diagnostics.
func (n *Node) Raft() *raft.Raft { return n.raft }

// Server is one member of the Raft configuration.
type Server struct {
	ID, Address   string
	Voter, Leader bool
}

// Servers returns the latest Raft configuration.
func (n *Node) Servers() ([]Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, n.mapRaftErr(err)
	}
	_, leaderID := n.raft.LeaderWithID()
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{
			ID:      string(s.ID),
			Address: string(s.Address),
			Voter:   s.Suffrage == raft.Voter,
			Leader:  s.ID == leaderID,
		})
	}
	return out, nil
}

// AddVoter adds (or promotes) a voting member. Leader only. ctx bounds the
// time to enqueue the change; once enqueued the call waits until it commits
// or leadership is lost.
func (n *Node) AddVoter(ctx context.Context, id, addr string) error {
	if !n.IsLeader() {
		return n.notLeaderErr(nil)
	}
	return n.mapRaftErr(n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, raftTimeout(ctx)).Error())
}

// AddNonvoter adds a member that replicates but does not vote. Leader only;
// ctx as for AddVoter.
func (n *Node) AddNonvoter(ctx context.Context, id, addr string) error {
	if !n.IsLeader() {
		return n.notLeaderErr(nil)
	}
	return n.mapRaftErr(n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, raftTimeout(ctx)).Error())
}

// RemoveServer removes a member. Leader only; ctx as for AddVoter.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return n.notLeaderErr(nil)
	}
	return n.mapRaftErr(n.raft.RemoveServer(raft.ServerID(id), 0, raftTimeout(ctx)).Error())
}

// prevalidate rejects what the log encoding cannot carry, so that every
// proposed entry decodes; the FSM checks everything else.
func prevalidate(op *Op) error {
	switch {
	case !op.Kind.valid():
		return fmt.Errorf("%w: unknown op kind %d", ErrBadArguments, op.Kind)
	case !op.Mode.valid():
		return fmt.Errorf("%w: unknown create mode %d", ErrBadArguments, op.Mode)
	case op.TTL < 0 || op.TTL > MaxTTL || op.TTL%time.Millisecond != 0:
		return fmt.Errorf("%w: TTL %s must be whole milliseconds in [0, %s]", ErrBadArguments, op.TTL, MaxTTL)
	}
	return nil
}

// Do applies one operation through Raft in session (0: no session; ephemeral
// creates need one). On a follower with Config.ForwardAddr it goes through
// the leader, and returns once this replica shows the result. The error is the operation's (ErrNoNode, ErrBadVersion,
// ...) or the proposal's (*NotLeaderError, ErrStopped, ctx's error).
func (n *Node) Do(ctx context.Context, session int64, op Op) (OpResult, error) {
	if err := prevalidate(&op); err != nil {
		return OpResult{Path: op.Path, Err: err}, err
	}
	c := newCommand(CmdOp)
	c.Session = session
	c.Ops = []Op{op}
	res, err := n.propose(ctx, c)
	if err != nil {
		return OpResult{Path: op.Path, Err: err}, err
	}
	return res.results[0], res.err
}

// Multi applies ops atomically through Raft in session. If an op fails
// nothing is applied and the error is a *MultiError (whose Results are also
// returned); other errors are about the proposal.
func (n *Node) Multi(ctx context.Context, session int64, ops ...Op) ([]OpResult, error) {
	for i := range ops {
		if err := prevalidate(&ops[i]); err != nil {
			results := make([]OpResult, len(ops))
			for j := range ops {
				results[j].Path = ops[j].Path
				if j == i {
					results[j].Err = err
				} else if j > i {
					results[j].Err = ErrRuntimeInconsistency
				}
			}
			return results, &MultiError{Index: i, Results: results}
		}
	}
	c := newCommand(CmdMulti)
	c.Session = session
	c.Ops = ops
	res, err := n.propose(ctx, c)
	if err != nil {
		return nil, err
	}
	return res.results, res.err
}

// Create creates a node without a session and returns its path (with the
// sequence suffix for sequential modes). Ephemeral modes need a session:
// use Do.
func (n *Node) Create(ctx context.Context, path string, data []byte, mode CreateMode) (string, error) {
	r, err := n.Do(ctx, 0, CreateOp(path, data, mode))
	if err != nil {
		return "", err
	}
	return r.Path, nil
}

// Delete deletes a childless node whose version matches (-1: any).
func (n *Node) Delete(ctx context.Context, path string, version int32) error {
	_, err := n.Do(ctx, 0, DeleteOp(path, version))
	return err
}

// SetData replaces a node's data if its version matches (-1: any) and
// returns the new stat.
func (n *Node) SetData(ctx context.Context, path string, data []byte, version int32) (Stat, error) {
	r, err := n.Do(ctx, 0, SetDataOp(path, data, version))
	if err != nil {
		return Stat{}, err
	}
	return r.Stat, nil
}

// Local reads: served from this replica's FSM (ZooKeeper's sequential
// consistency; call Sync first to see every write committed before it).
// Returned slices are copies owned by the caller.

// Get returns a node's data and stat, or ErrNoNode.
func (n *Node) Get(path string) ([]byte, Stat, error) { return n.fsm.get(path, nil) }

// Children returns a node's child names, sorted, and its stat.
func (n *Node) Children(path string) ([]string, Stat, error) { return n.fsm.children(path, nil) }

// Exists returns a node's stat, or ErrNoNode.
func (n *Node) Exists(path string) (Stat, error) { return n.fsm.exists(path, nil) }

// GetACL returns a node's ACL and stat.
func (n *Node) GetACL(path string) ([]ACL, Stat, error) { return n.fsm.getACL(path) }

// Ephemerals returns the paths owned by session, sorted.
func (n *Node) Ephemerals(session int64) []string { return n.fsm.ephemerals(session) }

// LastZxid returns the zxid (Raft index) of the last command this replica
// applied.
func (n *Node) LastZxid() int64 { return n.fsm.lastZxid.Load() }

// Sync returns once local reads see every write committed before the call.
// On the leader it is Barrier. On a follower with forwarding it asks the
// leader for a barrier and waits until this FSM has applied it (ZooKeeper's
// sync). Without forwarding it waits until the FSM has applied everything
// up to the commit index the follower knows; that index trails the
// leader's by about half a round trip, so a write committed in that window
// may not be visible yet.
func (n *Node) Sync(ctx context.Context) error {
	if n.forwarding() {
		err := n.forwardSync(ctx)
		if !errors.Is(err, errLocalLeader) {
			return err
		}
	}
	if n.IsLeader() {
		err := n.Barrier(ctx)
		if err == nil || !errors.Is(err, ErrNotLeader) {
			return err
		}
	}
	target := n.raft.CommitIndex()
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	wait := func(done func() bool) error {
		for !done() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-n.stop:
				return ErrStopped
			case <-t.C:
			}
		}
		return nil
	}
	if err := wait(func() bool { return n.raft.AppliedIndex() >= target }); err != nil {
		return err
	}
	// raft counts an entry applied when it hands it to the FSM goroutine, so
	// also wait for the FSM to reach the last command at or below target
	// (no-op and configuration entries never reach it).
	last := n.lastCommandAtOrBelow(target)
	return wait(func() bool { return n.fsm.lastZxid.Load() >= last })
}

// ReadBarrier returns once local reads see every write the leader had
// applied when it was called, so every write acknowledged before then, on
// any node: a follower with forwarding asks the leader for its read zxid
// (ReadIndex's round: one round trip, and the leader's heartbeat round to
// a quorum; nothing proposed) and waits until its own FSM has applied it.
// On the leader, and without forwarding, it returns at once, so a leader
// cut off from the quorum reads its replica as it is (ReadIndex does not).
// Unlike Sync it commits nothing; unlike ZooKeeper's local reads it makes
// a follower read after an acknowledged write see it. On an error (no
// leader reachable before ctx ends) local reads may still be stale.
func (n *Node) ReadBarrier(ctx context.Context) error {
	if !n.forwarding() || n.IsLeader() {
		return nil
	}
	err := n.forwardWait(ctx, fwdRead)
	if errors.Is(err, errLocalLeader) {
		return nil
	}
	return err
}

// lastCommandAtOrBelow returns the index of the last command entry at or
// below idx that the FSM may not have applied yet, or 0.
func (n *Node) lastCommandAtOrBelow(idx uint64) int64 {
	applied := n.fsm.lastZxid.Load()
	var l raft.Log
	for i := idx; int64(i) > applied; i-- {
		if err := n.logs.GetLog(i, &l); err != nil {
			// Compacted into a snapshot, which the FSM already holds.
			return 0
		}
		if l.Type == raft.LogCommand {
			return int64(i)
		}
	}
	return 0
}

// Watches. Registration and the read it goes with are atomic with respect
// to apply. A nil Watcher registers nothing.

// NewWatcher returns a Watcher; Close it when done (Node.Close closes all).
func (n *Node) NewWatcher() *Watcher { return n.watches.newWatcher(false) }

// NewPolledWatcher returns a Watcher without a delivery goroutine: the
// consumer waits on Ready and calls Take, which lets it order events with
// its own replies (the ZooKeeper shim does). Events is closed and unused.
// Close it when done.
func (n *Node) NewPolledWatcher() *Watcher { return n.watches.newWatcher(true) }

// GetW is Get plus a one-shot data watch (NodeDataChanged, NodeDeleted),
// registered only if the node exists.
func (n *Node) GetW(path string, w *Watcher) ([]byte, Stat, error) { return n.fsm.get(path, w) }

// ChildrenW is Children plus a one-shot child watch (NodeChildrenChanged,
// NodeDeleted), registered only if the node exists.
func (n *Node) ChildrenW(path string, w *Watcher) ([]string, Stat, error) {
	return n.fsm.children(path, w)
}

// ZKChildren is ChildrenW with the names in the order ZooKeeper returns
// them: the iteration order of its children HashSet (see childorder.go),
// which the ZooKeeper shim must reproduce. w may be nil.
func (n *Node) ZKChildren(path string, w *Watcher) ([]string, Stat, error) {
	return n.fsm.childrenOrdered(path, w, true)
}

// ExistsW is Exists plus a one-shot data watch, registered even when the
// node is absent (then it fires NodeCreated).
func (n *Node) ExistsW(path string, w *Watcher) (Stat, error) { return n.fsm.exists(path, w) }

// AddWatch adds a persistent or persistent-recursive watch on path (which
// need not exist).
func (n *Node) AddWatch(path string, w *Watcher, mode WatchMode) error {
	if w == nil {
		return fmt.Errorf("%w: nil watcher", ErrBadArguments)
	}
	return n.fsm.addWatch(path, w, mode)
}

// RemoveWatches removes w's watches of type t on path; ErrNoWatcher if none
// matched.
func (n *Node) RemoveWatches(path string, w *Watcher, t WatcherType) error {
	if err := validatePath(path); err != nil {
		return err
	}
	if w == nil {
		return fmt.Errorf("%w: nil watcher", ErrBadArguments)
	}
	return n.watches.removeWatches(path, w, t)
}

// NodeCount returns the number of znodes in this replica, reserved ones
// included.
func (n *Node) NodeCount() int { return n.fsm.nodeCount() }

// CountDescendants returns the number of nodes below path (ZooKeeper's
// getAllChildrenNumber), or ErrNoNode.
func (n *Node) CountDescendants(path string) (int, error) { return n.fsm.descendants(path) }

// CheckWatches reports, as RemoveWatches would, whether w has watches of
// type t on path, without removing them: nil, or ErrNoWatcher.
func (n *Node) CheckWatches(path string, w *Watcher, t WatcherType) error {
	if err := validatePath(path); err != nil {
		return err
	}
	if w == nil {
		return fmt.Errorf("%w: nil watcher", ErrBadArguments)
	}
	return n.watches.matchWatches(path, w, t, false)
}
