package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A log record batch is the unit of append, replication, fetch and storage
// (FORMATS.md §4). Strom writes and stores the V2 layout (magic 2):
//
//	BaseOffset i64 | Length i32 | Magic i8 | CommitTimestamp i64 | LeaderEpoch i32 |
//	CRC u32 | SchemaId i16 | Attributes i8 | LastOffsetDelta i32 | WriterId i64 |
//	BatchSequence i32 | RecordCount i32 | StatisticsLength i32 | statistics | records
//
// little-endian. The CRC is CRC-32C of everything after the CRC field, so the
// leader fills in BaseOffset, CommitTimestamp and LeaderEpoch without
// touching it. Headers of Fluss's older layouts (V0, and V1 as main and as
// 0.9.1 define it) are read too, for compatibility checks.

// Magic values.
const (
	MagicV0 int8 = 0
	MagicV1 int8 = 1
	MagicV2 int8 = 2
	// CurrentMagic is the layout Strom writes and stores.
	CurrentMagic = MagicV2
)

// Values a writer puts in fields the server assigns or that are unused.
const (
	NoWriterID      int64 = -1
	NoBatchSequence int32 = -1
	NoLeaderEpoch   int32 = -1
)

// AttrAppendOnly is attribute bit 0: every record is +A and there is no
// change-type vector.
const AttrAppendOnly int8 = 1

// BatchHeaderSize is the size of a V2 header.
const BatchHeaderSize = 56

// lengthFieldEnd is where the bytes counted by Length begin.
const lengthFieldEnd = 12

// ErrCorruptBatch marks a batch whose bytes are not a valid batch.
var ErrCorruptBatch = errors.New("record: corrupt batch")

// layout gives the field offsets of one header layout; -1 = absent.
type layout struct {
	name                                                       string
	leaderEpoch, crc, schemaID, attributes, lastOffsetDelta    int
	writerID, batchSequence, recordCount, statisticsLength, hd int
}

var (
	layoutV0     = layout{"V0", -1, 21, 25, 27, 28, 32, 40, 44, -1, 48}
	layoutV1     = layout{"V1", -1, 21, 25, 27, 28, 32, 40, 44, 48, 52}
	layoutV1Old  = layout{"V1 (0.9.1)", 21, 25, 29, 31, 32, 36, 44, 48, -1, 52}
	layoutV2     = layout{"V2", 21, 25, 29, 31, 32, 36, 44, 48, 52, 56}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
	le           = binary.LittleEndian
	minBatchSize = layoutV0.hd
)

// Batch is one encoded log record batch. Its methods read fields in place
// and never copy. A Batch from NextBatch or Validate is structurally sound;
// methods on any other Batch may panic on short input.
type Batch []byte

func (b Batch) layout() layout {
	switch b.Magic() {
	case MagicV0:
		return layoutV0
	case MagicV2:
		return layoutV2
	}
	// Magic 1 is ambiguous: main's V1 (statistics) or 0.9.1's V1 (leader
	// epoch). Only one CRC position validates.
	if len(b) >= layoutV1.hd && le.Uint32(b[layoutV1.crc:]) == crc32.Checksum(b[layoutV1.crc+4:], castagnoli) {
		return layoutV1
	}
	return layoutV1Old
}

// BaseOffset is the offset of the first record, assigned by the leader.
func (b Batch) BaseOffset() int64 { return int64(le.Uint64(b[0:])) }

// SetBaseOffset assigns the batch's offsets; the CRC is unaffected.
func (b Batch) SetBaseOffset(o int64) { le.PutUint64(b[0:], uint64(o)) }

// Length counts the bytes after the Length field.
func (b Batch) Length() int32 { return int32(le.Uint32(b[8:])) }

// Size is the whole batch's size in bytes, from its Length field.
func (b Batch) Size() int { return int(b.Length()) + lengthFieldEnd }

// Magic is the layout version.
func (b Batch) Magic() int8 { return int8(b[12]) }

// CommitTimestamp is the leader's append time in milliseconds.
func (b Batch) CommitTimestamp() int64 { return int64(le.Uint64(b[13:])) }

// SetCommitTimestamp sets the append time; the CRC is unaffected.
func (b Batch) SetCommitTimestamp(ms int64) { le.PutUint64(b[13:], uint64(ms)) }

// LeaderEpoch is the epoch of the leader that appended the batch, or
// NoLeaderEpoch in a layout without the field.
func (b Batch) LeaderEpoch() int32 {
	l := b.layout()
	if l.leaderEpoch < 0 {
		return NoLeaderEpoch
	}
	return int32(le.Uint32(b[l.leaderEpoch:]))
}

// SetLeaderEpoch sets the leader epoch of a V2 batch; the CRC is unaffected.
func (b Batch) SetLeaderEpoch(e int32) { le.PutUint32(b[layoutV2.leaderEpoch:], uint32(e)) }

// CRC is the stored checksum.
func (b Batch) CRC() uint32 { return le.Uint32(b[b.layout().crc:]) }

// ComputeCRC is the CRC-32C of the bytes the CRC covers.
func (b Batch) ComputeCRC() uint32 {
	return crc32.Checksum(b[b.layout().crc+4:], castagnoli)
}

// UpdateCRC stores ComputeCRC.
func (b Batch) UpdateCRC() { le.PutUint32(b[b.layout().crc:], b.ComputeCRC()) }

// SchemaID names the schema the records were written with.
func (b Batch) SchemaID() int16 { return int16(le.Uint16(b[b.layout().schemaID:])) }

// Attributes holds the flag bits (AttrAppendOnly).
func (b Batch) Attributes() int8 { return int8(b[b.layout().attributes]) }

// AppendOnly reports whether every record is +A (no change-type vector).
func (b Batch) AppendOnly() bool { return b.Attributes()&AttrAppendOnly != 0 }

// LastOffsetDelta is RecordCount-1 (0 for an empty batch).
func (b Batch) LastOffsetDelta() int32 { return int32(le.Uint32(b[b.layout().lastOffsetDelta:])) }

// LastOffset is the offset of the last record.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset is the offset after the batch.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// WriterID is the idempotent writer's id, or NoWriterID.
func (b Batch) WriterID() int64 { return int64(le.Uint64(b[b.layout().writerID:])) }

// BatchSequence is the writer's sequence number of the batch, or NoBatchSequence.
func (b Batch) BatchSequence() int32 { return int32(le.Uint32(b[b.layout().batchSequence:])) }

// RecordCount is the number of records.
func (b Batch) RecordCount() int32 { return int32(le.Uint32(b[b.layout().recordCount:])) }

// HeaderSize is the size of the batch's header (by its layout).
func (b Batch) HeaderSize() int { return b.layout().hd }

// Statistics returns the statistics bytes (empty when absent).
func (b Batch) Statistics() []byte {
	l := b.layout()
	if l.statisticsLength < 0 {
		return nil
	}
	n := int(int32(le.Uint32(b[l.statisticsLength:])))
	return b[l.hd : l.hd+n]
}

// Records returns the records section: for ARROW, the change-type vector
// (absent when append-only) followed by one Arrow IPC message.
func (b Batch) Records() []byte { return b[b.layout().hd+len(b.Statistics()) : b.Size()] }

// Validate checks the batch's structure and CRC; it returns an error
// wrapping ErrCorruptBatch that says what is wrong.
func (b Batch) Validate() error {
	if err := b.validateFrame(); err != nil {
		return err
	}
	if got, want := b.CRC(), b.ComputeCRC(); got != want {
		return fmt.Errorf("%w: CRC %#08x does not match the contents (%#08x)", ErrCorruptBatch, got, want)
	}
	return nil
}

// validateFrame checks everything but the CRC.
func (b Batch) validateFrame() error {
	if len(b) < minBatchSize {
		return fmt.Errorf("%w: %d bytes, shorter than a batch header", ErrCorruptBatch, len(b))
	}
	if m := b.Magic(); m < MagicV0 || m > MagicV2 {
		return fmt.Errorf("%w: unknown magic %d", ErrCorruptBatch, m)
	}
	l := b.layout()
	if len(b) < l.hd {
		return fmt.Errorf("%w: %d bytes, shorter than a %s header (%d)", ErrCorruptBatch, len(b), l.name, l.hd)
	}
	if size := int64(b.Length()) + lengthFieldEnd; size < int64(l.hd) || size != int64(len(b)) {
		return fmt.Errorf("%w: length field says %d bytes, have %d", ErrCorruptBatch, size, len(b))
	}
	if l.statisticsLength >= 0 {
		n := int32(le.Uint32(b[l.statisticsLength:]))
		if n < 0 || int(n) > len(b)-l.hd {
			return fmt.Errorf("%w: statistics length %d out of range", ErrCorruptBatch, n)
		}
	}
	count, delta := b.RecordCount(), b.LastOffsetDelta()
	if count < 0 || (count == 0 && delta != 0) || (count > 0 && delta != count-1) {
		return fmt.Errorf("%w: record count %d with last offset delta %d", ErrCorruptBatch, count, delta)
	}
	return nil
}

// NextBatch splits the first batch off buf. It checks the frame (sizes and
// magic) but not the CRC: callers that take bytes from outside call
// Validate. It returns io.ErrUnexpectedEOF-wrapping ErrCorruptBatch when buf
// ends inside the batch (a torn tail).
func NextBatch(buf []byte) (Batch, []byte, error) {
	if len(buf) < lengthFieldEnd+1 {
		return nil, buf, fmt.Errorf("%w: %d trailing bytes, shorter than a batch header: %w", ErrCorruptBatch, len(buf), errTorn)
	}
	size := int64(int32(le.Uint32(buf[8:]))) + lengthFieldEnd
	if size < int64(minBatchSize) {
		return nil, buf, fmt.Errorf("%w: length field says %d bytes", ErrCorruptBatch, size)
	}
	if size > int64(len(buf)) {
		return nil, buf, fmt.Errorf("%w: batch of %d bytes, only %d present: %w", ErrCorruptBatch, size, len(buf), errTorn)
	}
	b := Batch(buf[:size])
	if err := b.validateFrame(); err != nil {
		return nil, buf, err
	}
	return b, buf[size:], nil
}

// errTorn marks input that ends inside a batch; see IsTorn.
var errTorn = errors.New("input ends inside the batch")

// IsTorn reports whether err says the input ended inside a batch (as a log
// cut off by a crash does), as opposed to bytes that are wrong.
func IsTorn(err error) bool { return errors.Is(err, errTorn) }

// BatchHeader holds the header fields a writer chooses.
type BatchHeader struct {
	SchemaID      int16
	AppendOnly    bool
	WriterID      int64 // NoWriterID when not idempotent
	BatchSequence int32 // NoBatchSequence when not idempotent
}

// AppendBatch appends a V2 batch with the given header, record count and
// records section (for ARROW: change-type vector, then the Arrow IPC
// message) to dst, with BaseOffset 0, CommitTimestamp 0, LeaderEpoch
// NoLeaderEpoch and the CRC computed. It returns the extended slice and the
// batch within it.
func AppendBatch(dst []byte, h BatchHeader, recordCount int, records []byte) ([]byte, Batch) {
	start := len(dst)
	dst = append(dst, make([]byte, BatchHeaderSize)...)
	dst = append(dst, records...)
	b := Batch(dst[start:])
	le.PutUint32(b[8:], uint32(len(b)-lengthFieldEnd))
	b[12] = byte(MagicV2)
	b.SetLeaderEpoch(NoLeaderEpoch)
	le.PutUint16(b[29:], uint16(h.SchemaID))
	if h.AppendOnly {
		b[31] = byte(AttrAppendOnly)
	}
	if recordCount > 0 {
		le.PutUint32(b[32:], uint32(recordCount-1))
	}
	le.PutUint64(b[36:], uint64(h.WriterID))
	le.PutUint32(b[44:], uint32(h.BatchSequence))
	le.PutUint32(b[48:], uint32(recordCount))
	// StatisticsLength stays 0.
	b.UpdateCRC()
	return dst, b
}

// SetWriter sets the writer id and batch sequence of a V2 batch and
// recomputes the CRC (both fields are covered by it). An idempotent writer
// stamps a batch this way when it sends it, so a batch that was never
// appended does not use up a sequence number.
func (b Batch) SetWriter(writerID int64, sequence int32) {
	le.PutUint64(b[layoutV2.writerID:], uint64(writerID))
	le.PutUint32(b[layoutV2.batchSequence:], uint32(sequence))
	b.UpdateCRC()
}
