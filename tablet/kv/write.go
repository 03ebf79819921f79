package kv

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"strom/record"
	"strom/tablet/log"
)

// change is one key's new state produced by a PutKv record: its value (nil
// for a delete) and the index, in the changelog batch, of the changelog row
// that produced it.
type change struct {
	key   string
	value []byte
	row   int
}

// PutKv is the leader's write path (Fluss KvTablet.putAsLeader). For each
// record of batch, in order, it reads the key's current row (this batch's
// earlier records first, then the pre-write buffer, then Pebble), applies
// the merge engine, and adds the changelog rows: +I for a new key; -U (old)
// and +U (new) for an update, or only +U with table.changelog.image WAL
// (where, as in Fluss, the default merge engine without partial update
// skips the read and writes every upsert as +U); -D (old) for a delete; none
// when the merge engine leaves the row unchanged or the key to delete is
// absent. It then builds ONE Arrow changelog batch (the table's
// compression; the KV batch's writer id and sequence, so an idempotent
// retry is a duplicate), appends it to the log as leader, and puts the new
// rows in the pre-write buffer at their changelog offsets. The rows reach
// Pebble, and so Lookup, when FlushTo passes their offsets.
//
// targetColumns are column indexes for a partial update (nil: the whole
// row): they must include the primary key; other columns keep their stored
// values, and a delete sets the targeted non-key columns to NULL, deleting
// the row only when every non-key column is then NULL.
//
// Bad input gives an error and nothing is appended: a *RecordError naming
// the record and column (ErrInvalidRecord: a row that does not decode, a
// value of the wrong type, NULL in a NOT NULL or key column, a key that is
// not the row's; ErrDeletionDisabled: a delete under table.delete.behavior
// DISABLE), ErrPartialUpdateUnsupported, ErrSchemaMismatch, or
// record.ErrCorruptBatch, ErrBehindLog. Errors of the log's AppendAsLeader (fenced epoch,
// out-of-order sequence) come back wrapped. A retry the log recognises
// returns the original offsets with Duplicate set and changes nothing.
// It blocks on the log append; PutKv calls run one at a time.
func (t *Tablet) PutKv(ctx context.Context, batch record.KvBatch, targetColumns []int) (log.AppendInfo, error) {
	if err := ctx.Err(); err != nil {
		return log.AppendInfo{}, err
	}
	if err := batch.Validate(); err != nil {
		return log.AppendInfo{}, err
	}
	if id := batch.SchemaID(); id != t.cfg.SchemaID {
		return log.AppendInfo{}, fmt.Errorf("%w: batch has schema id %d, the table's is %d", ErrSchemaMismatch, id, t.cfg.SchemaID)
	}
	target, err := t.eng.targets(targetColumns)
	if err != nil {
		return log.AppendInfo{}, err
	}
	recs, err := batch.Records()
	if err != nil {
		return log.AppendInfo{}, err
	}

	// A damaged store refuses at once, not after a rebuild holding writeMu.
	if err := t.refuseDamaged(); err != nil {
		return log.AppendInfo{}, err
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.mu.Lock()
	closed, epoch, end := t.mu.closed, t.mu.leaderEpoch, t.mu.end
	t.mu.Unlock()
	if closed {
		return log.AppendInfo{}, ErrClosed
	}
	if err := t.refuseDamaged(); err != nil {
		return log.AppendInfo{}, err
	}
	// Only PutKv appends to a leader's log, under writeMu, so the log end
	// is stable here; a KV behind it would buffer changes at wrong offsets.
	if logEnd := t.log.LogEndOffset(); logEnd != end {
		return log.AppendInfo{}, fmt.Errorf("%w: applied up to offset %d, the log ends at %d", ErrBehindLog, end, logEnd)
	}
	// flushMu is held while merging so that Pebble and the buffer do not
	// move under the batch's reads: they go through one Pebble iterator,
	// a fixed view, and a flush between its creation and a read would
	// otherwise drop from the buffer a row the view does not have.
	t.flushMu.Lock()
	changes, err := t.mergeBatch(recs, target)
	t.flushMu.Unlock()
	if err != nil {
		t.builder.Reset()
		return log.AppendInfo{}, err
	}
	h := record.BatchHeader{SchemaID: t.cfg.SchemaID, WriterID: batch.WriterID(), BatchSequence: batch.BatchSequence()}
	buf, _, err := t.builder.Build(nil, h, t.compression)
	if err != nil {
		t.builder.Reset()
		return log.AppendInfo{}, fmt.Errorf("kv: build changelog: %w", err)
	}
	info, err := t.log.AppendAsLeader(buf, epoch, t.cfg.now())
	if err != nil {
		return log.AppendInfo{}, fmt.Errorf("kv: append changelog: %w", err)
	}
	if info.Duplicate {
		return info, nil
	}
	t.mu.Lock()
	for _, c := range changes {
		t.mu.buf.put(info.FirstOffset+int64(c.row), c.key, c.value)
	}
	t.mu.buf.endBatch(info.LastOffset + 1)
	t.mu.end = info.LastOffset + 1
	t.mu.Unlock()
	return info, nil
}

// mergeBatch runs the merge engine over recs, appending the changelog rows
// to t.builder. writeMu held.
func (t *Tablet) mergeBatch(recs []record.KvRecord, target []bool) ([]change, error) {
	e := t.eng
	r := reader{t: t}
	defer r.close()
	pending := make(map[string][]byte, len(recs)) // this batch's changes so far; nil value = deleted
	changes := make([]change, 0, len(recs))
	var rowErr error
	emit := func(i int, r record.Row, ct record.ChangeType) bool {
		if err := t.builder.Append(r, ct); err != nil {
			rowErr = recordErr(i, err)
			return false
		}
		return true
	}
	update := func(i int, key string, old, row record.Row, raw []byte) bool {
		if !e.walImage && !emit(i, old, record.UpdateBefore) {
			return false
		}
		if !emit(i, row, record.UpdateAfter) {
			return false
		}
		return t.addChange(&changes, pending, i, key, row, raw, &rowErr)
	}
	for i, rec := range recs {
		key := string(rec.Key)
		if rec.IsDelete() {
			if err := t.keys.CheckKey(rec.Key); err != nil {
				return nil, &RecordError{Index: i, Reason: "key: " + err.Error(), Err: ErrInvalidRecord}
			}
			switch e.deletes {
			case deleteDisable:
				return nil, &RecordError{Index: i, Reason: fmt.Sprintf("deletes are disabled (%s DISABLE)", record.OptDeleteBehavior), Err: ErrDeletionDisabled}
			case deleteIgnore:
				continue
			}
			old, err := r.current(i, rec.Key, pending)
			if err != nil {
				return nil, err
			}
			if old == nil {
				continue // deleting an absent key changes nothing
			}
			if row := e.remove(old, target); row != nil {
				if !update(i, key, old, row, nil) {
					return nil, rowErr
				}
				continue
			}
			if !emit(i, old, record.Delete) {
				return nil, rowErr
			}
			pending[key] = nil
			changes = append(changes, change{key: key, row: t.builder.Len() - 1})
			continue
		}

		row, err := t.rows.Decode(rec.Row)
		if err != nil {
			return nil, &RecordError{Index: i, Reason: err.Error(), Err: ErrInvalidRecord}
		}
		// A full-row write under the default merge engine is emitted as is,
		// and ArrowBuilder.Append checks it (CheckRow) then; any other row
		// is checked here, before it is merged.
		direct := target == nil && e.kind == engineDefault
		if !direct {
			if err := t.schema.CheckRow(row); err != nil {
				return nil, recordErr(i, err)
			}
		}
		var raw []byte // the stored value, when it is the record's row bytes
		if direct && t.rawValues {
			raw = le.AppendUint16(make([]byte, 0, 2+len(rec.Row)), uint16(t.cfg.SchemaID))
			raw = append(raw, rec.Row...)
		}
		k, err := t.keys.AppendRow(nil, row)
		if err != nil {
			return nil, recordErr(i, err)
		}
		if string(k) != key {
			return nil, &RecordError{Index: i, Reason: fmt.Sprintf("the record's key %x is not the key of its row's primary key columns (%x)", rec.Key, k), Err: ErrInvalidRecord}
		}
		if e.walImage && e.kind == engineDefault && target == nil {
			// Fluss's WAL shortcut: the result is the new row whatever was there.
			if !emit(i, row, record.UpdateAfter) || !t.addChange(&changes, pending, i, key, row, raw, &rowErr) {
				return nil, rowErr
			}
			continue
		}
		old, err := r.current(i, rec.Key, pending)
		if err != nil {
			return nil, err
		}
		if old == nil {
			row = e.insert(row, target)
			if !emit(i, row, record.Insert) || !t.addChange(&changes, pending, i, key, row, raw, &rowErr) {
				return nil, rowErr
			}
			continue
		}
		merged, changed, col, err := e.merge(old, row, target)
		if err != nil {
			return nil, &RecordError{Index: i, Column: t.schema.Columns[col].Name, Reason: err.Error(), Err: ErrInvalidRecord}
		}
		if !changed {
			continue
		}
		if !direct {
			raw = nil // merged: encode
		}
		if !update(i, key, old, merged, raw) {
			return nil, rowErr
		}
	}
	return changes, nil
}

// addChange records row as key's new state, produced by the changelog row
// just appended. raw, when not nil, is row's KV value already encoded.
func (t *Tablet) addChange(changes *[]change, pending map[string][]byte, i int, key string, row record.Row, raw []byte, rowErr *error) bool {
	v := raw
	if v == nil {
		var err error
		if v, err = t.rows.AppendKvValue(nil, t.cfg.SchemaID, row); err != nil {
			*rowErr = recordErr(i, err)
			return false
		}
	}
	pending[key] = v
	*changes = append(*changes, change{key: key, value: v, row: t.builder.Len() - 1})
	return true
}

// reader reads the current rows of one PutKv batch through one Pebble
// iterator, created on first use. writeMu and flushMu held.
type reader struct {
	t  *Tablet
	it *pebble.Iterator
}

func (r *reader) close() {
	if r.it != nil {
		r.it.Close()
	}
}

// current returns the row stored under key as the leader sees it: this
// batch's pending changes, then the pre-write buffer, then Pebble; nil
// when absent.
func (r *reader) current(i int, key []byte, pending map[string][]byte) (record.Row, error) {
	t := r.t
	v, ok := pending[string(key)]
	if !ok {
		t.mu.Lock()
		v, ok = t.mu.buf.get(key)
		t.mu.Unlock()
	}
	if !ok {
		if r.it == nil {
			it, err := t.db.NewIter(&pebble.IterOptions{LowerBound: rowsLower})
			if err != nil {
				return nil, fmt.Errorf("kv: record %d: read current row: %w", i, t.pebbleErr(err))
			}
			r.it = it
		}
		// SeekPrefixGE consults the bloom filters (the whole key is the
		// prefix under the default comparer).
		if r.it.SeekPrefixGE(key) && bytes.Equal(r.it.Key(), key) {
			v = r.it.Value()
		} else if err := r.it.Error(); err != nil {
			return nil, fmt.Errorf("kv: record %d: read current row: %w", i, t.pebbleErr(err))
		}
	}
	if v == nil {
		return nil, nil
	}
	return t.decodeValue(v)
}

// decodeValue decodes a stored KV value.
func (t *Tablet) decodeValue(v []byte) (record.Row, error) {
	id, rb, err := record.ParseKvValue(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if id != t.cfg.SchemaID {
		return nil, fmt.Errorf("%w: stored value has schema id %d, the table's is %d", ErrCorrupt, id, t.cfg.SchemaID)
	}
	row, err := t.rows.Decode(rb)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return row, nil
}

// recordErr turns a record package validation error into a *RecordError
// naming the first offending column.
func recordErr(i int, err error) error {
	if ies := record.InvalidErrors(err); len(ies) > 0 {
		return &RecordError{Index: i, Column: ies[0].Field, Reason: err.Error(), Err: ErrInvalidRecord}
	}
	return &RecordError{Index: i, Reason: err.Error(), Err: ErrInvalidRecord}
}
