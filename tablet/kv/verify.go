package kv

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"

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
	err = DiffFold(fold, func(yield func(k, v []byte) bool) {
		for ok := it.First(); ok; ok = it.Next() {
			if !yield(it.Key(), it.Value()) {
				return
			}
		}
	})
	if ierr := it.Error(); ierr != nil {
		return fmt.Errorf("kv: verify: %w", ierr)
	}
	if err != nil {
		return fmt.Errorf("%w (the changelog below offset %d)", err, flushed)
	}
	return nil
}

// DiffFold compares rows, a store's contents (each key once, in any
// order), with fold, the fold of its changelog (key to the row of its last
// +I or +U; a key whose last change is -D is absent). The first difference
// met is an error wrapping ErrCorrupt that names the key and both sides;
// nil means they are equal. It deletes from fold the keys it meets, so the
// caller must not reuse fold. Robustness checkers use it on contents and
// changelogs read through the API.
func DiffFold(fold map[string][]byte, rows iter.Seq2[[]byte, []byte]) error {
	for k, v := range rows {
		want, in := fold[string(k)]
		switch {
		case !in:
			return fmt.Errorf("%w: key %q: the store holds %q, absent from the changelog's fold", ErrCorrupt, k, v)
		case !bytes.Equal(v, want):
			return fmt.Errorf("%w: key %q: the store holds %q, the changelog folds to %q", ErrCorrupt, k, v, want)
		}
		delete(fold, string(k))
	}
	if len(fold) == 0 {
		return nil
	}
	k := slices.Min(slices.Collect(maps.Keys(fold)))
	return fmt.Errorf("%w: key %q: absent from the store, the changelog folds to %q", ErrCorrupt, k, fold[k])
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
