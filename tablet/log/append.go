package log

import (
	"fmt"
	"math"
	"time"

	"strom/record"
)

// AppendAsLeader appends client batches, back to back in batches, at the
// log end. Each batch is validated (frame and CRC; V2 layout); one bad
// batch rejects the call with an error wrapping record.ErrCorruptBatch and
// nothing is appended. The tablet assigns dense offsets from the log end and
// sets every batch's CommitTimestamp (now in ms, but never below the log's
// newest commit timestamp, so timestamps never decrease) and LeaderEpoch,
// rewriting those header fields of batches in place (they are outside the
// CRC); the tablet keeps no reference to batches after it returns.
//
// Idempotence: a batch of a writer (WriterID != record.NoWriterID) whose
// sequence is one of that writer's last five appended is a retry: nothing
// of the call is appended and the result carries the original batch's
// offsets and timestamp with Duplicate set. A sequence that does not follow
// the writer's last gives ErrOutOfOrderSequence; a writer the log does not
// know must start at sequence 0 (as Fluss's WriterAppendInfo requires).
//
// leaderEpoch below the latest epoch the log has seen (or negative) gives
// ErrFencedLeaderEpoch; a newer one is recorded in the epoch cache as
// starting at the first offset appended. The append is not fsynced here:
// the flusher does it as Config's flush policy says (or Flush). It blocks
// on the write while holding the writer lock, never on an fsync; reads
// are not blocked.
func (t *Tablet) AppendAsLeader(batches []byte, leaderEpoch int32, now time.Time) (AppendInfo, error) {
	v, err := t.Validate(batches)
	if err != nil {
		return AppendInfo{}, err
	}
	return t.AppendValidated(v, leaderEpoch, now)
}

// ValidBatches are client batches Validate has checked, for
// AppendValidated.
type ValidBatches struct {
	buf []byte
	hs  []record.Batch
}

// Validate checks client batches as AppendAsLeader does before appending
// them (frame, CRC, size; V2 layout), so that an append that may be tried
// more than once (as Replica does for a batch that arrived ahead of its
// writer's earlier ones) reads the batches once.
func (t *Tablet) Validate(batches []byte) (ValidBatches, error) {
	hs, err := validateBatches(batches, t.cfg.SegmentBytes)
	return ValidBatches{buf: batches, hs: hs}, err
}

// AppendValidated is AppendAsLeader for batches Validate has checked (and
// nothing has modified since). A call refused (for a sequence, say) changes
// neither the log nor the batches, and may be repeated.
func (t *Tablet) AppendValidated(v ValidBatches, leaderEpoch int32, now time.Time) (AppendInfo, error) {
	batches, hs := v.buf, v.hs
	if len(hs) == 0 {
		return AppendInfo{}, fmt.Errorf("%w: no batches to append", record.ErrCorruptBatch)
	}
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if t.mu.closed {
		return AppendInfo{}, ErrClosed
	}
	if latest := t.mu.epochs.latestEpoch(); leaderEpoch < 0 || leaderEpoch < latest {
		return AppendInfo{}, fmt.Errorf("%w: append with epoch %d, the log has seen epoch %d", ErrFencedLeaderEpoch, leaderEpoch, latest)
	}
	ts := max(now.UnixMilli(), t.mu.maxTs)
	first := t.mu.logEnd

	// Check every writer's sequence before touching anything.
	tx := t.writers.begin()
	next := first
	for _, h := range hs {
		if h.WriterID() != record.NoWriterID {
			if m, ok := tx.duplicate(h); ok {
				return AppendInfo{FirstOffset: m.first, LastOffset: m.last, CommitTimestamp: m.ts, Duplicate: true}, nil
			}
			if err := tx.checkLeader(h); err != nil {
				return AppendInfo{}, err
			}
			tx.add(h.WriterID(), batchMeta{seq: h.BatchSequence(), first: next, last: next + int64(h.LastOffsetDelta()), ts: ts})
		}
		next += int64(h.LastOffsetDelta()) + 1
	}
	last := next - 1

	if err := t.maybeRoll(int64(len(batches)), ts, last, len(hs)); err != nil {
		return AppendInfo{}, err
	}
	if leaderEpoch > t.mu.epochs.latestEpoch() {
		c := epochCache{entries: t.mu.epochs.clone()}
		c.assign(EpochEntry{Epoch: leaderEpoch, StartOffset: first})
		if err := t.installEpochs(c); err != nil {
			return AppendInfo{}, err
		}
	}
	o := first
	for _, h := range hs {
		h.SetBaseOffset(o)
		h.SetCommitTimestamp(ts)
		h.SetLeaderEpoch(leaderEpoch)
		o = h.NextOffset()
	}
	if err := t.write(batches, hs); err != nil {
		return AppendInfo{}, err
	}
	tx.commit()
	return AppendInfo{FirstOffset: first, LastOffset: last, CommitTimestamp: ts}, nil
}

// AppendAsFollower appends batches copied from the leader, back to back in
// batches, as they are (offsets, timestamps and epochs included). Each is
// validated as in AppendAsLeader; the first must start at the log end and
// each next one right after the previous (dense offsets), or the call
// fails with ErrOffsetMismatch and nothing is appended. Writer state is
// updated without sequence checks (the leader made them; this is Kafka's
// choice for replication, so that a follower never stalls on a writer it
// expired earlier than the leader). Batches carrying a leader epoch other
// than the latest are recorded in the epoch cache. The tablet does not
// modify or keep batches. The append is not fsynced.
func (t *Tablet) AppendAsFollower(batches []byte) error {
	hs, err := validateBatches(batches, t.cfg.SegmentBytes)
	if err != nil {
		return err
	}
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if t.mu.closed {
		return ErrClosed
	}
	want := t.mu.logEnd
	c := epochCache{entries: t.mu.epochs.clone()}
	epochsChanged := false
	for i, h := range hs {
		if h.BaseOffset() != want {
			return fmt.Errorf("%w: batch %d has base offset %d, want %d", ErrOffsetMismatch, i, h.BaseOffset(), want)
		}
		want = h.NextOffset()
		if e := h.LeaderEpoch(); e >= 0 && e != c.latestEpoch() {
			epochsChanged = c.assign(EpochEntry{Epoch: e, StartOffset: h.BaseOffset()}) || epochsChanged
		}
	}
	if err := t.maybeRoll(int64(len(batches)), hs[0].CommitTimestamp(), want-1, len(hs)); err != nil {
		return err
	}
	if epochsChanged {
		if err := t.installEpochs(c); err != nil {
			return err
		}
	}
	if err := t.write(batches, hs); err != nil {
		return err
	}
	for _, h := range hs {
		t.writers.apply(h)
	}
	return nil
}

// write appends the bytes of hs (which are batches) to the active segment
// and publishes them: segment size, indexes, log end. appendMu held. A
// failed write publishes nothing; bytes it may have left past the segment's
// size are never read and are overwritten by the next append.
func (t *Tablet) write(batches []byte, hs []record.Batch) error {
	s := t.active()
	if _, err := s.f.WriteAt(batches, s.size); err != nil {
		return fmt.Errorf("append to segment %d at %d: %w", s.base, s.size, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	pos := s.size
	for _, h := range hs {
		s.addBatch(pos, h, t.interval)
		pos += int64(len(h))
		t.mu.maxTs = max(t.mu.maxTs, h.CommitTimestamp())
	}
	t.mu.logEnd = hs[len(hs)-1].NextOffset()
	if t.cfg.flushPolicy() {
		t.wakeFlusher()
	}
	return nil
}

// maybeRoll seals the active segment and starts a new one at the log end if
// an append of n bytes in count batches, the first with commit timestamp
// ts and the last ending at offset last, should not go into it: it would
// pass SegmentBytes, the segment is older than SegmentAge, an index would
// pass its size, or a relative offset would not fit in 32 bits. An empty
// segment is never rolled. appendMu held.
func (t *Tablet) maybeRoll(n, ts, last int64, count int) error {
	s := t.active()
	if s.size == 0 {
		return nil
	}
	age := t.cfg.SegmentAge.Milliseconds()
	switch {
	case s.size+n > t.cfg.SegmentBytes:
	case age > 0 && ts-s.firstTs >= age:
	case len(s.offsets)+count > t.maxEntries || len(s.times)+count+1 > t.maxEntries:
	case last-s.base > math.MaxUint32:
	default:
		return nil
	}
	return t.roll()
}

// roll seals the active segment and creates the next one at the log end:
// write its index files, write the writer snapshot at the new base, create
// the new file, publish, and hand the sealed segment to the flusher, which
// fsyncs it (and its index files) outside every lock before the recovery
// point passes it. Until then recovery scans it like the last segment, so
// a torn tail in it is cut like one. appendMu held.
func (t *Tablet) roll() error {
	old := t.active()
	base := t.mu.logEnd
	if err := t.writeIndexFiles(old, false); err != nil {
		return fmt.Errorf("roll: %w", err)
	}
	if err := t.writeSnapshot(base); err != nil {
		return fmt.Errorf("roll: %w", err)
	}
	s, err := t.createSegment(base)
	if err != nil {
		return fmt.Errorf("roll: %w", err)
	}
	// A reader that saw this segment sealed before a truncation
	// reactivated it may have cached the index files of that time.
	old.closeIndexFiles(false)
	t.mu.Lock()
	old.seal()
	t.mu.segments = append(t.mu.segments, s)
	t.mu.unsynced = append(t.mu.unsynced, old)
	t.mu.Unlock()
	t.wakeFlusher()
	// Snapshots taken by Close inside the sealed segment are superseded by
	// the one at its end.
	return t.removeSnapshots(func(o int64) bool { return o > old.base && o < base })
}

// RemoveExpiredWriters forgets the idempotent writers whose last batch was
// committed more than Config.WriterExpiration before Config.Now (Fluss's
// periodic writer id expiration; the caller schedules it). A forgotten
// writer that comes back must start again at sequence 0 on the leader
// path. It stays forgotten across a restart: Open drops the writers
// expired by then from the state it loads. It returns how many writers
// were removed.
func (t *Tablet) RemoveExpiredWriters() int {
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	return t.removeExpiredLocked(t.writers)
}

// removeExpiredLocked drops ws's writers expired as of Config.Now and
// returns how many. appendMu held.
func (t *Tablet) removeExpiredLocked(ws *writerState) int {
	if t.cfg.WriterExpiration <= 0 {
		return 0
	}
	return ws.removeExpired(t.cfg.now().Add(-t.cfg.WriterExpiration).UnixMilli())
}

// CheckSequence reports, without appending, whether a batch of the given
// writer and sequence could be appended now: nil when it is the writer's
// next, or a retry of one of its last five (or the writer is
// record.NoWriterID); the *SequenceError AppendAsLeader would give
// otherwise. It lets a caller with costly work before the append (the KV
// tablet's merge) wait for a batch's turn before doing it.
func (t *Tablet) CheckSequence(writerID int64, seq int32) error {
	if writerID == record.NoWriterID {
		return nil
	}
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	last := record.NoBatchSequence
	if e, ok := t.writers.m[writerID]; ok {
		if _, dup := e.find(seq); dup {
			return nil
		}
		last = e.lastSeq()
	}
	if !inSequence(last, seq) {
		return &SequenceError{WriterID: writerID, Sequence: seq, Last: last}
	}
	return nil
}
