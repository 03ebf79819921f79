package kv

import (
	"errors"
	"fmt"
)

// Sentinel errors. Returned errors wrap them with detail; compare with
// errors.Is.
var (
	// ErrClosed: the tablet has been closed.
	ErrClosed = errors.New("kv: tablet closed")
	// ErrInvalidRecord: a PutKv record is bad input (a missing key column, a
	// value that is not of its column's type, NULL in a NOT NULL column, a key
	// that does not match its row, a partial update that omits the key).
	// Returned as *RecordError; nothing of the batch was written.
	ErrInvalidRecord = errors.New("kv: invalid record")
	// ErrDeletionDisabled: a PutKv batch deletes a row of a table whose
	// table.delete.behavior is DISABLE (Fluss DeletionDisabledException).
	// Returned as *RecordError; nothing of the batch was written.
	ErrDeletionDisabled = errors.New("kv: deletion disabled")
	// ErrPartialUpdateUnsupported: a partial update on a table whose merge
	// engine does not support one (first_row, versioned), or target columns
	// that are not a valid partial update (Fluss InvalidTargetColumnException).
	ErrPartialUpdateUnsupported = errors.New("kv: partial update not supported")
	// ErrSchemaMismatch: a PutKv batch names a schema id other than the
	// tablet's.
	ErrSchemaMismatch = errors.New("kv: schema id mismatch")
	// ErrAheadOfLog: Pebble holds rows flushed up to an offset the log no
	// longer has (the log lost committed batches, e.g. a power cut with
	// log fsync disabled), or the log starts above what Pebble holds, and
	// the log does not start at 0: the KV cannot be refolded from its
	// changelog without a snapshot. (From a log starting at 0 the KV is
	// rebuilt instead.)
	ErrAheadOfLog = errors.New("kv: kv store is ahead of its log")
	// ErrTruncateBelowFlushed: the log was truncated below the offset already
	// flushed into Pebble (committed data was removed, as after an unclean
	// leader election) and does not start at 0, so the KV cannot be rebuilt
	// from it: it must be restored from a snapshot.
	ErrTruncateBelowFlushed = errors.New("kv: truncation below the flushed offset")
	// ErrBehindLog: PutKv on a tablet that has not applied every batch of
	// its log (a follower's log appended batches after its BecomeLeader, or
	// BecomeLeader failed to replay them). Nothing was appended.
	ErrBehindLog = errors.New("kv: kv has not applied the whole log")
	// ErrStoreCorrupt: Pebble found a checksum failure in the tablet's
	// database (a damaged SST, corrupt.go); reads and writes are refused
	// until the KV is rebuilt from the log or restored from a snapshot.
	// Retriable: the rebuild serves them again, nothing wrong is served.
	ErrStoreCorrupt = errors.New("kv: pebble store corrupt, being rebuilt")
	// ErrCorrupt: bytes in Pebble or in the changelog that cannot be decoded
	// with the tablet's schema.
	ErrCorrupt = errors.New("kv: corrupt data")
)

// RecordError names the record of a PutKv batch (its index, from 0) and,
// when one is at fault, the column that made the batch fail. It matches its
// Err (ErrInvalidRecord, ErrDeletionDisabled) with errors.Is.
type RecordError struct {
	Index  int    // record index in the batch
	Column string // column name; "" when no single column is at fault
	Reason string
	Err    error // the sentinel
}

func (e *RecordError) Error() string {
	if e.Column != "" {
		return fmt.Sprintf("%v: record %d, column %q: %s", e.Err, e.Index, e.Column, e.Reason)
	}
	return fmt.Sprintf("%v: record %d: %s", e.Err, e.Index, e.Reason)
}

func (e *RecordError) Unwrap() error { return e.Err }
