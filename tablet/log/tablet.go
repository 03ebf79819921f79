package log

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/record"
)

// Tablet is one bucket replica's log on local disk. All exported methods
// are safe for concurrent use. Reads never hold a lock during file I/O;
// changes (appends, rolls, truncation, retention) are serialized by a
// writer lock held during their I/O, so reads proceed while a change
// writes. See DESIGN.md for the lock order.
type Tablet struct {
	cfg        Config
	fs         vfs.FS
	dir        string
	lg         *slog.Logger
	interval   int64 // Config.IndexIntervalBytes
	maxEntries int   // per index of a segment

	// appendMu serializes every change to the log and is held during the
	// change's file I/O (but no fsync of segment data, except by Close,
	// TruncateTo and Open). Lock order: appendMu, flushMu, then hwFileMu or
	// rpFileMu, then mu.
	appendMu sync.Mutex
	// writers and snapshots are guarded by appendMu.
	writers   *writerState
	snapshots []int64 // offsets of the writer snapshot files, ascending

	// flushMu serializes flush rounds (flush.go) and is held during their
	// fsyncs. Only Close takes it while holding appendMu.
	flushMu sync.Mutex
	flusher struct {
		wake     chan struct{} // capacity 1: wakeFlusher
		stop     chan struct{} // closed by stopFlusher
		stopOnce sync.Once
		done     chan struct{} // closed when runFlusher returns
	}

	// hwFileMu serializes writes of the high watermark checkpoint.
	hwFileMu sync.Mutex
	// rpFileMu serializes writes of the recovery point checkpoint, and
	// guards rpWritten, the value last written.
	rpFileMu  sync.Mutex
	rpWritten int64

	// mu guards the in-memory view readers use. It is held only for memory
	// operations. Fields marked "writer" are written only while holding
	// both appendMu and mu, so the writer may read them holding appendMu
	// alone.
	mu struct {
		sync.Mutex
		segments []*segment // writer: ascending base offsets; the last is active
		logEnd   int64      // writer: the offset the next batch gets
		maxTs    int64      // writer: largest commit timestamp in the log, -1 if none
		epochs   epochCache // writer
		closed   bool       // writer
		hw       int64      // the high watermark
		truncGen uint64     // bumped (before the files change) by every truncation
		// flushed: every batch below it is fsynced. With a flush policy
		// the high watermark stays at or below it.
		flushed   int64
		lastFlush time.Time  // when the active segment was last fsynced
		unsynced  []*segment // sealed segments not yet fsynced, oldest first
	}

	recovery RecoveryInfo // set by Open, read-only after

	verify verifyState // the background check of sealed segments (verify.go)

	// testHookReadIO, if set, runs in Read after its file I/O, before it
	// checks for a racing truncation.
	testHookReadIO func()
}

// AppendInfo describes an append.
type AppendInfo struct {
	// FirstOffset and LastOffset are the offsets of the first and last
	// record appended (of the original batch for a duplicate).
	FirstOffset, LastOffset int64
	// CommitTimestamp is the commit timestamp (ms) the batches got.
	CommitTimestamp int64
	// Duplicate reports that the batch was a retry of one already in the
	// log: nothing was appended and the offsets are the original ones.
	Duplicate bool
}

// ReadInfo is the result of a Read.
type ReadInfo struct {
	// Batches holds whole stored batches back to back, nil when there is
	// nothing to return. It is a fresh buffer (or, from ReadInto, the
	// caller's) owned by the caller; the tablet keeps no reference to it.
	Batches []byte
	// LogStartOffset, LogEndOffset and HighWatermark are the log's values
	// when the read started.
	LogStartOffset, LogEndOffset, HighWatermark int64
}

// SegmentInfo describes one segment, for tiering and diagnostics.
type SegmentInfo struct {
	BaseOffset   int64  // offset of the first batch
	NextOffset   int64  // offset after the last batch
	Size         int64  // bytes of batches
	MaxTimestamp int64  // newest commit timestamp (ms), -1 when empty
	Sealed       bool   // rolled: its files no longer change
	Path         string // the .log file; the indexes sit beside it (.index, .timeindex) once sealed
}

// Open opens (creating if needed) the log in cfg.Dir and recovers it: see
// DESIGN.md "Recovery". A torn or corrupt tail of the last segment is cut
// and reported (Warn log and RecoveryInfo); invalid data anywhere else
// fails Open with a *CorruptSegmentError naming the file and position.
func Open(cfg Config) (*Tablet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Tablet{
		cfg:        cfg,
		fs:         cfg.fs(),
		dir:        cfg.Dir,
		lg:         cfg.logger().With("component", "log", "dir", cfg.Dir),
		interval:   int64(cfg.IndexIntervalBytes),
		maxEntries: cfg.maxIndexEntries(),
		writers:    newWriterState(),
	}
	if err := t.load(); err != nil {
		for _, s := range t.mu.segments {
			s.closeFiles()
		}
		return nil, fmt.Errorf("open log %s: %w", cfg.Dir, err)
	}
	t.mu.flushed, t.mu.lastFlush = t.mu.logEnd, time.Now() // load fsynced what it recovered
	t.flusher.wake = make(chan struct{}, 1)
	t.flusher.stop = make(chan struct{})
	t.flusher.done = make(chan struct{})
	go t.runFlusher()
	return t, nil
}

// Close stops the flusher, fsyncs every segment not yet fsynced, writes
// the active segment's indexes, the writer state snapshot, the high
// watermark checkpoint and the clean-shutdown marker, and closes the files
// (reads in flight finish first). Later calls return ErrClosed; Close
// itself may be called again and returns nil. Config.OnFlush is not
// called.
func (t *Tablet) Close() error {
	t.stopFlusher() // before appendMu: a round may be in OnFlush
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if t.mu.closed {
		return nil
	}
	var errs []error
	s := t.active()
	if _, err := t.flushRound(true); err != nil {
		errs = append(errs, err)
	}
	if err := t.writeIndexFiles(s, true); err != nil {
		errs = append(errs, err)
	}
	if err := t.writeSnapshot(t.mu.logEnd); err != nil {
		errs = append(errs, err)
	}
	if err := t.CheckpointHighWatermark(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		// The marker says every file above is whole; write it last.
		if err := writeFileAtomic(t.fs, t.dir, cleanFile, nil, t.cfg.NoSync); err != nil {
			errs = append(errs, err)
		}
	}
	if !t.cfg.NoSync {
		if err := syncDir(t.fs, t.dir); err != nil {
			errs = append(errs, err)
		}
	}
	t.mu.Lock()
	t.mu.closed = true
	toClose := t.retireLocked(t.mu.segments)
	t.mu.Unlock()
	for _, s := range toClose {
		if err := s.closeFiles(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close log %s: %w", t.dir, err)
	}
	return nil
}

// Dir is the tablet's directory.
func (t *Tablet) Dir() string { return t.dir }

// RecoveryInfo reports what Open found and repaired.
func (t *Tablet) RecoveryInfo() RecoveryInfo {
	r := t.recovery
	r.RebuiltIndexes = slices.Clone(r.RebuiltIndexes)
	return r
}

// LogStartOffset is the first offset in the log.
func (t *Tablet) LogStartOffset() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.segments[0].base
}

// LogEndOffset is the offset the next appended batch gets.
func (t *Tablet) LogEndOffset() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.logEnd
}

// HighWatermark is the in-memory high watermark.
func (t *Tablet) HighWatermark() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.hw
}

// SetHighWatermark sets the high watermark, clamped to [log start, log
// end], and with a flush policy (Config.FlushMessages, FlushInterval) to
// at most FlushedOffset, and returns the value set. It may move backwards
// (the replica layer decides); it is persisted by CheckpointHighWatermark
// and Close.
func (t *Tablet) SetHighWatermark(o int64) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	limit := t.mu.logEnd
	if t.cfg.flushPolicy() {
		limit = min(limit, t.mu.flushed)
	}
	t.mu.hw = min(max(o, t.mu.segments[0].base), limit)
	return t.mu.hw
}

// CheckpointHighWatermark writes the high watermark to the checkpoint file
// atomically (temp file, fsync, rename). It blocks on file I/O but not on
// appends.
func (t *Tablet) CheckpointHighWatermark() error {
	t.hwFileMu.Lock()
	defer t.hwFileMu.Unlock()
	t.mu.Lock()
	hw, closed := t.mu.hw, t.mu.closed
	t.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if err := writeFileAtomic(t.fs, t.dir, hwFile, encodeOffset(hw), t.cfg.NoSync); err != nil {
		return err
	}
	if !t.cfg.NoSync {
		return syncDir(t.fs, t.dir)
	}
	return nil
}

// Segments describes the segments, oldest first.
func (t *Tablet) Segments() []SegmentInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]SegmentInfo, len(t.mu.segments))
	for i, s := range t.mu.segments {
		next := t.mu.logEnd
		if i+1 < len(t.mu.segments) {
			next = t.mu.segments[i+1].base
		}
		out[i] = SegmentInfo{BaseOffset: s.base, NextOffset: next, Size: s.size, MaxTimestamp: s.maxTs, Sealed: s.sealed, Path: s.path(logSuffix)}
	}
	return out
}

// AssignEpoch records that leader epoch epoch starts at startOffset (a new
// leader calls it with its epoch and the log end before appending). It is
// a no-op if the latest epoch is already epoch. An epoch older than the
// latest gives ErrFencedLeaderEpoch; a start offset beyond the log end
// gives *OffsetOutOfRangeError. The checkpoint is written before it
// returns.
func (t *Tablet) AssignEpoch(epoch int32, startOffset int64) error {
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if t.mu.closed {
		return ErrClosed
	}
	if latest := t.mu.epochs.latestEpoch(); epoch < 0 || epoch < latest {
		return fmt.Errorf("%w: epoch %d, the log has seen epoch %d", ErrFencedLeaderEpoch, epoch, latest)
	}
	if start := t.mu.segments[0].base; startOffset < start || startOffset > t.mu.logEnd {
		return &OffsetOutOfRangeError{Offset: startOffset, LogStart: start, LogEnd: t.mu.logEnd}
	}
	c := epochCache{entries: t.mu.epochs.clone()}
	if !c.assign(EpochEntry{Epoch: epoch, StartOffset: startOffset}) {
		return nil
	}
	return t.installEpochs(c)
}

// EndOffsetForEpoch answers a follower's OffsetForLeaderEpoch request
// (Kafka KIP-101): the largest epoch ≤ epoch in the epoch cache, and the
// start offset of the next epoch in the cache, or the log end when there is
// none (the latest epoch, or an epoch newer than it). For an epoch older
// than every entry it returns epoch itself and the first entry's start
// offset; when the log knows no epoch, or for record.NoLeaderEpoch,
// (record.NoLeaderEpoch, UndefinedOffset).
func (t *Tablet) EndOffsetForEpoch(epoch int32) (int32, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.epochs.endOffsetFor(epoch, t.mu.logEnd)
}

// LatestEpoch is the newest leader epoch in the epoch cache, or
// record.NoLeaderEpoch.
func (t *Tablet) LatestEpoch() int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.epochs.latestEpoch()
}

// Epochs returns a copy of the epoch cache, oldest first.
func (t *Tablet) Epochs() []EpochEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.epochs.clone()
}

// installEpochs persists c and then makes it the epoch cache. appendMu
// held.
func (t *Tablet) installEpochs(c epochCache) error {
	if err := t.persistEpochs(c); err != nil {
		return err
	}
	t.mu.Lock()
	t.mu.epochs = c
	t.mu.Unlock()
	return nil
}

// persistEpochs writes c to the checkpoint file. appendMu held.
func (t *Tablet) persistEpochs(c epochCache) error {
	if err := writeFileAtomic(t.fs, t.dir, epochFile, encodeEpochs(c.entries), t.cfg.NoSync); err != nil {
		return err
	}
	if !t.cfg.NoSync {
		return syncDir(t.fs, t.dir)
	}
	return nil
}

// active is the active segment. appendMu or mu held.
func (t *Tablet) active() *segment { return t.mu.segments[len(t.mu.segments)-1] }

// release ends a reader's use of s, closing its files if s has left the
// log and this was the last reader.
func (t *Tablet) release(s *segment) {
	t.mu.Lock()
	s.refs--
	closeNow := s.refs == 0 && s.removed
	t.mu.Unlock()
	if closeNow {
		s.closeFiles()
	}
}

// retireLocked marks segs as gone from the log and returns those no reader
// uses, which the caller closes after unlocking mu; the others are closed
// by their last reader's release. mu held.
func (t *Tablet) retireLocked(segs []*segment) []*segment {
	var idle []*segment
	for _, s := range segs {
		s.removed = true
		if s.refs == 0 {
			idle = append(idle, s)
		}
	}
	return idle
}

// writeIndexFiles writes s's in-memory indexes to its index files
// (atomically; fsynced if sync and not NoSync; the caller syncs the
// directory). appendMu held.
func (t *Tablet) writeIndexFiles(s *segment, sync bool) error {
	idx := make([]byte, 0, len(s.offsets)*offsetEntrySize)
	for _, e := range s.offsets {
		idx = appendOffsetEntry(idx, e)
	}
	times := s.finalTimes()
	tidx := make([]byte, 0, len(times)*timeEntrySize)
	for _, e := range times {
		tidx = appendTimeEntry(tidx, e)
	}
	noSync := t.cfg.NoSync || !sync
	if err := writeFileAtomic(t.fs, t.dir, fileName(s.base, indexSuffix), idx, noSync); err != nil {
		return err
	}
	return writeFileAtomic(t.fs, t.dir, fileName(s.base, timeIndexSuffix), tidx, noSync)
}

// writeSnapshot writes the writer state as of offset (which must be the
// log end) to "<offset>.writer_snapshot". appendMu held.
func (t *Tablet) writeSnapshot(offset int64) error {
	if err := writeFileAtomic(t.fs, t.dir, fileName(offset, snapshotSuffix), t.writers.encode(offset), t.cfg.NoSync); err != nil {
		return err
	}
	if i, found := slices.BinarySearch(t.snapshots, offset); !found {
		t.snapshots = slices.Insert(t.snapshots, i, offset)
	}
	return nil
}

// removeSnapshots deletes the writer snapshots whose offsets satisfy drop.
// appendMu held.
func (t *Tablet) removeSnapshots(drop func(offset int64) bool) error {
	var errs []error
	kept := t.snapshots[:0]
	for _, o := range t.snapshots {
		if !drop(o) {
			kept = append(kept, o)
			continue
		}
		if err := t.fs.Remove(filepath.Join(t.dir, fileName(o, snapshotSuffix))); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	t.snapshots = kept
	return errors.Join(errs...)
}

// recomputeMaxTsLocked sets mu.maxTs from the segments. appendMu and mu
// held.
func (t *Tablet) recomputeMaxTsLocked() {
	t.mu.maxTs = -1
	for _, s := range t.mu.segments {
		t.mu.maxTs = max(t.mu.maxTs, s.maxTs)
	}
}

// validateBatches splits an append's bytes into batches and checks each
// (frame, CRC, V2 layout, size). The batches alias buf.
func validateBatches(buf []byte, maxBatch int64) ([]record.Batch, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("%w: no batches to append", record.ErrCorruptBatch)
	}
	if int64(len(buf)) > 1<<31-1 {
		return nil, fmt.Errorf("%w: one append of %d bytes, the most is 2 GiB", ErrRecordTooLarge, len(buf))
	}
	var hs []record.Batch
	for pos, rest := 0, buf; len(rest) > 0; {
		b, r, err := record.NextBatch(rest)
		if err == nil {
			err = b.Validate()
		}
		if err == nil && b.Magic() != record.CurrentMagic {
			err = fmt.Errorf("%w: magic %d; the log stores magic %d", record.ErrCorruptBatch, b.Magic(), record.CurrentMagic)
		}
		if err != nil {
			return nil, fmt.Errorf("batch %d at byte %d: %w", len(hs), pos, err)
		}
		if int64(len(b)) > maxBatch {
			return nil, fmt.Errorf("%w: batch %d is %d bytes, the segment size is %d", ErrRecordTooLarge, len(hs), len(b), maxBatch)
		}
		hs = append(hs, b)
		pos += len(b)
		rest = r
	}
	return hs, nil
}
