package log

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Flushing: every fsync of segment data runs here, outside appendMu and mu,
// serialized by flushMu, so appends and reads never wait for one. A roll
// hands the sealed segment to the flusher goroutine; with a flush policy
// every append wakes it, and it fsyncs the active segment when the policy
// says so. An fsync covers everything appended before it started, so the
// appends that arrive while one runs share the next (group commit).

// FlushedOffset is the offset below which every batch is fsynced (the log
// end after Open). With a flush policy (Config.FlushMessages,
// Config.FlushInterval) the high watermark never passes it.
func (t *Tablet) FlushedOffset() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.flushed
}

// HasFlushPolicy reports whether the tablet has a flush policy
// (Config.FlushMessages or FlushInterval): its high watermark then never
// passes FlushedOffset.
func (t *Tablet) HasFlushPolicy() bool { return t.cfg.flushPolicy() }

// Flush fsyncs every batch appended before the call (the sealed segments
// not yet fsynced, then the active one), advances FlushedOffset and calls
// Config.OnFlush if it moved. It blocks on the fsyncs, and on one already
// running, but not appends. With Config.NoSync nothing is fsynced.
func (t *Tablet) Flush() error {
	advanced, err := t.flushRound(true)
	if advanced && t.cfg.OnFlush != nil {
		t.cfg.OnFlush()
	}
	return err
}

// wakeFlusher tells the flusher goroutine there may be work; it never
// blocks.
func (t *Tablet) wakeFlusher() {
	select {
	case t.flusher.wake <- struct{}{}:
	default:
	}
}

// runFlusher is the flusher goroutine: each wake-up (or, with
// Config.FlushInterval, when the oldest unflushed data comes due) it runs
// one flush round. Close stops it.
func (t *Tablet) runFlusher() {
	defer close(t.flusher.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-t.flusher.stop:
			return
		case <-t.flusher.wake:
		case <-timer.C:
		}
		advanced, err := t.flushRound(false)
		if err != nil && !errors.Is(err, ErrClosed) {
			// The flushed offset stays; the next wake-up tries again.
			t.lg.Error("flush log", "error", err)
		}
		if advanced && t.cfg.OnFlush != nil {
			t.cfg.OnFlush()
		}
		if wait := t.flushDueIn(); wait > 0 {
			if err != nil {
				wait = max(wait, t.cfg.FlushInterval) // not a retry loop on a failing disk
			}
			timer.Reset(wait)
		}
	}
}

// stopFlusher ends the flusher goroutine and waits for it (a round in
// progress finishes first).
func (t *Tablet) stopFlusher() {
	t.flusher.stopOnce.Do(func() { close(t.flusher.stop) })
	<-t.flusher.done
}

// flushDueIn is how long until the interval policy makes the active
// segment's unflushed data due, or 0 when there is none or no such policy.
func (t *Tablet) flushDueIn() time.Duration {
	if t.cfg.FlushInterval <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.logEnd <= t.mu.flushed {
		return 0
	}
	return max(time.Until(t.mu.lastFlush.Add(t.cfg.FlushInterval)), time.Millisecond)
}

// activeDueLocked reports whether the flush policy wants the active
// segment fsynced now. mu held.
func (t *Tablet) activeDueLocked(now time.Time) bool {
	pending := t.mu.logEnd - t.mu.flushed
	switch {
	case pending <= 0:
		return false
	case pending >= t.cfg.FlushMessages:
		return true
	case t.cfg.FlushInterval > 0:
		return now.Sub(t.mu.lastFlush) >= t.cfg.FlushInterval
	}
	return false
}

// flushRound fsyncs the sealed segments not yet fsynced (with their index
// files, then the directory) and, if all or the flush policy says so, the
// active segment up to the log end; then it advances the flushed offset and
// the recovery point. It reports whether the flushed offset moved.
// flushMu is held throughout; appendMu and mu are not held during I/O.
func (t *Tablet) flushRound(all bool) (bool, error) {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	now := time.Now()
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return false, ErrClosed
	}
	t.pruneUnsyncedLocked()
	sealed := slices.Clone(t.mu.unsynced)
	active, end, gen := t.active(), t.mu.logEnd, t.mu.truncGen
	withActive := end > t.mu.flushed && (all || t.activeDueLocked(now))
	pinned := sealed
	if withActive {
		pinned = append(pinned[:len(pinned):len(pinned)], active)
	}
	for _, s := range pinned {
		s.refs++
	}
	t.mu.Unlock()
	defer func() {
		for _, s := range pinned {
			t.release(s)
		}
	}()
	if len(pinned) == 0 {
		return false, nil
	}

	var err error
	for _, s := range sealed {
		if err = t.syncSealed(s); err != nil {
			break
		}
	}
	if err == nil && len(sealed) > 0 && !t.cfg.NoSync {
		// The index files' renames, and the creation of the segments
		// after them, the active one included.
		err = syncDir(t.fs, t.dir)
	}
	if err == nil && withActive {
		if err = t.syncFile(active.path(logSuffix), active.f); err != nil {
			err = fmt.Errorf("flush segment %d: %w", active.base, err)
		}
	}
	if err != nil {
		return false, err
	}

	t.mu.Lock()
	t.mu.unsynced = slices.DeleteFunc(t.mu.unsynced, func(s *segment) bool { return slices.Contains(sealed, s) })
	flushed := t.mu.flushed
	if len(sealed) > 0 {
		flushed = max(flushed, active.base)
	}
	if withActive {
		flushed = end
		t.mu.lastFlush = now
	}
	// A truncation during the fsyncs may have cut what they covered; it
	// lowered the flushed offset itself.
	advanced := gen == t.mu.truncGen && flushed > t.mu.flushed
	if advanced {
		t.mu.flushed = flushed
	}
	t.mu.Unlock()
	if len(sealed) > 0 {
		if err := t.checkpointRecoveryPoint(); err != nil {
			return advanced, err
		}
	}
	return advanced, nil
}

// syncSealed fsyncs a sealed segment and its index files (written
// unsynced by the roll).
func (t *Tablet) syncSealed(s *segment) error {
	if err := t.syncFile(s.path(logSuffix), s.f); err != nil {
		return fmt.Errorf("sync segment %d: %w", s.base, err)
	}
	if t.cfg.NoSync {
		return nil
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		f, err := t.fs.Open(s.path(suffix))
		if err == nil {
			err = t.syncFile(s.path(suffix), f)
			f.Close()
		}
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted with the segment; recovery rebuilds missing ones
		}
		if err != nil {
			return fmt.Errorf("sync index of segment %d: %w", s.base, err)
		}
	}
	return nil
}

// syncFile fsyncs f through Config.SyncFile, unless Config.NoSync.
func (t *Tablet) syncFile(path string, f vfs.File) error {
	switch {
	case t.cfg.NoSync:
		return nil
	case t.cfg.SyncFile != nil:
		return t.cfg.SyncFile(path, f)
	}
	return f.Sync()
}

// pruneUnsyncedLocked drops from the list of segments to fsync those that
// left the log (retention, truncation) or are active again (truncation).
// mu held.
func (t *Tablet) pruneUnsyncedLocked() {
	t.mu.unsynced = slices.DeleteFunc(t.mu.unsynced, func(s *segment) bool { return s.removed || !s.sealed })
}

// checkpointRecoveryPoint writes the recovery point, the base of the first
// segment not known to be fsynced, if it changed. The value is taken under
// rpFileMu, so the last write is always the newest state: a roll never
// raises it, the flusher raises it only after its fsyncs, and a truncation
// lowers it. It never claims a segment fsynced before it is.
func (t *Tablet) checkpointRecoveryPoint() error {
	t.rpFileMu.Lock()
	defer t.rpFileMu.Unlock()
	t.mu.Lock()
	t.pruneUnsyncedLocked()
	rp := t.active().base
	if len(t.mu.unsynced) > 0 {
		rp = t.mu.unsynced[0].base
	}
	t.mu.Unlock()
	if rp == t.rpWritten {
		return nil
	}
	if err := writeFileAtomic(t.fs, t.dir, recoveryPointFile, encodeOffset(rp), t.cfg.NoSync); err != nil {
		return err
	}
	if !t.cfg.NoSync {
		if err := syncDir(t.fs, t.dir); err != nil {
			return err
		}
	}
	t.rpWritten = rp
	return nil
}
