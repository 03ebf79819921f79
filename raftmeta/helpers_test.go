package raftmeta

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testLogger logs through t.Log until the test ends. RAFTMETA_TEST_LOG=debug
// or info raises the level (default warn).
func testLogger(t testing.TB, name string) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop) // registered first, runs last: after nodes close
	level := slog.LevelWarn
	switch strings.ToLower(os.Getenv("RAFTMETA_TEST_LOG")) {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})).With("test_node", name)
}

type testWriter struct {
	t       testing.TB
	mu      sync.Mutex
	stopped bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

var _ io.Writer = (*testWriter)(nil)

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// harness applies commands straight to an FSM, as raft would.
type harness struct {
	t   testing.TB
	f   *fsm
	idx uint64
	now int64 // ms; the time stamped on commands
}

const testEpochMs = 1_700_000_000_000

func newHarness(t testing.TB) *harness {
	return &harness{t: t, f: newFSM(testLogger(t, "fsm"), newWatchManager()), now: testEpochMs}
}

func (h *harness) apply(c *command) applyResult {
	h.t.Helper()
	if c.Time == 0 {
		c.Time = h.now
	}
	h.idx++
	r := h.f.Apply(&raft.Log{Index: h.idx, Term: 1, Type: raft.LogCommand, Data: encodeCommand(c)})
	return r.(applyResult)
}

func (h *harness) do(session int64, op Op) (OpResult, error) {
	h.t.Helper()
	r := h.apply(&command{Type: CmdOp, Session: session, Ops: []Op{op}})
	return r.results[0], r.err
}

func (h *harness) mustDo(session int64, op Op) OpResult {
	h.t.Helper()
	r, err := h.do(session, op)
	if err != nil {
		h.t.Fatalf("%s %s: %v", op.Kind, op.Path, err)
	}
	return r
}

func (h *harness) create(path string, data []byte, mode CreateMode) string {
	h.t.Helper()
	return h.mustDo(0, CreateOp(path, data, mode)).Path
}

func (h *harness) multi(session int64, ops ...Op) ([]OpResult, error) {
	h.t.Helper()
	r := h.apply(&command{Type: CmdMulti, Session: session, Ops: ops})
	return r.results, r.err
}

func (h *harness) newSession(timeout time.Duration) int64 {
	h.t.Helper()
	r := h.apply(&command{Type: CmdCreateSession, Timeout: timeout.Milliseconds(), Password: make([]byte, 16)})
	if r.err != nil {
		h.t.Fatal(r.err)
	}
	return r.session.ID
}

func (h *harness) stat(path string) Stat {
	h.t.Helper()
	st, err := h.f.exists(path, nil)
	if err != nil {
		h.t.Fatalf("exists %s: %v", path, err)
	}
	return st
}

func wantErr(t testing.TB, got, want error) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Fatalf("unexpected error: %v", got)
		}
		return
	}
	if !errors.Is(got, want) {
		t.Fatalf("error = %v, want %v", got, want)
	}
}

// nextEvent returns w's next event or fails after a deadline.
func nextEvent(t testing.TB, w *Watcher) Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatal("watcher channel closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event within 5s")
	}
	return Event{}
}

func expectEvents(t testing.TB, w *Watcher, want ...Event) {
	t.Helper()
	for i, we := range want {
		got := nextEvent(t, w)
		if got.Type != we.Type || got.Path != we.Path || (we.Zxid != 0 && got.Zxid != we.Zxid) {
			t.Fatalf("event %d = %+v, want %+v", i, got, we)
		}
	}
}

// dumpNode is everything a read returns about one node.
type dumpNode struct {
	Data     string
	Nil      bool
	Stat     Stat
	ACL      []ACL
	Children []string
}

// reader is what dumpTree needs (Node and fsm both provide it).
type reader interface {
	Get(string) ([]byte, Stat, error)
	Children(string) ([]string, Stat, error)
	GetACL(string) ([]ACL, Stat, error)
}

type fsmReader struct{ f *fsm }

func (r fsmReader) Get(p string) ([]byte, Stat, error)        { return r.f.get(p, nil) }
func (r fsmReader) Children(p string) ([]string, Stat, error) { return r.f.children(p, nil) }
func (r fsmReader) GetACL(p string) ([]ACL, Stat, error)      { return r.f.getACL(p) }

// dumpTree reads the whole tree through the public read path.
func dumpTree(t testing.TB, r reader) map[string]dumpNode {
	t.Helper()
	out := make(map[string]dumpNode)
	var walk func(p string)
	walk = func(p string) {
		data, st, err := r.Get(p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		kids, _, err := r.Children(p)
		if err != nil {
			t.Fatalf("children %s: %v", p, err)
		}
		acl, _, err := r.GetACL(p)
		if err != nil {
			t.Fatalf("acl %s: %v", p, err)
		}
		out[p] = dumpNode{Data: string(data), Nil: data == nil, Stat: st, ACL: acl, Children: kids}
		for _, k := range kids {
			if p == "/" {
				walk("/" + k)
			} else {
				walk(p + "/" + k)
			}
		}
	}
	walk("/")
	return out
}

var discardLogger = slog.New(slog.DiscardHandler)
