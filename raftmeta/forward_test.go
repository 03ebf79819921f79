package raftmeta

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testSecret is the forward secret of the test clusters.
var testSecret = bytes.Repeat([]byte("k"), MinForwardSecret)

// forwardingCluster is a testCluster whose nodes forward to the leader over
// HTTP on loopback; addrs maps each NodeID to its ForwardHandler's address.
type forwardingCluster struct {
	*testCluster
	addrs map[string]string
}

func newForwardingCluster(t *testing.T, size int) *forwardingCluster {
	return newForwardingClusterWith(t, size, nil)
}

// newForwardingClusterWith lets configure adjust each node's Config first.
func newForwardingClusterWith(t *testing.T, size int, configure func(i int, cfg *Config)) *forwardingCluster {
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
		cfg.ForwardSecret = testSecret
		if configure != nil {
			configure(i, cfg)
		}
	})
	for i, n := range c.nodes {
		current[i].Store(n)
	}
	t.Cleanup(func() {
		for i := range current {
			current[i].Store(nil)
		}
	})
	return &forwardingCluster{testCluster: c, addrs: addrs}
}

// follower returns a node that does not lead.
func (c *forwardingCluster) follower() *Node {
	leader := c.leader()
	for _, n := range c.nodes {
		if n != leader {
			return n
		}
	}
	c.t.Fatal("no follower")
	return nil
}

func TestForwardFromFollower(t *testing.T) {
	c := newForwardingCluster(t, 3)
	leader := c.leader()
	f := c.follower()
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
		if _, err := n.serveForward(t.Context(), "n0", b); err == nil {
			t.Errorf("accepted %x", b)
		}
	}
	// A noop is not forwardable.
	if _, err := n.serveForward(t.Context(), "n0", append([]byte{fwdPropose}, encodeCommand(newCommand(CmdNoop))...)); err == nil {
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

// TestForwardRefusesUnsignedCalls: a forward call without the cluster
// secret's signature (curl's) is refused and changes nothing; the same call
// signed is served.
func TestForwardRefusesUnsignedCalls(t *testing.T) {
	c := newForwardingCluster(t, 3)
	leader := c.leader()
	ctx := testCtx(t, 20*time.Second)
	s, err := leader.CreateSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	create := newCommand(CmdOp)
	create.Ops = []Op{CreateOp("/pwned", nil, Persistent)}
	closeSession := newCommand(CmdCloseSession)
	closeSession.Session = s.ID
	bodies := map[string][]byte{
		"create":       append([]byte{fwdPropose}, encodeCommand(create)...),
		"closeSession": append([]byte{fwdPropose}, encodeCommand(closeSession)...),
	}
	url := "http://" + c.addrs[leader.cfg.NodeID] + ForwardPath
	post := func(body []byte, sign func(r *http.Request)) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		sign(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	wrongSecret := bytes.Repeat([]byte("x"), MinForwardSecret)
	for _, tc := range []struct {
		name   string
		sign   func(r *http.Request, body []byte)
		status int
	}{
		{"unsigned", func(*http.Request, []byte) {}, http.StatusUnauthorized},
		{"wrong secret", func(r *http.Request, b []byte) { SignForward(r, wrongSecret, "n1", b, time.Now()) }, http.StatusForbidden},
		{"no secret", func(r *http.Request, b []byte) { SignForward(r, nil, "n1", b, time.Now()) }, http.StatusForbidden},
		{"stale", func(r *http.Request, b []byte) { SignForward(r, testSecret, "n1", b, time.Now().Add(-time.Minute)) }, http.StatusForbidden},
		{"body changed", func(r *http.Request, b []byte) { SignForward(r, testSecret, "n1", b[:len(b)-1], time.Now()) }, http.StatusForbidden},
		{"sender changed", func(r *http.Request, b []byte) {
			SignForward(r, testSecret, "n1", b, time.Now())
			r.Header.Set(headerForwardFrom, "n2")
		}, http.StatusForbidden},
	} {
		for what, body := range bodies {
			status, out := post(body, func(r *http.Request) { tc.sign(r, body) })
			if status != tc.status {
				t.Errorf("%s %s: status %d (%s), want %d", tc.name, what, status, out, tc.status)
			}
		}
	}
	if err := leader.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Exists("/pwned"); !errors.Is(err, ErrNoNode) {
		t.Errorf("/pwned after refused calls: %v", err)
	}
	if _, ok := leader.Session(s.ID); !ok {
		t.Error("session closed by a refused call")
	}
	// Signed with the cluster secret, the same calls are served: the
	// refusals above were the signature's.
	for _, what := range []string{"create", "closeSession"} {
		body := bodies[what]
		status, out := post(body, func(r *http.Request) { SignForward(r, testSecret, "n1", body, time.Now()) })
		if status != http.StatusOK || len(out) == 0 || out[0] != fwdOK {
			t.Fatalf("signed %s: status %d, reply %q", what, status, out)
		}
	}
	if _, err := leader.Exists("/pwned"); err != nil {
		t.Errorf("/pwned after the signed call: %v", err)
	}
	if _, ok := leader.Session(s.ID); ok {
		t.Error("session not closed by the signed call")
	}
}

// TestCheckWrite: Config.CheckWrite vets writes on the node they are made
// on and again on the leader, which sees the forwarding node as from; a
// refusal proposes nothing and reaches the caller as ErrRefused, forwarded
// or not.
func TestCheckWrite(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{} // checking node → from of each write checked
	c := newForwardingClusterWith(t, 3, func(_ int, cfg *Config) {
		node := cfg.NodeID
		cfg.CheckWrite = func(from string, _ int64, ops []Op) error {
			mu.Lock()
			seen[node] = append(seen[node], from)
			mu.Unlock()
			if ops[0].Path == "/refused-by-"+node {
				return errors.New("refused here")
			}
			return nil
		}
	})
	leader, f := c.leader(), c.follower()
	lid, fid := leader.cfg.NodeID, f.cfg.NodeID
	ctx := testCtx(t, 20*time.Second)

	// Refused on the follower itself: nothing reaches the leader.
	if _, err := f.Create(ctx, "/refused-by-"+fid, nil, Persistent); !errors.Is(err, ErrRefused) {
		t.Fatalf("write refused on the follower: %v", err)
	}
	// Accepted by the follower, refused by the leader.
	mu.Lock()
	clear(seen)
	mu.Unlock()
	if _, err := f.Create(ctx, "/refused-by-"+lid, nil, Persistent); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "refused here") {
		t.Fatalf("write refused on the leader: %v", err)
	}
	if _, err := f.MultiAsync(ctx, 0, CreateOp("/refused-by-"+lid, nil, Persistent)).Wait(); !errors.Is(err, ErrRefused) {
		t.Fatalf("async multi refused on the leader: %v", err)
	}
	mu.Lock()
	if got := seen[lid]; len(got) != 2 || got[0] != fid || got[1] != fid {
		t.Errorf("the leader checked forwarded writes as from %q, want %q", got, fid)
	}
	mu.Unlock()
	if _, err := leader.Do(ctx, 0, CreateOp("/refused-by-"+lid, nil, Persistent)); !errors.Is(err, ErrRefused) {
		t.Fatalf("leader's own write: %v", err)
	}
	for _, n := range c.nodes {
		if _, err := n.Exists("/refused-by-" + lid); !errors.Is(err, ErrNoNode) {
			t.Errorf("%s: refused write applied: %v", n.cfg.NodeID, err)
		}
	}
	// Anything else goes through.
	if _, err := f.Create(ctx, "/fine", nil, Persistent); err != nil {
		t.Fatal(err)
	}
}
