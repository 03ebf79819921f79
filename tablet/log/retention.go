package log

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// DeleteExpiredSegments deletes the oldest segments whose newest commit
// timestamp is older than now-ttl (Fluss table.log.ttl; ttl ≤ 0 keeps
// everything). Only whole segments go, oldest first and stopping at the
// first one that is not expired; never the active segment, and never a
// segment holding an offset at or above the high watermark. The log start
// moves to the first remaining segment. It returns how many segments were
// deleted.
func (t *Tablet) DeleteExpiredSegments(now time.Time, ttl time.Duration) (int, error) {
	if ttl <= 0 {
		return 0, nil
	}
	limit := now.UnixMilli() - ttl.Milliseconds()
	return t.deleteSegments(func(s *segment, _ int64) bool { return s.maxTs < limit })
}

// DeleteSegmentsBefore deletes the oldest segments that hold only offsets
// below offset (once they are copied to remote storage), with the same
// limits as DeleteExpiredSegments: whole segments, never the active one,
// nothing at or above the high watermark. It returns how many segments were
// deleted.
func (t *Tablet) DeleteSegmentsBefore(offset int64) (int, error) {
	return t.deleteSegments(func(_ *segment, next int64) bool { return next <= offset })
}

// deleteSegments deletes the longest run of oldest non-active segments for
// which del(segment, its next offset) holds and whose offsets are all
// below the high watermark.
func (t *Tablet) deleteSegments(del func(s *segment, next int64) bool) (int, error) {
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if t.mu.closed {
		return 0, ErrClosed
	}
	t.mu.Lock()
	segs, hw := t.mu.segments, t.mu.hw
	t.mu.Unlock()
	n := 0
	for n < len(segs)-1 {
		next := segs[n+1].base
		if next > hw || !del(segs[n], next) {
			break
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	gone, start := segs[:n], segs[n].base
	c := epochCache{entries: t.mu.epochs.clone()}
	epochsChanged := c.truncateFromStart(start)

	t.mu.Lock()
	t.mu.segments = slices.Clone(segs[n:])
	t.mu.epochs = c
	idle := t.retireLocked(gone)
	t.mu.Unlock()

	var errs []error
	// Oldest first, so that a crash part way leaves a log that is a suffix.
	for _, s := range gone {
		if err := s.removeFiles(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range idle {
		s.closeFiles()
	}
	if err := t.removeSnapshots(func(o int64) bool { return o < start }); err != nil {
		errs = append(errs, err)
	}
	if epochsChanged {
		if err := t.persistEpochs(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("delete segments before %d: %w", start, err)
	}
	t.lg.Info("deleted old segments", "segments", n, "log_start", start)
	return n, nil
}
