package log

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// The two sparse indexes of a segment. The active segment keeps them in
// memory (written to disk when it is sealed and on Close); a sealed
// segment's are read from its files with positional reads, so they cost no
// memory. See DESIGN.md for the file layouts.

const (
	// offsetEntrySize: relative offset u32 | position u32.
	offsetEntrySize = 8
	// timeEntrySize: timestamp i64 | relative offset u32.
	timeEntrySize = 12
)

var le = binary.LittleEndian

// offsetEntry says the batch whose base offset is segment base + rel
// starts at byte pos of the segment file.
type offsetEntry struct {
	rel uint32
	pos uint32
}

// timeEntry says the largest commit timestamp of the segment's batches up
// to and including the batch at segment base + rel is ts, and that batch is
// the first to carry it: every batch before it has a smaller timestamp.
type timeEntry struct {
	ts  int64
	rel uint32
}

func appendOffsetEntry(dst []byte, e offsetEntry) []byte {
	dst = le.AppendUint32(dst, e.rel)
	return le.AppendUint32(dst, e.pos)
}

func appendTimeEntry(dst []byte, e timeEntry) []byte {
	dst = le.AppendUint64(dst, uint64(e.ts))
	return le.AppendUint32(dst, e.rel)
}

func decodeOffsetEntry(b []byte) offsetEntry {
	return offsetEntry{rel: le.Uint32(b), pos: le.Uint32(b[4:])}
}

func decodeTimeEntry(b []byte) timeEntry {
	return timeEntry{ts: int64(le.Uint64(b)), rel: le.Uint32(b[8:])}
}

// lastAtMost binary-searches n entries ordered by key and returns the index
// of the last one for which atMost reports key ≤ target, or -1.
func lastAtMost(n int, atMost func(i int) (bool, error)) (int, error) {
	lo, hi := 0, n // entries before lo satisfy atMost, entries from hi on do not
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		ok, err := atMost(m)
		if err != nil {
			return -1, err
		}
		if ok {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1, nil
}

// lookupOffsetMem returns the last entry with rel ≤ target.
func lookupOffsetMem(es []offsetEntry, target uint32) (offsetEntry, bool) {
	i, _ := lastAtMost(len(es), func(i int) (bool, error) { return es[i].rel <= target, nil })
	if i < 0 {
		return offsetEntry{}, false
	}
	return es[i], true
}

// lookupTimeMem returns the last entry with ts ≤ target.
func lookupTimeMem(es []timeEntry, target int64) (timeEntry, bool) {
	i, _ := lastAtMost(len(es), func(i int) (bool, error) { return es[i].ts <= target, nil })
	if i < 0 {
		return timeEntry{}, false
	}
	return es[i], true
}

// lookupOffsetFile is lookupOffsetMem over an index file of n entries; it
// also returns the entry's index in the file, -1 when there is none.
func lookupOffsetFile(f io.ReaderAt, n int, target uint32) (offsetEntry, int, error) {
	var buf [offsetEntrySize]byte
	i, err := lastAtMost(n, func(i int) (bool, error) {
		if _, err := f.ReadAt(buf[:], int64(i)*offsetEntrySize); err != nil {
			return false, err
		}
		return decodeOffsetEntry(buf[:]).rel <= target, nil
	})
	if err != nil || i < 0 {
		return offsetEntry{}, -1, err
	}
	if _, err := f.ReadAt(buf[:], int64(i)*offsetEntrySize); err != nil {
		return offsetEntry{}, -1, err
	}
	return decodeOffsetEntry(buf[:]), i, nil
}

// lookupTimeFile is lookupTimeMem over a time index file of n entries, with
// the entry's index as lookupOffsetFile.
func lookupTimeFile(f io.ReaderAt, n int, target int64) (timeEntry, int, error) {
	var buf [timeEntrySize]byte
	i, err := lastAtMost(n, func(i int) (bool, error) {
		if _, err := f.ReadAt(buf[:], int64(i)*timeEntrySize); err != nil {
			return false, err
		}
		return decodeTimeEntry(buf[:]).ts <= target, nil
	})
	if err != nil || i < 0 {
		return timeEntry{}, -1, err
	}
	if _, err := f.ReadAt(buf[:], int64(i)*timeEntrySize); err != nil {
		return timeEntry{}, -1, err
	}
	return decodeTimeEntry(buf[:]), i, nil
}

// checkOffsetIndex checks a whole offset index file's contents against its
// segment: whole entries, relative offsets strictly increasing and below
// span (the number of offsets the segment holds), positions strictly
// increasing and below size.
func checkOffsetIndex(b []byte, span, size int64) error {
	if len(b)%offsetEntrySize != 0 {
		return fmt.Errorf("%d bytes is not a whole number of %d-byte entries", len(b), offsetEntrySize)
	}
	var prev offsetEntry
	for i := 0; i < len(b); i += offsetEntrySize {
		e := decodeOffsetEntry(b[i:])
		if int64(e.rel) >= span || int64(e.pos) >= size {
			return fmt.Errorf("entry %d (offset +%d at position %d) lies outside the segment (%d offsets, %d bytes)", i/offsetEntrySize, e.rel, e.pos, span, size)
		}
		if i > 0 && (e.rel <= prev.rel || e.pos <= prev.pos) {
			return fmt.Errorf("entry %d (offset +%d at position %d) does not follow entry %d (offset +%d at position %d)", i/offsetEntrySize, e.rel, e.pos, i/offsetEntrySize-1, prev.rel, prev.pos)
		}
		prev = e
	}
	return nil
}

// checkTimeIndex checks a whole time index file's contents: whole entries,
// timestamps strictly increasing, relative offsets non-decreasing and
// below span.
func checkTimeIndex(b []byte, span int64) error {
	if len(b)%timeEntrySize != 0 {
		return fmt.Errorf("%d bytes is not a whole number of %d-byte entries", len(b), timeEntrySize)
	}
	prev := timeEntry{ts: math.MinInt64}
	for i := 0; i < len(b); i += timeEntrySize {
		e := decodeTimeEntry(b[i:])
		if int64(e.rel) >= span {
			return fmt.Errorf("entry %d (offset +%d) lies outside the segment (%d offsets)", i/timeEntrySize, e.rel, span)
		}
		if i > 0 && (e.ts <= prev.ts || e.rel < prev.rel) {
			return fmt.Errorf("entry %d (time %d at offset +%d) does not follow entry %d (time %d at offset +%d)", i/timeEntrySize, e.ts, e.rel, i/timeEntrySize-1, prev.ts, prev.rel)
		}
		prev = e
	}
	return nil
}
