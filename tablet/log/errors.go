package log

import (
	"errors"
	"fmt"
	"math"

	"strom/record"
)

// Sentinel errors. Returned errors wrap them with detail; compare with
// errors.Is. Batches that fail validation on append are rejected with an
// error wrapping record.ErrCorruptBatch.
var (
	// ErrClosed: the tablet has been closed.
	ErrClosed = errors.New("log: tablet closed")
	// ErrOffsetOutOfRange: a read or lookup named an offset below the log
	// start or above the log end (Fluss LOG_OFFSET_OUT_OF_RANGE). Returned
	// as *OffsetOutOfRangeError.
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrOutOfOrderSequence: an idempotent writer's batch sequence does not
	// follow the last one appended (Fluss OUT_OF_ORDER_SEQUENCE). Nothing of
	// the append was written. Returned as *SequenceError.
	ErrOutOfOrderSequence = errors.New("log: out of order batch sequence")
	// ErrFencedLeaderEpoch: AppendAsLeader was given a leader epoch older
	// than the latest one the log has seen (or a negative one): the caller
	// is a deposed leader (Fluss FENCED_LEADER_EPOCH).
	ErrFencedLeaderEpoch = errors.New("log: fenced leader epoch")
	// ErrOffsetMismatch: AppendAsFollower got batches that do not start at
	// the log end or whose offsets are not dense and increasing.
	ErrOffsetMismatch = errors.New("log: batch offsets do not continue the log")
	// ErrRecordTooLarge: a batch is larger than Config.SegmentBytes, or one
	// append is larger than 2 GiB (Fluss RECORD_TOO_LARGE).
	ErrRecordTooLarge = errors.New("log: batch too large")
	// ErrCorruptSegment: a segment file holds bytes that are not valid
	// batches where valid batches must be. Returned as *CorruptSegmentError.
	ErrCorruptSegment = errors.New("log: corrupt segment")
)

// SequenceError is ErrOutOfOrderSequence with the sequences involved. It
// matches ErrOutOfOrderSequence with errors.Is.
type SequenceError struct {
	WriterID int64
	Sequence int32 // the batch's
	Last     int32 // the writer's last appended; record.NoBatchSequence if none
}

func (e *SequenceError) Error() string {
	if e.Last == record.NoBatchSequence {
		return fmt.Sprintf("%v: writer %d sent sequence %d, but the bucket does not know the writer (new, or idle for longer than server.writer-id.expiration-time): a writer starts at sequence 0",
			ErrOutOfOrderSequence, e.WriterID, e.Sequence)
	}
	return fmt.Sprintf("%v: writer %d sent sequence %d, the last appended is %d", ErrOutOfOrderSequence, e.WriterID, e.Sequence, e.Last)
}

func (e *SequenceError) Is(target error) bool { return target == ErrOutOfOrderSequence }

// Ahead reports whether the batch is early rather than wrong: at most
// writerBatches-1 batches of the writer are missing before it, as when a
// writer with several requests in flight has a later one arrive first.
// Such a batch can be appended once the missing ones are.
func (e *SequenceError) Ahead() bool {
	next := int64(e.Last) + 1 // NoBatchSequence (-1) + 1: a new writer starts at 0
	if e.Last == math.MaxInt32 {
		next = 0
	}
	missing := (int64(e.Sequence) - next + 1<<31) % (1 << 31)
	return e.Sequence >= 0 && missing >= 1 && missing < writerBatches
}

// OffsetOutOfRangeError says which offset was asked for and the range the
// log holds. It matches ErrOffsetOutOfRange with errors.Is.
type OffsetOutOfRangeError struct {
	Offset   int64 // the offset asked for
	LogStart int64 // the log start offset at the time
	LogEnd   int64 // the log end offset at the time
}

func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("log: offset %d out of range: the log holds [%d, %d)", e.Offset, e.LogStart, e.LogEnd)
}

// Is reports whether target is ErrOffsetOutOfRange.
func (e *OffsetOutOfRangeError) Is(target error) bool { return target == ErrOffsetOutOfRange }

// CorruptSegmentError names the file and byte position where invalid data
// was found. It matches ErrCorruptSegment and whatever Err matches
// (record.ErrCorruptBatch for a bad batch).
type CorruptSegmentError struct {
	Path     string // the segment (or index) file
	Position int64  // byte position in Path
	Err      error  // what is wrong
}

func (e *CorruptSegmentError) Error() string {
	return fmt.Sprintf("log: corrupt segment %s at position %d: %v", e.Path, e.Position, e.Err)
}

// Unwrap returns ErrCorruptSegment and Err.
func (e *CorruptSegmentError) Unwrap() []error { return []error{ErrCorruptSegment, e.Err} }

// ErrCorruptRecord: stored batches cannot be served: their CRC does not
// match their bytes, the background check of a sealed segment found them
// damaged, or no reader can decode them (Fluss CORRUPT_RECORD_EXCEPTION).
// Returned as *CorruptRecordError. Reading the same offsets again gets the
// same error on this node; a reader may skip to NextOffset, losing the
// records in between. (Once replication exists, another replica may hold
// an intact copy, and the error becomes retriable there.)
var ErrCorruptRecord = errors.New("log: corrupt record")

// CorruptRecordError names the offsets that cannot be served. It matches
// ErrCorruptRecord and whatever Err matches.
type CorruptRecordError struct {
	Offset     int64 // first offset of the damaged batch (or range)
	NextOffset int64 // the offset after it: where a reader may go on
	Err        error // what is wrong
}

func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("log: offsets [%d, %d) cannot be served: %v", e.Offset, e.NextOffset, e.Err)
}

// Unwrap returns ErrCorruptRecord and Err.
func (e *CorruptRecordError) Unwrap() []error { return []error{ErrCorruptRecord, e.Err} }
