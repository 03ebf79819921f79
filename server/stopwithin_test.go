package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// stuckStop is a Stop that blocks in a named stage until released, as the
// metadata replica's close did once (robustness seed 44: no "node closed"
// after the gossip leave, and the process outlived its supervisor's grace).
type stuckStop struct {
	release chan struct{}
	err     error
}

func (f *stuckStop) Stop(context.Context) error { <-f.release; return f.err }
func (f *stuckStop) StopStage() string          { return "close the metadata replica (raft shutdown)" }

func TestStopWithinReturnsWhenAStageBlocks(t *testing.T) {
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	f := &stuckStop{release: make(chan struct{})}
	defer close(f.release)
	err := stopWithin(f, 50e6, lg) // 50 ms of shutdown.timeout
	if err == nil || !strings.Contains(err.Error(), "shutdown.timeout") || !strings.Contains(err.Error(), f.StopStage()) {
		t.Fatalf("stopWithin = %v, want an error naming shutdown.timeout and the stage", err)
	}
	if !strings.Contains(logs.String(), "stopWithin") {
		t.Fatalf("the log does not hold the goroutines' stacks:\n%.2000s", logs.String())
	}
}

func TestStopWithinReturnsTheStopsResult(t *testing.T) {
	want := errors.New("close metadata replica: boom")
	f := &stuckStop{release: make(chan struct{}), err: want}
	close(f.release)
	if err := stopWithin(f, 1<<62, slog.New(slog.DiscardHandler)); err != want {
		t.Fatalf("stopWithin = %v, want the stop's own %v", err, want)
	}
}
