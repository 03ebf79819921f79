package raftmeta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Forwarding: a follower sends writes, session commands, heartbeats and
// sync requests to the leader over HTTP (POST ForwardPath on the leader's
// ForwardAddr; the leader serves it with ForwardHandler, normally on the
// node's API mux). Request and reply bodies use this package's codec.
//
//	request := kind u8 | body
//	  1 propose: a command entry (encodeCommand; nonce and time are the
//	    leader's own): op, multi, createSession, closeSession
//	  2 touch:   count u32 | session i64 *
//	  3 sync:    —  (the leader commits a barrier)
//	  4 read:    —  (the leader answers its read zxid once a quorum of
//	    voters confirmed its leadership: ReadIndex, readindex.go; a node
//	    older than that answered its last applied zxid unconfirmed)
//	  5 claim:   session i64  (the sender now holds the session's connection)
//	reply   := status u8 | body
//	  0 ok: propose → applyResult | zxid i64; touch, claim → —; sync, read → zxid i64
//	    (zxid: the leader's last applied, or for read its read zxid, which the
//	    follower waits for)
//	  1 not leader, nothing proposed (the follower retries)
//	  2 failed: message str (the outcome of a write is unknown)
//	  3 refused by Config.CheckWrite, nothing proposed: message str
//	  4 session moved (ErrSessionMoved), nothing proposed: message str
//	  5 above the cluster's feature level (ErrFeatureNotActive), nothing
//	    proposed: message str. Only a command of a level above 0 gets it,
//	    which only a node that knows the status sends; an older follower
//	    would read any status it does not know as 2.
//
// applyResult := results count u32 | (path str | stat | err)* |
//
//	session id i64 | timeoutMs i64 | password bytes | err
//
// err := code u8 (0 none, errorCodes index+1, 255 other) | message str |
//
//	multi index i32 (-1: not a MultiError)
//
// stat := czxid mzxid pzxid ctime mtime i64 | version cversion aversion
//
//	i32 | ephemeralOwner i64 | dataLength numChildren i32
const ForwardPath = "/raftmeta.v1/forward"

const (
	fwdPropose uint8 = 1
	fwdTouch   uint8 = 2
	fwdSync    uint8 = 3
	fwdRead    uint8 = 4
	fwdClaim   uint8 = 5

	fwdOK        uint8 = 0
	fwdNotLeader uint8 = 1
	fwdFailed    uint8 = 2
	fwdRefused   uint8 = 3
	fwdMoved     uint8 = 4
	fwdNotActive uint8 = 5
)

// fwdSentinels: the statuses of proposals refused before anything was
// proposed, and the sentinel each stands for.
var fwdSentinels = map[uint8]error{fwdRefused: ErrRefused, fwdMoved: ErrSessionMoved, fwdNotActive: ErrFeatureNotActive}

// MaxForwardBytes bounds a request a follower forwards to the leader, and so
// the largest write a follower can take (a large multi). A write's encoding
// is at most about 1.5 times its ZooKeeper packet, so a packet limit of half
// of it (server's zookeeper.jute.maxbuffer) always fits.
const MaxForwardBytes = 64 << 20

// errorCodes lists the sentinels a forwarded result can carry.
var errorCodes = []error{
	ErrNoNode, ErrNodeExists, ErrBadVersion, ErrNotEmpty, ErrNoChildrenForEphemerals,
	ErrBadArguments, ErrInvalidACL, ErrSessionExpired, ErrRuntimeInconsistency, ErrNoWatcher,
}

func encodeErr(e *encoder, err error) {
	if err == nil {
		e.u8(0)
		e.str("")
		e.i32(-1)
		return
	}
	code := uint8(255)
	for i, s := range errorCodes {
		if errors.Is(err, s) {
			code = uint8(i + 1)
			break
		}
	}
	e.u8(code)
	e.str(err.Error())
	var me *MultiError
	if errors.As(err, &me) {
		e.i32(int32(me.Index))
	} else {
		e.i32(-1)
	}
}

// forwardedError keeps the leader's message and the sentinel it wraps.
type forwardedError struct {
	msg      string
	sentinel error
}

func (e *forwardedError) Error() string { return e.msg }
func (e *forwardedError) Unwrap() error { return e.sentinel }

func decodeErr(d *decoder, results []OpResult) error {
	code := d.u8("error code")
	msg := d.str("error message")
	idx := d.i32("multi index")
	if d.err != nil || code == 0 {
		return nil
	}
	var err error
	switch {
	case int(code) <= len(errorCodes):
		err = &forwardedError{msg: msg, sentinel: errorCodes[code-1]}
	default:
		err = errors.New(msg)
	}
	if idx >= 0 {
		return &MultiError{Index: int(idx), Results: results}
	}
	return err
}

func encodeStat(e *encoder, s Stat) {
	e.i64(s.Czxid)
	e.i64(s.Mzxid)
	e.i64(s.Pzxid)
	e.i64(s.Ctime)
	e.i64(s.Mtime)
	e.i32(s.Version)
	e.i32(s.Cversion)
	e.i32(s.Aversion)
	e.i64(s.EphemeralOwner)
	e.i32(s.DataLength)
	e.i32(s.NumChildren)
}

func decodeStat(d *decoder) Stat {
	return Stat{
		Czxid: d.i64("czxid"), Mzxid: d.i64("mzxid"), Pzxid: d.i64("pzxid"),
		Ctime: d.i64("ctime"), Mtime: d.i64("mtime"),
		Version: d.i32("version"), Cversion: d.i32("cversion"), Aversion: d.i32("aversion"),
		EphemeralOwner: d.i64("ephemeralOwner"),
		DataLength:     d.i32("dataLength"), NumChildren: d.i32("numChildren"),
	}
}

func encodeApplyResult(e *encoder, r applyResult) {
	e.u32(uint32(len(r.results)))
	for _, res := range r.results {
		e.str(res.Path)
		encodeStat(e, res.Stat)
		encodeErr(e, res.Err)
	}
	e.i64(r.session.ID)
	e.i64(r.session.Timeout.Milliseconds())
	e.bytes(r.session.Password)
	encodeErr(e, r.err)
}

func decodeApplyResult(d *decoder) applyResult {
	var r applyResult
	n := d.u32("result count")
	if d.err == nil && int(n) > d.remaining()/(4+60+9) {
		d.fail("result count %d", n)
		return r
	}
	for i := uint32(0); i < n && d.err == nil; i++ {
		var res OpResult
		res.Path = d.str("result path")
		res.Stat = decodeStat(d)
		res.Err = decodeErr(d, nil)
		r.results = append(r.results, res)
	}
	r.session.ID = d.i64("session id")
	r.session.Timeout = time.Duration(d.i64("session timeout")) * time.Millisecond
	r.session.Password = d.bytes("session password")
	r.err = decodeErr(d, r.results)
	return r
}

// ForwardHandler serves followers' forwarded requests (mount it at
// ForwardPath). It answers "not leader" unless this node leads. A call that
// is not signed with Config.ForwardSecret is refused before its body is
// decoded: 401 without a signature, 403 with a wrong or stale one.
func (n *Node) ForwardHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		from, body, status, err := ReadSigned(r, n.cfg.ForwardSecret, MaxForwardBytes, time.Now())
		if err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		out, err := n.serveForward(r.Context(), from, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(out)
	})
}

// serveForward answers one forwarded request, sent by node from, on the
// leader. An error means the request did not decode.
func (n *Node) serveForward(ctx context.Context, from string, body []byte) ([]byte, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("%w: empty forward request", ErrCorrupt)
	}
	e := &encoder{}
	switch body[0] {
	case fwdPropose:
		c, err := decodeCommand(body[1:])
		if err != nil {
			return nil, err
		}
		switch c.Type {
		case CmdOp, CmdMulti, CmdCreateSession, CmdCloseSession:
		default:
			return nil, fmt.Errorf("%w: command %s cannot be forwarded", ErrCorrupt, c.Type)
		}
		c.Time = time.Now().UnixMilli()
		c.from = from
		res, err := n.proposeLocal(ctx, c)
		switch {
		case errors.Is(err, errNotProposed):
			e.u8(fwdNotLeader)
			return e.b, nil
		case errors.Is(err, ErrRefused):
			e.u8(fwdRefused)
			e.str(err.Error())
			return e.b, nil
		case errors.Is(err, ErrSessionMoved):
			e.u8(fwdMoved)
			e.str(err.Error())
			return e.b, nil
		case errors.Is(err, ErrFeatureNotActive):
			e.u8(fwdNotActive)
			e.str(err.Error())
			return e.b, nil
		case err != nil:
			e.u8(fwdFailed)
			e.str(err.Error())
			return e.b, nil
		}
		switch c.Type {
		case CmdCreateSession:
			if res.err == nil {
				n.tracker.touch(res.session.ID, time.Now())
				n.tracker.claim(res.session.ID, from)
			}
		case CmdCloseSession:
			n.tracker.forget(c.Session)
		}
		e.u8(fwdOK)
		encodeApplyResult(e, res)
		e.i64(n.fsm.lastZxid.Load())
	case fwdTouch:
		d := &decoder{b: body, off: 1}
		cnt := d.u32("touch count")
		if d.err == nil && int(cnt) > d.remaining()/8 {
			d.fail("touch count %d", cnt)
		}
		ids := make([]int64, 0, cnt)
		for i := uint32(0); i < cnt && d.err == nil; i++ {
			ids = append(ids, d.i64("session"))
		}
		d.end("touch request")
		if d.err != nil {
			return nil, d.err
		}
		if !n.IsLeader() {
			e.u8(fwdNotLeader)
			return e.b, nil
		}
		now := time.Now()
		for _, id := range ids {
			if n.fsm.hasSession(id) {
				n.tracker.touch(id, now)
			}
		}
		e.u8(fwdOK)
	case fwdSync:
		if len(body) != 1 {
			return nil, fmt.Errorf("%w: sync request with a body", ErrCorrupt)
		}
		if err := n.barrierLocal(ctx); err != nil {
			if errors.Is(err, errNotProposed) {
				e.u8(fwdNotLeader)
			} else {
				e.u8(fwdFailed)
				e.str(err.Error())
			}
			return e.b, nil
		}
		e.u8(fwdOK)
		e.i64(n.fsm.lastZxid.Load())
	case fwdClaim:
		d := &decoder{b: body, off: 1}
		id := d.i64("session")
		d.end("claim request")
		if d.err != nil {
			return nil, d.err
		}
		if !n.IsLeader() {
			e.u8(fwdNotLeader)
			return e.b, nil
		}
		n.tracker.claim(id, from)
		e.u8(fwdOK)
	case fwdRead:
		if len(body) != 1 {
			return nil, fmt.Errorf("%w: read request with a body", ErrCorrupt)
		}
		zxid, err := n.leaderReads.do(ctx)
		switch {
		case errors.Is(err, errNotProposed), errors.Is(err, ErrNotLeader):
			e.u8(fwdNotLeader)
			return e.b, nil
		case err != nil:
			e.u8(fwdFailed)
			e.str(err.Error())
			return e.b, nil
		}
		e.u8(fwdOK)
		e.i64(zxid)
	default:
		return nil, fmt.Errorf("%w: forward kind %d", ErrCorrupt, body[0])
	}
	return e.b, nil
}

// forwarding reports whether a follower forwards to the leader.
func (n *Node) forwarding() bool { return n.cfg.ForwardAddr != nil }

// forwardCall posts req to the leader and returns the reply body after its
// status byte. It retries, until ctx ends, while no leader is known or the
// target says it does not lead (nothing was proposed then).
func (n *Node) forwardCall(ctx context.Context, req []byte) (*decoder, error) {
	backoff := 5 * time.Millisecond
	for {
		_, id := n.raft.LeaderWithID()
		if string(id) == n.cfg.NodeID && n.IsLeader() {
			return nil, errLocalLeader
		}
		var addr string
		if id != "" {
			addr = n.cfg.ForwardAddr(string(id))
		}
		if addr != "" {
			d, retry, err := n.post(ctx, addr, req)
			if !retry {
				return d, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, n.notLeaderErr(ctx.Err())
		case <-n.stop:
			return nil, ErrStopped
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// errLocalLeader: this node became leader while forwarding; the caller
// proposes locally.
var errLocalLeader = errors.New("raftmeta: this node leads")

// post makes one forward call. retry is true when nothing happened on the
// leader and the call may be repeated.
func (n *Node) post(ctx context.Context, addr string, req []byte) (d *decoder, retry bool, err error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+ForwardPath, bytes.NewReader(req))
	if err != nil {
		return nil, false, err
	}
	hr.Header.Set("Content-Type", "application/octet-stream")
	SignForward(hr, n.cfg.ForwardSecret, n.cfg.NodeID, req, time.Now())
	resp, err := n.httpc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, n.notLeaderErr(ctx.Err())
		}
		// The leader may be gone; whether a write reached it is unknown
		// only if the request was sent, which a dial error rules out. Be
		// conservative: retry only proposals that are idempotent (touch,
		// sync); fail the rest with an unknown outcome.
		if req[0] != fwdPropose {
			return nil, true, nil
		}
		return nil, false, n.notLeaderErr(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxForwardBytes))
	if err != nil {
		return nil, false, n.notLeaderErr(err)
	}
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		return nil, false, fmt.Errorf("raftmeta: forward to %s: %s: %s", addr, resp.Status, bytes.TrimSpace(body))
	}
	switch body[0] {
	case fwdOK:
		return &decoder{b: body, off: 1}, false, nil
	case fwdNotLeader:
		return nil, true, nil
	case fwdRefused, fwdMoved, fwdNotActive:
		d := &decoder{b: body, off: 1}
		return nil, false, &forwardedError{msg: d.str("refusal"), sentinel: fwdSentinels[body[0]]}
	default:
		d := &decoder{b: body, off: 1}
		msg := d.str("forward error")
		return nil, false, n.notLeaderErr(errors.New(msg))
	}
}

// forwardPropose sends c to the leader and returns its apply result.
func (n *Node) forwardPropose(ctx context.Context, c *command) (applyResult, error) {
	req := append([]byte{fwdPropose}, encodeCommand(c)...)
	d, err := n.forwardCall(ctx, req)
	if err != nil {
		return applyResult{}, err
	}
	res := decodeApplyResult(d)
	zxid := d.i64("leader zxid")
	d.end("forward reply")
	if d.err != nil {
		return applyResult{}, fmt.Errorf("raftmeta: forward reply: %w", d.err)
	}
	// The write is committed; make this replica show it before returning,
	// so that the caller reads its own write here.
	if err := n.waitZxid(ctx, zxid); err != nil {
		return applyResult{}, err
	}
	return res, nil
}

// forwardSync asks the leader for a barrier and waits until this replica
// has applied up to it.
func (n *Node) forwardSync(ctx context.Context) error {
	return n.forwardWait(ctx, fwdSync)
}

// forwardWait sends a sync or read request (no body; the reply is the
// leader's zxid) and waits until this replica has applied that zxid.
func (n *Node) forwardWait(ctx context.Context, kind uint8) error {
	d, err := n.forwardCall(ctx, []byte{kind})
	if err != nil {
		return err
	}
	zxid := d.i64("zxid")
	d.end("sync or read reply")
	if d.err != nil {
		return fmt.Errorf("raftmeta: forward reply: %w", d.err)
	}
	return n.waitZxid(ctx, zxid)
}

// waitZxid waits until this replica has applied zxid.
func (n *Node) waitZxid(ctx context.Context, zxid int64) error {
	if n.fsm.lastZxid.Load() >= zxid {
		return nil
	}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for n.fsm.lastZxid.Load() < zxid {
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

// touchSpacing is the least time between two heartbeat batches: far below
// any session timeout, and it bounds the forwarding traffic of a busy
// follower to one small call per spacing.
const touchSpacing = 10 * time.Millisecond

// touchLoop sends the heartbeats of sessions touched on this follower to the
// leader, coalesced: at most one call in flight, and at most one call per
// touchSpacing.
func (n *Node) touchLoop() {
	defer n.wg.Done()
	pace := time.NewTimer(0)
	defer pace.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.touchNotify:
		}
		select {
		case <-n.stop:
			return
		case <-pace.C:
		}
		pace.Reset(touchSpacing)
		n.touchMu.Lock()
		ids := make([]int64, 0, len(n.touchPending))
		for id := range n.touchPending {
			ids = append(ids, id)
		}
		clear(n.touchPending)
		n.touchMu.Unlock()
		if len(ids) == 0 {
			continue
		}
		e := &encoder{}
		e.u8(fwdTouch)
		e.u32(uint32(len(ids)))
		for _, id := range ids {
			e.i64(id)
		}
		ctx, cancel := context.WithTimeout(n.baseCtx, 2*time.Second)
		_, err := n.forwardCall(ctx, e.b)
		cancel()
		if err != nil && !errors.Is(err, errLocalLeader) {
			n.lg.Debug("forward heartbeats failed", "sessions", len(ids), "err", err)
		}
	}
}

// queueTouch records a heartbeat for the leader.
func (n *Node) queueTouch(id int64) {
	n.touchMu.Lock()
	n.touchPending[id] = struct{}{}
	n.touchMu.Unlock()
	select {
	case n.touchNotify <- struct{}{}:
	default:
	}
}
