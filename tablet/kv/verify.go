package kv

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"strom/record"
)

// VerifyFold checks DESIGN.md §8.4 on this replica: Pebble holds exactly
// the fold of its changelog below the flushed offset (each +I/+U row put,
// each -D key deleted, in log order). It reads one Pebble snapshot (rows
// and flushed offset together) and the log from offset 0, so it works on
// a leader or a follower while they write, and fails with ErrAheadOfLog
// when the log no longer starts at 0. A difference is an error wrapping
// ErrCorrupt naming the first key found. It reads the whole log and every
// row: for tests and diagnostics, not the serving path.
func (t *Tablet) VerifyFold() error {
	t.readMu.RLock()
	defer t.readMu.RUnlock()
	if t.isClosed() {
		return ErrClosed
	}
	snap := t.db.NewSnapshot()
	defer snap.Close()
	flushed := int64(0)
	switch v, closer, err := snap.Get(metaFlushedKey); {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return fmt.Errorf("kv: verify: %w", err)
	default:
		if len(v) == 8 {
			flushed = int64(le.Uint64(v))
		}
		closer.Close()
	}
	if start := t.log.LogStartOffset(); start > 0 {
		return fmt.Errorf("%w: verify: the log starts at %d, not 0", ErrAheadOfLog, start)
	}
	fold := map[string][]byte{}
	for off := int64(0); off < flushed; {
		info, err := t.log.Read(off, 4<<20, flushed)
		if err != nil {
			return fmt.Errorf("kv: verify: read the log at %d: %w", off, err)
		}
		if err := t.foldInto(fold, info.Batches, &off); err != nil {
			return err
		}
		if info.Batches == nil {
			return fmt.Errorf("%w: verify: rows flushed up to %d, the log has no batch at %d", ErrCorrupt, flushed, off)
		}
	}
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: rowsLower})
	if err != nil {
		return fmt.Errorf("kv: verify: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		want, in := fold[string(it.Key())]
		if !in || !bytes.Equal(it.Value(), want) {
			return fmt.Errorf("%w: key %x: pebble holds %x, the changelog below offset %d folds to %x", ErrCorrupt, it.Key(), it.Value(), flushed, want)
		}
		delete(fold, string(it.Key()))
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("kv: verify: %w", err)
	}
	for k, v := range fold {
		return fmt.Errorf("%w: key %x: absent from pebble, the changelog below offset %d folds to %x", ErrCorrupt, k, flushed, v)
	}
	return nil
}

// foldInto applies the changes of batches to fold and moves *off past them.
func (t *Tablet) foldInto(fold map[string][]byte, batches []byte, off *int64) error {
	for rest := batches; len(rest) > 0; {
		b, r, err := record.NextBatch(rest)
		if err != nil {
			return fmt.Errorf("%w: changelog: %w", ErrCorrupt, err)
		}
		rest, *off = r, b.NextOffset()
		cs, err := t.changesOf(b, b.BaseOffset())
		if err != nil {
			return err
		}
		for _, c := range cs {
			if c.value == nil {
				delete(fold, c.key)
			} else {
				fold[c.key] = c.value
			}
		}
	}
	return nil
}
