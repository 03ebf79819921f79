package log

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"strom/record"
)

// Verify reads the whole log and checks every batch as recovery checks the
// last segment: sound frame, V2 layout, CRC, offsets dense from each
// segment's base to the next segment's. It returns the first problem as a
// *CorruptSegmentError naming the file and byte position, and repairs
// nothing. Open does not CRC-check sealed segments (that would read the
// whole log); Verify is the administrative check that does. It reads
// without locks held and does not block appends.
func (t *Tablet) Verify() error {
	for {
		t.mu.Lock()
		if t.mu.closed {
			t.mu.Unlock()
			return ErrClosed
		}
		segs := append([]*segment(nil), t.mu.segments...)
		sizes := make([]int64, len(segs))
		for i, s := range segs {
			sizes[i] = s.size
			s.refs++
		}
		end, gen := t.mu.logEnd, t.mu.truncGen
		t.mu.Unlock()

		var err error
		for i, s := range segs {
			next := end
			if i+1 < len(segs) {
				next = segs[i+1].base
			}
			if err = verifySegment(s, sizes[i], next); err != nil {
				break
			}
		}
		again := t.mustRetry(gen, err, segs...)
		for _, s := range segs {
			t.release(s)
		}
		if !again {
			return err
		}
	}
}

// verifySegment checks the first size bytes of s, which must hold batches
// with offsets from s.base to next.
func verifySegment(s *segment, size, next int64) error {
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, size), 1<<20)
	pos, want := int64(0), s.base
	var buf []byte
	for pos < size {
		b, err := nextStored(r, pos, size, want, &buf)
		if errors.Is(err, record.ErrCorruptBatch) {
			return &CorruptSegmentError{Path: s.path(logSuffix), Position: pos, Err: err}
		}
		if err != nil {
			return fmt.Errorf("verify segment %d at %d: %w", s.base, pos, err)
		}
		pos += int64(len(b))
		want = b.NextOffset()
	}
	if want != next {
		return &CorruptSegmentError{Path: s.path(logSuffix), Position: size, Err: fmt.Errorf("ends at offset %d, but the log continues at %d", want, next)}
	}
	return nil
}

// verifyState is the background check of sealed segments (VerifyStep) and
// what it found: the offset ranges that reads refuse. Its mutex is a leaf,
// taken with or without Tablet.mu (after it).
type verifyState struct {
	// bytes and corrupt count the bytes checked and the damaged batches
	// (or ranges) found, repaired the ranges RepairDamaged rewrote,
	// reindexed the lying index files rebuildIndexes rebuilt: counters for
	// metrics.
	bytes, corrupt, repaired, reindexed atomic.Int64

	mu struct {
		sync.Mutex
		cursor  verifyCursor
		damaged []damagedRange // ascending, not overlapping
	}
}

// verifyCursor is where the next VerifyStep goes on: position pos of the
// sealed segment with base offset base, whose batch there has base offset
// want. The zero cursor starts at the oldest sealed segment.
type verifyCursor struct {
	base, pos, want int64
	started         bool
}

// damagedRange is a range of offsets found damaged. It holds while the log
// is not truncated (truncGen unchanged): a truncation may rewrite it.
type damagedRange struct {
	from, to int64 // [from, to)
	gen      uint64
	err      error
	// seg, pos and size are where the range's bytes are: size bytes at
	// byte pos of the segment with base offset seg.
	seg, pos, size int64
}

// VerifiedBytes returns the bytes of sealed segments VerifyStep has
// checked since Open. Safe for concurrent use (a metric).
func (t *Tablet) VerifiedBytes() int64 { return t.verify.bytes.Load() }

// CorruptBatches returns the number of damaged batches (or ranges, where
// the damage hides where batches end) Open and VerifyStep have found. Safe
// for concurrent use (a metric).
func (t *Tablet) CorruptBatches() int64 { return t.verify.corrupt.Load() }

// FirstCorruptOffset returns the first offset of the lowest damaged range
// Open or VerifyStep found (and no truncation since cut away), or -1 if none.
// Safe for concurrent use.
func (t *Tablet) FirstCorruptOffset() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, next := t.damagedLocked(-1); next < math.MaxInt64 {
		return next
	}
	return -1
}

// damagedLocked returns the damaged range holding offset, if any, and the
// start of the first damaged range above offset (math.MaxInt64 if none).
// Ranges from before the last truncation are forgotten. Called with t.mu
// held.
func (t *Tablet) damagedLocked(offset int64) (*CorruptRecordError, int64) {
	v := &t.verify
	v.mu.Lock()
	defer v.mu.Unlock()
	next := int64(math.MaxInt64)
	kept := v.mu.damaged[:0]
	var hit *CorruptRecordError
	for _, r := range v.mu.damaged {
		if r.gen != t.mu.truncGen {
			continue
		}
		kept = append(kept, r)
		switch {
		case r.from <= offset && offset < r.to:
			hit = &CorruptRecordError{Offset: r.from, NextOffset: r.to, Err: r.err}
		case r.from > offset:
			next = min(next, r.from)
		}
	}
	v.mu.damaged = kept
	return hit, next
}

// VerifyStep checks about maxBytes (at least one batch) of the sealed
// segments' batches, frame and CRC, going on where the previous call
// stopped, oldest segment first, and round again after the newest sealed
// one. It returns the bytes it read: 0 when there is no sealed segment. A
// damaged batch is logged (Error), counted (CorruptBatches), and its
// offsets are refused to readers from then on (Read returns a
// *CorruptRecordError), while the rest of the log serves; when the damage
// hides where the batch ends, the rest of the segment is refused. The
// active segment is not checked: recovery checks it at open, and appends
// validate what they write. VerifyStep reads without locks held and does
// not block appends; calls must not overlap (one background checker).
func (t *Tablet) VerifyStep(maxBytes int64) (int64, error) {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return 0, ErrClosed
	}
	t.verify.mu.Lock()
	c := t.verify.mu.cursor
	t.verify.mu.Unlock()
	// Every segment but the last (the active one) is sealed.
	segs := t.mu.segments
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base >= c.base })
	switch {
	case len(segs) == 1:
		t.mu.Unlock()
		return 0, nil
	case !c.started || i >= len(segs)-1:
		i = 0 // a new round
		c = verifyCursor{base: segs[0].base, want: segs[0].base, started: true}
	case segs[i].base != c.base:
		// The cursor's segment left the log (retention): the next one.
		c = verifyCursor{base: segs[i].base, want: segs[i].base, started: true}
	}
	s, size, end, gen := segs[i], segs[i].size, segs[i+1].base, t.mu.truncGen
	s.refs++
	t.mu.Unlock()
	defer t.release(s)

	start := c.pos
	var err error
	c, err = t.verifyFrom(s, size, end, gen, c, maxBytes)
	n := c.pos - start
	if err != nil && t.mustRetry(gen, err, s) {
		// A truncation (a follower cutting a damaged range it found, say)
		// or retention took the bytes being read: no finding; a new round.
		err, c = nil, verifyCursor{}
	}
	if c.pos >= size {
		c = verifyCursor{base: end, want: end, started: true} // the next segment
	}
	t.verify.bytes.Add(n)
	t.verify.mu.Lock()
	t.verify.mu.cursor = c
	t.verify.mu.Unlock()
	return n, err
}

// verifyFrom checks the batches of sealed segment s (size bytes, offsets up
// to end) from cursor c until about maxBytes are read or the segment ends,
// and returns the cursor after them.
func (t *Tablet) verifyFrom(s *segment, size, end int64, gen uint64, c verifyCursor, maxBytes int64) (verifyCursor, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, c.pos, size-c.pos), int(min(max(maxBytes, 4096), 1<<20)))
	var buf []byte
	for read := int64(0); c.pos < size && read < max(maxBytes, 1); {
		b, err := nextStored(r, c.pos, size, c.want, &buf)
		if err != nil && !errors.Is(err, record.ErrCorruptBatch) {
			return c, fmt.Errorf("verify segment %d at %d: %w", s.base, c.pos, err)
		}
		if err == nil {
			c.pos += int64(len(b))
			read += int64(len(b))
			c.want = b.NextOffset()
			continue
		}
		// A batch whose header holds (so its end is known) lost only
		// itself; otherwise nothing after it in the segment can be told
		// apart.
		to, skip := end, size-c.pos
		var hdr [headerSize]byte
		if rerr := readFull(s.f, hdr[:min(headerSize, size-c.pos)], c.pos); rerr == nil {
			if h, herr := checkHeader(hdr[:min(headerSize, size-c.pos)], c.pos, size, c.want); herr == nil {
				to, skip = h.NextOffset(), int64(h.Size())
			}
		}
		t.markDamaged(s, c.pos, skip, c.want, to, gen, err)
		c.pos += skip
		read += skip
		c.want = to
		if c.pos < size {
			r.Reset(io.NewSectionReader(s.f, c.pos, size-c.pos))
		}
	}
	return c, nil
}

// markDamaged records offsets [from, to) of segment s as damaged, found at
// byte pos (size bytes), unless a truncation since (gen) may have rewritten
// them. A range found again in a later round is not counted or logged
// again; one found while a truncation rewrote the segment is no finding at
// all.
func (t *Tablet) markDamaged(s *segment, pos, size, from, to int64, gen uint64, err error) {
	t.mu.Lock()
	v := &t.verify
	v.mu.Lock()
	known := t.mu.truncGen != gen
	for _, r := range v.mu.damaged {
		known = known || r.from == from && r.gen == gen
	}
	if !known {
		v.mu.damaged = append(v.mu.damaged, damagedRange{from: from, to: to, gen: gen, err: err, seg: s.base, pos: pos, size: size})
		sort.Slice(v.mu.damaged, func(i, j int) bool { return v.mu.damaged[i].from < v.mu.damaged[j].from })
	}
	v.mu.Unlock()
	t.mu.Unlock()
	if known {
		return
	}
	v.corrupt.Add(1)
	t.lg.Error("corrupt batch in a sealed segment: its offsets are refused to readers",
		"segment", s.path(logSuffix), "position", pos, "offset", from, "next_offset", to, "err", err)
}
