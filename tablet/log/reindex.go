package log

import (
	"errors"
	"fmt"
	"slices"

	"strom/record"
)

// A sealed segment's index files are checked at open only at their ends
// (whole entries, the first and last entries ordered and inside the
// segment, the walk from the last offset entry): a damaged entry in the
// middle passes. Every lookup therefore checks the entry it lands on
// (segment.lookupFile; for the time index, offsetForTimestampOnce), and on
// a mismatch the segment's indexes are rebuilt from its batch headers and
// the lookup is done again: a lying entry is never served, and it is
// found again after a restart only if the rebuild's files were lost.

// IndexRebuilds returns how many times a sealed segment's index files were
// found lying (an entry naming a batch the segment does not hold there)
// and rebuilt from the segment since Open. Safe for concurrent use (a
// metric).
func (t *Tablet) IndexRebuilds() int64 { return t.verify.reindexed.Load() }

// lookupSealed is s.lookupFile, rebuilding s's indexes (rebuildIndexes)
// and looking up again when the entry it landed on does not hold.
// appendMuHeld says whether the caller holds appendMu.
func (t *Tablet) lookupSealed(s *segment, offset int64, appendMuHeld bool) (pos, base int64, err error) {
	pos, base, gen, err := s.lookupFile(offset)
	if !errors.Is(err, errIndexEntry) {
		return pos, base, err
	}
	if err := t.rebuildIndexes(s, gen, err, appendMuHeld); err != nil {
		return 0, 0, err
	}
	pos, base, _, err = s.lookupFile(offset)
	return pos, base, err
}

// rebuildIndexes rebuilds sealed segment s's index files from its batch
// headers, as Open rebuilds missing ones, because an entry of index
// generation gen was found lying (cause). Nothing is done when the
// generation moved (another lookup rebuilt them), or when s is no longer a
// sealed segment of the log (truncation or retention; the caller's read
// starts over). The header walk checks every frame and the dense offsets
// from s.base to the next segment's base; if it fails, the segment itself
// is damaged, the index files are left alone and the walk's error is
// returned (the background check marks the damage for repair). The new
// files are written atomically and fsynced under appendMu (no roll,
// truncation or retention in between), readers still using the old ones
// finish with them. Logged at Error and counted (IndexRebuilds).
func (t *Tablet) rebuildIndexes(s *segment, gen uint64, cause error, appendMuHeld bool) error {
	if !appendMuHeld {
		t.appendMu.Lock()
		defer t.appendMu.Unlock()
	}
	t.mu.Lock()
	segs := t.mu.segments
	i := slices.Index(segs, s)
	live := i >= 0 && i+1 < len(segs) && s.sealed && !s.removed && !t.mu.closed
	var next int64
	if live {
		next = segs[i+1].base
	}
	t.mu.Unlock()
	if !live || s.indexGen() != gen {
		return nil
	}
	scratch := &segment{base: s.base, fs: s.fs, dir: s.dir, f: s.f}
	scratch.resetEmpty()
	_, end, err := scratch.walk(0, s.size, s.base, func(pos int64, h record.Batch) error {
		scratch.addBatch(pos, h, t.interval)
		return nil
	})
	if err == nil && end != next {
		err = &CorruptSegmentError{Path: s.path(logSuffix), Position: s.size, Err: fmt.Errorf("ends at offset %d, but the next segment starts at %d", end, next)}
	}
	if err != nil {
		return fmt.Errorf("rebuild the indexes of segment %d (%v): %w", s.base, cause, err)
	}
	if err := t.writeIndexFiles(scratch, true); err != nil {
		return fmt.Errorf("rebuild the indexes of segment %d: %w", s.base, err)
	}
	s.retireIndexFiles()
	t.mu.Lock()
	s.nOffsets, s.nTimes = len(scratch.offsets), len(scratch.finalTimes())
	t.mu.Unlock()
	t.verify.reindexed.Add(1)
	t.lg.Error("a sealed segment's index named a batch the segment does not hold there: rebuilt its index files from the segment",
		"segment", s.path(logSuffix), "err", cause, "offset_entries", len(scratch.offsets), "time_entries", len(scratch.finalTimes()))
	return nil
}
