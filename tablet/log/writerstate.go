package log

import (
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"slices"

	"strom/record"
)

// Writer state (Fluss's WriterStateManager, Kafka's ProducerStateManager):
// for each idempotent writer, the last few batches it appended, so that a
// retried batch is recognised and answered with its original offsets, and
// a gap in the sequence is refused.

// writerBatches is how many batches per writer are remembered (Fluss and
// Kafka: 5, the most in-flight requests an idempotent writer may have).
const writerBatches = 5

// batchMeta describes one appended batch of a writer.
type batchMeta struct {
	seq         int32
	first, last int64 // offsets
	ts          int64 // commit timestamp (ms)
}

// writerEntry holds a writer's last batches, oldest first.
type writerEntry struct {
	batches []batchMeta
}

func (e *writerEntry) lastSeq() int32 { return e.batches[len(e.batches)-1].seq }

func (e *writerEntry) find(seq int32) (batchMeta, bool) {
	for _, b := range e.batches {
		if b.seq == seq {
			return b, true
		}
	}
	return batchMeta{}, false
}

func (e *writerEntry) add(b batchMeta) {
	if len(e.batches) == writerBatches {
		e.batches = append(e.batches[:0], e.batches[1:]...)
	}
	e.batches = append(e.batches, b)
}

func (e *writerEntry) clone() *writerEntry {
	return &writerEntry{batches: slices.Clone(e.batches)}
}

// inSequence reports whether next follows last, wrapping from
// math.MaxInt32 to 0 as Fluss's writers do.
func inSequence(last, next int32) bool {
	if last == math.MaxInt32 {
		return next == 0
	}
	return next == last+1
}

// writerState maps writer id to its entry. Not safe for concurrent use: the
// tablet touches it only under appendMu.
type writerState struct {
	m map[int64]*writerEntry
}

func newWriterState() *writerState { return &writerState{m: map[int64]*writerEntry{}} }

// writerTxn stages the writer state changes of one append, so that a call
// rejected half way changes nothing.
type writerTxn struct {
	ws      *writerState
	touched map[int64]*writerEntry
}

func (ws *writerState) begin() *writerTxn { return &writerTxn{ws: ws} }

func (tx *writerTxn) entry(id int64) (*writerEntry, bool) {
	if e, ok := tx.touched[id]; ok {
		return e, true
	}
	e, ok := tx.ws.m[id]
	if !ok {
		return nil, false
	}
	if tx.touched == nil {
		tx.touched = map[int64]*writerEntry{}
	}
	e = e.clone()
	tx.touched[id] = e
	return e, true
}

// duplicate returns the committed batch h repeats, if any.
func (tx *writerTxn) duplicate(h record.Batch) (batchMeta, bool) {
	e, ok := tx.ws.m[h.WriterID()]
	if !ok {
		return batchMeta{}, false
	}
	return e.find(h.BatchSequence())
}

// checkLeader checks that h's sequence follows its writer's last one. A
// writer the log does not know must start at sequence 0 (Fluss's
// WriterAppendInfo: an empty entry's last sequence is -1).
func (tx *writerTxn) checkLeader(h record.Batch) error {
	id, seq := h.WriterID(), h.BatchSequence()
	last := record.NoBatchSequence
	if e, ok := tx.entry(id); ok {
		last = e.lastSeq()
	}
	if !inSequence(last, seq) {
		return &SequenceError{WriterID: id, Sequence: seq, Last: last}
	}
	return nil
}

// add stages batch m of writer id.
func (tx *writerTxn) add(id int64, m batchMeta) {
	e, ok := tx.entry(id)
	if !ok {
		e = &writerEntry{}
		if tx.touched == nil {
			tx.touched = map[int64]*writerEntry{}
		}
		tx.touched[id] = e
	}
	e.add(m)
}

func (tx *writerTxn) commit() {
	maps.Copy(tx.ws.m, tx.touched)
}

// apply adds a stored batch to the state without checks (recovery and the
// follower path: the leader already checked).
func (ws *writerState) apply(h record.Batch) {
	id := h.WriterID()
	if id == record.NoWriterID {
		return
	}
	e, ok := ws.m[id]
	if !ok {
		e = &writerEntry{}
		ws.m[id] = e
	}
	e.add(batchMeta{seq: h.BatchSequence(), first: h.BaseOffset(), last: h.LastOffset(), ts: h.CommitTimestamp()})
}

// removeExpired drops the writers whose last batch was committed before
// limit (ms) and returns how many.
func (ws *writerState) removeExpired(limit int64) int {
	n := 0
	for id, e := range ws.m {
		if e.batches[len(e.batches)-1].ts < limit {
			delete(ws.m, id)
			n++
		}
	}
	return n
}

// Writer state snapshot file, "<offset>.writer_snapshot": the state after
// every batch below offset, little-endian:
//
//	version u8 (1) | crc u32 | offset i64 | writers u32 |
//	  writers × ( writerId i64 | batches u8 |
//	              batches × ( seq i32 | first i64 | last i64 | ts i64 ) )
//
// crc is CRC-32C of everything after it.
const snapshotVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (ws *writerState) encode(offset int64) []byte {
	b := []byte{snapshotVersion, 0, 0, 0, 0}
	b = le.AppendUint64(b, uint64(offset))
	b = le.AppendUint32(b, uint32(len(ws.m)))
	ids := slices.SortedFunc(maps.Keys(ws.m), cmp.Compare[int64])
	for _, id := range ids {
		e := ws.m[id]
		b = le.AppendUint64(b, uint64(id))
		b = append(b, byte(len(e.batches)))
		for _, m := range e.batches {
			b = le.AppendUint32(b, uint32(m.seq))
			b = le.AppendUint64(b, uint64(m.first))
			b = le.AppendUint64(b, uint64(m.last))
			b = le.AppendUint64(b, uint64(m.ts))
		}
	}
	le.PutUint32(b[1:], crc32.Checksum(b[5:], castagnoli))
	return b
}

var errBadSnapshot = errors.New("bad writer snapshot")

// decodeWriterSnapshot parses encode's output and checks it was taken at
// wantOffset.
func decodeWriterSnapshot(b []byte, wantOffset int64) (*writerState, error) {
	if len(b) < 17 || b[0] != snapshotVersion {
		return nil, fmt.Errorf("%w: short or unknown version", errBadSnapshot)
	}
	if got, want := le.Uint32(b[1:]), crc32.Checksum(b[5:], castagnoli); got != want {
		return nil, fmt.Errorf("%w: CRC %#08x, contents %#08x", errBadSnapshot, got, want)
	}
	if o := int64(le.Uint64(b[5:])); o != wantOffset {
		return nil, fmt.Errorf("%w: taken at offset %d, file name says %d", errBadSnapshot, o, wantOffset)
	}
	n := le.Uint32(b[13:])
	p := b[17:]
	ws := newWriterState()
	for range n {
		if len(p) < 9 {
			return nil, fmt.Errorf("%w: truncated", errBadSnapshot)
		}
		id := int64(le.Uint64(p))
		k := int(p[8])
		p = p[9:]
		if k == 0 || k > writerBatches || len(p) < k*28 {
			return nil, fmt.Errorf("%w: writer %d with %d batches", errBadSnapshot, id, k)
		}
		e := &writerEntry{}
		for range k {
			e.batches = append(e.batches, batchMeta{
				seq:   int32(le.Uint32(p)),
				first: int64(le.Uint64(p[4:])),
				last:  int64(le.Uint64(p[12:])),
				ts:    int64(le.Uint64(p[20:])),
			})
			p = p[28:]
		}
		ws.m[id] = e
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errBadSnapshot, len(p))
	}
	return ws, nil
}
