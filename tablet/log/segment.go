package log

import (
	"errors"
	"fmt"
	"io"
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

	// idx holds the lazily opened index files of a sealed segment.
	idx struct {
		sync.Mutex
		offsets, times vfs.File
		closed         bool
	}
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
func (s *segment) indexFiles() (offsets, times vfs.File, err error) {
	s.idx.Lock()
	defer s.idx.Unlock()
	if s.idx.closed {
		return nil, nil, os.ErrClosed
	}
	if s.idx.offsets == nil {
		f, err := s.fs.Open(s.path(indexSuffix))
		if err != nil {
			return nil, nil, err
		}
		s.idx.offsets = f
	}
	if s.idx.times == nil {
		f, err := s.fs.Open(s.path(timeIndexSuffix))
		if err != nil {
			return nil, nil, err
		}
		s.idx.times = f
	}
	return s.idx.offsets, s.idx.times, nil
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

// lookupFile is lookupMem for a sealed segment, from its index file of n
// entries (s.nOffsets, read by the caller under a lock).
func (s *segment) lookupFile(offset int64, n int) (pos, base int64, err error) {
	if n == 0 {
		return 0, s.base, nil
	}
	f, _, err := s.indexFiles()
	if err != nil {
		return 0, 0, err
	}
	e, ok, err := lookupOffsetFile(f, n, uint32(offset-s.base))
	if err != nil || !ok {
		return 0, s.base, err
	}
	return int64(e.pos), s.base + int64(e.rel), nil
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
