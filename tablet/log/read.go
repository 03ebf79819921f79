package log

import (
	"fmt"
	"sort"

	"strom/record"
)

// Read returns whole stored batches starting with the one that holds
// offset: as many as fit in maxBytes, but always the first one whole even
// if it is larger (so a reader always makes progress), and never a batch
// whose last offset is ≥ maxOffset (pass the high watermark to keep
// uncommitted data from readers; math.MaxInt64 for no limit). The batches
// all come from one segment, so a read may return less than maxBytes while
// more data follows. ReadInfo.Batches is nil when offset is the log end or
// nothing below maxOffset remains. An offset below the log start or above
// the log end gives *OffsetOutOfRangeError.
//
// Read does its file I/O without holding any lock, concurrently with
// appends; a truncation that races with it makes it start over, so it
// never returns bytes the log no longer holds.
//
// Offsets that VerifyStep found damaged are refused: an offset in such a
// range gives a *CorruptRecordError naming the range (retrying gets the same
// answer on this node; a reader may skip to its NextOffset), and a read
// before one stops at its start.
func (t *Tablet) Read(offset int64, maxBytes int, maxOffset int64) (ReadInfo, error) {
	return t.ReadInto(nil, offset, maxBytes, maxOffset)
}

// ReadInto is Read into buf's memory: ReadInfo.Batches is buf[:n] when
// cap(buf) holds what the read takes from the file (up to maxBytes, or the
// first batch when it is larger), else a fresh buffer. Only Batches' bytes
// are written. A caller reusing one buffer for its reads (a pool) saves
// the allocation and the zeroing of a fresh one per read; it must not
// reuse buf while it still uses Batches. Batches has the capacity of the
// buffer read into, fresh or buf, which a read that ends before a batch
// that does not fit leaves partly unused: a pool keeps Batches[:0].
func (t *Tablet) ReadInto(buf []byte, offset int64, maxBytes int, maxOffset int64) (ReadInfo, error) {
	for {
		info, retry, err := t.readOnce(buf, offset, maxBytes, maxOffset)
		if !retry {
			return info, err
		}
	}
}

func (t *Tablet) readOnce(dst []byte, offset int64, maxBytes int, maxOffset int64) (info ReadInfo, retry bool, err error) {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return ReadInfo{}, false, ErrClosed
	}
	segs := t.mu.segments
	start, end := segs[0].base, t.mu.logEnd
	info = ReadInfo{LogStartOffset: start, LogEndOffset: end, HighWatermark: t.mu.hw}
	if offset < start || offset > end {
		t.mu.Unlock()
		return info, false, &OffsetOutOfRangeError{Offset: offset, LogStart: start, LogEnd: end}
	}
	damaged, next := t.damagedLocked(offset)
	if damaged != nil {
		t.mu.Unlock()
		return info, false, damaged
	}
	limit := min(maxOffset, end, next)
	if offset >= limit {
		t.mu.Unlock()
		return info, false, nil
	}
	s := segs[sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })-1]
	size, sealed := s.size, s.sealed
	var pos, base int64
	if !sealed {
		pos, base = s.lookupMem(offset)
	}
	s.refs++
	gen := t.mu.truncGen
	t.mu.Unlock()

	if sealed {
		pos, base, err = t.lookupSealed(s, offset, false)
	}
	if err == nil {
		info.Batches, err = t.readSegment(dst, s, pos, base, size, offset, limit, maxBytes)
	} else {
		err = fmt.Errorf("read segment %d index: %w", s.base, err)
	}
	if t.testHookReadIO != nil {
		t.testHookReadIO()
	}
	again := t.mustRetry(gen, err, s)
	t.release(s)
	if again {
		return ReadInfo{}, true, nil
	}
	return info, false, err
}

// mustRetry reports whether a read that began when truncGen was gen must
// start over: a truncation has begun since (its bytes may be gone or
// rewritten), or it failed on a segment that has since left the log
// (retention deleted its index files; the retry reports the new range).
func (t *Tablet) mustRetry(gen uint64, err error, segs ...*segment) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.truncGen != gen {
		return true
	}
	if err != nil {
		for _, s := range segs {
			if s.removed {
				return true
			}
		}
	}
	return false
}

// readSegment reads the batches for Read from s, whose first size bytes are
// whole batches, into dst's memory if it has the capacity (see ReadInto);
// the batch at pos, with base offset base, is at or before the one holding
// offset.
func (t *Tablet) readSegment(dst []byte, s *segment, pos, base, size, offset, limit int64, maxBytes int) ([]byte, error) {
	var first record.Batch
	var firstPos int64
	_, _, err := s.walk(pos, size, base, func(p int64, h record.Batch) error {
		if h.LastOffset() < offset {
			return nil
		}
		first, firstPos = append(record.Batch(nil), h...), p
		return errStop
	})
	if err != nil {
		return nil, err
	}
	if first == nil {
		return nil, &CorruptSegmentError{Path: s.path(logSuffix), Position: size, Err: fmt.Errorf("offset %d is not in the segment's batches", offset)}
	}
	if first.LastOffset() >= limit {
		return nil, nil
	}
	n := min(max(int64(maxBytes), int64(first.Size())), size-firstPos)
	var buf []byte
	if int64(cap(dst)) >= n {
		buf = dst[:n]
	} else {
		buf = make([]byte, n)
	}
	if err := readFull(s.f, buf, firstPos); err != nil {
		return nil, fmt.Errorf("read segment %d at %d: %w", s.base, firstPos, err)
	}
	// Keep the whole batches below limit.
	cut, want := int64(0), first.BaseOffset()
	for cut < n {
		h, err := checkHeader(buf[cut:min(n, cut+headerSize)], firstPos+cut, firstPos+n, want)
		if err != nil || h.LastOffset() >= limit {
			// Past the buffer's last whole batch, or at limit. Damage here
			// is reported by the read that starts at this batch.
			break
		}
		cut += int64(h.Size())
		want = h.NextOffset()
	}
	return buf[:cut], nil
}

// OffsetForTimestamp returns the offset of the first batch whose commit
// timestamp is ≥ ms (Kafka's ListOffsets by timestamp, using the time
// indexes); found is false (and offset -1) when every batch is older. The
// result may lie
// above the high watermark; the caller clamps it.
func (t *Tablet) OffsetForTimestamp(ms int64) (offset int64, found bool, err error) {
	rebuilt := false
	for {
		o, ok, retry, err := t.offsetForTimestampOnce(ms, &rebuilt)
		if !retry {
			return o, ok, err
		}
	}
}

// tsView is what offsetForTimestampOnce needs of a segment, taken under mu.
type tsView struct {
	s         *segment
	sealed    bool
	size      int64
	startOff  int64 // for an active segment: start the walk at this batch
	pos, base int64 // index hint for startOff
}

// offsetForTimestampOnce is one try of OffsetForTimestamp. A lying time
// index entry (the batch it names does not start at its offset with its
// timestamp) has the segment's indexes rebuilt and the lookup start over,
// once (*rebuilt).
func (t *Tablet) offsetForTimestampOnce(ms int64, rebuilt *bool) (int64, bool, bool, error) {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return 0, false, false, ErrClosed
	}
	segs := t.mu.segments
	i := 0
	for i < len(segs) && segs[i].maxTs < ms {
		i++
	}
	if i == len(segs) {
		t.mu.Unlock()
		return -1, false, false, nil
	}
	// Every batch before segment i is older than ms; the answer is in i
	// (or, were an index wrong, after it).
	views := make([]tsView, 0, len(segs)-i)
	for _, s := range segs[i:] {
		v := tsView{s: s, sealed: s.sealed, size: s.size, startOff: s.base, base: s.base}
		if !s.sealed {
			if e, ok := lookupTimeMem(s.finalTimes(), ms); ok {
				v.startOff = s.base + int64(e.rel)
			}
			v.pos, v.base = s.lookupMem(v.startOff)
		}
		s.refs++
		views = append(views, v)
	}
	gen := t.mu.truncGen
	t.mu.Unlock()
	defer func() {
		for _, v := range views {
			t.release(v.s)
		}
	}()

	var result int64 = -1
	var err error
	var lie error // a time index entry that does not hold
	for k, v := range views {
		h := timeHint{entry: -1} // none: nothing to check
		if k == 0 && v.sealed {
			if h, err = t.timeHint(v.s, ms); err != nil {
				break
			}
			v.startOff, v.pos, v.base = h.startOff, h.pos, h.base
		}
		if k > 0 {
			v.startOff, v.pos, v.base = v.s.base, 0, v.s.base
		}
		checked := h.entry < 0 // the batch the time entry names, found as it says
		_, _, err = v.s.walk(v.pos, v.size, v.base, func(_ int64, b record.Batch) error {
			if !checked && b.LastOffset() >= v.startOff {
				if b.BaseOffset() != v.startOff || b.CommitTimestamp() != h.ts {
					lie = fmt.Errorf("%w: time index entry %d says offset %d has timestamp %d, the batch there holds [%d, %d] at %d",
						errIndexEntry, h.entry, v.startOff, h.ts, b.BaseOffset(), b.LastOffset(), b.CommitTimestamp())
					return errStop
				}
				checked = true
			}
			if b.LastOffset() >= v.startOff && b.CommitTimestamp() >= ms {
				result = b.BaseOffset()
				return errStop
			}
			return nil
		})
		if err == nil && lie == nil && !checked {
			lie = fmt.Errorf("%w: time index entry %d names offset %d, which the segment does not hold", errIndexEntry, h.entry, v.startOff)
		}
		if lie != nil {
			lie = &CorruptSegmentError{Path: v.s.path(timeIndexSuffix), Position: int64(h.entry) * timeEntrySize, Err: lie}
			if *rebuilt {
				return 0, false, false, lie
			}
			*rebuilt = true
			if err := t.rebuildIndexes(v.s, h.gen, lie, false); err != nil {
				return 0, false, false, err
			}
			return 0, false, true, nil
		}
		if err != nil || result >= 0 {
			break
		}
	}
	segsUsed := make([]*segment, len(views))
	for k, v := range views {
		segsUsed[k] = v.s
	}
	if t.mustRetry(gen, err, segsUsed...) {
		return 0, false, true, nil
	}
	return result, result >= 0 && err == nil, false, err
}

// timeHint is where to start looking for a timestamp in a sealed segment:
// the batch its time index names (startOff; entry is the entry's index in
// the file and ts its timestamp, or entry is -1 and startOff the segment's
// base when none applies), the offset index hint for it (pos, base), and
// the index generation used.
type timeHint struct {
	startOff, pos, base int64
	entry               int
	ts                  int64
	gen                 uint64
}

// timeHint finds, from sealed segment s's time index, the batch to start
// looking for timestamp ms at.
func (t *Tablet) timeHint(s *segment, ms int64) (timeHint, error) {
	h := timeHint{startOff: s.base, entry: -1}
	v, err := s.indexFiles()
	if err != nil {
		return h, err
	}
	h.gen = v.gen
	if v.nTimes > 0 {
		e, i, err := lookupTimeFile(v.times, v.nTimes, ms)
		if err != nil {
			return h, err
		}
		if i >= 0 {
			h.startOff, h.entry, h.ts = s.base+int64(e.rel), i, e.ts
		}
	}
	h.pos, h.base, err = t.lookupSealed(s, h.startOff, false)
	return h, err
}
