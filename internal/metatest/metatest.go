// Package metatest starts real metadata nodes for tests of the packages
// built on raftmeta: hashicorp/raft on its in-memory transport and stores,
// with shortened timings.
package metatest

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"strom/raftmeta"
)

// NewNode returns a single-voter metadata node that is already leader. It is
// closed when the test ends.
func NewNode(t testing.TB) *raftmeta.Node {
	t.Helper()
	return NewGroup(t, 1)[0]
}

// NewGroup returns a metadata group of size voters, ids "1".."size", on one
// in-memory network, each node knowing the leader. Close a node to kill it;
// the others are closed when the test ends.
func NewGroup(t testing.TB, size int) []*raftmeta.Node {
	t.Helper()
	nodes := make([]*raftmeta.Node, size)
	trans := make([]*raft.InmemTransport, size)
	for i := range size {
		_, trans[i] = raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("node%d:7001", i+1)))
	}
	for i := range size {
		for j := range size {
			if i != j {
				trans[i].Connect(trans[j].LocalAddr(), trans[j])
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range size {
		cfg := raftmeta.DefaultConfig()
		cfg.NodeID = strconv.Itoa(i + 1)
		cfg.Dir = t.TempDir()
		cfg.Bootstrap = i == 0
		cfg.Logger = Logger(t).With("node", cfg.NodeID)
		cfg.HeartbeatTimeout = 100 * time.Millisecond
		cfg.ElectionTimeout = 100 * time.Millisecond
		cfg.LeaderLeaseTimeout = 100 * time.Millisecond
		cfg.CommitTimeout = 5 * time.Millisecond
		cfg.SessionCheckInterval = 20 * time.Millisecond
		cfg.AdvertiseAddr = string(trans[i].LocalAddr())
		n, err := raftmeta.OpenWith(cfg, trans[i], raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes[i] = n
		if i == 0 {
			if err := n.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
		} else if err := nodes[0].AddVoter(ctx, cfg.NodeID, cfg.AdvertiseAddr); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if err := n.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// Logger writes through t.Log, so logs sit with the test that made them.
func Logger(t testing.TB) *slog.Logger { return LoggerAt(t, slog.LevelDebug) }

// LoggerAt is Logger for records at lvl and above. What is logged once the
// test has ended (by a goroutine still stopping) is dropped.
func LoggerAt(t testing.TB, lvl slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(&tWriter{t: t}, &slog.HandlerOptions{Level: lvl}))
}

type tWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		func() {
			defer func() {
				if recover() != nil { // t.Log after the test ended panics
					w.done = true
				}
			}()
			w.t.Log(strings.TrimRight(string(p), "\n"))
		}()
	}
	return len(p), nil
}
