package zkwire

import (
	"fmt"
	"net"
	"testing"
	"time"

	"strom/internal/metatest"
	"strom/raftmeta"
)

// handshakeFrom connects to addr from a loopback address and sends a
// connect request; it reports whether a session came back (false: the
// server closed the connection without answering). The connection stays
// open until the test ends.
func handshakeFrom(t *testing.T, addr, from string) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rc := &rawClient{t: t, c: c}
	rc.writeFrame(connectPacket(10000))
	_, err = rc.tryReadFrame()
	return err == nil
}

// Connections over maxClientCnxns from one IP, or over maxCnxns in all, are
// closed as they are accepted, before the connect request is answered
// (ZooKeeper's NIOServerCnxnFactory.doAccept); other clients are served.
func TestConnectionLimits(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxClientConnections = 2
	cfg.MaxConnections = 3
	s := startServer(t, metatest.NewNode(t), cfg)
	addr := s.Addr().String()
	for i := range 2 {
		if !handshakeFrom(t, addr, "127.0.0.1") {
			t.Fatalf("connection %d refused within maxClientCnxns", i+1)
		}
	}
	if handshakeFrom(t, addr, "127.0.0.1") {
		t.Fatal("a third connection from one IP got a session; maxClientCnxns is 2")
	}
	if !handshakeFrom(t, addr, "127.0.0.2") {
		t.Fatal("a connection from another IP was refused")
	}
	if handshakeFrom(t, addr, "127.0.0.3") {
		t.Fatal("a fourth connection got a session; maxCnxns is 3")
	}
}

// createPacket is a create request of exactly size bytes (length prefix
// excluded) for path, its data filling the rest.
func createPacket(xid int32, path string, size int) []byte {
	// xid, type, path, data length, ACL (count, perms, "world", "anyone"), flags
	fixed := 4 + 4 + (4 + len(path)) + 4 + (4 + 4 + 4 + len("world") + 4 + len("anyone")) + 4
	return buildRequest(xid, opCreate, func(e *encoder) {
		e.str(path)
		e.buffer(make([]byte, size-fixed))
		e.acls([]raftmeta.ACL{{Perms: 31, Scheme: "world", ID: "anyone"}})
		e.i32(0)
	})
}

// A packet of jute.maxbuffer bytes (0xfffff) is served; one byte more
// closes the connection, with no reply, as ZooKeeper 3.8 does
// (NIOServerCnxn.readLength: "Len error"), and the server goes on serving.
// Compared with a real ZooKeeper (at its default jute.maxbuffer) when
// STROM_ZK_ADDR is set.
func TestPacketOverJuteMaxbuffer(t *testing.T) {
	_, shim := newShim(t)
	t.Run("shim", func(t *testing.T) { checkJuteMaxbuffer(t, shim.Addr().String()) })
	t.Run("zookeeper", func(t *testing.T) { checkJuteMaxbuffer(t, realZooKeeper(t)) })
}

func checkJuteMaxbuffer(t *testing.T, addr string) {
	const maxbuffer = 0xfffff
	acl := []raftmeta.ACL{{Perms: 31, Scheme: "world", ID: "anyone"}}
	root := fmt.Sprintf("/strom-limit-%d", time.Now().UnixNano())
	rc := dialRaw(t, addr, 10000)
	if code, _, _ := rc.call(opCreate, func(e *encoder) { e.str(root); e.buffer(nil); e.acls(acl); e.i32(0) }); code != codeOK {
		t.Fatalf("create %s: code %d", root, code)
	}
	t.Cleanup(func() {
		rc := dialRaw(t, addr, 10000)
		for _, p := range []string{root + "/fits", root} {
			rc.call(opDelete, func(e *encoder) { e.str(p); e.i32(-1) })
		}
	})
	rc.xid++
	rc.writeFrame(createPacket(rc.xid, root+"/fits", maxbuffer))
	d := &decoder{b: rc.readFrame()}
	d.i32("xid")
	d.i64("zxid")
	if code := d.i32("err"); code != codeOK {
		t.Fatalf("create of a %d-byte packet: code %d", maxbuffer, code)
	}
	rc.xid++
	// The server may close the connection before the packet is all written
	// (ZooKeeper does, having read the length): a failed write is that
	// close too.
	if err := rc.tryWriteFrame(createPacket(rc.xid, root+"/over", maxbuffer+1)); err != nil {
		t.Logf("the %d-byte packet's write failed: %v (the server closed the connection)", maxbuffer+1, err)
	} else if b, err := rc.tryReadFrame(); err == nil {
		t.Fatalf("a %d-byte packet was answered (%d bytes); the connection should close", maxbuffer+1, len(b))
	}
	// Other connections are served.
	other := dialRaw(t, addr, 10000)
	if code, _, _ := other.call(opExists, func(e *encoder) { e.str(root + "/over"); e.boolean(false) }); code != codeNoNode {
		t.Fatalf("exists %s/over after the refusal: code %d, want NoNode", root, code)
	}
}
