package log

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncGate is a Config.SyncFile that, once armed, holds every fsync of a
// segment file until the test lets it go (one value on proceed, or
// release), reporting each as it starts. It does not really fsync (the
// tests are about order, not disks); fail makes the fsyncs fail instead.
type syncGate struct {
	started chan string // the segment's file name
	proceed chan struct{}
	armed   atomic.Bool
	fail    bool // set before arming
	once    sync.Once
}

func newSyncGate(cfg *Config) *syncGate {
	g := &syncGate{started: make(chan string, 100), proceed: make(chan struct{})}
	cfg.NoSync = false
	cfg.SyncFile = func(name string, f vfs.File) error {
		if !g.armed.Load() || !strings.HasSuffix(name, logSuffix) {
			return nil
		}
		g.started <- filepath.Base(name)
		if g.fail {
			return errors.New("injected fsync failure")
		}
		<-g.proceed
		return nil
	}
	return g
}

// release lets every fsync from now on through.
func (g *syncGate) release() { g.once.Do(func() { close(g.proceed) }) }

// openGated opens the tablet and then arms g; the gate is released before
// the tablet closes.
func openGated(t *testing.T, cfg Config, g *syncGate) *Tablet {
	tb := openT(t, cfg)
	t.Cleanup(g.release) // runs before openT's Close
	g.armed.Store(true)
	return tb
}

// recv waits for a value on ch; failing after a long while (the thing
// waited for does not happen), never for timing.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// With log.flush.interval-messages = 1 the high watermark never passes an
// offset whose data is not fsynced, and the appends made while an fsync
// runs share the next one.
func TestHighWatermarkWaitsForFsync(t *testing.T) {
	cfg := testConfig(t)
	cfg.FlushMessages = 1
	g := newSyncGate(&cfg)
	flushed := make(chan struct{}, 100)
	cfg.OnFlush = func() { flushed <- struct{}{} }
	tb := openGated(t, cfg, g)
	m := &model{}
	now := time.UnixMilli(1_000_000)

	appendLeader(t, tb, m, 1, now, batchSpec{id: 1, records: 3, size: 40})
	if name := recv(t, g.started, "the fsync of the append"); name != fileName(0, logSuffix) {
		t.Fatalf("fsync of %s, want the active segment", name)
	}
	if hw := tb.SetHighWatermark(tb.LogEndOffset()); hw != 0 || tb.FlushedOffset() != 0 {
		t.Fatalf("high watermark %d, flushed offset %d while the fsync of [0, 3) runs; want 0, 0", hw, tb.FlushedOffset())
	}
	for i := range 5 { // appended during the fsync: one more covers them all
		appendLeader(t, tb, m, 1, now, batchSpec{id: int64(2 + i), records: 3, size: 40})
	}
	g.proceed <- struct{}{}
	recv(t, flushed, "OnFlush")
	recv(t, g.started, "the second fsync") // blocked: [3, 18) is not yet on disk
	if hw := tb.SetHighWatermark(tb.LogEndOffset()); hw != 3 || tb.FlushedOffset() != 3 {
		t.Fatalf("high watermark %d, flushed offset %d after the first fsync; want 3, 3", hw, tb.FlushedOffset())
	}
	g.proceed <- struct{}{}
	recv(t, flushed, "OnFlush")
	if hw := tb.SetHighWatermark(tb.LogEndOffset()); hw != 18 {
		t.Fatalf("high watermark %d after the second fsync, want 18", hw)
	}
	if n := len(g.started); n != 0 {
		t.Fatalf("%d more fsyncs for appends already covered", n)
	}
	readAll(t, tb, m, 1<<20)
}

// With log.flush.interval-ms alone the data is fsynced once it is that old,
// without another append, and only then committed.
func TestFlushInterval(t *testing.T) {
	cfg := testConfig(t)
	cfg.FlushInterval = 5 * time.Millisecond
	g := newSyncGate(&cfg)
	tb := openGated(t, cfg, g)
	appendLeader(t, tb, &model{}, 1, time.UnixMilli(1_000_000), batchSpec{id: 1, records: 2, size: 40})
	recv(t, g.started, "the interval's fsync")
	if hw := tb.SetHighWatermark(tb.LogEndOffset()); hw != 0 {
		t.Fatalf("high watermark %d during the fsync, want 0", hw)
	}
	g.proceed <- struct{}{}
	for tb.FlushedOffset() != 2 {
		time.Sleep(time.Millisecond)
	}
	if hw := tb.SetHighWatermark(tb.LogEndOffset()); hw != 2 {
		t.Fatalf("high watermark %d after the fsync, want 2", hw)
	}
}

// A roll hands the sealed segment's fsync to the flusher: appends go on
// while it is blocked, and the recovery point moves past the segment only
// once it is done.
func TestRollDoesNotWaitForFsync(t *testing.T) {
	cfg := testConfig(t)
	g := newSyncGate(&cfg)
	tb := openGated(t, cfg, g)
	now := time.UnixMilli(1_000_000)
	specs := make(chan batchSpec, 100)
	done := make(chan error, 1)
	go func() { // two rolls, then a few appends
		for i := int64(0); len(tb.Segments()) < 3 || i < 20; i++ {
			s := batchSpec{id: i, records: 2, size: 1000}
			if _, err := tb.AppendAsLeader(s.bytes(), 1, now); err != nil {
				done <- err
				return
			}
			specs <- s
		}
		done <- nil
	}()
	if name := recv(t, g.started, "the rolled segment's fsync"); name != fileName(0, logSuffix) {
		t.Fatalf("fsync of %s, want the first segment", name)
	}
	if err := recv(t, done, "the appends while the rolled segment's fsync is blocked"); err != nil {
		t.Fatal(err)
	}
	close(specs)
	m := &model{}
	for s := range specs {
		o := m.end(0)
		m.batches = append(m.batches, stored{base: o, last: o + 1, id: s.id, size: s.size, ts: now.UnixMilli(), epoch: 1})
	}
	readAll(t, tb, m, 1<<20)
	if rp, _, err := readOffset(vfs.Default, cfg.Dir, recoveryPointFile); err != nil || rp != 0 {
		t.Fatalf("recovery point %d (%v) while the first segment's fsync is blocked, want 0", rp, err)
	}
	g.release()
	segs := tb.Segments()
	active := segs[len(segs)-1].BaseOffset
	for {
		rp, _, err := readOffset(vfs.Default, cfg.Dir, recoveryPointFile)
		if err != nil {
			t.Fatal(err)
		}
		if rp == active {
			break
		}
		time.Sleep(time.Millisecond)
	}
}

// A power cut may lose the tail of a sealed segment whose fsync had not
// happened: recovery scans it (the recovery point says so), cuts it at the
// last whole batch, deletes the segments after it, and says so; appends
// then continue densely.
func TestRecoveryCutsUnsyncedSealedSegment(t *testing.T) {
	cfg := testConfig(t)
	g := newSyncGate(&cfg)
	g.fail = true // the rolled segments never reach the disk
	tb := openGated(t, cfg, g)
	m := &model{}
	now := time.UnixMilli(1_000_000)
	for i := int64(0); len(tb.Segments()) < 3; i++ {
		appendLeader(t, tb, m, 1, now, batchSpec{id: i, records: 2, size: 1000})
	}
	segs := tb.Segments()
	tb.crash()
	// The power cut: the first segment keeps its first batch and half of
	// its second.
	first := decode(t, mustRead(t, segs[0].Path))
	keep := int64(len(first[0])) + int64(len(first[1]))/2
	if err := os.Truncate(segs[0].Path, keep); err != nil {
		t.Fatal(err)
	}

	cfg.SyncFile = nil
	var lc *logCapture
	cfg.Logger, lc = testLogger(t)
	tb = openT(t, cfg)
	ri := tb.RecoveryInfo()
	wantBytes := keep - int64(len(first[0])) + segs[1].Size + segs[2].Size
	if !ri.Truncated || ri.TruncatedSegment != 0 || ri.TruncatedPosition != int64(len(first[0])) ||
		ri.TruncatedOffset != 2 || ri.DroppedSegments != 2 || ri.TruncatedBytes != wantBytes {
		t.Fatalf("recovery %+v; want a cut of segment 0 at %d (offset 2), %d bytes and 2 segments dropped", ri, len(first[0]), wantBytes)
	}
	if !strings.Contains(lc.String(), "deleted the segments after the cut") || !strings.Contains(lc.String(), "bytes_dropped") {
		t.Fatalf("cut not logged:\n%s", lc)
	}
	if n := len(tb.Segments()); n != 1 || tb.LogEndOffset() != 2 {
		t.Fatalf("%d segments, log end %d; want 1, 2", n, tb.LogEndOffset())
	}
	m.truncate(2)
	appendLeader(t, tb, m, 1, now, batchSpec{id: 50, records: 4, size: 10})
	readAll(t, tb, m, 1<<20)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
