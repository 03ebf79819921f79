package zkwire

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/raft"

	"strom/raftmeta"
)

type zkNop struct{}

func (zkNop) Printf(string, ...any) {}

// recordingListener keeps every byte clients send, to seed the fuzzer with
// real packets.
type recordingListener struct {
	net.Listener
	mu  sync.Mutex
	buf []byte
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, l: l}, nil
}

type recordingConn struct {
	net.Conn
	l     *recordingListener
	mu    sync.Mutex
	bytes []byte
}

func (c *recordingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	c.bytes = append(c.bytes, b[:n]...)
	c.mu.Unlock()
	return n, err
}

func (c *recordingConn) Close() error {
	c.mu.Lock()
	c.l.mu.Lock()
	c.l.buf = append(c.l.buf, frames(c.bytes)...)
	c.l.mu.Unlock()
	c.bytes = nil
	c.mu.Unlock()
	return c.Conn.Close()
}

// frames re-frames a connection's stream as length-prefixed packets after
// the connect request, each as a separate (length, body) record.
func frames(b []byte) []byte {
	var out []byte
	first := true
	for len(b) >= 4 {
		n := int(binary.BigEndian.Uint32(b))
		if n < 0 || n > len(b)-4 {
			break
		}
		if !first {
			out = binary.BigEndian.AppendUint32(out, uint32(n))
			out = append(out, b[4:4+n]...)
		}
		first = false
		b = b[4+n:]
	}
	return out
}

// realPackets runs a go-zookeeper session doing one of everything and
// returns the request packets it sent. Everything it starts is stopped
// and silent when it returns (a fuzz target may not log through f).
func realPackets(t testing.TB) [][]byte {
	cfg := raftmeta.DefaultConfig()
	cfg.NodeID = "1"
	cfg.Bootstrap = true
	cfg.HeartbeatTimeout = 50 * time.Millisecond
	cfg.ElectionTimeout = 50 * time.Millisecond
	cfg.LeaderLeaseTimeout = 50 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	_, trans := raft.NewInmemTransport("")
	n, err := raftmeta.OpenWith(cfg, trans, raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := &recordingListener{Listener: ln}
	scfg := testConfig(t)
	scfg.Logger = nil
	s, err := Start(n, rl, scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _, err := zk.Connect([]string{ln.Addr().String()}, time.Second, zk.WithLogger(zkNop{}))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "session", func() bool { return c.State() == zk.StateHasSession })
	acl := zk.WorldACL(zk.PermAll)
	_, _ = c.Create("/f", []byte("data"), 0, acl)
	_, _ = c.Create("/f/s", nil, zk.FlagSequence|zk.FlagEphemeral, acl)
	_, _ = c.CreateContainer("/c", nil, 4, acl)
	_, _ = c.CreateTTL("/t", nil, zk.FlagTTL, acl, time.Minute)
	_, _, _, _ = c.GetW("/f")
	_, _, _, _ = c.ChildrenW("/f")
	_, _, _, _ = c.ExistsW("/nope")
	_, _ = c.Set("/f", []byte("x"), -1)
	_, _, _ = c.GetACL("/f")
	_, _ = c.SetACL("/f", acl, -1)
	_, _ = c.Sync("/f")
	_ = c.AddAuth("digest", []byte("u:p"))
	_, _ = c.Multi(&zk.CreateRequest{Path: "/m", Acl: acl}, &zk.SetDataRequest{Path: "/m", Version: -1},
		&zk.CheckVersionRequest{Path: "/m", Version: 1}, &zk.DeleteRequest{Path: "/m", Version: -1})
	_ = c.Delete("/c", -1)
	c.Close()
	_ = s.Close()
	rl.mu.Lock()
	defer rl.mu.Unlock()
	var out [][]byte
	b := rl.buf
	for len(b) >= 4 {
		m := int(binary.BigEndian.Uint32(b))
		out = append(out, append([]byte{}, b[4:4+m]...))
		b = b[4+m:]
	}
	return out
}

func TestRealPacketsDecode(t *testing.T) {
	pkts := realPackets(t)
	if len(pkts) < 15 {
		t.Fatalf("recorded %d packets", len(pkts))
	}
	for _, p := range pkts {
		r, err := decodeRequest(p)
		if err != nil {
			t.Errorf("real packet %x: %v", p, err)
		}
		if r.op == opMulti && len(r.ops) != 4 {
			t.Errorf("multi decoded %d ops", len(r.ops))
		}
	}
}

func FuzzDecodePacket(f *testing.F) {
	for _, p := range realPackets(f) {
		f.Add(p)
	}
	acl := []raftmeta.ACL{{Perms: 31, Scheme: "world", ID: "anyone"}}
	extra := [][]byte{
		buildRequest(1, opAddWatch, func(e *encoder) { e.str("/a"); e.i32(1) }),
		buildRequest(1, opRemoveWatches, func(e *encoder) { e.str("/a"); e.i32(3) }),
		buildRequest(1, opGetAllChildrenNumber, func(e *encoder) { e.str("/a") }),
		buildRequest(1, opGetEphemerals, func(e *encoder) { e.str("/") }),
		buildRequest(-8, opSetWatches2, func(e *encoder) {
			e.i64(5)
			for range 5 {
				e.strs([]string{"/a", "/b"})
			}
		}),
		buildRequest(1, opCreateTTL, func(e *encoder) { e.str("/t"); e.buffer(nil); e.acls(acl); e.i32(5); e.i64(10) }),
		buildRequest(1, opMultiRead, func(e *encoder) {
			e.i32(opGetData)
			e.boolean(false)
			e.i32(-1)
			e.str("/")
			e.boolean(false)
			endMulti(e)
		}),
	}
	for _, p := range extra {
		f.Add(p[4:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRequest(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a packet that decodes the same.
		if r.op == opGetData {
			again, err := decodeRequest(buildRequest(r.xid, r.op, func(e *encoder) { e.str(r.path); e.boolean(r.watch) })[4:])
			if err != nil || again.path != r.path {
				t.Fatalf("re-decode: %v", err)
			}
		}
		_, _ = decodeConnect(b)
	})
}
