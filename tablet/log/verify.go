package log

import (
	"bufio"
	"errors"
	"fmt"
	"io"

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
