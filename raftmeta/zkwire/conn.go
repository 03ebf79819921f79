package zkwire

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"strom/raftmeta"
)

// conn is one client connection. serve runs the handshake and then the
// handler loop on the connection's goroutine; a reader goroutine decodes
// packets and hands them over in order; a writer goroutine writes replies
// in request order, waiting for pipelined writes to apply, and writes the
// queued watch events before each reply (see DESIGN.md).
type conn struct {
	s  *Server
	nc net.Conn
	bw *bufio.Writer

	sid     int64
	timeout time.Duration
	w       *raftmeta.Watcher
	jobs    chan job       // handler → writer, in request order
	pending sync.WaitGroup // writes queued but not yet applied
	authIDs []raftmeta.ACL // recorded auth ids (scheme, id); Perms unused
	lg      interface {
		Debug(string, ...any)
		Info(string, ...any)
		Warn(string, ...any)
	}
}

// errCloseConn ends the handler after its reply is written.
var errCloseConn = errors.New("zkwire: close connection")

func (c *conn) serve() {
	defer c.nc.Close()
	c.lg = c.s.lg.With("remote", c.nc.RemoteAddr().String())
	c.bw = bufio.NewWriterSize(c.nc, 16<<10)
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))

	var head [4]byte
	if err := readFull(c.nc, head[:]); err != nil {
		return
	}
	if cmd := string(head[:]); isFourLetterWord(cmd) {
		c.fourLetterWord(cmd)
		return
	}
	body, err := c.readBody(head)
	if err != nil {
		c.lg.Debug("bad connect packet", "err", err)
		return
	}
	req, err := decodeConnect(body)
	if err != nil {
		c.lg.Debug("bad connect request", "err", err)
		return
	}
	if !c.handshake(req) {
		return
	}
	c.w = c.s.node.NewPolledWatcher()
	defer c.w.Close()
	c.loop()
}

// readBody reads the packet whose length prefix is head.
func (c *conn) readBody(head [4]byte) ([]byte, error) {
	n := int32(binary.BigEndian.Uint32(head[:]))
	if n < 0 || int(n) > c.s.cfg.MaxPacketSize {
		return nil, fmt.Errorf("%w: packet length %d outside [0, %d]", errMalformed, n, c.s.cfg.MaxPacketSize)
	}
	b := make([]byte, n)
	if err := readFull(c.nc, b); err != nil {
		return nil, err
	}
	return b, nil
}

// handshake answers the connect request. It reports whether the connection
// goes on.
func (c *conn) handshake(req connectRequest) bool {
	node := c.s.node
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.cfg.RequestTimeout)
	defer cancel()
	// A client that has seen more than this replica must not read older
	// state here (ZooKeeper refuses it); catch up first.
	if req.lastZxidSeen > node.LastZxid() {
		_ = node.Sync(ctx)
		if req.lastZxidSeen > node.LastZxid() {
			c.lg.Info("refusing client ahead of this replica", "client_zxid", req.lastZxidSeen, "zxid", node.LastZxid())
			return false
		}
	}
	timeout := time.Duration(req.timeoutMs) * time.Millisecond
	timeout = min(max(timeout, c.s.cfg.MinSessionTimeout), c.s.cfg.MaxSessionTimeout)
	var sess raftmeta.Session
	if req.sessionID == 0 {
		var err error
		sess, err = node.CreateSession(ctx, timeout)
		if err != nil {
			c.lg.Warn("create session failed", "err", err)
			return false
		}
		// The session was applied on the leader; wait for this replica, so
		// that later checks of it here do not find it missing.
		if !c.waitSession(ctx, sess.ID) {
			return false
		}
	} else {
		s, ok := node.Session(req.sessionID)
		if !ok {
			_ = node.Sync(ctx)
			s, ok = node.Session(req.sessionID)
		}
		if !ok || subtle.ConstantTimeCompare(s.Password, req.passwd) != 1 {
			// ZooKeeper's answer for an expired or unknown session, or a
			// wrong password: timeout 0, session 0, then close.
			c.writeConnect(req, 0, 0, make([]byte, 16))
			_ = c.bw.Flush()
			return false
		}
		sess = s
		node.Touch(sess.ID)
		// The session's writes through any other node now fail with
		// SessionMoved, which closes their connection (ZooKeeper
		// revalidates the session with its leader the same way).
		if err := node.ClaimSession(ctx, sess.ID); err != nil {
			c.lg.Info("cannot claim the session with the leader; closing", "session", fmt.Sprintf("0x%x", sess.ID), "err", err)
			return false
		}
	}
	c.sid, c.timeout = sess.ID, sess.Timeout
	c.lg = c.s.lg.With("remote", c.nc.RemoteAddr().String(), "session", fmt.Sprintf("0x%x", sess.ID))
	c.s.takeSession(sess.ID, c)
	c.writeConnect(req, int32(sess.Timeout.Milliseconds()), sess.ID, sess.Password)
	if err := c.bw.Flush(); err != nil {
		return false
	}
	c.lg.Debug("session connected", "timeout", sess.Timeout, "new", req.sessionID == 0)
	return true
}

func (c *conn) waitSession(ctx context.Context, id int64) bool {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		if _, ok := c.s.node.Session(id); ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

func (c *conn) writeConnect(req connectRequest, timeoutMs int32, sid int64, pw []byte) {
	e := &encoder{b: make([]byte, 4, 64)}
	e.i32(0) // protocol version
	e.i32(timeoutMs)
	e.i64(sid)
	e.buffer(pw)
	if req.hasReadOnly {
		e.boolean(false)
	}
	c.writeFrame(e.b)
}

// writeFrame fills in the length prefix of b (whose first 4 bytes are
// reserved for it) and buffers it.
func (c *conn) writeFrame(b []byte) {
	binary.BigEndian.PutUint32(b[:4], uint32(len(b)-4))
	_, _ = c.bw.Write(b)
	c.s.sent.Add(1)
}

type packet struct {
	req request
	err error
}

// job is one reply in request order. wait, when set, is a pipelined write:
// the writer calls it (exactly once) to learn the outcome; a non-nil error
// drops the connection.
type job struct {
	xid    int32
	code   int32
	body   func(e *encoder)
	wait   func() (code int32, body func(e *encoder), err error)
	before [][]byte // frames to send before the reply (setWatches events)
	start  time.Time
}

// maxPipelined bounds a connection's queued replies (ZooKeeper's
// outstanding-requests limit plays this role).
const maxPipelined = 256

// loop runs the session: a reader goroutine decodes packets; this goroutine
// executes them in order and queues their replies for the writer; it also
// ends when the session does. Closing: the writer drains and flushes the
// queued replies (closeSession's included), then the connection closes.
func (c *conn) loop() {
	reqs := make(chan packet)
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	writerDone := make(chan struct{})
	c.jobs = make(chan job, maxPipelined)
	go func() {
		defer close(readerDone)
		c.readLoop(reqs, stop)
	}()
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	defer func() {
		close(stop)
		close(c.jobs)
		<-writerDone
		_ = c.nc.Close()
		<-readerDone
	}()
	// Closed or expired on any node (this one's own closeSession ends the
	// loop through handle first), as ZooKeeper closes a session's
	// connection when it applies its closeSession.
	ended := c.s.node.SessionEnded(c.sid)
	for {
		var err error
		select {
		case p, ok := <-reqs:
			if !ok {
				return
			}
			if p.err != nil {
				c.lg.Info("closing connection on bad packet", "err", p.err)
				return
			}
			err = c.handle(&p.req)
		case <-ended:
			c.lg.Info("session closed or expired; closing connection")
			return
		case <-c.s.ctx.Done():
			return
		}
		if err != nil {
			if !errors.Is(err, errCloseConn) {
				c.lg.Warn("closing connection", "err", err)
			}
			return
		}
	}
}

// writeLoop writes replies in order and watch events as they come, until
// the job queue is closed. After a write failure it only drains (every
// pipelined write is still waited for).
func (c *conn) writeLoop() {
	broken := false
	fail := func(err error) {
		if !broken {
			broken = true
			if err != nil {
				c.lg.Warn("closing connection", "err", err)
			}
			_ = c.nc.Close()
		}
	}
	for {
		select {
		case j, ok := <-c.jobs:
			if !ok {
				if !broken {
					c.flushEvents()
					_ = c.flush()
				}
				return
			}
			code, body := j.code, j.body
			var err error
			if j.wait != nil {
				code, body, err = j.wait()
				c.pending.Done()
			}
			if broken {
				continue
			}
			if err != nil {
				fail(err)
				continue
			}
			c.flushEvents()
			for _, f := range j.before {
				c.writeFrame(f)
			}
			c.writeReply(j.xid, code, body)
			c.s.recordLatency(time.Since(j.start))
			if len(c.jobs) == 0 {
				if err := c.flush(); err != nil {
					fail(nil)
				}
			}
		case <-c.w.Ready():
			if broken {
				continue
			}
			c.flushEvents()
			if err := c.flush(); err != nil {
				fail(nil)
			}
		}
	}
}

func (c *conn) flush() error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(max(c.timeout, time.Second)))
	return c.bw.Flush()
}

// readLoop decodes packets until an error; a client silent for its session
// timeout is cut off (ZooKeeper does the same).
func (c *conn) readLoop(out chan<- packet, stop <-chan struct{}) {
	defer close(out)
	var head [4]byte
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.timeout))
		if err := readFull(c.nc, head[:]); err != nil {
			return
		}
		var p packet
		body, err := c.readBody(head)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				return
			}
			p.err = err
		} else {
			c.s.received.Add(1)
			p.req, p.err = decodeRequest(body)
		}
		select {
		case out <- p:
		case <-stop:
			return
		}
		if p.err != nil {
			return
		}
	}
}

// flushEvents buffers every queued watch event.
func (c *conn) flushEvents() {
	for _, ev := range c.w.Take() {
		e := &encoder{b: make([]byte, 4, 64)}
		e.i32(xidNotification)
		e.i64(ev.Zxid)
		e.i32(codeOK)
		e.i32(int32(ev.Type))
		e.i32(stateSyncConnected)
		e.str(ev.Path)
		c.writeFrame(e.b)
	}
}

// reply queues a ready reply to xid (the writer sends the watch events
// queued before it first).
func (c *conn) reply(xid, code int32, body func(e *encoder)) {
	c.jobs <- job{xid: xid, code: code, body: body, start: time.Now()}
}

// writeReply buffers a reply; only the writer calls it.
func (c *conn) writeReply(xid, code int32, body func(e *encoder)) {
	e := &encoder{b: make([]byte, 4, 128)}
	e.i32(xid)
	e.i64(c.s.node.LastZxid())
	e.i32(code)
	if body != nil && code == codeOK {
		body(e)
	}
	c.writeFrame(e.b)
}

// pipeline queues a write whose outcome wait returns; reads wait for it
// (barrier) so that a client reads its own writes.
func (c *conn) pipeline(xid int32, wait func() (int32, func(e *encoder), error)) {
	c.pending.Add(1)
	c.jobs <- job{xid: xid, wait: wait, start: time.Now()}
}

// eager runs body now (in the handler, where reads and connection state
// belong) and returns a body that appends the bytes it produced.
func eager(body func(e *encoder)) func(e *encoder) {
	tmp := &encoder{}
	body(tmp)
	return func(e *encoder) { e.b = append(e.b, tmp.b...) }
}

// barrier waits until every pipelined write of this connection is applied.
func (c *conn) barrier() { c.pending.Wait() }

// readBarrier makes a read on a follower see every write acknowledged
// before it on any node (raftmeta.Node.ReadBarrier: one round trip to the
// leader). ZooKeeper reads a follower's replica as it is; Fluss reads on
// one server what it was just told another wrote. Without a leader
// reached within a third of the session timeout (an election) the read is
// served from this replica as it is, before the client gives up on it.
func (c *conn) readBarrier() {
	ctx, cancel := context.WithTimeout(c.s.ctx, min(c.s.cfg.RequestTimeout, c.timeout/3))
	defer cancel()
	if err := c.s.node.ReadBarrier(ctx); err != nil {
		c.lg.Debug("read barrier failed; reading this replica as it is", "err", err)
	}
}

// replyErr answers with err's code, or returns err (closing the
// connection) when it has none.
func (c *conn) replyErr(xid int32, err error) error {
	code, ok := errCode(err)
	if !ok {
		return err
	}
	c.reply(xid, code, nil)
	return nil
}

func (c *conn) protected(path string) bool {
	root := c.s.cfg.ProtectedRoot
	return root != "-" && (path == root || strings.HasPrefix(path, root+"/"))
}

func (c *conn) writeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.s.ctx, c.s.cfg.RequestTimeout)
}

// handle answers one request. A non-nil error closes the connection after
// what was buffered is flushed.
func (c *conn) handle(r *request) error {
	node := c.s.node
	node.Touch(c.sid)
	switch r.op {
	case opCreate, opCreate2, opCreateContainer, opCreateTTL, opDelete, opSetData, opSetACL, opCheck, opMulti, opAuth, opCloseSession:
		// Writes are checked by the leader when proposed; ZooKeeper checks
		// neither auth nor closeSession.
	default:
		// A moved session's read, sync, ping or watch op through its old
		// connection on the leader closes it without a reply, as
		// ZooKeeper's FinalRequestProcessor does on SessionMoved.
		if err := node.CheckSessionOwner(c.sid); err != nil {
			return err
		}
	}
	switch r.op {
	case opPing:
		c.reply(r.xid, codeOK, nil)
		return nil
	case opCreate, opCreate2, opCreateContainer, opCreateTTL, opDelete, opSetData, opSetACL, opCheck:
		op, err := c.buildOp(r)
		if err != nil {
			return c.replyErr(r.xid, err)
		}
		ctx, cancel := c.writeCtx()
		p := node.DoAsync(ctx, c.sid, op)
		opCode := r.op
		c.pipeline(r.xid, func() (int32, func(e *encoder), error) {
			defer cancel()
			res, err := p.Wait()
			if err != nil {
				code, ok := errCode(err)
				if !ok {
					return 0, nil, err
				}
				return code, nil, nil
			}
			return codeOK, func(e *encoder) { encodeResult(e, opCode, res[0]) }, nil
		})
		return nil
	case opMulti:
		return c.multi(r)
	case opAuth:
		c.addAuth(r)
		c.reply(r.xid, codeOK, nil)
		return nil
	}
	// Everything else reads or depends on this connection's earlier
	// writes: wait for them (a client reads its own writes).
	c.barrier()
	switch r.op {
	case opMultiRead, opExists, opGetData, opGetChildren, opGetChildren2, opGetAllChildrenNumber, opGetEphemerals, opGetACL:
		c.readBarrier()
	}
	switch r.op {
	case opMultiRead:
		c.reply(r.xid, codeOK, eager(func(e *encoder) { c.multiRead(e, r) }))
	case opExists:
		var st raftmeta.Stat
		var err error
		if r.watch {
			st, err = node.ExistsW(r.path, c.w)
		} else {
			st, err = node.Exists(r.path)
		}
		if err != nil {
			return c.replyErr(r.xid, readErr(err))
		}
		c.reply(r.xid, codeOK, func(e *encoder) { e.stat(st) })
	case opGetData:
		data, st, err := node.GetW(r.path, c.watcherIf(r.watch))
		if err != nil {
			return c.replyErr(r.xid, readErr(err))
		}
		c.reply(r.xid, codeOK, func(e *encoder) { e.buffer(data); e.stat(st) })
	case opGetChildren, opGetChildren2:
		kids, st, err := node.ZKChildren(r.path, c.watcherIf(r.watch))
		if err != nil {
			return c.replyErr(r.xid, readErr(err))
		}
		c.reply(r.xid, codeOK, func(e *encoder) {
			e.strs(kids)
			if r.op == opGetChildren2 {
				e.stat(st)
			}
		})
	case opGetAllChildrenNumber:
		n, err := node.CountDescendants(r.path)
		if err != nil {
			return c.replyErr(r.xid, readErr(err))
		}
		c.reply(r.xid, codeOK, func(e *encoder) { e.i32(int32(n)) })
	case opGetEphemerals:
		var out []string
		prefix := strings.TrimFunc(r.path, func(r rune) bool { return r <= ' ' }) // Java's trim
		for _, p := range c.ephemerals() {
			if prefix == "" || prefix == "/" || strings.HasPrefix(p, r.path) {
				out = append(out, p)
			}
		}
		c.reply(r.xid, codeOK, func(e *encoder) { e.strs(out) })
	case opGetACL:
		acl, st, err := node.GetACL(r.path)
		if err != nil {
			return c.replyErr(r.xid, readErr(err))
		}
		c.reply(r.xid, codeOK, func(e *encoder) { e.acls(acl); e.stat(st) })
	case opSync:
		ctx, cancel := c.writeCtx()
		err := node.Sync(ctx)
		cancel()
		if err != nil {
			return err
		}
		c.reply(r.xid, codeOK, func(e *encoder) { e.str(r.path) })
	case opSetWatches, opSetWatches2:
		c.setWatches(r) // queues its events and its reply
	case opAddWatch:
		mode := raftmeta.WatchMode(r.flags)
		if mode != raftmeta.WatchPersistent && mode != raftmeta.WatchPersistentRecursive {
			// ZooKeeper's DataTree.addWatch throws IllegalArgumentException,
			// which FinalRequestProcessor answers MarshallingError.
			c.reply(r.xid, codeMarshallingError, nil)
			return nil
		}
		// ZooKeeper does not check the path; one raftmeta refuses names no
		// node, so the watch could never fire and is not kept.
		if err := node.AddWatch(r.path, c.w, mode); err != nil && !errors.Is(err, raftmeta.ErrBadArguments) {
			return c.replyErr(r.xid, err)
		}
		// The reply is an ErrorResponse record (err i32, 0): the Java
		// client reads it and drops a connection whose reply lacks it.
		c.reply(r.xid, codeOK, func(e *encoder) { e.i32(codeOK) })
	case opRemoveWatches, opCheckWatches:
		t := raftmeta.WatcherType(r.flags)
		if t < raftmeta.WatcherChildren || t > raftmeta.WatcherPersistentRecursive {
			// WatcherType.fromInt throws; FinalRequestProcessor answers
			// MarshallingError.
			c.reply(r.xid, codeMarshallingError, nil)
			return nil
		}
		f := node.RemoveWatches
		if r.op == opCheckWatches {
			f = node.CheckWatches
		}
		err := f(r.path, c.w, t)
		if errors.Is(err, raftmeta.ErrBadArguments) {
			// ZooKeeper does not check the path: no watch is on it.
			err = raftmeta.ErrNoWatcher
		}
		if err != nil {
			return c.replyErr(r.xid, err)
		}
		c.reply(r.xid, codeOK, nil)
	case opWhoAmI:
		c.reply(r.xid, codeOK, eager(func(e *encoder) {
			ids := c.authInfo()
			e.i32(int32(len(ids)))
			for _, id := range ids {
				user := id.ID
				if id.Scheme == "digest" {
					// DigestAuthenticationProvider.getUserName: the user, not the hash.
					user, _, _ = strings.Cut(user, ":")
				}
				e.str(id.Scheme)
				e.str(user)
			}
		}))
	case opCloseSession:
		ctx, cancel := c.writeCtx()
		err := node.CloseSession(ctx, c.sid)
		cancel()
		if err != nil && !errors.Is(err, raftmeta.ErrSessionExpired) {
			return err
		}
		c.reply(r.xid, codeOK, nil)
		return errCloseConn
	default:
		c.reply(r.xid, codeUnimplemented, nil)
	}
	return nil
}

// readErr is the error of a read: ZooKeeper does not check a read's path
// (only for NUL), so a path raftmeta refuses (relative, trailing slash, ...)
// names no node: NoNode.
func readErr(err error) error {
	if errors.Is(err, raftmeta.ErrBadArguments) {
		return raftmeta.ErrNoNode
	}
	return err
}

func (c *conn) watcherIf(watch bool) *raftmeta.Watcher {
	if watch {
		return c.w
	}
	return nil
}

// buildOp turns a write request into a raftmeta.Op, refusing what
// ZooKeeper refuses before the tree is consulted.
func (c *conn) buildOp(r *request) (raftmeta.Op, error) {
	if c.protected(r.path) {
		return raftmeta.Op{}, fmt.Errorf("%w: %s is read-only", errNoAuth, r.path)
	}
	switch r.op {
	case opDelete:
		return raftmeta.DeleteOp(r.path, r.version), nil
	case opSetData:
		return raftmeta.SetDataOp(r.path, r.data, r.version), nil
	case opCheck:
		return raftmeta.CheckOp(r.path, r.version), nil
	case opSetACL:
		acl, err := c.fixACL(r.acl)
		if err != nil {
			return raftmeta.Op{}, err
		}
		return raftmeta.SetACLOp(r.path, acl, r.version), nil
	}
	if r.flags < 0 || r.flags > int32(raftmeta.PersistentSequentialWithTTL) {
		return raftmeta.Op{}, fmt.Errorf("%w: create flags %d", raftmeta.ErrBadArguments, r.flags)
	}
	mode, err := createMode(r.op, raftmeta.CreateMode(r.flags))
	if err != nil {
		return raftmeta.Op{}, err
	}
	acl, err := c.fixACL(r.acl)
	if err != nil {
		return raftmeta.Op{}, err
	}
	op := raftmeta.CreateOp(r.path, r.data, mode)
	op.ACL = acl
	if mode.IsTTL() {
		if r.ttl <= 0 || r.ttl > int64(raftmeta.MaxTTL/time.Millisecond) {
			return raftmeta.Op{}, fmt.Errorf("%w: ttl %d", raftmeta.ErrBadArguments, r.ttl)
		}
		op.TTL = time.Duration(r.ttl) * time.Millisecond
	}
	return op, nil
}

// createMode is the mode of the node a create op makes with flags, as
// ZooKeeper 3.8 (with extendedTypesEnabled) decides it: the op picks the
// transaction, the flags only ephemeral and sequential. So createContainer
// makes a container whatever the flags (sequential ones are refused: a
// sequential container has no mode here), create and create2 with the
// container flag a persistent node, and a TTL mode needs createTTL (its
// ttl is -1 otherwise, which ZooKeeper's validateTTL refuses) and
// createTTL a TTL mode (its ttl is set).
func createMode(op int32, mode raftmeta.CreateMode) (raftmeta.CreateMode, error) {
	switch {
	case op == opCreateContainer && !mode.IsSequential() && !mode.IsTTL():
		return raftmeta.Container, nil
	case op == opCreateContainer, op == opCreateTTL && !mode.IsTTL(), op != opCreateTTL && mode.IsTTL():
		return 0, fmt.Errorf("%w: create mode %s with %s", raftmeta.ErrBadArguments, mode, opName(op))
	case mode.IsContainer():
		return raftmeta.Persistent, nil
	}
	return mode, nil
}

// fixACL is ZooKeeper's fixupACL: an empty list is invalid, "auth" entries
// become the connection's authenticated ids (none: invalid).
func (c *conn) fixACL(in []raftmeta.ACL) ([]raftmeta.ACL, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: empty ACL", raftmeta.ErrInvalidACL)
	}
	out := make([]raftmeta.ACL, 0, len(in))
	for _, a := range in {
		if a.Scheme != "auth" {
			out = append(out, a)
			continue
		}
		added := false
		for _, id := range c.authInfo() {
			if id.Scheme == "digest" {
				out = append(out, raftmeta.ACL{Perms: a.Perms, Scheme: id.Scheme, ID: id.ID})
				added = true
			}
		}
		if !added {
			return nil, fmt.Errorf("%w: auth ACL without authentication", raftmeta.ErrInvalidACL)
		}
	}
	return out, nil
}

// addAuth records an auth packet. digest "user:password" is recorded as
// ZooKeeper stores it, user:base64(sha1(user:password)); an id already
// recorded is not added again (ZooKeeper keeps a set). Nothing is enforced
// with it.
func (c *conn) addAuth(r *request) {
	id := string(r.auth)
	if r.scheme == "digest" {
		user, _, _ := strings.Cut(id, ":")
		sum := sha1.Sum(r.auth)
		id = user + ":" + base64.StdEncoding.EncodeToString(sum[:])
	}
	a := raftmeta.ACL{Scheme: r.scheme, ID: id}
	if !slices.Contains(c.authIDs, a) {
		c.authIDs = append(c.authIDs, a)
	}
}

// authInfo returns the connection's ids in the order ZooKeeper's
// ServerCnxn.getAuthInfo lists them (whoAmI, an "auth" ACL): its authInfo
// is a ConcurrentHashMap-backed set holding ("ip", client address), added
// when the connection is made, and each id an auth packet added. It
// iterates bin by bin (Id.hashCode spread, a table of 16 doubled when the
// size reaches 3/4 of it), a bin in insertion order. Not reproduced: the
// order inside a bin split by a resize (12 ids or more).
func (c *conn) authInfo() []raftmeta.ACL {
	host, _, _ := net.SplitHostPort(c.nc.RemoteAddr().String())
	ids := append([]raftmeta.ACL{{Scheme: "ip", ID: host}}, c.authIDs...)
	n := uint32(16)
	for uint32(len(ids)) >= n-n/4 {
		n *= 2
	}
	slices.SortStableFunc(ids, func(a, b raftmeta.ACL) int {
		return cmp.Compare(idHash(a)&(n-1), idHash(b)&(n-1))
	})
	return ids
}

// idHash is the jute-generated Id.hashCode (scheme, id), spread as
// ConcurrentHashMap.spread does.
func idHash(a raftmeta.ACL) uint32 {
	h := 37*(37*17+javaStringHash(a.Scheme)) + javaStringHash(a.ID)
	return h ^ (h >> 16)
}

// encodeResult writes the response record of a single write.
func encodeResult(e *encoder, op int32, res raftmeta.OpResult) {
	switch op {
	case opCreate:
		e.str(res.Path)
	case opCreate2, opCreateContainer, opCreateTTL:
		e.str(res.Path)
		e.stat(res.Stat)
	case opSetData, opSetACL:
		e.stat(res.Stat)
	}
}

// multiCreateOp is the op ZooKeeper runs for a create inside a multi: it
// rebuilds each one from its flags (MultiOperationRecord → Op.create), so
// the container flag makes a createContainer, any other non-TTL flags a
// plain create (createContainer then makes a persistent node, create2
// answers without a stat, createTTL ignores its ttl). A TTL mode is left
// to buildOp (createTTL only).
func multiCreateOp(op, flags int32) int32 {
	switch mode := raftmeta.CreateMode(flags); {
	case op != opCreate && op != opCreate2 && op != opCreateContainer && op != opCreateTTL, mode.IsTTL():
		return op
	case mode.IsContainer():
		return opCreateContainer
	}
	return opCreate
}

// multiResultType is the type a multi result carries for a sub-op.
func multiResultType(op int32) int32 {
	switch op {
	case opCreateContainer, opCreateTTL, opCreate2:
		return opCreate2
	}
	return op
}

func (c *conn) multi(r *request) error {
	if len(r.ops) == 0 {
		c.reply(r.xid, codeOK, func(e *encoder) { endMulti(e) })
		return nil
	}
	for i := range r.ops {
		r.ops[i].op = multiCreateOp(r.ops[i].op, r.ops[i].flags)
	}
	ops := make([]raftmeta.Op, 0, len(r.ops))
	bad, badErr := -1, error(nil)
	for i := range r.ops {
		op, err := c.buildOp(&r.ops[i])
		if err != nil {
			bad, badErr = i, err
			break
		}
		ops = append(ops, op)
	}
	ctx, cancel := c.writeCtx()
	if bad < 0 {
		p := c.s.node.MultiAsync(ctx, c.sid, ops...)
		subs := r.ops
		c.pipeline(r.xid, func() (int32, func(e *encoder), error) {
			defer cancel()
			results, err := p.Wait()
			var me *raftmeta.MultiError
			if err != nil && !errors.As(err, &me) {
				return 0, nil, err
			}
			return codeOK, multiBody(subs, results, me), nil
		})
		return nil
	}
	defer cancel()
	// An op refused before the tree: ZooKeeper still reports the first
	// failure in op order, so run the ops before it followed by a check that
	// cannot pass; nothing is applied either way. It is logged after this
	// connection's earlier writes (proposed in order) and runs synchronously.
	var results []raftmeta.OpResult
	var err error
	if bad > 0 {
		results, err = c.s.node.Multi(ctx, c.sid, append(ops[:bad:bad], raftmeta.CheckOp("/", -2))...)
	} else {
		err = &raftmeta.MultiError{Index: 0}
	}
	var me *raftmeta.MultiError
	if err == nil || !errors.As(err, &me) {
		if err == nil {
			err = errors.New("zkwire: impossible check passed")
		}
		return err
	}
	index := min(me.Index, bad)
	full := make([]raftmeta.OpResult, len(r.ops))
	for i := range full {
		switch {
		case i < index:
		case i == index && i == bad:
			full[i].Err = badErr
		case i == index:
			full[i].Err = results[i].Err
		default:
			full[i].Err = raftmeta.ErrRuntimeInconsistency
		}
	}
	c.reply(r.xid, codeOK, multiBody(r.ops, full, &raftmeta.MultiError{Index: index, Results: full}))
	return nil
}

// multiBody encodes a multi's results: on failure (me set) every result
// is an error result (0 before the failing op, its code, -2 after).
func multiBody(subs []request, results []raftmeta.OpResult, me *raftmeta.MultiError) func(e *encoder) {
	return func(e *encoder) {
		for i, sub := range subs {
			if me != nil {
				var code int32
				switch {
				case i == me.Index:
					code, _ = errCode(results[i].Err)
				case i > me.Index:
					code = codeRuntimeInconsistency
				}
				e.i32(opError)
				e.boolean(false)
				e.i32(code)
				e.i32(code)
				continue
			}
			t := multiResultType(sub.op)
			e.i32(t)
			e.boolean(false)
			e.i32(0)
			encodeResult(e, t, results[i])
		}
		endMulti(e)
	}
}

func endMulti(e *encoder) {
	e.i32(-1)
	e.boolean(true)
	e.i32(-1)
}

// multiRead answers each read on its own (ZooKeeper's multiRead is not
// atomic and never fails as a whole); watches are not set.
func (c *conn) multiRead(e *encoder, r *request) {
	for _, sub := range r.ops {
		var err error
		switch sub.op {
		case opGetData:
			var data []byte
			var st raftmeta.Stat
			if data, st, err = c.s.node.Get(sub.path); err == nil {
				e.i32(opGetData)
				e.boolean(false)
				e.i32(0)
				e.buffer(data)
				e.stat(st)
				continue
			}
		case opGetChildren:
			var kids []string
			if kids, _, err = c.s.node.ZKChildren(sub.path, nil); err == nil {
				e.i32(opGetChildren)
				e.boolean(false)
				e.i32(0)
				e.strs(kids)
				continue
			}
		}
		code, _ := errCode(readErr(err))
		e.i32(opError)
		e.boolean(false)
		e.i32(code)
		e.i32(code)
	}
	endMulti(e)
}

// setWatches re-registers a reconnecting client's watches and queues the
// reply. As ZooKeeper does, a watch whose condition already changed past
// relZxid fires at once (before the reply) instead of being registered.
func (c *conn) setWatches(r *request) {
	node := c.s.node
	var evs []raftmeta.Event
	fire := func(t raftmeta.EventType, p string) {
		evs = append(evs, raftmeta.Event{Type: t, Path: p, Zxid: node.LastZxid()})
	}
	for _, p := range r.dataW {
		_, st, err := node.GetW(p, c.w)
		switch {
		case err != nil:
			fire(raftmeta.NodeDeleted, p)
		case st.Mzxid > r.relZxid:
			_ = node.RemoveWatches(p, c.w, raftmeta.WatcherData)
			fire(raftmeta.NodeDataChanged, p)
		}
	}
	for _, p := range r.existW {
		if _, err := node.ExistsW(p, c.w); err == nil {
			_ = node.RemoveWatches(p, c.w, raftmeta.WatcherData)
			fire(raftmeta.NodeCreated, p)
		}
	}
	for _, p := range r.childW {
		_, st, err := node.ChildrenW(p, c.w)
		switch {
		case err != nil:
			fire(raftmeta.NodeDeleted, p)
		case st.Pzxid > r.relZxid:
			_ = node.RemoveWatches(p, c.w, raftmeta.WatcherChildren)
			fire(raftmeta.NodeChildrenChanged, p)
		}
	}
	for _, p := range r.persW {
		_ = node.AddWatch(p, c.w, raftmeta.WatchPersistent)
	}
	for _, p := range r.recW {
		_ = node.AddWatch(p, c.w, raftmeta.WatchPersistentRecursive)
	}
	var frames [][]byte
	for _, ev := range evs {
		e := &encoder{b: make([]byte, 4, 64)}
		e.i32(xidNotification)
		e.i64(ev.Zxid)
		e.i32(codeOK)
		e.i32(int32(ev.Type))
		e.i32(stateSyncConnected)
		e.str(ev.Path)
		frames = append(frames, e.b)
	}
	c.jobs <- job{xid: r.xid, code: codeOK, before: frames, start: time.Now()}
}

// ephemerals returns the session's ephemeral nodes in the order ZooKeeper's
// getEphemerals lists them: the iteration order of a clone of the session's
// HashSet<String> (DataTree.getEphemerals). HashMap iterates bucket by
// bucket, each bucket in insertion order. The clone's table has
// tableSizeFor((int)(size/0.75f + 1)) buckets and is filled in the
// original's iteration order: by bucket under the original's capacity (16,
// doubled while the size passes 3/4 of it), then by insertion, which is
// creation order (czxid). Not reproduced: a capacity grown by a larger past
// size, and treeified buckets.
func (c *conn) ephemerals() []string {
	paths := c.s.node.Ephemerals(c.sid)
	czxid := make(map[string]int64, len(paths))
	for _, p := range paths {
		st, _ := c.s.node.Exists(p)
		czxid[p] = st.Czxid
	}
	orig := uint32(16)
	for uint32(len(paths)) > orig*3/4 {
		orig *= 2
	}
	clone := uint32(1)
	for t := uint32(float32(len(paths))/0.75 + 1); clone < t; {
		clone *= 2
	}
	slices.SortStableFunc(paths, func(a, b string) int {
		ha, hb := javaHash(a), javaHash(b)
		return cmp.Or(cmp.Compare(ha&(clone-1), hb&(clone-1)), cmp.Compare(ha&(orig-1), hb&(orig-1)), cmp.Compare(czxid[a], czxid[b]))
	})
	return paths
}

// javaHash is Java's String.hashCode spread as HashMap.hash does.
func javaHash(s string) uint32 {
	h := javaStringHash(s)
	return h ^ (h >> 16)
}

// javaStringHash is Java's String.hashCode (over UTF-16 code units).
func javaStringHash(s string) uint32 {
	var h uint32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + uint32(u)
	}
	return h
}
