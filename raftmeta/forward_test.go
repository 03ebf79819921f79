package raftmeta

import (
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// newForwardingCluster is a testCluster whose nodes forward to the leader
// over HTTP on loopback.
func newForwardingCluster(t *testing.T, size int) *testCluster {
	current := make([]atomic.Pointer[Node], size)
	addrs := make(map[string]string)
	for i := range size {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := current[i].Load()
			if n == nil {
				http.Error(w, "node down", http.StatusServiceUnavailable)
				return
			}
			n.ForwardHandler().ServeHTTP(w, r)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		addrs["n"+string(rune('0'+i))] = ln.Addr().String()
	}
	c := newTestClusterWith(t, size, func(i int, cfg *Config) {
		cfg.ForwardAddr = func(id string) string { return addrs[id] }
	})
	for i, n := range c.nodes {
		current[i].Store(n)
	}
	t.Cleanup(func() {
		for i := range current {
			current[i].Store(nil)
		}
	})
	return c
}

func TestForwardFromFollower(t *testing.T) {
	c := newForwardingCluster(t, 3)
	leader := c.leader()
	var f *Node
	for _, n := range c.nodes {
		if n != leader {
			f = n
			break
		}
	}
	ctx := testCtx(t, 20*time.Second)
	s, err := f.CreateSession(ctx, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Session(s.ID); !ok {
		t.Fatal("follower does not see its forwarded session")
	}
	if _, err := f.Do(ctx, s.ID, CreateOp("/eph", []byte("x"), Ephemeral)); err != nil {
		t.Fatal(err)
	}
	// Read your own write on the follower at once.
	if _, st, err := f.Get("/eph"); err != nil || st.EphemeralOwner != s.ID {
		t.Fatalf("follower read: %+v %v", st, err)
	}
	res, err := f.Multi(ctx, s.ID, CreateOp("/a", nil, Persistent), CreateOp("/eph", nil, Persistent), DeleteOp("/a", -1))
	var me *MultiError
	if !errors.As(err, &me) || me.Index != 1 || !errors.Is(err, ErrNodeExists) ||
		!errors.Is(res[2].Err, ErrRuntimeInconsistency) || res[0].Err != nil {
		t.Fatalf("multi: %+v %v", res, err)
	}
	if _, err := f.SetData(ctx, "/eph", nil, 5); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("setData: %v", err)
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// Heartbeats on the follower keep the session alive on the leader well
	// past its timeout.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		f.Touch(s.ID)
		if _, ok := leader.Session(s.ID); !ok {
			t.Fatal("session expired despite forwarded heartbeats")
		}
		time.Sleep(20 * time.Millisecond) // the heartbeat rate, not a wait for a condition
	}
	// Silence: the leader expires it and the ephemeral goes everywhere.
	waitFor(t, 10*time.Second, "expiry", func() bool {
		_, err := f.Exists("/eph")
		return errors.Is(err, ErrNoNode)
	})
	s2, err := f.CreateSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CloseSession(ctx, s2.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.CloseSession(ctx, s2.ID); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("close twice: %v", err)
	}
}

func TestForwardDecodeRejectsGarbage(t *testing.T) {
	n := newTestCluster(t, 1).nodes[0]
	for _, b := range [][]byte{nil, {9}, {fwdPropose, 1, 2}, {fwdTouch, 0, 0, 0, 9}, {fwdSync, 1}} {
		if _, err := n.serveForward(t.Context(), b); err == nil {
			t.Errorf("accepted %x", b)
		}
	}
	// A noop is not forwardable.
	if _, err := n.serveForward(t.Context(), append([]byte{fwdPropose}, encodeCommand(newCommand(CmdNoop))...)); err == nil {
		t.Error("forwarded noop accepted")
	}
}

// FuzzDecodeForwardReply: a follower decodes whatever a peer answers
// without panicking; a result it encodes decodes to the same.
func FuzzDecodeForwardReply(f *testing.F) {
	e := &encoder{}
	encodeApplyResult(e, applyResult{
		results: []OpResult{{Path: "/a", Stat: Stat{Version: 1}}, {Path: "/b", Err: ErrNodeExists}},
		session: Session{ID: 5, Timeout: time.Second, Password: []byte("pw")},
		err:     &MultiError{Index: 1},
	})
	f.Add(e.b)
	e = &encoder{}
	encodeApplyResult(e, applyResult{})
	f.Add(e.b)
	f.Fuzz(func(t *testing.T, b []byte) {
		d := &decoder{b: b}
		r := decodeApplyResult(d)
		if d.err != nil {
			return
		}
		e := &encoder{}
		encodeApplyResult(e, r)
		d2 := &decoder{b: e.b}
		r2 := decodeApplyResult(d2)
		if d2.err != nil || len(r2.results) != len(r.results) || r2.session.ID != r.session.ID {
			t.Fatalf("re-decode: %v", d2.err)
		}
	})
}
