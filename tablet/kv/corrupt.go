package kv

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"strom/tablet/log"
)

// A Pebble SST whose block checksum fails (a flipped bit on disk) makes
// the tablet's rows untrustworthy: the damaged block may hold any of them.
// The first corruption Pebble reports, on a read or in the background (a
// compaction), marks the tablet damaged; from then on reads, PutKv and
// Checkpoint refuse with ErrStoreCorrupt (retriable: nothing is served from
// a store that may be wrong, and no snapshot copies damaged files) until
// Rebuild (from the log) or Restore (a snapshot) replaces the database.
// FlushTo and ApplyChangelog go on: they only write, and the rebuild
// replays the log anyway.

// damage holds the first corruption seen since the database was opened.
type damage struct{ p atomic.Pointer[error] }

// note records err (the first one wins).
func (d *damage) note(err error) { d.p.CompareAndSwap(nil, &err) }

func (d *damage) get() error {
	if p := d.p.Load(); p != nil {
		return *p
	}
	return nil
}

func (d *damage) clear() { d.p.Store(nil) }

// clearIf forgets the damage seen before a rebuild (p), not one the new
// database reported since.
func (d *damage) clearIf(p *error) { d.p.CompareAndSwap(p, nil) }

// Damaged returns, when Pebble has reported a corruption of the tablet's
// database (a checksum failure of an SST), that error; nil otherwise. The
// replica layer polls it and rebuilds the KV (Rebuild, or Restore from a
// snapshot when the log does not start at 0).
func (t *Tablet) Damaged() error { return t.damage.get() }

// refuseDamaged is the check at the start of reads and writes.
func (t *Tablet) refuseDamaged() error {
	if err := t.damage.get(); err != nil {
		return fmt.Errorf("%w: %w", ErrStoreCorrupt, err)
	}
	return nil
}

// pebbleErr marks the tablet damaged when err is a Pebble corruption, and
// returns err wrapped in ErrStoreCorrupt then; other errors as they are.
func (t *Tablet) pebbleErr(err error) error {
	if err == nil || !pebble.IsCorruptionError(err) {
		return err
	}
	t.damage.note(err)
	return fmt.Errorf("%w: %w", ErrStoreCorrupt, err)
}

// eventListener reports Pebble's corruption events to d (DataCorruption is
// called on the read path that met the damaged block: it must not block)
// and its background errors to lg. Without it Pebble's default handler of
// a corruption is Fatalf, which took the whole node down.
func eventListener(d *damage, lg pebbleLogger) *pebble.EventListener {
	return &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			err := info.Details
			if err == nil || !pebble.IsCorruptionError(err) {
				err = fmt.Errorf("%w: %s", pebble.ErrCorruption, info)
			}
			d.note(err)
			lg.lg.Error("pebble sst corrupt: the kv refuses reads until it is rebuilt", "path", info.Path, "err", errText(info.Details))
		},
		BackgroundError: func(err error) {
			if pebble.IsCorruptionError(err) {
				d.note(err)
			}
			lg.lg.Error("pebble background error", "err", errText(err))
		},
	}
}

// Rebuild replaces a damaged database (Damaged) by a new one folded from
// the whole log, which must start at offset 0 (else ErrAheadOfLog: the rows
// below its start are gone; restore a snapshot with Restore). The log is
// the truth and Pebble its fold, so the new database holds exactly the
// committed rows, and the pre-write buffer the rest of the log, as before
// the damage. Reads are refused (ErrStoreCorrupt) until it is done; writes
// wait for it. If the replay fails (the log does not read: its own damage,
// repaired from another replica), the tablet stays damaged and Rebuild may
// be called again. Open scans of the old database are closed; the database
// gets a new ID.
func (t *Tablet) Rebuild() error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	if start := t.log.LogStartOffset(); start > 0 {
		return fmt.Errorf("%w: the kv is damaged and the log starts at %d; restore a snapshot", ErrAheadOfLog, start)
	}
	seen := t.damage.p.Load()
	cause := t.damage.get()
	empty := t.cfg.Dir + "-rebuild"
	fs := t.cfg.fs()
	if err := fs.RemoveAll(empty); err != nil {
		return fmt.Errorf("kv: rebuild: %w", err)
	}
	if err := log.CreateDir(fs, empty, false); err != nil {
		return fmt.Errorf("kv: rebuild: %w", err)
	}
	if err := t.swapDB(empty); err != nil {
		return err
	}
	if err := t.recover(); err != nil {
		if seen == nil {
			t.damage.note(fmt.Errorf("rebuild from the log: %w", err))
		}
		return fmt.Errorf("kv: rebuild: %w", err)
	}
	t.damage.clearIf(seen)
	t.lg.Warn("rebuilt a damaged kv from the log", "cause", errText(cause), "flushed", t.FlushedOffset())
	return nil
}

// openFresh is Open's way past a corruption met during recovery: the
// database is closed, its directory emptied, and recovery run again on an
// empty one (a refold of the log from 0; ErrAheadOfLog when the log does
// not start at 0, which the replica layer answers with a snapshot).
func (t *Tablet) openFresh(cause error) error {
	t.lg.Error("pebble sst corrupt at open: rebuilding the kv from the log", "err", errText(cause))
	err := t.db.Close()
	t.db = nil
	fs := t.cfg.fs()
	if err == nil {
		err = fs.RemoveAll(t.cfg.Dir)
	}
	if err == nil {
		err = log.CreateDir(fs, t.cfg.Dir, false)
	}
	if err == nil {
		t.db, t.id, err = openPebble(t.cfg, &t.damage)
	}
	if err != nil {
		return errors.Join(cause, fmt.Errorf("kv: open afresh: %w", err))
	}
	t.damage.clear()
	t.mu.buf = newPreWriteBuffer()
	t.mu.flushed, t.mu.end = 0, 0
	if err := t.recover(); err != nil {
		return errors.Join(cause, err)
	}
	return nil
}

// errText is err's one-line message: Pebble's errors format with stack
// traces under %+v, which slog uses.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
