package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// A KV record batch carries a PutKv request's writes to one bucket
// (FORMATS.md §5), Fluss's DefaultKvRecordBatch, KvRecordBatchBuilder and
// DefaultKvRecord:
//
//	Length i32 | Magic i8 | CRC u32 | SchemaId i16 | Attributes i8 |
//	WriterId i64 | BatchSequence i32 | RecordCount i32 | records
//
// little-endian, Length counting the bytes after it and the CRC-32C covering
// SchemaId to the end. Each record is
//
//	Length i32 | key length (unsigned VarInt32) | key | row
//
// where the key is the compacted primary key and the row a compacted row
// without schema id (the batch's SchemaId names its schema); a record that
// ends right after its key has no row and is a delete.

// KvMagic is the only KV batch magic.
const KvMagic int8 = 0

// KvBatchHeaderSize is the size of a KV batch header.
const KvBatchHeaderSize = 28

// KV batch field offsets.
const (
	kvLengthOffset        = 0
	kvMagicOffset         = 4
	kvCRCOffset           = 5
	kvSchemaIDOffset      = 9
	kvAttributesOffset    = 11
	kvWriterIDOffset      = 12
	kvBatchSequenceOffset = 20
	kvRecordCountOffset   = 24
	kvLengthFieldEnd      = 4
	kvRecordLengthSize    = 4
)

// KvBatch is one encoded KV record batch. Its methods read fields in place
// and never copy. A KvBatch that passed Validate is sound; methods on any
// other KvBatch may panic on input shorter than a header.
type KvBatch []byte

// Length counts the bytes after the Length field.
func (b KvBatch) Length() int32 { return int32(le.Uint32(b[kvLengthOffset:])) }

// Magic is the layout version, KvMagic.
func (b KvBatch) Magic() int8 { return int8(b[kvMagicOffset]) }

// CRC is the stored checksum.
func (b KvBatch) CRC() uint32 { return le.Uint32(b[kvCRCOffset:]) }

// ComputeCRC is the CRC-32C of the bytes the CRC covers (SchemaId to the end).
func (b KvBatch) ComputeCRC() uint32 { return crc32.Checksum(b[kvSchemaIDOffset:], castagnoli) }

// SchemaID names the schema of the records' rows.
func (b KvBatch) SchemaID() int16 { return int16(le.Uint16(b[kvSchemaIDOffset:])) }

// Attributes holds flag bits; Fluss defines none and writes 0.
func (b KvBatch) Attributes() int8 { return int8(b[kvAttributesOffset]) }

// WriterID is the idempotent writer's id, or NoWriterID.
func (b KvBatch) WriterID() int64 { return int64(le.Uint64(b[kvWriterIDOffset:])) }

// BatchSequence is the writer's sequence number of the batch, or NoBatchSequence.
func (b KvBatch) BatchSequence() int32 { return int32(le.Uint32(b[kvBatchSequenceOffset:])) }

// RecordCount is the number of records.
func (b KvBatch) RecordCount() int32 { return int32(le.Uint32(b[kvRecordCountOffset:])) }

// KvRecord is one write of a KV batch.
type KvRecord struct {
	// Key is the compacted primary key (KeyCodec); never empty.
	Key []byte
	// Row is the compacted row (CompactedRowCodec) without schema id, or nil
	// for a delete.
	Row []byte
}

// IsDelete reports whether the record deletes its key.
func (r KvRecord) IsDelete() bool { return len(r.Row) == 0 }

// Validate checks the whole batch: header size, Length against the bytes
// present, magic, CRC, and that the records section is exactly RecordCount
// well-framed records, each with a non-empty key. The error wraps
// ErrCorruptBatch and says what is wrong. Rows are not decoded: that needs
// the schema SchemaID names.
func (b KvBatch) Validate() error {
	if len(b) < KvBatchHeaderSize {
		return fmt.Errorf("%w: KV batch of %d bytes, shorter than its header (%d)", ErrCorruptBatch, len(b), KvBatchHeaderSize)
	}
	if size := int64(b.Length()) + kvLengthFieldEnd; size != int64(len(b)) {
		return fmt.Errorf("%w: KV batch length field says %d bytes, have %d", ErrCorruptBatch, size, len(b))
	}
	if m := b.Magic(); m != KvMagic {
		return fmt.Errorf("%w: unknown KV batch magic %d", ErrCorruptBatch, m)
	}
	if got, want := b.CRC(), b.ComputeCRC(); got != want {
		return fmt.Errorf("%w: KV batch CRC %#08x does not match the contents (%#08x)", ErrCorruptBatch, got, want)
	}
	_, err := b.Records()
	return err
}

// Records parses the records section into records whose Key and Row alias
// b. It checks the framing (as Validate does) but not the CRC; the error
// wraps ErrCorruptBatch.
func (b KvBatch) Records() ([]KvRecord, error) {
	if len(b) < KvBatchHeaderSize {
		return nil, fmt.Errorf("%w: KV batch of %d bytes, shorter than its header (%d)", ErrCorruptBatch, len(b), KvBatchHeaderSize)
	}
	count := b.RecordCount()
	if count < 0 {
		return nil, fmt.Errorf("%w: KV batch record count %d", ErrCorruptBatch, count)
	}
	rest := b[KvBatchHeaderSize:]
	// Every record takes at least 6 bytes, which bounds the allocation by
	// the input rather than by a count read from it.
	records := make([]KvRecord, 0, min(int(count), len(rest)/6))
	for i := range int(count) {
		rec, n, reason := nextKvRecord(rest)
		if reason != "" {
			return nil, fmt.Errorf("%w: KV record %d at byte %d: %s", ErrCorruptBatch, i, len(b)-len(rest), reason)
		}
		records = append(records, rec)
		rest = rest[n:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the %d records of the KV batch", ErrCorruptBatch, len(rest), count)
	}
	return records, nil
}

// nextKvRecord parses the record at the start of buf and returns its size.
func nextKvRecord(buf []byte) (KvRecord, int, string) {
	if len(buf) < kvRecordLengthSize {
		return KvRecord{}, 0, fmt.Sprintf("%d bytes left, too few for a record length", len(buf))
	}
	length := int32(le.Uint32(buf))
	body := buf[kvRecordLengthSize:]
	if length < 0 || int(length) > len(body) {
		return KvRecord{}, 0, fmt.Sprintf("record length %d, %d bytes left", length, len(body))
	}
	body = body[:length]
	r := fieldReader{b: body}
	keyLen, reason := r.varUint(32)
	if reason != "" {
		return KvRecord{}, 0, "key length: " + reason
	}
	if keyLen == 0 {
		return KvRecord{}, 0, "empty key"
	}
	if keyLen > uint64(r.remaining()) {
		return KvRecord{}, 0, fmt.Sprintf("key length %d is more than the %d bytes left in the record", int32(uint32(keyLen)), r.remaining())
	}
	rec := KvRecord{Key: body[r.pos : r.pos+int(keyLen)]}
	if rowStart := r.pos + int(keyLen); rowStart < len(body) {
		rec.Row = body[rowStart:]
	}
	return rec, kvRecordLengthSize + int(length), ""
}

// KvBatchHeader holds the header fields a writer chooses.
type KvBatchHeader struct {
	SchemaID      int16
	WriterID      int64 // NoWriterID when not idempotent
	BatchSequence int32 // NoBatchSequence when not idempotent
}

// KvBatchBuilder builds one KV batch, as Fluss's KvRecordBatchBuilder. It is
// not safe for concurrent use.
type KvBatchBuilder struct {
	h     KvBatchHeader
	buf   []byte
	count int32
}

// NewKvBatchBuilder returns a builder of an empty batch with header h.
func NewKvBatchBuilder(h KvBatchHeader) *KvBatchBuilder {
	b := &KvBatchBuilder{h: h}
	b.reset()
	return b
}

func (b *KvBatchBuilder) reset() {
	b.buf = make([]byte, KvBatchHeaderSize, 256)
	b.count = 0
}

// Append adds a write of key: an upsert of row (a compacted row without
// schema id, written with the header's schema), or a delete when row is
// empty. It copies both. The error is an *InvalidError when key is empty or
// the record or batch would not fit Fluss's int32 lengths; the builder is
// then unchanged.
func (b *KvBatchBuilder) Append(key, row []byte) error {
	if len(key) == 0 {
		return &InvalidError{Field: "key", Reason: "a KV record needs a non-empty key"}
	}
	body := int64(uvarintLen(uint64(len(key)))) + int64(len(key)) + int64(len(row))
	if body > math.MaxInt32 || int64(len(b.buf))+kvRecordLengthSize+body-kvLengthFieldEnd > math.MaxInt32 {
		return &InvalidError{Field: "record", Reason: fmt.Sprintf("a KV record of %d bytes does not fit the batch", body)}
	}
	b.buf = le.AppendUint32(b.buf, uint32(body))
	b.buf = binary.AppendUvarint(b.buf, uint64(len(key)))
	b.buf = append(b.buf, key...)
	b.buf = append(b.buf, row...)
	b.count++
	return nil
}

// Len is the number of records appended so far.
func (b *KvBatchBuilder) Len() int { return int(b.count) }

// Size is the size in bytes of the batch Build would return now.
func (b *KvBatchBuilder) Size() int { return len(b.buf) }

// Build fills in the header and returns the batch, which the caller then
// owns; the builder starts over, empty, with the same header.
func (b *KvBatchBuilder) Build() KvBatch {
	out := KvBatch(b.buf)
	le.PutUint32(out[kvLengthOffset:], uint32(len(out)-kvLengthFieldEnd))
	out[kvMagicOffset] = byte(KvMagic)
	le.PutUint16(out[kvSchemaIDOffset:], uint16(b.h.SchemaID))
	out[kvAttributesOffset] = 0
	le.PutUint64(out[kvWriterIDOffset:], uint64(b.h.WriterID))
	le.PutUint32(out[kvBatchSequenceOffset:], uint32(b.h.BatchSequence))
	le.PutUint32(out[kvRecordCountOffset:], uint32(b.count))
	le.PutUint32(out[kvCRCOffset:], out.ComputeCRC())
	b.reset()
	return out
}

// uvarintLen is the size of v as an unsigned LEB128 varint.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// SetWriter sets the writer id and batch sequence and recomputes the CRC
// (both fields are covered by it), as record.Batch.SetWriter does for log
// batches.
func (b KvBatch) SetWriter(writerID int64, sequence int32) {
	le.PutUint64(b[kvWriterIDOffset:], uint64(writerID))
	le.PutUint32(b[kvBatchSequenceOffset:], uint32(sequence))
	le.PutUint32(b[kvCRCOffset:], b.ComputeCRC())
}
