// Package metatest starts real metadata nodes for tests of the packages
// built on raftmeta: hashicorp/raft on its in-memory transport and stores,
// with shortened timings.
package metatest

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"strom/raftmeta"
)

// NewNode returns a single-voter metadata node that is already leader. It is
// closed when the test ends.
func NewNode(t testing.TB) *raftmeta.Node {
	t.Helper()
	cfg := raftmeta.DefaultConfig()
	cfg.NodeID = "1"
	cfg.Dir = t.TempDir()
	cfg.Bootstrap = true
	cfg.Logger = Logger(t)
	cfg.HeartbeatTimeout = 100 * time.Millisecond
	cfg.ElectionTimeout = 100 * time.Millisecond
	cfg.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	_, trans := raft.NewInmemTransport(raft.ServerAddress("node1:7001"))
	cfg.AdvertiseAddr = string(trans.LocalAddr())
	n, err := raftmeta.OpenWith(cfg, trans, raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// Logger writes through t.Log, so logs sit with the test that made them.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
