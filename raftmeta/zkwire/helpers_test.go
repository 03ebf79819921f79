package zkwire

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"strom/internal/metatest"
	"strom/raftmeta"
)

// testConfig shortens the session limits so expiry tests run quickly.
func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.MinSessionTimeout = 200 * time.Millisecond
	cfg.MaxSessionTimeout = 10 * time.Second
	cfg.Logger = metatest.Logger(t)
	return cfg
}

// startServer serves node on a loopback port until the test ends.
func startServer(t testing.TB, node *raftmeta.Node, cfg Config) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(node, ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newShim starts a single-node group with a shim on it.
func newShim(t testing.TB) (*raftmeta.Node, *Server) {
	n := metatest.NewNode(t)
	return n, startServer(t, n, testConfig(t))
}

type zkLogger struct{ t testing.TB }

func (l zkLogger) Printf(format string, args ...any) { l.t.Logf("zk: "+format, args...) }

// connect opens a go-zookeeper session and waits until it has one.
// A non-nil dialer is used for every connection.
func connect(t testing.TB, servers []string, timeout time.Duration, dialer *cutDialer) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	var c *zk.Conn
	var ev <-chan zk.Event
	var err error
	if dialer != nil {
		c, ev, err = zk.Connect(servers, timeout, zk.WithLogger(zkLogger{t}), zk.WithDialer(dialer.dial))
	} else {
		c, ev, err = zk.Connect(servers, timeout, zk.WithLogger(zkLogger{t}))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	waitFor(t, 10*time.Second, "session", func() bool { return c.State() == zk.StateHasSession })
	return c, ev
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// nextEvent returns the next event on ch of a type other than session
// events, or fails after d.
func nextEvent(t testing.TB, ch <-chan zk.Event, d time.Duration) zk.Event {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("event channel closed")
			}
			if ev.Type == zk.EventSession {
				continue
			}
			return ev
		case <-timer.C:
			t.Fatalf("no event within %s", d)
		}
	}
}

// cutDialer dials normally and remembers its connections, so a test can
// cut them; with refuse set it fails every later dial.
type cutDialer struct {
	mu     sync.Mutex
	conns  []net.Conn
	refuse bool
	dials  int
}

func (d *cutDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dials++
	if d.refuse {
		return nil, fmt.Errorf("dial refused by test")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *cutDialer) cut(refuse bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refuse = refuse
	for _, c := range d.conns {
		_ = c.Close()
	}
	d.conns = nil
}

func (d *cutDialer) dialCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials
}

// rawClient speaks the protocol by hand, for what go-zookeeper lacks
// (addWatch, removeWatches, multiRead, ...) and for bad packets.
type rawClient struct {
	t   testing.TB
	c   net.Conn
	sid int64
	xid int32
}

func dialRaw(t testing.TB, addr string, timeoutMs int32) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rc := &rawClient{t: t, c: c}
	rc.writeFrame(connectPacket(timeoutMs))
	d := &decoder{b: rc.readFrame()}
	d.i32("proto")
	d.i32("timeout")
	rc.sid = d.i64("sid")
	if d.err != nil || rc.sid == 0 {
		t.Fatalf("handshake failed: %v sid %d", d.err, rc.sid)
	}
	return rc
}

// dialSession connects to addr with an existing session's id and password
// and fails the test unless the server accepts it.
func dialSession(t testing.TB, addr string, sid int64, password []byte, timeoutMs int32) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rc := &rawClient{t: t, c: c, sid: sid}
	e := &encoder{b: make([]byte, 4)}
	e.i32(0)
	e.i64(0)
	e.i32(timeoutMs)
	e.i64(sid)
	e.buffer(password)
	rc.writeFrame(e.b)
	d := &decoder{b: rc.readFrame()}
	d.i32("proto")
	if to, got := d.i32("timeout"), d.i64("sid"); to == 0 || got != sid {
		t.Fatalf("reconnect with session %x refused: timeout %d sid %x", sid, to, got)
	}
	return rc
}

// connectPacket is a connect request for a new session.
func connectPacket(timeoutMs int32) []byte {
	e := &encoder{b: make([]byte, 4)}
	e.i32(0)
	e.i64(0)
	e.i32(timeoutMs)
	e.i64(0)
	e.buffer(make([]byte, 16))
	return e.b
}

// tryWriteFrame sends one frame and returns the write's error.
func (rc *rawClient) tryWriteFrame(b []byte) error {
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_ = rc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := rc.c.Write(b)
	return err
}

func (rc *rawClient) writeFrame(b []byte) {
	rc.t.Helper()
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_ = rc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawClient) readFrame() []byte {
	rc.t.Helper()
	b, err := rc.tryReadFrame()
	if err != nil {
		rc.t.Fatal(err)
	}
	return b
}

func (rc *rawClient) tryReadFrame() ([]byte, error) {
	_ = rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var h [4]byte
	if _, err := io.ReadFull(rc.c, h[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(h[:]))
	_, err := io.ReadFull(rc.c, b)
	return b, err
}

// buildRequest builds a request packet: body fills in the record.
func buildRequest(xid, op int32, body func(e *encoder)) []byte {
	e := &encoder{b: make([]byte, 4)}
	e.i32(xid)
	e.i32(op)
	if body != nil {
		body(e)
	}
	return e.b
}

// call sends a request and returns the reply's error code and body,
// collecting the notifications that arrive before it.
func (rc *rawClient) call(op int32, body func(e *encoder)) (code int32, d *decoder, events []raftmeta.Event) {
	rc.t.Helper()
	code, _, b, events := rc.callXid(0, op, body)
	return code, &decoder{b: b}, events
}

// callXid is call with the reply's zxid and its whole body; xid 0 sends
// the next xid, another value is sent as is (auth -4, setWatches -8).
func (rc *rawClient) callXid(xid, op int32, body func(e *encoder)) (code int32, zxid int64, b []byte, events []raftmeta.Event) {
	rc.t.Helper()
	if xid == 0 {
		rc.xid++
		xid = rc.xid
	}
	rc.writeFrame(buildRequest(xid, op, body))
	for {
		d := &decoder{b: rc.readFrame()}
		rxid := d.i32("xid")
		zxid := d.i64("zxid")
		code := d.i32("err")
		if rxid == xidNotification {
			typ := d.i32("type")
			d.i32("state")
			events = append(events, raftmeta.Event{Type: raftmeta.EventType(typ), Path: d.str("path"), Zxid: zxid})
			continue
		}
		if rxid != xid {
			rc.t.Fatalf("reply xid %d, want %d", rxid, xid)
		}
		return code, zxid, d.b[d.off:], events
	}
}

// readEvent reads one notification.
func (rc *rawClient) readEvent() raftmeta.Event {
	rc.t.Helper()
	d := &decoder{b: rc.readFrame()}
	xid := d.i32("xid")
	zxid := d.i64("zxid")
	d.i32("err")
	if xid != xidNotification {
		rc.t.Fatalf("got reply xid %d, want a notification", xid)
	}
	typ := d.i32("type")
	d.i32("state")
	return raftmeta.Event{Type: raftmeta.EventType(typ), Path: d.str("path"), Zxid: zxid}
}
