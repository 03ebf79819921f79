package log

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/record"
)

// File name suffixes inside a tablet directory.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	snapshotSuffix  = ".writer_snapshot"
	tmpSuffix       = ".tmp"
)

// fileName is "<offset as 20 digits><suffix>", Kafka's naming, so that
// names sort like offsets.
func fileName(offset int64, suffix string) string {
	return fmt.Sprintf("%020d%s", offset, suffix)
}

// parseFileName returns the offset of a name made by fileName with suffix.
func parseFileName(name, suffix string) (int64, bool) {
	if len(name) != 20+len(suffix) || name[20:] != suffix {
		return 0, false
	}
	o, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || o < 0 {
		return 0, false
	}
	return o, true
}

// segment is one <base>.log file and its indexes.
//
// Fields marked "writer" are written only by the goroutine holding
// Tablet.appendMu, and only while it also holds Tablet.mu; so they may be
// read under either lock. Fields marked "mu" are guarded by Tablet.mu.
type segment struct {
	base int64
	fs   vfs.FS
	dir  string
	f    vfs.File // the .log file, open read-write for the segment's life

	// writer: bytes of whole batches in the file. Bytes past size (a torn
	// or failed write) are never read and are overwritten by the next
	// append.
	size int64
	// writer: the largest commit timestamp in the segment (-1 when empty),
	// and the base offset of the first batch that carries it.
	maxTs    int64
	maxTsOff int64
	// writer: the commit timestamp of the first batch (-1 when empty); the
	// age used by Config.SegmentAge.
	firstTs int64
	// writer: a sealed segment never changes again (unless a truncation
	// reactivates it); its indexes live in files.
	sealed bool
	// writer, active segment only: the indexes in memory and the bytes
	// appended since the last offset index entry.
	offsets    []offsetEntry
	times      []timeEntry
	sinceIndex int64
	// writer, sealed segment only: the entry counts of the index files.
	nOffsets, nTimes int

	// mu: readers using f (or the index files) outside the lock, and
	// whether the segment has left the log (its files are closed when the
	// last reader leaves).
	refs    int
	removed bool

	// idx holds the lazily opened index files of a sealed segment, their
	// entry counts (from their sizes when opened), and gen, which
	// rebuildIndexes increments each time it replaces the files; the
	// handles it replaced stay open in retired (a reader may still be
	// using them) until the segment's files are closed.
	idx struct {
		sync.Mutex
		offsets, times   vfs.File
		nOffsets, nTimes int
		gen              uint64
		retired          []vfs.File
		closed           bool
	}
}

// indexView is a sealed segment's open index files as indexFiles found
// them: the files, their entry counts, and the index generation (see
// segment.idx).
type indexView struct {
	offsets, times   vfs.File
	nOffsets, nTimes int
	gen              uint64
}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, fileName(s.base, suffix))
}

// newSegmentState resets the writer fields of an empty active segment.
func (s *segment) resetEmpty() {
	s.size = 0
	s.maxTs, s.maxTsOff, s.firstTs = -1, -1, -1
	s.sealed = false
	s.offsets, s.times, s.sinceIndex = nil, nil, 0
	s.nOffsets, s.nTimes = 0, 0
}

// seal makes the active segment sealed: its indexes now live in its index
// files (written by the caller). appendMu and mu held.
func (s *segment) seal() {
	s.sealed = true
	s.nOffsets, s.nTimes = len(s.offsets), len(s.finalTimes())
	s.offsets, s.times = nil, nil
}

// addBatch records a batch appended at pos in the in-memory indexes of the
// active segment. interval is Config.IndexIntervalBytes.
func (s *segment) addBatch(pos int64, h record.Batch, interval int64) {
	base, ts := h.BaseOffset(), h.CommitTimestamp()
	if s.firstTs < 0 {
		s.firstTs = ts
	}
	if ts > s.maxTs {
		s.maxTs, s.maxTsOff = ts, base
	}
	if s.sinceIndex >= interval {
		s.offsets = append(s.offsets, offsetEntry{rel: uint32(base - s.base), pos: uint32(pos)})
		if n := len(s.times); n == 0 || s.maxTs > s.times[n-1].ts {
			s.times = append(s.times, timeEntry{ts: s.maxTs, rel: uint32(s.maxTsOff - s.base)})
		}
		s.sinceIndex = 0
	}
	s.sinceIndex += int64(h.Size())
	s.size = pos + int64(h.Size())
}

// finalTimes returns the time index to store when the segment is sealed:
// the in-memory entries plus one for the segment's largest timestamp, so
// that the last entry of a sealed segment's time index is its newest
// commit timestamp (what retention looks at).
func (s *segment) finalTimes() []timeEntry {
	ts := s.times
	if s.maxTs >= 0 && (len(ts) == 0 || s.maxTs > ts[len(ts)-1].ts) {
		ts = append(ts[:len(ts):len(ts)], timeEntry{ts: s.maxTs, rel: uint32(s.maxTsOff - s.base)})
	}
	return ts
}

// indexFiles opens the index files of a sealed segment on first use.
func (s *segment) indexFiles() (indexView, error) {
	s.idx.Lock()
	defer s.idx.Unlock()
	if s.idx.closed {
		return indexView{}, os.ErrClosed
	}
	open := func(suffix string, entrySize int) (vfs.File, int, error) {
		f, err := s.fs.Open(s.path(suffix))
		if err != nil {
			return nil, 0, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		return f, int(st.Size() / int64(entrySize)), nil
	}
	var err error
	if s.idx.offsets == nil {
		if s.idx.offsets, s.idx.nOffsets, err = open(indexSuffix, offsetEntrySize); err != nil {
			return indexView{}, err
		}
	}
	if s.idx.times == nil {
		if s.idx.times, s.idx.nTimes, err = open(timeIndexSuffix, timeEntrySize); err != nil {
			return indexView{}, err
		}
	}
	return indexView{offsets: s.idx.offsets, times: s.idx.times, nOffsets: s.idx.nOffsets, nTimes: s.idx.nTimes, gen: s.idx.gen}, nil
}

// retireIndexFiles makes the next indexFiles open the index files anew
// (rebuildIndexes rewrote them) and increments the index generation. The
// handles in use stay open for the readers using them.
func (s *segment) retireIndexFiles() {
	s.idx.Lock()
	defer s.idx.Unlock()
	for _, f := range []vfs.File{s.idx.offsets, s.idx.times} {
		if f != nil {
			s.idx.retired = append(s.idx.retired, f)
		}
	}
	s.idx.offsets, s.idx.times = nil, nil
	s.idx.gen++
}

// indexGen returns the index generation (see segment.idx).
func (s *segment) indexGen() uint64 {
	s.idx.Lock()
	defer s.idx.Unlock()
	return s.idx.gen
}

// closeIndexFiles closes the index files opened by indexFiles. If final,
// they are never opened again.
func (s *segment) closeIndexFiles(final bool) {
	s.idx.Lock()
	defer s.idx.Unlock()
	for _, f := range []vfs.File{s.idx.offsets, s.idx.times} {
		if f != nil {
			f.Close()
		}
	}
	if final {
		for _, f := range s.idx.retired {
			f.Close()
		}
		s.idx.retired = nil
	}
	s.idx.offsets, s.idx.times = nil, nil
	s.idx.closed = final
}

// closeFiles closes every file of the segment.
func (s *segment) closeFiles() error {
	s.closeIndexFiles(true)
	return s.f.Close()
}

// removeFiles deletes the segment's files (the .log last, so that a crash
// in between leaves a segment whose missing indexes are rebuilt).
func (s *segment) removeFiles() error {
	var errs []error
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, logSuffix} {
		if err := s.fs.Remove(s.path(suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lookup returns the byte position and base offset of a batch at or
// before the one holding offset (which must lie in the segment): the
// nearest index entry, or the segment start.
func (s *segment) lookupMem(offset int64) (pos, base int64) {
	if e, ok := lookupOffsetMem(s.offsets, uint32(offset-s.base)); ok {
		return int64(e.pos), s.base + int64(e.rel)
	}
	return 0, s.base
}

// errIndexEntry: an index entry of a sealed segment names a batch the
// segment does not hold where the entry says (the index file is damaged;
// Tablet.rebuildIndexes rebuilds it from the segment).
var errIndexEntry = errors.New("the index entry does not name a batch of the segment")

// lookupFile is lookupMem for a sealed segment, from its index file. It
// checks the entry it lands on: a batch with the entry's base offset must
// start at the entry's position (a sound header; the walk that follows
// checks the rest), else the error is a *CorruptSegmentError naming the
// index file and wrapping errIndexEntry. gen is the index generation the
// lookup used, for rebuildIndexes.
func (s *segment) lookupFile(offset int64) (pos, base int64, gen uint64, err error) {
	v, err := s.indexFiles()
	if err != nil {
		return 0, 0, 0, err
	}
	if v.nOffsets == 0 {
		return 0, s.base, v.gen, nil
	}
	e, i, err := lookupOffsetFile(v.offsets, v.nOffsets, uint32(offset-s.base))
	if err != nil || i < 0 {
		return 0, s.base, v.gen, err
	}
	pos, base = int64(e.pos), s.base+int64(e.rel)
	if err := s.checkEntry(pos, base); err != nil {
		return 0, 0, v.gen, &CorruptSegmentError{Path: s.path(indexSuffix), Position: int64(i) * offsetEntrySize,
			Err: fmt.Errorf("%w: entry %d says offset %d starts at byte %d: %w", errIndexEntry, i, base, pos, err)}
	}
	return pos, base, v.gen, nil
}

// checkEntry checks that a batch with base offset base starts at byte pos
// of the segment: a sound V2 header (its size is not checked against the
// segment's: the walk from it does that).
func (s *segment) checkEntry(pos, base int64) error {
	var hdr [headerSize]byte
	if err := readFull(s.f, hdr[:], pos); err != nil {
		return err
	}
	_, err := checkHeader(hdr[:], pos, math.MaxInt64, base)
	return err
}

// headerSize is the bytes of a batch header a header walk reads: all V2
// fields before the statistics.
const headerSize = record.BatchHeaderSize

// errStop ends a walk early without error.
var errStop = errors.New("stop")

// walk reads the headers of the batches of s from pos (where a batch with
// base offset wantBase starts) up to end, checking that each is a sound V2
// frame that fits before end and continues the offsets densely, and calls
// fn with each header (only the header's bytes are valid). fn may return
// errStop. walk returns the position and offset after the last batch
// visited; an unsound frame gives a *CorruptSegmentError.
func (s *segment) walk(pos, end, wantBase int64, fn func(pos int64, h record.Batch) error) (int64, int64, error) {
	var hdr [headerSize]byte
	for pos < end {
		n := min(int64(len(hdr)), end-pos)
		if _, err := s.f.ReadAt(hdr[:n], pos); err != nil {
			return pos, wantBase, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
		}
		h, err := checkHeader(hdr[:n], pos, end, wantBase)
		if err != nil {
			return pos, wantBase, &CorruptSegmentError{Path: s.path(logSuffix), Position: pos, Err: err}
		}
		if fn != nil {
			if err := fn(pos, h); err == errStop {
				return pos, wantBase, nil
			} else if err != nil {
				return pos, wantBase, err
			}
		}
		pos += int64(h.Size())
		wantBase = h.NextOffset()
	}
	return pos, wantBase, nil
}

// checkHeader checks the header of a stored batch at pos: a V2 frame whose
// declared size fits before end, consistent record counts, and base offset
// wantBase (unless wantBase < 0).
func checkHeader(h []byte, pos, end, wantBase int64) (record.Batch, error) {
	if len(h) < headerSize {
		return nil, fmt.Errorf("%w: %d bytes left, shorter than a batch header", record.ErrCorruptBatch, len(h))
	}
	b := record.Batch(h)
	if m := b.Magic(); m != record.CurrentMagic {
		return nil, fmt.Errorf("%w: magic %d, want %d", record.ErrCorruptBatch, m, record.CurrentMagic)
	}
	size := int64(b.Length()) + 12
	if size < headerSize {
		return nil, fmt.Errorf("%w: length field says %d bytes", record.ErrCorruptBatch, size)
	}
	if pos+size > end {
		return nil, fmt.Errorf("%w: batch of %d bytes runs past the end of the data (%d)", record.ErrCorruptBatch, size, end)
	}
	count, delta := b.RecordCount(), b.LastOffsetDelta()
	if count < 0 || (count == 0 && delta != 0) || (count > 0 && delta != count-1) {
		return nil, fmt.Errorf("%w: record count %d with last offset delta %d", record.ErrCorruptBatch, count, delta)
	}
	if wantBase >= 0 && b.BaseOffset() != wantBase {
		return nil, fmt.Errorf("%w: base offset %d, want %d", record.ErrCorruptBatch, b.BaseOffset(), wantBase)
	}
	return b, nil
}

// readFull is ReadAt that treats a short read at end of file as
// io.ErrUnexpectedEOF.
func readFull(f io.ReaderAt, buf []byte, pos int64) error {
	n, err := f.ReadAt(buf, pos)
	if n == len(buf) {
		return nil
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
