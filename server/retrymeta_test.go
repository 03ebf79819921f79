package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"strom/raftmeta"
)

// A Sync after registration that meets a leadership change ("leadership lost
// while committing log", an ErrNotLeader) is tried again; the node used to
// exit on start (robustness harness, seed 45, a rolling restart).
func TestRetryMetaRetriesALeadershipChange(t *testing.T) {
	lg := slog.New(slog.DiscardHandler)
	calls := 0
	err := retryMeta(context.Background(), lg, "sync metadata", func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("barrier: %w", raftmeta.ErrNotLeader)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("retryMeta = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestRetryMetaStopsOnPermanentErrors(t *testing.T) {
	lg := slog.New(slog.DiscardHandler)
	for _, perm := range []error{ErrIdentityMismatch, raftmeta.ErrStopped} {
		calls := 0
		err := retryMeta(context.Background(), lg, "register node", func() error {
			calls++
			return fmt.Errorf("wrapped: %w", perm)
		})
		if !errors.Is(err, perm) || calls != 1 {
			t.Errorf("retryMeta = %v after %d calls, want %v after 1", err, calls, perm)
		}
	}
}

func TestRetryMetaNamesWhatAndTheLastError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := retryMeta(ctx, slog.New(slog.DiscardHandler), "sync metadata", func() error {
		cancel()
		return raftmeta.ErrNotLeader
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "sync metadata") ||
		!strings.Contains(err.Error(), raftmeta.ErrNotLeader.Error()) {
		t.Fatalf("retryMeta = %v, want the context's error naming sync metadata and the last error", err)
	}
}
