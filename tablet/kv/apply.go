package kv

import (
	"fmt"

	"strom/record"
)

// ApplyChangelog is the follower path (a hot standby): batches, back to
// back, are changelog batches the follower's log has just appended
// (AppendAsFollower), and their changes go into the pre-write buffer in
// order — rows of +I and +U records are put, -D records delete their key,
// -U records are skipped — to reach Pebble when FlushTo passes them, as on
// the leader. Buffering rather than writing Pebble directly keeps Pebble
// free of uncommitted rows on every replica, so a follower whose log is
// truncated on a leader change (TruncateTo) only drops buffer entries, and
// a follower promoted to leader serves at once: its Pebble holds what is
// committed and its buffer the uncommitted tail of its log, exactly the
// leader's state.
//
// Records below the offset the tablet has applied are skipped (a repeated
// call is harmless); when the first batch starts above it (an earlier call
// failed) the missing batches are first read back from the log, so the
// batches must already be in the log. A batch that does not decode with
// the table's schema is ErrCorrupt. Nothing of a failing call is applied
// after the failing batch.
func (t *Tablet) ApplyChangelog(batches []byte) error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.mu.Lock()
	closed := t.mu.closed
	t.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if b, _, err := record.NextBatch(batches); err == nil {
		// A gap (an earlier call failed): catch up from the log first.
		if _, err := t.replayLocked(b.BaseOffset()); err != nil {
			return err
		}
	}
	_, err := t.applyLocked(batches)
	return err
}

// applyLocked decodes changelog batches and buffers their changes; it
// returns the number of records applied. writeMu held (or Open running).
func (t *Tablet) applyLocked(batches []byte) (int, error) {
	applied := 0
	for rest := batches; len(rest) > 0; {
		b, r, err := record.NextBatch(rest)
		if err != nil {
			return applied, fmt.Errorf("%w: changelog: %w", ErrCorrupt, err)
		}
		rest = r
		t.mu.Lock()
		end := t.mu.end
		t.mu.Unlock()
		if b.NextOffset() <= end {
			continue
		}
		if b.BaseOffset() > end {
			return applied, fmt.Errorf("kv: changelog batch at offset %d, the KV has applied up to %d", b.BaseOffset(), end)
		}
		cs, err := t.changesOf(b, end)
		if err != nil {
			return applied, err
		}
		t.mu.Lock()
		for _, c := range cs {
			t.mu.buf.put(b.BaseOffset()+int64(c.row), c.key, c.value)
		}
		t.mu.buf.endBatch(b.NextOffset())
		t.mu.end = b.NextOffset()
		t.mu.Unlock()
		applied += len(cs)
	}
	return applied, nil
}

// changesOf decodes the changes of a changelog batch at offsets ≥ from.
func (t *Tablet) changesOf(b record.Batch, from int64) ([]change, error) {
	if b.RecordCount() == 0 {
		return nil, nil
	}
	if id := b.SchemaID(); id != t.cfg.SchemaID {
		return nil, fmt.Errorf("%w: changelog batch at offset %d has schema id %d, the table's is %d", ErrCorrupt, b.BaseOffset(), id, t.cfg.SchemaID)
	}
	ab, err := record.DecodeArrowBatch(b, t.schema, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: changelog batch at offset %d: %w", ErrCorrupt, b.BaseOffset(), err)
	}
	defer ab.Release()
	var cs []change
	for i := range ab.Len() {
		if b.BaseOffset()+int64(i) < from {
			continue
		}
		ct := ab.ChangeType(i)
		if ct == record.UpdateBefore {
			continue
		}
		row := ab.Row(i)
		key, err := t.keys.AppendRow(nil, row)
		if err != nil {
			return nil, fmt.Errorf("%w: changelog offset %d: %w", ErrCorrupt, b.BaseOffset()+int64(i), err)
		}
		c := change{key: string(key), row: i}
		switch ct {
		case record.Insert, record.UpdateAfter:
			if c.value, err = t.rows.AppendKvValue(nil, t.cfg.SchemaID, row); err != nil {
				return nil, fmt.Errorf("%w: changelog offset %d: %w", ErrCorrupt, b.BaseOffset()+int64(i), err)
			}
		case record.Delete:
		default:
			return nil, fmt.Errorf("%w: changelog offset %d has change type %s", ErrCorrupt, b.BaseOffset()+int64(i), ct)
		}
		cs = append(cs, c)
	}
	return cs, nil
}
