package membership

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuf collects a node's logs for the test to poll, and passes them on
// to t.Log.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), s)
}

type node struct {
	*Membership
	logs   *logBuf
	events chan Event
}

func key(b byte) []byte { return bytes.Repeat([]byte{b}, SecretKeyBytes) }

func startNode(t *testing.T, id int32, clusterID string, secret []byte, join ...string) *node {
	t.Helper()
	n := &node{logs: &logBuf{}, events: make(chan Event, 100)}
	lg := slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := Start(Config{
		Self:          Meta{ID: id, API: "127.0.0.1:1", Raft: "127.0.0.1:2", Rack: "r" + string(rune('0'+id)), Version: "v-test", ClusterID: clusterID, Roles: []string{"metadata", "tablet"}},
		BindAddr:      "127.0.0.1:0",
		Join:          join,
		SecretKey:     secret,
		SecretKeyName: "cluster.secret",
		Timings:       LocalTimings(),
		Logger:        lg,
		OnEvent: func(e Event) {
			select {
			case n.events <- e:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Membership = m
	t.Cleanup(func() {
		m.Close()
		if t.Failed() {
			t.Logf("node %d logs:\n%s", id, n.logs.buf.String())
		}
	})
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func alive(m *Membership) int {
	n := 0
	for _, mb := range m.Members() {
		if mb.Alive {
			n++
		}
	}
	return n
}

func TestThreeMembersJoinAndOneFails(t *testing.T) {
	a := startNode(t, 1, "", key(1))
	b := startNode(t, 2, "", key(1), "127.0.0.1:1", a.Self().Gossip) // a dead address first: any one answering is enough
	c := startNode(t, 3, "", key(1), b.Self().Gossip)
	for _, n := range []*node{a, b, c} {
		waitFor(t, "three alive members", func() bool { return alive(n.Membership) == 3 })
	}
	<-c.Joined()
	got, ok := a.Member(3)
	if !ok || got.Raft != "127.0.0.1:2" || got.API != "127.0.0.1:1" || got.Gossip != c.Self().Gossip || got.Rack != "r3" ||
		got.Version != "v-test" || strings.Join(got.Roles, ",") != "metadata,tablet" || got.HasState {
		t.Fatalf("a sees member 3 as %+v", got)
	}

	// Metadata changes reach the others.
	if err := b.Update(time.Second, func(m *Meta) { m.ClusterID, m.HasState = "c1", true }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's update at c", func() bool { mb, _ := c.Member(2); return mb.ClusterID == "c1" && mb.HasState })

	// Killed (no leave): declared dead, a failure.
	c.Kill()
	waitFor(t, "c declared dead at a", func() bool { mb, _ := a.Member(3); return !mb.Alive })
	if mb, _ := a.Member(3); mb.Left {
		t.Fatalf("a killed member is a failure, not a leave: %+v", mb)
	}
	waitFor(t, "a fail event at a", func() bool {
		for {
			select {
			case e := <-a.events:
				if e.Kind == EventFail && e.Member.ID == 3 {
					return true
				}
			default:
				return false
			}
		}
	})
	// A graceful close is a leave.
	b.Close()
	waitFor(t, "b left at a", func() bool { mb, _ := a.Member(2); return !mb.Alive && mb.Left })
}

func TestWrongSecretRefused(t *testing.T) {
	a := startNode(t, 1, "", key(1))
	b := startNode(t, 2, "", key(2), a.Self().Gossip)
	waitFor(t, "a to log the refusal naming cluster.secret", func() bool {
		return a.logs.contains("a node with another cluster.secret tried to talk to this one")
	})
	waitFor(t, "b to log why it cannot join", func() bool {
		return b.logs.contains("cannot join yet") && b.logs.contains("may have another cluster.secret")
	})
	if alive(a.Membership) != 1 || alive(b.Membership) != 1 {
		t.Fatalf("members: a %+v, b %+v", a.Members(), b.Members())
	}
	select {
	case <-b.Joined():
		t.Fatal("b joined with the wrong secret")
	default:
	}
}

func TestOtherClusterRefused(t *testing.T) {
	a := startNode(t, 1, "cluster-x", key(1))
	fresh := startNode(t, 3, "", key(1), a.Self().Gossip) // no cluster yet: may join
	b := startNode(t, 2, "cluster-y", key(1), a.Self().Gossip)
	<-b.Refused()
	if err := b.JoinError(); !errors.Is(err, ErrClusterMismatch) || !strings.Contains(err.Error(), "is in cluster cluster-x, this node in cluster cluster-y") {
		t.Fatalf("join error = %v, want both ids named", err)
	}
	<-fresh.Joined()
	waitFor(t, "the fresh node at a", func() bool { return alive(a.Membership) == 2 })
	if _, ok := a.Member(2); ok {
		t.Fatalf("a took in a member of another cluster: %+v", a.Members())
	}
	if _, ok := b.Member(1); ok {
		t.Fatalf("b took in a member of another cluster: %+v", b.Members())
	}
}

func TestMetaEncoding(t *testing.T) {
	m := Meta{ID: 7, API: "a:1", Raft: "r:2", Gossip: "g:3", Rack: "rack", Version: "0.1", ClusterID: "cid", Roles: []string{"x", "y"}, HasState: true}
	got, err := decodeMeta(m.encode())
	if err != nil || got.ID != 7 || got.API != "a:1" || got.Raft != "r:2" || got.Gossip != "g:3" || got.Rack != "rack" ||
		got.Version != "0.1" || got.ClusterID != "cid" || strings.Join(got.Roles, ",") != "x,y" || !got.HasState {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	b := m.encode()
	for _, bad := range [][]byte{nil, b[:5], b[:len(b)-1], append(append([]byte{}, b...), 0), append([]byte{9}, b[1:]...)} {
		if _, err := decodeMeta(bad); err == nil {
			t.Errorf("decodeMeta(%x) succeeded", bad)
		}
	}
}
