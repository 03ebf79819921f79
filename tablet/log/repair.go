package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
)

// ErrRepair: a damaged range could not be rewritten from the copy given
// (it is not a sound copy of the range's batches, or the range left the
// log). Returned wrapped, naming the range; the range stays refused.
var ErrRepair = errors.New("log: cannot repair the damaged range")

// DamagedRange is a range of offsets [From, To) that VerifyStep (or Open)
// found damaged and that reads refuse.
type DamagedRange struct{ From, To int64 }

// Damaged returns the damaged ranges reads refuse now, ascending (none
// from before the last truncation). Safe for concurrent use.
func (t *Tablet) Damaged() []DamagedRange {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.damagedLocked(-1) // forgets the ranges of older truncation generations
	t.verify.mu.Lock()
	defer t.verify.mu.Unlock()
	out := make([]DamagedRange, 0, len(t.verify.mu.damaged))
	for _, r := range t.verify.mu.damaged {
		out = append(out, DamagedRange{From: r.from, To: r.to})
	}
	return out
}

// RepairedRanges returns the damaged ranges RepairDamaged has rewritten
// since Open. Safe for concurrent use (a metric).
func (t *Tablet) RepairedRanges() int64 { return t.verify.repaired.Load() }

// RepairDamaged rewrites the damaged range that starts at offset from
// (found by VerifyStep) in place, from a copy of its batches: read(offset)
// returns whole stored batches from offset (another replica's, below its
// high watermark, so byte for byte the same as these were when written).
// RepairDamaged calls read from from, then from the end of what it
// returned, until the range is covered. Every batch of the copy must be
// sound (frame, CRC), its offsets dense from from to the range's end, and
// the batches must fill the range's bytes exactly (or, for a range that
// runs to the end of its segment's data, such as one Open found where a
// segment was cut short, take any number of bytes): then they are written
// at the same byte positions of the same segment file, the file is
// fsynced, and the range is served again. The offset and time indexes are
// not touched: the offsets and byte positions are those they were built
// from. Batches of the copy beyond the range are ignored.
//
// Any other copy is refused with an error wrapping ErrRepair, and the range
// stays refused; a copy that fits batch by batch but not in total (no
// replica stores that: replication copies batches verbatim) may leave the
// range's bytes part copy, part damage, still refused. A truncation or
// the segment's removal while it runs ends it with ErrRepair (the range
// is gone). Readers never see the range half written. Calls must not
// overlap each other or VerifyStep (the one background checker makes
// both).
func (t *Tablet) RepairDamaged(from int64, read func(offset int64) ([]byte, error)) error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	gen := t.mu.truncGen
	var d damagedRange
	found := false
	t.verify.mu.Lock()
	for _, r := range t.verify.mu.damaged {
		if r.from == from && r.gen == gen {
			d, found = r, true
		}
	}
	t.verify.mu.Unlock()
	var s *segment
	for _, seg := range t.mu.segments {
		if seg.base == d.seg {
			s = seg
		}
	}
	if !found || s == nil {
		t.mu.Unlock()
		return fmt.Errorf("%w at offset %d: no damaged range starts there", ErrRepair, from)
	}
	// A range that runs to the end of its segment's data (found where the
	// segment was cut short, or where a damaged header hides where the
	// batches end) may take more or fewer bytes than its damaged ones.
	tail := d.pos+d.size == s.size
	s.refs++
	t.mu.Unlock()
	defer t.release(s)

	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w [%d, %d) of %s (%d bytes at %d): %s", ErrRepair, d.from, d.to, s.path(logSuffix), d.size, d.pos, fmt.Sprintf(format, args...))
	}
	pos, end, want := d.pos, d.pos+d.size, d.from
	if tail {
		end = math.MaxInt64
	}
	maxTs, maxTsOff, firstTs := int64(-1), int64(-1), int64(-1)
	var buf []byte
	for want < d.to {
		data, err := read(want)
		if err != nil {
			return fail("reading a copy from offset %d: %v", want, err)
		}
		// Keep the copy's batches below d.to; each must fit in the range.
		n, r := int64(0), bufio.NewReaderSize(bytes.NewReader(data), 64<<10)
		for n < int64(len(data)) && want < d.to {
			b, err := nextStored(r, n, int64(len(data)), want, &buf)
			if err != nil {
				return fail("the copy at offset %d: %v", want, err)
			}
			if b.NextOffset() > d.to || pos+n+int64(len(b)) > end {
				return fail("the copy's batch [%d, %d) of %d bytes at byte %d does not fit", b.BaseOffset(), b.NextOffset(), len(b), pos+n)
			}
			if ts := b.CommitTimestamp(); ts > maxTs {
				maxTs, maxTsOff = ts, b.BaseOffset()
			}
			if firstTs < 0 {
				firstTs = b.CommitTimestamp()
			}
			n += int64(len(b))
			want = b.NextOffset()
		}
		if n == 0 {
			return fail("the copy has no batch from offset %d", want)
		}
		t.mu.Lock()
		if t.mu.truncGen != gen || t.mu.closed || s.removed {
			t.mu.Unlock()
			return fail("the log was truncated, closed or retention removed the segment meanwhile")
		}
		_, err = s.f.WriteAt(data[:n], pos)
		t.mu.Unlock()
		if err != nil {
			return fail("writing: %v", err)
		}
		pos += n
	}
	if !tail && pos != end {
		return fail("the copy is %d bytes, the range %d", pos-d.pos, d.size)
	}
	if tail && pos < d.pos+d.size {
		if err := truncateFile(s.f, pos); err != nil {
			return fail("cutting the damaged bytes after the copy: %v", err)
		}
	}
	if err := s.f.Sync(); err != nil {
		return fail("fsync: %v", err)
	}
	// The segment's size and timestamps are writer fields.
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.truncGen != gen || s.removed {
		return fail("the log was truncated meanwhile")
	}
	if tail {
		s.size = pos
	}
	if maxTs > s.maxTs {
		s.maxTs, s.maxTsOff = maxTs, maxTsOff
		t.recomputeMaxTsLocked()
	}
	if d.from == s.base && firstTs >= 0 {
		s.firstTs = firstTs
	}
	v := &t.verify
	v.mu.Lock()
	kept := v.mu.damaged[:0]
	for _, r := range v.mu.damaged {
		if r.from != d.from || r.gen != gen {
			kept = append(kept, r)
		}
	}
	v.mu.damaged = kept
	v.mu.Unlock()
	v.repaired.Add(1)
	t.lg.Warn("repaired a corrupt range in a sealed segment from a copy: its offsets are served again",
		"segment", s.path(logSuffix), "position", d.pos, "bytes", d.size, "offset", d.from, "next_offset", d.to)
	return nil
}
