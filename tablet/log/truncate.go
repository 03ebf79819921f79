package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/record"
)

// TruncateTo drops every batch that holds an offset ≥ offset (a follower
// whose history diverged from its leader's). If offset falls inside a
// batch, that whole batch goes too and the log ends at its base offset.
// Segments after the cut are deleted, the segment holding it becomes the
// active one, the epoch cache forgets epochs starting at or after the new
// end, the writer state is rebuilt as of the new end, and the high
// watermark is lowered to it if above. An offset at or beyond the log end
// does nothing; one below the log start empties the log and restarts it
// there (TruncateFullyAndStartAt). Reads in flight that overlap the cut
// start over. The cut is fsynced (unless Config.NoSync) before TruncateTo
// returns.
func (t *Tablet) TruncateTo(offset int64) error {
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if t.mu.closed {
		return ErrClosed
	}
	segs := t.mu.segments
	if offset < 0 {
		return &OffsetOutOfRangeError{Offset: offset, LogStart: segs[0].base, LogEnd: t.mu.logEnd}
	}
	if offset >= t.mu.logEnd {
		return nil
	}
	if offset < segs[0].base {
		return t.truncateFullyLocked(offset)
	}
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
	s := segs[i]
	cutPos, newEnd := int64(0), offset
	if s.base != offset {
		var pos, base int64
		var err error
		d, damagedHere := t.damagedAt(s.base, offset)
		switch {
		case damagedHere:
			// A damaged range starts at offset (a follower cutting it to
			// refetch): where its bytes start is known, its header may be
			// damaged.
			pos, base = d.pos, offset
		case s.sealed:
			if pos, base, err = t.lookupSealed(s, offset, true); err != nil {
				return fmt.Errorf("truncate: %w", err)
			}
		default:
			pos, base = s.lookupMem(offset)
		}
		newEnd = -1
		if base == offset {
			// The index (or the damaged range) names the batch: the cut
			// needs no header of it, which may be damaged.
			cutPos, newEnd = pos, offset
		}
		walkTo := s.size
		if newEnd >= 0 {
			walkTo = pos // nothing to walk
		}
		_, _, err = s.walk(pos, walkTo, base, func(p int64, h record.Batch) error {
			if h.NextOffset() == offset {
				// Cut after this batch, without reading the next header.
				cutPos, newEnd = p+int64(h.Size()), offset
				return errStop
			}
			if h.LastOffset() < offset {
				return nil
			}
			cutPos, newEnd = p, h.BaseOffset()
			return errStop
		})
		if err != nil {
			return fmt.Errorf("truncate: %w", err)
		}
		if newEnd < 0 {
			return &CorruptSegmentError{Path: s.path(logSuffix), Position: s.size, Err: fmt.Errorf("offset %d is not in the segment's batches", offset)}
		}
	}
	if cutPos == 0 && i > 0 {
		// Nothing of the segment stays: the previous one keeps all its
		// batches and becomes active again.
		i--
		s = segs[i]
		cutPos = s.size
	}

	// The segment's state as an active segment holding [0, cutPos).
	st := &segment{base: s.base, fs: s.fs, dir: s.dir, f: s.f}
	st.resetEmpty()
	if _, _, err := s.walk(0, cutPos, s.base, func(p int64, h record.Batch) error {
		st.addBatch(p, h, t.interval)
		return nil
	}); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	removed := slices.Clone(segs[i+1:])
	c := epochCache{entries: t.mu.epochs.clone()}
	epochsChanged := c.truncateFromEnd(newEnd)

	// Publish first, then change the files: a read that starts from now on
	// sees the new end; one already running sees truncGen move and starts
	// over.
	t.mu.Lock()
	t.mu.truncGen++
	t.mu.segments = slices.Clone(segs[:i+1])
	s.size, s.maxTs, s.maxTsOff, s.firstTs = st.size, st.maxTs, st.maxTsOff, st.firstTs
	s.offsets, s.times, s.sinceIndex = st.offsets, st.times, st.sinceIndex
	s.sealed, s.nOffsets, s.nTimes = false, 0, 0
	t.mu.logEnd = newEnd
	t.mu.hw = min(t.mu.hw, newEnd)
	t.mu.flushed = min(t.mu.flushed, newEnd)
	t.mu.epochs = c
	t.recomputeMaxTsLocked()
	idle := t.retireLocked(removed)
	t.pruneUnsyncedLocked()
	t.mu.Unlock()

	var errs []error
	// Newest first, so that a crash part way leaves a log that is a prefix.
	for j := len(removed) - 1; j >= 0; j-- {
		if err := removed[j].removeFiles(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := t.fs.Remove(s.path(suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.closeIndexFiles(false)
	if !t.cfg.NoSync {
		// The deletions must be durable before the cut: otherwise a power
		// cut could bring back later segments after a shortened one.
		if err := syncDir(t.fs, t.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := truncateFile(s.f, cutPos); err != nil {
		errs = append(errs, fmt.Errorf("truncate segment %d at %d: %w", s.base, cutPos, err))
	} else if err := t.syncFile(s.path(logSuffix), s.f); err != nil {
		errs = append(errs, fmt.Errorf("sync segment %d: %w", s.base, err))
	}
	for _, r := range idle {
		r.closeFiles()
	}
	if epochsChanged {
		if err := t.persistEpochs(c); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := t.loadWriterState(newEnd); err != nil {
		errs = append(errs, err)
	}
	// The segment the cut made active may lie below the recovery point.
	if err := t.checkpointRecoveryPoint(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("truncate to %d: %w", offset, err)
	}
	return nil
}

// TruncateFullyAndStartAt deletes every segment and restarts the log,
// empty, at offset (a follower whose fetch offset fell below its leader's
// log start): log start, log end and high watermark become offset, and the
// epoch cache and writer state are emptied.
func (t *Tablet) TruncateFullyAndStartAt(offset int64) error {
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if t.mu.closed {
		return ErrClosed
	}
	if offset < 0 {
		return &OffsetOutOfRangeError{Offset: offset, LogStart: t.mu.segments[0].base, LogEnd: t.mu.logEnd}
	}
	return t.truncateFullyLocked(offset)
}

// truncateFullyLocked implements TruncateFullyAndStartAt. appendMu held.
func (t *Tablet) truncateFullyLocked(offset int64) error {
	// The new segment is created under a temporary name: an old segment may
	// have the same base.
	final := filepath.Join(t.dir, fileName(offset, logSuffix))
	tmp := final + tmpSuffix
	f, err := t.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("truncate fully: %w", err)
	}
	ns := &segment{base: offset, fs: t.fs, dir: t.dir, f: f}
	ns.resetEmpty()

	old := t.mu.segments
	t.mu.Lock()
	t.mu.truncGen++
	t.mu.segments = []*segment{ns}
	t.mu.logEnd, t.mu.hw, t.mu.maxTs, t.mu.flushed = offset, offset, -1, offset
	t.mu.epochs = epochCache{}
	idle := t.retireLocked(old)
	t.pruneUnsyncedLocked()
	t.mu.Unlock()

	var errs []error
	for j := len(old) - 1; j >= 0; j-- {
		if err := old[j].removeFiles(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := t.fs.Remove(ns.path(suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := t.fs.Rename(tmp, final); err != nil {
		errs = append(errs, err)
	}
	if !t.cfg.NoSync {
		if err := syncDir(t.fs, t.dir); err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range idle {
		r.closeFiles()
	}
	t.writers = newWriterState()
	if err := t.removeSnapshots(func(int64) bool { return true }); err != nil {
		errs = append(errs, err)
	}
	if err := t.persistEpochs(epochCache{}); err != nil {
		errs = append(errs, err)
	}
	if err := t.checkpointRecoveryPoint(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("truncate fully and start at %d: %w", offset, err)
	}
	return nil
}
