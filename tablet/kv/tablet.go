package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"strom/record"
	"strom/tablet/log"
)

// The key space of a bucket's Pebble database:
//
//	""            meta: the flushed log offset, int64 little-endian
//	key (≥ 1 byte) a row: compacted primary key → KV value
//
// The meta key is the empty key. A compacted key is never empty — a key has
// at least one column and every field encodes to at least one byte (an
// empty STRING or BYTES is its one-byte length 0x00) — and a KV batch
// record with an empty key is rejected as corrupt, so no row can land on
// it. A 0x00-prefixed meta key would not do: BOOLEAN false, TINYINT 0 and
// INT 0 all encode as 0x00, so rows can start with 0x00. The empty key sorts
// before every other key, so data scans start at rowsLower and never see it.
var (
	metaFlushedKey = []byte{}
	rowsLower      = []byte{0x00}
)

var le = binary.LittleEndian

// Tablet is one bucket replica's primary-key store: rows in Pebble keyed
// by compacted primary key, with the bucket's log as its write-ahead log
// (the changelog). All exported methods are safe for concurrent use. See
// DESIGN.md for the write path, recovery, invariants and lock order.
type Tablet struct {
	cfg         Config
	lg          *slog.Logger
	log         *log.Tablet
	db          *pebble.DB
	eng         *engine
	schema      record.Schema
	rows        *record.CompactedRowCodec
	keys        record.RowKeyEncoder // the 0.9.1 client's primary-key encoding (record.PrimaryKeyEncoder)
	compression record.ArrowCompression
	// rawValues: a row decoded from a PutKv record re-encodes to the same
	// bytes, so its stored value can be the record's bytes. True unless the
	// table has FLOAT or DOUBLE columns, whose NaNs the codec canonicalizes
	// on encoding (the changelog's fold would then differ from the store).
	rawValues bool
	// id is the database's identity (checkpoint.go).
	id string
	// damage is the first corruption Pebble reported (corrupt.go).
	damage damage

	// writeMu serializes the changes that extend or cut the buffer:
	// PutKv, ApplyChangelog, TruncateTo, Close. Lock order: writeMu, then
	// flushMu, then readMu, then mu.
	writeMu sync.Mutex
	builder *record.ArrowBuilder // guarded by writeMu

	// flushMu serializes FlushTo's Pebble writes.
	flushMu sync.Mutex

	// mu guards the in-memory state; held only for memory operations.
	mu struct {
		sync.Mutex
		buf         *preWriteBuffer
		flushed     int64 // every change below it is in Pebble (the meta key's value)
		end         int64 // offset after the last change buffered or flushed
		leaderEpoch int32
		closed      bool
		snapshots   map[*Snapshot]struct{}
	}

	// readMu keeps Close from closing Pebble under a read: reads hold it
	// shared for their Pebble calls, Close exclusively.
	readMu sync.RWMutex
}

// Open opens (creating if needed) the Pebble database in cfg.Dir and
// recovers the tablet from it and cfg.Log, which must already be open: it
// reads the flushed offset from Pebble, raises the log's high watermark to
// it if the log's checkpoint lagged (Pebble only ever holds committed rows,
// so the true high watermark was at least that), replays the log from the
// flushed offset to its end into the pre-write buffer, and flushes what is
// below the high watermark. Afterwards Pebble equals the fold of the
// changelog up to the high watermark. It fails with ErrAheadOfLog when
// Pebble holds rows beyond the log's end, and with a wrapped ErrCorrupt
// when the changelog cannot be decoded.
func Open(cfg Config) (*Tablet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	eng, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	s := cfg.Table.Schema
	rows, err := record.NewCompactedRowCodec(s.Columns)
	if err != nil {
		return nil, err
	}
	keys, err := record.PrimaryKeyEncoder(cfg.Table)
	if err != nil {
		return nil, err
	}
	comp, err := record.CompressionOf(cfg.Table)
	if err != nil {
		return nil, err
	}
	builder, err := record.NewArrowBuilder(s, nil)
	if err != nil {
		return nil, err
	}
	// Pebble syncs its own directory, not the entries of the ones it
	// creates above it.
	if err := log.CreateDir(cfg.fs(), cfg.Dir, false); err != nil {
		builder.Release()
		return nil, fmt.Errorf("kv: create %s: %w", cfg.Dir, err)
	}
	t := &Tablet{
		cfg: cfg, lg: cfg.logger().With("component", "kv", "dir", cfg.Dir), log: cfg.Log,
		eng: eng, schema: s, rows: rows, keys: keys, compression: comp, builder: builder,
	}
	if t.db, t.id, err = openPebble(cfg, &t.damage); err != nil {
		builder.Release()
		return nil, err
	}
	t.rawValues = true
	for _, c := range s.Columns {
		if c.Type.Root == record.Float || c.Type.Root == record.Double {
			t.rawValues = false
		}
	}
	t.mu.buf = newPreWriteBuffer()
	t.mu.snapshots = map[*Snapshot]struct{}{}
	err = t.recover()
	if err != nil && pebble.IsCorruptionError(err) {
		err = t.openFresh(err)
	}
	if err != nil {
		if t.db != nil {
			t.db.Close()
		}
		builder.Release()
		return nil, err
	}
	return t, nil
}

// openPebble opens the Pebble database in cfg.Dir (which exists) and
// reads (or makes) its identity.
// Pebble's corruption reports go to d.
func openPebble(cfg Config, d *damage) (*pebble.DB, string, error) {
	memTable := cfg.MemTableSize
	if memTable == 0 {
		memTable = DefaultMemTableSize
	}
	id, err := loadID(cfg.fs(), cfg.Dir)
	if err != nil {
		return nil, "", err
	}
	opts := &pebble.Options{
		FS:           cfg.fs(),
		Cache:        cfg.Cache,
		MemTableSize: memTable,
		DisableWAL:   cfg.DisableWAL,
		Logger:       pebbleLogger{cfg.logger().With("component", "kv", "dir", cfg.Dir)},
	}
	opts.EventListener = eventListener(d, opts.Logger.(pebbleLogger))
	// Bloom filters: PutKv reads every key it writes, and most inserts
	// miss; without filters each miss reads a data block of every level.
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		return nil, "", fmt.Errorf("kv: open pebble %s: %w", cfg.Dir, err)
	}
	return db, id, nil
}

// recover is Open's replay, and Restore's after it swapped the database:
// with writeMu held (or Open running) nothing else writes, but Restore runs
// it on a live tablet, so what readers see is set under mu.
func (t *Tablet) recover() error {
	flushed, ok, err := t.readFlushed()
	if err != nil {
		return err
	}
	start, end := t.log.LogStartOffset(), t.log.LogEndOffset()
	if !ok {
		if start > 0 {
			return fmt.Errorf("%w: pebble is empty and the log starts at %d; restore a snapshot", ErrAheadOfLog, start)
		}
		flushed = 0
	}
	if flushed < start {
		return fmt.Errorf("%w: rows flushed up to offset %d, the log now starts at %d; restore a snapshot", ErrAheadOfLog, flushed, start)
	}
	if flushed > end {
		// The log lost committed batches (a power cut with log fsync off
		// on this node): its own replicas hold them, Pebble must not.
		t.lg.Warn("pebble holds rows the log no longer has: rebuilding it from the log", "flushed", flushed, "log_end", end)
		return t.rebuildLocked()
	}
	if hw := t.log.HighWatermark(); flushed > hw {
		t.lg.Info("raising the high watermark to the flushed offset", "hw", hw, "flushed", flushed)
		t.log.SetHighWatermark(flushed)
	}
	t.mu.Lock() // Restore runs it on a live tablet: readers may look
	t.mu.flushed, t.mu.end = flushed, flushed
	t.mu.Unlock()
	replayed, err := t.replayLocked(end)
	if err != nil {
		return err
	}
	hw := t.log.HighWatermark()
	if err := t.FlushTo(hw); err != nil {
		return err
	}
	t.mu.Lock()
	buffered := t.mu.buf.len()
	t.mu.Unlock()
	t.lg.Info("recovered", "flushed", flushed, "replayed_rows", replayed, "hw", hw, "log_end", end, "buffered", buffered)
	return nil
}

// replayLocked applies the log's batches from the offset the KV has
// applied up to `to` (the follower path, ApplyChangelog, reading the
// batches back from the log), and returns the number of changes applied.
// writeMu held, or Open running.
func (t *Tablet) replayLocked(to int64) (int, error) {
	replayed := 0
	for {
		t.mu.Lock()
		off := t.mu.end
		t.mu.Unlock()
		if off >= to {
			return replayed, nil
		}
		info, err := t.log.Read(off, 4<<20, to)
		if err != nil {
			return replayed, fmt.Errorf("kv: replay log from %d: %w", off, err)
		}
		n, err := t.applyLocked(info.Batches)
		replayed += n
		if err != nil {
			return replayed, fmt.Errorf("kv: replay log from %d: %w", off, err)
		}
		t.mu.Lock()
		moved := t.mu.end > off
		t.mu.Unlock()
		if !moved {
			return replayed, fmt.Errorf("kv: replay log from %d: no batch below offset %d", off, to)
		}
	}
}

// rebuildLocked empties Pebble and the buffer and folds the whole log
// into them again: Pebble held rows the log no longer has. That is
// possible only when committed batches were lost: an unclean leader
// election (a leader from outside the ISR, whose log is shorter), or a
// power cut losing unfsynced batches on a majority of the replicas. The
// log must start at offset 0 (else ErrAheadOfLog: the rows below its start
// are gone, restore a snapshot). Readers see rows disappear and come back
// during the rebuild; the replica layer serves reads on the leader only.
// writeMu held, or Open running.
func (t *Tablet) rebuildLocked() error {
	if start := t.log.LogStartOffset(); start > 0 {
		return fmt.Errorf("%w: pebble holds rows the log no longer has, and the log starts at %d; restore a snapshot", ErrAheadOfLog, start)
	}
	t.flushMu.Lock()
	err := t.clearPebble()
	if err == nil {
		t.mu.Lock()
		t.mu.buf = newPreWriteBuffer()
		t.mu.flushed, t.mu.end = 0, 0
		t.mu.Unlock()
	}
	t.flushMu.Unlock()
	if err != nil {
		return err
	}
	replayed, err := t.replayLocked(t.log.LogEndOffset())
	if err != nil {
		return err
	}
	hw := t.log.HighWatermark()
	if err := t.FlushTo(hw); err != nil {
		return err
	}
	t.lg.Warn("rebuilt from the log", "replayed_rows", replayed, "hw", hw, "log_end", t.log.LogEndOffset())
	return nil
}

// clearPebble deletes every key, the flushed offset's included (a crash
// part way through a rebuild leaves an empty Pebble with no flushed offset:
// Open replays the log from 0). flushMu held.
func (t *Tablet) clearPebble() error {
	it, err := t.db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("kv: clear: %w", err)
	}
	var last []byte
	if it.Last() {
		last = bytes.Clone(it.Key())
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("kv: clear: %w", err)
	}
	b := t.db.NewBatch()
	defer b.Close()
	// The range starts at the first row key, not at the empty meta key:
	// Pebble's invariant checks reject a range deletion from the empty key
	// once it is in an sstable.
	err = b.Delete(metaFlushedKey, nil)
	if len(last) > 0 {
		err = errors.Join(err, b.DeleteRange(rowsLower, last, nil), b.Delete(last, nil))
	}
	if err != nil {
		return fmt.Errorf("kv: clear: %w", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("kv: clear: %w", err)
	}
	return nil
}

func (t *Tablet) readFlushed() (int64, bool, error) {
	v, closer, err := t.db.Get(metaFlushedKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("kv: read flushed offset: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, false, fmt.Errorf("%w: flushed offset of %d bytes", ErrCorrupt, len(v))
	}
	return int64(le.Uint64(v)), true, nil
}

// Close closes the open snapshots and Pebble (flushing its memtable). It
// does not close the log, and does not flush the pre-write buffer: those
// rows are not committed, and Open replays them from the log. Later calls
// of other methods return ErrClosed; Close itself may be called again.
func (t *Tablet) Close() error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil
	}
	t.mu.closed = true
	snaps := t.mu.snapshots
	t.mu.snapshots = nil
	t.mu.Unlock()
	t.readMu.Lock()
	defer t.readMu.Unlock()
	for s := range snaps {
		s.closeLocked()
	}
	t.builder.Release()
	if err := t.db.Close(); err != nil {
		return fmt.Errorf("kv: close pebble: %w", err)
	}
	return nil
}

// BecomeLeader makes the tablet its log's leader at epoch (the epoch
// PutKv appends with); the replica layer calls it when this replica
// becomes leader. It first brings the KV level with the log: it applies the
// log's batches the KV has not (normally none: the follower passes every
// batch it appends to ApplyChangelog), and forgets changes beyond the
// log's end (as TruncateTo). Pebble then holds the committed rows and the
// pre-write buffer the rest of the log, uncommitted, so the next PutKv
// merges against every write the log holds, the acknowledged ones
// included. On an error (the log does not decode) the epoch is not set
// and PutKv keeps failing with ErrBehindLog.
func (t *Tablet) BecomeLeader(epoch int32) error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.mu.Lock()
	closed, end := t.mu.closed, t.mu.end
	t.mu.Unlock()
	if closed {
		return ErrClosed
	}
	logEnd := t.log.LogEndOffset()
	if end > logEnd {
		if err := t.truncateLocked(logEnd); err != nil {
			return err
		}
	}
	if _, err := t.replayLocked(logEnd); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.leaderEpoch = epoch
	return nil
}

// FlushedOffset is the offset below which every change is in Pebble.
func (t *Tablet) FlushedOffset() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.flushed
}

// Stats describes the pre-write buffer.
type Stats struct {
	FlushedOffset   int64 // every change below it is in Pebble
	AppliedOffset   int64 // offset after the last change the KV holds (buffered or flushed)
	BufferedEntries int   // changes waiting for the high watermark
	BufferedBytes   int   // their key and value bytes
}

// Stats returns the tablet's offsets and buffer size.
func (t *Tablet) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Stats{FlushedOffset: t.mu.flushed, AppliedOffset: t.mu.end,
		BufferedEntries: t.mu.buf.len(), BufferedBytes: t.mu.buf.bytes}
}

// FlushTo writes the buffered changes below highWatermark into Pebble, in
// one Pebble batch together with the new flushed offset, and drops them
// from the buffer: Pebble only ever holds committed rows. The replica
// layer calls it whenever the high watermark advances, on the leader and
// on followers, and before it completes the acks=-1 PutKv requests the
// advance satisfies, so that an acknowledged write is visible to Lookup.
// A highWatermark at or below the flushed offset does nothing. The Pebble
// write is not fsynced: the log is the WAL, and Open replays what Pebble
// lost. It blocks on Pebble but not on PutKv or reads.
func (t *Tablet) FlushTo(highWatermark int64) error {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	// Flush whole changelog batches only: the log commits whole batches,
	// and a high watermark inside one (which the replica layer does not
	// produce) would otherwise split it between Pebble and the buffer.
	upTo := t.mu.buf.boundary(min(highWatermark, t.mu.end), t.mu.flushed)
	if upTo <= t.mu.flushed {
		t.mu.Unlock()
		return nil
	}
	es := append([]*bufEntry(nil), t.mu.buf.below(upTo)...)
	t.mu.Unlock()

	b := t.db.NewBatch()
	defer b.Close()
	for _, e := range es {
		var err error
		if e.value == nil {
			err = b.Delete([]byte(e.key), nil)
		} else {
			err = b.Set([]byte(e.key), e.value, nil)
		}
		if err != nil {
			return fmt.Errorf("kv: flush: %w", err)
		}
	}
	var meta [8]byte
	le.PutUint64(meta[:], uint64(upTo))
	if err := b.Set(metaFlushedKey, meta[:], nil); err != nil {
		return fmt.Errorf("kv: flush: %w", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("kv: flush: %w", err)
	}
	t.mu.Lock()
	t.mu.buf.drop(len(es))
	t.mu.buf.dropEnds(upTo)
	t.mu.flushed = upTo
	t.mu.Unlock()
	return nil
}

// TruncateTo forgets every change at or above offset, and the rest of a
// changelog batch that holds offset (as the log does): the replica layer
// calls it right after truncating the log to offset (a follower whose log
// diverged from its new leader's). Normally only buffered changes go: the
// log is cut above the high watermark (Kafka KIP-101: the new leader holds
// every committed batch), and Pebble holds rows below it only. Below the
// flushed offset (committed batches lost: an unclean leader election) the
// KV is rebuilt from the log (rebuildLocked), or, when the log does not
// start at 0, it fails with ErrTruncateBelowFlushed and changes nothing
// (the KV must then be restored from a snapshot).
func (t *Tablet) TruncateTo(offset int64) error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	return t.truncateLocked(offset)
}

// truncateLocked is TruncateTo. writeMu held.
func (t *Tablet) truncateLocked(offset int64) error {
	t.flushMu.Lock()
	t.mu.Lock()
	closed, flushed := t.mu.closed, t.mu.flushed
	if !closed && offset >= flushed {
		// The log drops a batch that holds offset whole; so does the buffer.
		end := t.mu.buf.boundary(offset, flushed)
		t.mu.buf.truncateTo(end)
		t.mu.end = end
	}
	t.mu.Unlock()
	t.flushMu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case offset >= flushed:
		return nil
	case t.log.LogStartOffset() > 0:
		return fmt.Errorf("%w: truncate to %d, rows are flushed up to %d, and the log starts at %d", ErrTruncateBelowFlushed, offset, flushed, t.log.LogStartOffset())
	}
	t.lg.Warn("truncated below the flushed offset (committed batches lost): rebuilding from the log", "offset", offset, "flushed", flushed)
	return t.rebuildLocked()
}

// pebbleLogger drops Pebble's informational logs, passes its errors to the
// tablet's logger and keeps its fatal ones fatal.
type pebbleLogger struct{ lg *slog.Logger }

func (pebbleLogger) Infof(string, ...any) {}
func (l pebbleLogger) Errorf(format string, a ...any) {
	l.lg.Error("pebble error", "msg", fmt.Sprintf(format, a...))
}
func (pebbleLogger) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
