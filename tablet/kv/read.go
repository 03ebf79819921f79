package kv

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Reads serve Pebble only, never the pre-write buffer: they see exactly
// the committed rows (Fluss's lookups read RocksDB only, too). Values are
// KV values (schema id, then the compacted row), fresh copies owned by the
// caller (Lookup's share one allocation, each capped at its own end).

func (t *Tablet) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.closed
}

// Lookup returns the value of each key (compacted primary keys), nil for
// a key with no row, in the order of keys. An empty key has no row.
func (t *Tablet) Lookup(keys [][]byte) ([][]byte, error) {
	values, _, err := t.LookupMax(keys, 0)
	return values, err
}

// LookupMax is Lookup that stops before the values found pass maxBytes
// (≤ 0: no bound) and then reports more: it returns nothing and holds at
// most maxBytes of values (plus the one value that passes them) meanwhile,
// so a caller can refuse a lookup whose answer would be too large.
func (t *Tablet) LookupMax(keys [][]byte, maxBytes int) (values [][]byte, more bool, err error) {
	out := make([][]byte, len(keys))
	var slab []byte
	t.readMu.RLock()
	defer t.readMu.RUnlock()
	if t.isClosed() {
		return nil, false, ErrClosed
	}
	if err := t.refuseDamaged(); err != nil {
		return nil, false, err
	}
	size := 0
	for i, k := range keys {
		if len(k) == 0 {
			continue // the meta key, never a row
		}
		v, closer, err := t.db.Get(k)
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("kv: lookup: %w", t.pebbleErr(err))
		}
		if size += len(v); maxBytes > 0 && size > maxBytes {
			closer.Close()
			return nil, true, nil
		}
		// The values share one slab (one allocation per call, not per
		// key), each capped at its own end so that appending to one
		// cannot overwrite the next.
		if len(v) > cap(slab)-len(slab) {
			// Room for the rest if their values are this one's size.
			slab = make([]byte, 0, max(len(v), min(len(v)*(len(keys)-i), lookupSlab)))
		}
		start := len(slab)
		slab = append(slab, v...)
		out[i] = slab[start:len(slab):len(slab)]
		closer.Close()
	}
	return out, false, nil
}

// lookupSlab bounds what Lookup allocates at once for the values it copies
// out of Pebble (a value larger than that gets its own).
const lookupSlab = 1 << 20

// PrefixLookup returns the values of every row whose key starts with
// prefix, in key order: the compacted key of a bucket-key prefix of the
// primary key is a byte prefix of the key (record's prefix property). The
// caller (the server) checks that the columns are such a prefix. An empty
// prefix is an error. It stops before the values pass maxBytes (≤ 0: no
// bound), and then reports more: rows are left.
func (t *Tablet) PrefixLookup(prefix []byte, maxBytes int) (values [][]byte, more bool, err error) {
	if len(prefix) == 0 {
		return nil, false, errors.New("kv: prefix lookup needs a non-empty prefix")
	}
	return t.scan(prefix, prefixEnd(prefix), -1, maxBytes)
}

// LimitScan returns the values of the first n rows in key order (Fluss's
// LimitScan: any n rows of the bucket). n ≤ 0 returns nothing.
func (t *Tablet) LimitScan(n int) ([][]byte, error) {
	if n <= 0 {
		return nil, nil
	}
	values, _, err := t.scan(rowsLower, nil, n, 0)
	return values, err
}

// scan collects the values in [lower, upper) (nil upper: no bound), at
// most n (n < 0: all) and at most maxBytes of them (≤ 0: no bound); more
// reports that it stopped at maxBytes with rows left.
func (t *Tablet) scan(lower, upper []byte, n, maxBytes int) (out [][]byte, more bool, err error) {
	t.readMu.RLock()
	defer t.readMu.RUnlock()
	if t.isClosed() {
		return nil, false, ErrClosed
	}
	if err := t.refuseDamaged(); err != nil {
		return nil, false, err
	}
	it, err := t.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, false, fmt.Errorf("kv: scan: %w", t.pebbleErr(err))
	}
	size := 0
	for ok := it.First(); ok && (n < 0 || len(out) < n); ok = it.Next() {
		if size += len(it.Value()); maxBytes > 0 && size > maxBytes {
			more = true
			break
		}
		out = append(out, append([]byte(nil), it.Value()...))
	}
	if err := it.Close(); err != nil {
		return nil, false, fmt.Errorf("kv: scan: %w", t.pebbleErr(err))
	}
	return out, more, nil
}

// prefixEnd returns the smallest key above every key starting with p, or
// nil when there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Snapshot is a consistent, point-in-time view of a bucket's rows (a
// Pebble snapshot) for a full scan paged by the caller (ScanKv). It is not
// safe for concurrent use. Close it when done; Tablet.Close closes any
// still open.
type Snapshot struct {
	t      *Tablet
	snap   *pebble.Snapshot
	offset int64
	resume []byte // the key after which the next page starts; nil: from the start
	done   bool
	closed bool
}

// KeyValue is one row of a scan.
type KeyValue struct {
	Key   []byte // compacted primary key
	Value []byte // KV value
}

// Snapshot opens a consistent view of the committed rows.
func (t *Tablet) Snapshot() (*Snapshot, error) {
	t.readMu.RLock()
	defer t.readMu.RUnlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return nil, ErrClosed
	}
	if err := t.refuseDamaged(); err != nil {
		return nil, err
	}
	// flushMu is not held, but mu is: a flush updates mu.flushed after its
	// Pebble commit, so offset ≤ the view's real flushed offset. Read the
	// meta key from the snapshot itself for the exact value.
	s := &Snapshot{t: t, snap: t.db.NewSnapshot()}
	t.mu.snapshots[s] = struct{}{}
	if v, closer, err := s.snap.Get(metaFlushedKey); err == nil {
		if len(v) == 8 {
			s.offset = int64(le.Uint64(v))
		}
		closer.Close()
	}
	return s, nil
}

// Offset is the log offset the view reflects: it holds exactly the
// changelog below it.
func (s *Snapshot) Offset() int64 { return s.offset }

// Next returns the next rows of the view in key order, at most maxRows
// (≥ 1) and about maxBytes of keys and values (always at least one row),
// and an empty result once the view is exhausted.
func (s *Snapshot) Next(maxRows, maxBytes int) ([]KeyValue, error) {
	if s.done {
		return nil, nil
	}
	s.t.readMu.RLock()
	defer s.t.readMu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	if err := s.t.refuseDamaged(); err != nil {
		return nil, err
	}
	lower := rowsLower
	if s.resume != nil {
		lower = append(append([]byte(nil), s.resume...), 0) // the smallest key after resume
	}
	it, err := s.snap.NewIter(&pebble.IterOptions{LowerBound: lower})
	if err != nil {
		return nil, fmt.Errorf("kv: scan snapshot: %w", s.t.pebbleErr(err))
	}
	var out []KeyValue
	size := 0
	ok := it.First()
	for ; ok && len(out) < max(maxRows, 1) && (len(out) == 0 || size < maxBytes); ok = it.Next() {
		kv := KeyValue{Key: append([]byte(nil), it.Key()...), Value: append([]byte(nil), it.Value()...)}
		size += len(kv.Key) + len(kv.Value)
		out = append(out, kv)
	}
	if !ok {
		s.done = true
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("kv: scan snapshot: %w", s.t.pebbleErr(err))
	}
	if len(out) > 0 {
		s.resume = out[len(out)-1].Key
	}
	return out, nil
}

// Close releases the view. It may be called more than once.
func (s *Snapshot) Close() error {
	s.t.readMu.RLock()
	defer s.t.readMu.RUnlock()
	s.t.mu.Lock()
	if s.t.mu.snapshots != nil {
		delete(s.t.mu.snapshots, s)
	}
	s.t.mu.Unlock()
	return s.closeLocked()
}

// closeLocked closes the Pebble snapshot; readMu held.
func (s *Snapshot) closeLocked() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return s.snap.Close()
}
