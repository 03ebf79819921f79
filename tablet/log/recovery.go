package log

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/record"
)

// RecoveryInfo reports what Open found and what it repaired. Open also
// logs every repair at Warn.
type RecoveryInfo struct {
	// Clean reports that the previous Close completed (its clean-shutdown
	// marker was found), so the last segment's indexes were loaded rather
	// than rebuilt by a full scan.
	Clean bool
	// Segments is the number of segments opened.
	Segments int
	// ScannedBatches is the number of batches whose CRC Open checked: after
	// an unclean stop, the segments from the recovery point on (normally
	// the last one).
	ScannedBatches int
	// Truncated reports that the log's tail was cut (in the last segment,
	// or in a sealed one not yet fsynced); the fields after it say where
	// and why.
	Truncated bool
	// TruncatedSegment is the base offset of the segment that was cut.
	TruncatedSegment int64
	// TruncatedPosition is the byte position of the cut in that segment
	// file: everything from it on was dropped.
	TruncatedPosition int64
	// TruncatedBytes is the number of bytes dropped (of that segment and
	// of the segments after it).
	TruncatedBytes int64
	// DroppedSegments is the number of whole segments deleted after the
	// cut: segments that were not yet fsynced may follow a sealed segment
	// whose tail a power cut lost.
	DroppedSegments int
	// TruncatedOffset is the first offset that was not recovered (the log
	// end after the cut).
	TruncatedOffset int64
	// TruncateReason says what was wrong with the first dropped byte.
	TruncateReason string
	// RebuiltIndexes lists the base offsets of the sealed segments whose
	// index files were missing or unusable and were rebuilt.
	RebuiltIndexes []int64
	// WriterSnapshot is the offset of the writer state snapshot recovery
	// started from, or -1 when the state was rebuilt from the log start.
	WriterSnapshot int64
	// EpochsRebuilt reports that the leader epoch checkpoint was missing or
	// unusable and was rebuilt from the batches' leader epochs.
	EpochsRebuilt bool
	// Damaged lists the ranges of sealed segments found damaged (a bad
	// frame or CRC, or the segment cut short) while their indexes were
	// rebuilt: reads refuse them until RepairDamaged rewrites them from
	// another replica's copy (see loadSealed). Nothing was cut.
	Damaged []DamagedRange
	// LogStartOffset and LogEndOffset are the log's bounds after recovery.
	LogStartOffset, LogEndOffset int64
}

// load opens the directory's files and recovers the log. Only Open calls
// it, before the tablet is shared, but it takes the locks where the
// helpers it shares with the running tablet expect them.
func (t *Tablet) load() error {
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if err := CreateDir(t.fs, t.dir, t.cfg.NoSync); err != nil {
		return err
	}
	names, err := t.fs.List(t.dir)
	if err != nil {
		return err
	}
	var bases []int64
	indexFiles := map[int64]bool{}
	clean := false
	for _, name := range names {
		if o, ok := parseFileName(name, logSuffix); ok {
			bases = append(bases, o)
			continue
		}
		if o, ok := parseFileName(name, snapshotSuffix); ok {
			t.snapshots = append(t.snapshots, o)
			continue
		}
		if o, ok := parseFileName(name, indexSuffix); ok {
			indexFiles[o] = true
		} else if o, ok := parseFileName(name, timeIndexSuffix); ok {
			indexFiles[o] = true
		}
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			// A write that did not reach its rename.
			if err := t.fs.Remove(filepath.Join(t.dir, name)); err != nil {
				return err
			}
		case name == cleanFile:
			clean = true
		}
	}
	slices.Sort(bases)
	slices.Sort(t.snapshots)
	t.recovery = RecoveryInfo{Clean: clean, WriterSnapshot: -1}

	// Index files without a segment (left by a crash in the middle of a
	// deletion) would be mistaken for a new segment's.
	for o := range indexFiles {
		if _, found := slices.BinarySearch(bases, o); !found {
			t.fs.Remove(filepath.Join(t.dir, fileName(o, indexSuffix)))
			t.fs.Remove(filepath.Join(t.dir, fileName(o, timeIndexSuffix)))
		}
	}

	if len(bases) == 0 {
		s, err := t.createSegment(0)
		if err != nil {
			return err
		}
		t.mu.segments = []*segment{s}
	} else {
		for _, b := range bases {
			f, err := t.fs.OpenReadWrite(filepath.Join(t.dir, fileName(b, logSuffix)), vfs.WriteCategoryUnspecified)
			if err != nil {
				return err
			}
			t.mu.segments = append(t.mu.segments, &segment{base: b, fs: t.fs, dir: t.dir, f: f})
		}
	}
	// The segments from the one holding the recovery point on may not have
	// been fsynced (a roll leaves that to the flusher): after an unclean
	// stop they are scanned and cut like a last segment. The others were
	// fsynced; damage there is not a torn write.
	segs := t.mu.segments
	k := len(segs) - 1
	rp, ok, err := readOffset(t.fs, t.dir, recoveryPointFile)
	t.rpWritten = -1
	switch {
	case err != nil:
		t.lg.Warn("recovery point checkpoint unreadable, scanning every segment", "error", err)
		rp = 0
	case !ok:
		rp = segs[k].base // none yet, or written by a version that fsynced at every roll
	default:
		t.rpWritten = rp
	}
	for !clean && k > 0 && segs[k].base > rp {
		k--
	}
	for i, s := range segs[:k] {
		if err := t.loadSealed(s, segs[i+1].base); err != nil {
			return err
		}
	}
	if clean {
		if err := t.loadActive(segs[k], true); err != nil {
			return err
		}
	} else if err := t.recoverUnsynced(k); err != nil {
		return err
	}
	segs = t.mu.segments
	last := segs[len(segs)-1]
	// The active segment's index files are rewritten when it is sealed or
	// closed; stale ones must not survive into a later crash recovery.
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := t.fs.Remove(last.path(suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	t.recomputeMaxTsLocked()
	t.recovery.Segments = len(segs)
	t.recovery.LogStartOffset, t.recovery.LogEndOffset = segs[0].base, t.mu.logEnd
	if err := t.checkpointRecoveryPoint(); err != nil {
		return err
	}

	if err := t.loadEpochs(); err != nil {
		return err
	}
	snap, err := t.loadWriterState(t.mu.logEnd)
	if err != nil {
		return err
	}
	t.recovery.WriterSnapshot = snap
	hw, ok, err := readOffset(t.fs, t.dir, hwFile)
	if err != nil {
		t.lg.Warn("high watermark checkpoint unreadable, starting from the log start", "error", err)
	}
	if !ok {
		hw = 0
	}
	t.mu.hw = min(max(hw, segs[0].base), t.mu.logEnd)

	// From here on a crash is unclean: the marker must be gone for good.
	if clean {
		if err := t.fs.Remove(filepath.Join(t.dir, cleanFile)); err != nil {
			return err
		}
	}
	if !t.cfg.NoSync {
		if err := syncDir(t.fs, t.dir); err != nil {
			return err
		}
	}
	return nil
}

// createSegment creates an empty segment file at base (replacing any file
// of that name) and removes stale index files for it. The caller syncs the
// directory. appendMu held.
func (t *Tablet) createSegment(base int64) (*segment, error) {
	s := &segment{base: base, fs: t.fs, dir: t.dir}
	f, err := t.fs.Create(s.path(logSuffix), vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("create segment %d: %w", base, err)
	}
	s.f = f
	s.resetEmpty()
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := t.fs.Remove(s.path(suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			f.Close()
			return nil, err
		}
	}
	return s, nil
}

// loadSealed opens a segment that is not the last. Its index files are
// used if present and sane (cheap checks), else rebuilt by walking its
// batch headers. Either way the batches after the last offset index entry
// are walked to check that the segment ends, on a whole batch, exactly
// where the next one begins.
//
// Sealed segments were fsynced before the next segment was created, so
// damage there is not a torn write and is never cut: where the walk fails
// (a bad frame, the segment cut short or empty), the segment is scanned
// batch by batch, CRC included, and every damaged batch or range is marked
// as VerifyStep marks what it finds (markDamaged): reads refuse it with a
// *CorruptRecordError, and the replica layer repairs it from another
// replica's copy. A damaged batch whose header holds loses only itself;
// where the header does not hold, or the segment ends early, the range
// runs to the next segment's base offset. Open goes on: one damaged
// segment does not take the whole log (and the node) down.
func (t *Tablet) loadSealed(s *segment, next int64) error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	s.resetEmpty()
	s.size = st.Size()
	if s.size > 0 {
		if reason := t.loadIndexFiles(s, next); reason == "" {
			return nil
		} else if reason != "missing" {
			t.lg.Warn("rebuilding unusable segment indexes", "segment", s.base, "reason", reason)
		}
	}
	// Rebuild from the batch headers.
	size := s.size
	s.resetEmpty()
	_, end, err := s.walk(0, size, s.base, func(pos int64, h record.Batch) error {
		s.addBatch(pos, h, t.interval)
		return nil
	})
	var ce *CorruptSegmentError
	switch {
	case err != nil && !errors.As(err, &ce):
		return err // I/O
	case err == nil && end > next:
		return &CorruptSegmentError{Path: s.path(logSuffix), Position: size, Err: fmt.Errorf("ends at offset %d, but the next segment starts at %d", end, next)}
	case err != nil || end != next:
		if err := t.scanDamaged(s, size, next); err != nil {
			return err
		}
	}
	if err := t.writeIndexFiles(s, true); err != nil {
		return err
	}
	t.recovery.RebuiltIndexes = append(t.recovery.RebuiltIndexes, s.base)
	s.seal()
	return nil
}

// scanDamaged rebuilds the in-memory indexes of sealed segment s (size
// bytes, offsets up to next) whose header walk failed, checking every
// batch (frame, CRC, dense offsets) as verifyFrom does, and marks each
// damaged batch or range (see loadSealed). Bytes after a segment whose
// offsets already reach next hold no offset: they are left unread (size
// stops before them), not marked.
func (t *Tablet) scanDamaged(s *segment, size, next int64) error {
	s.resetEmpty()
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, size), 1<<20)
	pos, want := int64(0), s.base
	var buf []byte
	for pos < size && want < next {
		b, err := nextStored(r, pos, size, want, &buf)
		if err != nil && !errors.Is(err, record.ErrCorruptBatch) {
			return fmt.Errorf("scan segment %d at %d: %w", s.base, pos, err)
		}
		if err == nil {
			s.addBatch(pos, b, t.interval)
			pos += int64(len(b))
			want = b.NextOffset()
			continue
		}
		to, skip := next, size-pos
		var hdr [headerSize]byte
		n := min(headerSize, size-pos)
		if rerr := readFull(s.f, hdr[:n], pos); rerr == nil {
			if h, herr := checkHeader(hdr[:n], pos, size, want); herr == nil && h.NextOffset() <= next {
				to, skip = h.NextOffset(), int64(h.Size())
			}
		}
		t.markDamagedAtOpen(s, pos, skip, want, to, err)
		pos += skip
		want = to
		s.size, s.sinceIndex = pos, s.sinceIndex+skip
		if pos < size {
			r.Reset(io.NewSectionReader(s.f, pos, size-pos))
		}
	}
	switch {
	case want < next:
		// Cut short (or empty): the offsets up to next are missing.
		t.markDamagedAtOpen(s, pos, 0, want, next, fmt.Errorf("%w: the segment ends at offset %d (byte %d), the next one starts at %d", record.ErrCorruptBatch, want, pos, next))
	case want > next:
		return &CorruptSegmentError{Path: s.path(logSuffix), Position: pos, Err: fmt.Errorf("ends at offset %d, but the next segment starts at %d", want, next)}
	case pos < size:
		t.lg.Warn("ignoring bytes after the last batch of a sealed segment: they hold no offset", "segment", s.path(logSuffix), "position", pos, "bytes", size-pos)
	}
	s.size = pos
	return nil
}

// markDamagedAtOpen marks offsets [from, to) of sealed segment s (size
// bytes at byte pos) damaged, as VerifyStep does, and reports the range in
// RecoveryInfo.
func (t *Tablet) markDamagedAtOpen(s *segment, pos, size, from, to int64, err error) {
	t.markDamaged(s, pos, size, from, to, 0, &CorruptSegmentError{Path: s.path(logSuffix), Position: pos, Err: err})
	t.recovery.Damaged = append(t.recovery.Damaged, DamagedRange{From: from, To: to})
}

// loadIndexFiles uses a sealed segment's index files if they pass cheap
// checks (whole entries; first and last entries ordered and inside the
// segment; the walk from the last offset entry ends exactly at next). It
// returns why they cannot be used, or "".
func (t *Tablet) loadIndexFiles(s *segment, next int64) string {
	span := next - s.base
	idx, err1 := readEnds(t.fs, s.path(indexSuffix), offsetEntrySize)
	tidx, err2 := readEnds(t.fs, s.path(timeIndexSuffix), timeEntrySize)
	if errors.Is(err1, os.ErrNotExist) || errors.Is(err2, os.ErrNotExist) {
		return "missing"
	}
	if err := errors.Join(err1, err2); err != nil {
		return err.Error()
	}
	if err := checkOffsetIndex(idx.ends, span, s.size); err != nil {
		return "offset index: " + err.Error()
	}
	if err := checkTimeIndex(tidx.ends, span); err != nil {
		return "time index: " + err.Error()
	}
	if tidx.n == 0 {
		return "time index empty"
	}
	pos, base := int64(0), s.base
	if idx.n > 0 {
		e := decodeOffsetEntry(idx.ends[len(idx.ends)-offsetEntrySize:])
		pos, base = int64(e.pos), s.base+int64(e.rel)
	}
	lastTime := decodeTimeEntry(tidx.ends[len(tidx.ends)-timeEntrySize:])
	maxTs := lastTime.ts
	_, end, err := s.walk(pos, s.size, base, func(_ int64, h record.Batch) error {
		maxTs = max(maxTs, h.CommitTimestamp())
		return nil
	})
	if err != nil {
		return "walk from the last offset index entry: " + err.Error()
	}
	if end != next {
		return fmt.Sprintf("walk from the last offset index entry ends at offset %d, the next segment starts at %d", end, next)
	}
	s.sealed = true
	s.nOffsets, s.nTimes = idx.n, tidx.n
	s.maxTs, s.maxTsOff = maxTs, s.base+int64(lastTime.rel)
	return ""
}

// fileEnds holds the first and last entries of an index file.
type fileEnds struct {
	n    int    // entries in the file
	ends []byte // the first entry, then the last if there are two or more
}

func readEnds(fs vfs.FS, path string, entrySize int) (fileEnds, error) {
	f, err := fs.Open(path)
	if err != nil {
		return fileEnds{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fileEnds{}, err
	}
	if st.Size()%int64(entrySize) != 0 {
		return fileEnds{}, fmt.Errorf("%s: %d bytes is not a whole number of %d-byte entries", filepath.Base(path), st.Size(), entrySize)
	}
	n := int(st.Size() / int64(entrySize))
	var ends []byte
	if n > 0 {
		ends = make([]byte, entrySize, 2*entrySize)
		if err := readFull(f, ends, 0); err != nil {
			return fileEnds{}, err
		}
	}
	if n > 1 {
		ends = ends[:2*entrySize]
		if err := readFull(f, ends[entrySize:], st.Size()-int64(entrySize)); err != nil {
			return fileEnds{}, err
		}
	}
	return fileEnds{n: n, ends: ends}, nil
}

// recoverUnsynced scans the segments from segs[k] on, which the recovery
// point does not vouch for, as recoverActive does the last one: each is
// checked batch by batch (frame, CRC, dense offsets), and at the first
// invalid byte, or where a segment does not end at the next one's base, the
// log is cut and the segments after are deleted (a power cut may have lost
// the tail of a sealed segment that was not yet fsynced). What remains is
// fsynced, so the recovery point can move to the last segment.
func (t *Tablet) recoverUnsynced(k int) error {
	segs := t.mu.segments
	for i := k; i < len(segs); i++ {
		s := segs[i]
		st, err := s.f.Stat()
		if err != nil {
			return err
		}
		if err := t.recoverActive(s, st.Size()); err != nil {
			return err
		}
		if i == len(segs)-1 {
			break
		}
		next := segs[i+1].base
		if !t.recovery.Truncated && t.mu.logEnd == next {
			if err := t.writeIndexFiles(s, true); err != nil {
				return err
			}
			s.seal()
			continue
		}
		var dropped int64
		for _, d := range segs[i+1:] {
			st, err := d.f.Stat()
			if err != nil {
				return err
			}
			dropped += st.Size()
		}
		if !t.recovery.Truncated {
			t.noteCut(s, s.size, 0, fmt.Sprintf("the segment ends at offset %d, the next one starts at %d", t.mu.logEnd, next))
		}
		t.recovery.TruncatedBytes += dropped
		t.recovery.DroppedSegments = len(segs) - i - 1
		// Newest first, so that a crash part way leaves a prefix.
		for j := len(segs) - 1; j > i; j-- {
			segs[j].closeFiles()
			if err := segs[j].removeFiles(); err != nil {
				return err
			}
		}
		t.lg.Warn("deleted the segments after the cut", "segments", len(segs)-i-1, "bytes_dropped", dropped, "next_offset", t.mu.logEnd)
		t.mu.segments = segs[:i+1]
		break
	}
	for _, s := range t.mu.segments[k:] {
		if err := t.syncFile(s.path(logSuffix), s.f); err != nil {
			return fmt.Errorf("sync segment %d: %w", s.base, err)
		}
	}
	if !t.cfg.NoSync {
		// The rewritten index files, before the recovery point moves.
		return syncDir(t.fs, t.dir)
	}
	return nil
}

// loadActive opens the last segment. After a clean Close its index files
// are loaded and the batches after the last offset entry are checked
// (CRC included); otherwise, or if that fails, the whole segment is
// scanned with recoverActive.
func (t *Tablet) loadActive(s *segment, clean bool) error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	if clean {
		reason, err := t.loadActiveClean(s, st.Size())
		if err != nil {
			return err
		}
		if reason == "" {
			return nil
		}
		t.lg.Warn("clean shutdown marker found but the last segment's indexes are unusable, scanning it", "segment", s.base, "reason", reason)
	}
	return t.recoverActive(s, st.Size())
}

// loadActiveClean loads the last segment's index files written by Close.
// It returns why they cannot be used, or "".
func (t *Tablet) loadActiveClean(s *segment, size int64) (string, error) {
	s.resetEmpty()
	idx, err1 := readFile(t.fs, s.path(indexSuffix))
	tidx, err2 := readFile(t.fs, s.path(timeIndexSuffix))
	if err := errors.Join(err1, err2); err != nil {
		return err.Error(), nil
	}
	// Offsets are not known yet; the walk below checks the entries against
	// the batches.
	if err := checkOffsetIndex(idx, 1<<32, max(size, 1)); err != nil {
		return "offset index: " + err.Error(), nil
	}
	if err := checkTimeIndex(tidx, 1<<32); err != nil {
		return "time index: " + err.Error(), nil
	}
	for i := 0; i < len(idx); i += offsetEntrySize {
		s.offsets = append(s.offsets, decodeOffsetEntry(idx[i:]))
	}
	for i := 0; i < len(tidx); i += timeEntrySize {
		s.times = append(s.times, decodeTimeEntry(tidx[i:]))
	}
	pos, base := int64(0), s.base
	if n := len(s.offsets); n > 0 {
		pos, base = int64(s.offsets[n-1].pos), s.base+int64(s.offsets[n-1].rel)
		// Check the entry points at a batch with the offset it claims.
		var hdr [headerSize]byte
		if err := readFull(s.f, hdr[:], pos); err != nil {
			return "last offset index entry: " + err.Error(), nil
		}
		if _, err := checkHeader(hdr[:], pos, size, base); err != nil {
			return "last offset index entry: " + err.Error(), nil
		}
	}
	if n := len(s.times); n > 0 {
		s.maxTs, s.maxTsOff = s.times[n-1].ts, s.base+int64(s.times[n-1].rel)
	}
	s.size = size
	s.sinceIndex = size - pos
	if size > 0 {
		var hdr [headerSize]byte
		if err := readFull(s.f, hdr[:], 0); err != nil {
			return "first batch: " + err.Error(), nil
		}
		s.firstTs = record.Batch(hdr[:]).CommitTimestamp()
	}
	end := base
	var buf []byte
	for pos < size {
		b, err := readBatch(s.f, pos, size, end, &buf)
		if err != nil {
			return fmt.Sprintf("batch at position %d: %v", pos, err), nil
		}
		if ts := b.CommitTimestamp(); ts > s.maxTs {
			s.maxTs, s.maxTsOff = ts, b.BaseOffset()
		}
		pos += int64(len(b))
		end = b.NextOffset()
	}
	t.mu.logEnd = end
	return "", nil
}

// readBatch reads the whole batch at pos (which must end by end) and checks
// it like recovery does: frame, V2, base offset want, CRC.
func readBatch(f io.ReaderAt, pos, end, want int64, buf *[]byte) (record.Batch, error) {
	var lenField [12]byte
	if end-pos < int64(len(lenField)) {
		return nil, fmt.Errorf("%w: %d trailing bytes, shorter than a batch header", record.ErrCorruptBatch, end-pos)
	}
	if err := readFull(f, lenField[:], pos); err != nil {
		return nil, err
	}
	size := int64(int32(le.Uint32(lenField[8:]))) + 12
	if size < headerSize {
		return nil, fmt.Errorf("%w: length field says %d bytes", record.ErrCorruptBatch, size)
	}
	if pos+size > end {
		return nil, fmt.Errorf("%w: batch of %d bytes, only %d present", record.ErrCorruptBatch, size, end-pos)
	}
	if int64(cap(*buf)) < size {
		*buf = make([]byte, size)
	}
	b := (*buf)[:size]
	if err := readFull(f, b, pos); err != nil {
		return nil, err
	}
	if _, err := checkHeader(b, pos, end, want); err != nil {
		return nil, err
	}
	if err := record.Batch(b).Validate(); err != nil {
		return nil, err
	}
	return record.Batch(b), nil
}

// recoverActive scans the last segment from its start, checking every
// batch (frame, V2, CRC, offsets dense from the segment base), rebuilds its
// in-memory indexes, and cuts the file at the first invalid byte,
// reporting the cut.
func (t *Tablet) recoverActive(s *segment, size int64) error {
	s.resetEmpty()
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, size), 1<<20)
	pos, want := int64(0), s.base
	var buf []byte
	var reason error
	for pos < size {
		b, err := nextStored(r, pos, size, want, &buf)
		if err != nil {
			if !errors.Is(err, record.ErrCorruptBatch) {
				return fmt.Errorf("scan segment %d at %d: %w", s.base, pos, err)
			}
			reason = err
			break
		}
		s.addBatch(pos, b, t.interval)
		t.recovery.ScannedBatches++
		pos += int64(len(b))
		want = b.NextOffset()
	}
	t.mu.logEnd = want
	if reason == nil {
		return nil
	}
	if err := truncateFile(s.f, pos); err != nil {
		return fmt.Errorf("cut segment %d at %d: %w", s.base, pos, err)
	}
	if err := t.syncFile(s.path(logSuffix), s.f); err != nil {
		return fmt.Errorf("sync segment %d: %w", s.base, err)
	}
	t.noteCut(s, pos, size-pos, reason.Error())
	return nil
}

// noteCut records and logs that the log was cut at position pos of s,
// dropping n bytes of it.
func (t *Tablet) noteCut(s *segment, pos, n int64, reason string) {
	t.recovery.Truncated = true
	t.recovery.TruncatedSegment = s.base
	t.recovery.TruncatedPosition = pos
	t.recovery.TruncatedBytes = n
	t.recovery.TruncatedOffset = t.mu.logEnd
	t.recovery.TruncateReason = reason
	t.lg.Warn("cut invalid tail of the log",
		"segment", s.path(logSuffix), "position", pos, "bytes_dropped", n,
		"next_offset", t.mu.logEnd, "reason", reason)
}

// nextStored reads the next batch from r (at file position pos of a
// segment of size bytes) and checks it. It reads no further than the batch.
func nextStored(r *bufio.Reader, pos, size, want int64, buf *[]byte) (record.Batch, error) {
	if size-pos < 12 {
		return nil, fmt.Errorf("%w: torn: %d trailing bytes, shorter than a batch header", record.ErrCorruptBatch, size-pos)
	}
	lenField, err := r.Peek(12)
	if err != nil {
		return nil, err
	}
	n := int64(int32(le.Uint32(lenField[8:]))) + 12
	if n < headerSize {
		return nil, fmt.Errorf("%w: length field says %d bytes", record.ErrCorruptBatch, n)
	}
	if pos+n > size {
		return nil, fmt.Errorf("%w: torn: batch of %d bytes, only %d present", record.ErrCorruptBatch, n, size-pos)
	}
	if int64(cap(*buf)) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	if _, err := checkHeader(b, pos, size, want); err != nil {
		return nil, err
	}
	if err := record.Batch(b).Validate(); err != nil {
		return nil, err
	}
	return record.Batch(b), nil
}

// loadEpochs loads the leader epoch checkpoint, rebuilding it from the
// batches' leader epochs if it is missing (and the log is not empty) or
// unreadable, and trims it to the log's bounds.
func (t *Tablet) loadEpochs() error {
	start, end := t.mu.segments[0].base, t.mu.logEnd
	data, err := readFile(t.fs, filepath.Join(t.dir, epochFile))
	var c epochCache
	rebuild, persist := false, false
	switch {
	case errors.Is(err, os.ErrNotExist):
		rebuild, persist = start != end, true
	case err != nil:
		return err
	default:
		es, perr := parseEpochs(data)
		if perr != nil {
			t.lg.Warn("leader epoch checkpoint unreadable, rebuilding it from the log", "error", perr)
			rebuild, persist = true, true
		}
		c.entries = es
	}
	if rebuild {
		c = epochCache{}
		err := t.walkFrom(start, func(h record.Batch) error {
			if e := h.LeaderEpoch(); e >= 0 && e != c.latestEpoch() {
				c.assign(EpochEntry{Epoch: e, StartOffset: h.BaseOffset()})
			}
			return nil
		})
		if err != nil {
			return err
		}
		t.recovery.EpochsRebuilt = true
	}
	// An entry may start at the log end (a leader that has not appended
	// yet), not beyond it.
	if c.truncateFromEnd(end + 1) {
		persist = true
	}
	if c.truncateFromStart(start) {
		persist = true
	}
	if persist {
		return t.installEpochs(c)
	}
	t.mu.epochs = c
	return nil
}

// loadWriterState rebuilds the writer state as of offset end (the log
// end): from the newest readable snapshot in [log start, end], then the
// batches after it, less the writers expired by now; snapshots beyond end
// (from a log since cut) are deleted. It returns the offset of the snapshot used, or -1. appendMu
// held.
func (t *Tablet) loadWriterState(end int64) (int64, error) {
	start := t.mu.segments[0].base
	if err := t.removeSnapshots(func(o int64) bool { return o > end || o < start }); err != nil {
		return -1, err
	}
	ws, from, used := newWriterState(), start, int64(-1)
	for i := len(t.snapshots) - 1; i >= 0; i-- {
		o := t.snapshots[i]
		data, err := readFile(t.fs, filepath.Join(t.dir, fileName(o, snapshotSuffix)))
		if err == nil {
			var got *writerState
			if got, err = decodeWriterSnapshot(data, o); err == nil {
				ws, from, used = got, o, o
				break
			}
		}
		t.lg.Warn("writer snapshot unusable, trying an older one", "offset", o, "error", err)
	}
	if from < end {
		err := t.walkFrom(from, func(h record.Batch) error {
			if h.BaseOffset() >= end {
				return errStop
			}
			ws.apply(h)
			return nil
		})
		if err != nil {
			return -1, err
		}
	}
	// Writers that expired before the restart stay forgotten: the
	// snapshot, or the batches replayed, may predate their expiration.
	t.removeExpiredLocked(ws)
	t.writers = ws
	return used, nil
}

// walkFrom calls fn with the header of each batch from the one holding
// offset to the log end, in offset order. appendMu held (so the segments
// do not change).
func (t *Tablet) walkFrom(offset int64, fn func(h record.Batch) error) error {
	segs := t.mu.segments
	i, found := slices.BinarySearchFunc(segs, offset, func(s *segment, o int64) int {
		switch {
		case s.base < o:
			return -1
		case s.base > o:
			return 1
		}
		return 0
	})
	if !found {
		i--
	}
	if i < 0 {
		i = 0
	}
	for ; i < len(segs); i++ {
		s := segs[i]
		var pos, base int64
		var err error
		if s.sealed {
			pos, base, err = t.lookupSealed(s, max(offset, s.base), true)
			if err != nil {
				return err
			}
		} else {
			pos, base = s.lookupMem(max(offset, s.base))
		}
		damaged := t.damagedIn(s.base)
		stopped := false
		for pos < s.size && !stopped {
			var at int64
			at, _, err = s.walk(pos, s.size, base, func(p int64, h record.Batch) error {
				if _, bad := damaged[p]; bad || h.LastOffset() < offset {
					return nil // a damaged batch's header is not trusted either
				}
				if err := fn(h); err == errStop {
					stopped = true
					return errStop
				} else if err != nil {
					return err
				}
				return nil
			})
			if err == nil {
				break
			}
			d, ok := damaged[at]
			if !ok {
				return err
			}
			// A damaged range (marked at Open or by VerifyStep): its
			// batches are unknown; go on after it.
			t.lg.Warn("skipping a damaged range of the log: its batches' writer and leader epoch are not known", "segment", s.path(logSuffix), "offset", d.from, "next_offset", d.to)
			pos, base, err = d.pos+d.size, d.to, nil
		}
		if stopped {
			return nil
		}
	}
	return nil
}

// damagedAt returns the damaged range (of the current truncation
// generation) of the segment with base offset seg that starts at offset
// from, if there is one.
func (t *Tablet) damagedAt(seg, from int64) (damagedRange, bool) {
	for _, r := range t.damagedIn(seg) {
		if r.from == from {
			return r, true
		}
	}
	return damagedRange{}, false
}

// damagedIn returns the damaged ranges (of the current truncation
// generation) of the segment with base offset seg, by the byte position
// where each starts.
func (t *Tablet) damagedIn(seg int64) map[int64]damagedRange {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.verify.mu.Lock()
	defer t.verify.mu.Unlock()
	var out map[int64]damagedRange
	for _, r := range t.verify.mu.damaged {
		if r.gen == t.mu.truncGen && r.seg == seg {
			if out == nil {
				out = map[int64]damagedRange{}
			}
			out[r.pos] = r
		}
	}
	return out
}
