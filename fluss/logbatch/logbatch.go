package logbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
)

// Magic values (FORMATS.md §4.1). Magic 1 is read as 0.9.1 defines it
// (LeaderEpoch, no statistics): this package speaks to 0.9.1 clients only.
const (
	MagicV0 int8 = 0 // 48-byte header: no LeaderEpoch, no StatisticsLength
	MagicV1 int8 = 1 // 0.9.1's: 52 bytes, LeaderEpoch at 21
	MagicV2 int8 = 2 // Strom's stored layout: 56 bytes, StatisticsLength at 52
)

// Header sizes of the three layouts.
const (
	HeaderSizeV0 = 48
	HeaderSizeV1 = 52
	HeaderSizeV2 = 56
)

// noLeaderEpoch is what a V0 batch becomes in V2, as Fluss's writers fill it.
const noLeaderEpoch = -1

// Offsets shared by every layout: BaseOffset i64 | Length i32 | Magic i8 |
// CommitTimestamp i64.
const (
	lengthOffset = 8
	magicOffset  = 12
	epochOffset  = 21 // V1 and V2 only; V0 has its CRC here
	// lengthEnd is where the bytes the Length field counts begin.
	lengthEnd = 12
	// fixedLen is SchemaId i16 | Attributes i8 | LastOffsetDelta i32 |
	// WriterId i64 | BatchSequence i32 | RecordCount i32: the same fields,
	// in the same order, right after the CRC in every layout.
	fixedLen = 23
)

// crcOffset returns where a layout's CRC sits; the fixed fields follow it.
func crcOffset(magic int8) int {
	if magic == MagicV0 {
		return 21
	}
	return 25
}

var le = binary.LittleEndian

// zeroStats is a StatisticsLength of 0.
var zeroStats [4]byte

// ErrCorrupt marks input that is not a valid batch of the expected layouts.
// Errors from this package wrap it inside a *BatchError.
var ErrCorrupt = errors.New("logbatch: corrupt batch")

// BatchError says which batch of a buffer is wrong and why. It wraps
// ErrCorrupt. Index and Pos locate the batch (0-based, in batches and in bytes
// from the start of the buffer); BaseOffset is its BaseOffset field, or -1
// when the header is too short to have one.
type BatchError struct {
	Index, Pos int
	BaseOffset int64
	Reason     string
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("logbatch: batch %d (at byte %d, base offset %d): %s", e.Index, e.Pos, e.BaseOffset, e.Reason)
}

func (e *BatchError) Unwrap() error { return ErrCorrupt }

// batchAt splits off the batch at buf[pos:], checking its frame: the header
// of its magic, a Length that fits, the magic one of want, the record count
// consistent with LastOffsetDelta. index is for the error.
func batchAt(buf []byte, pos, index int, want func(int8) bool, wantName string) ([]byte, error) {
	rest := buf[pos:]
	fail := func(format string, args ...any) error {
		base := int64(-1)
		if len(rest) >= 8 {
			base = int64(le.Uint64(rest))
		}
		return &BatchError{Index: index, Pos: pos, BaseOffset: base, Reason: fmt.Sprintf(format, args...)}
	}
	if len(rest) <= magicOffset {
		return nil, fail("%d bytes left, shorter than a batch header", len(rest))
	}
	magic := int8(rest[magicOffset])
	if !want(magic) {
		return nil, fail("magic %d; expected %s", magic, wantName)
	}
	hd := headerSize(magic)
	size := int64(int32(le.Uint32(rest[lengthOffset:]))) + lengthEnd
	if size < int64(hd) {
		return nil, fail("length field says %d bytes, shorter than the %d-byte header of magic %d", size, hd, magic)
	}
	if size > int64(len(rest)) {
		return nil, fail("length field says %d bytes, only %d left in the buffer", size, len(rest))
	}
	b := rest[:size]
	if magic == MagicV2 {
		if n := int32(le.Uint32(b[52:])); n < 0 || int64(n) > size-HeaderSizeV2 {
			return nil, fail("statistics length %d out of range (batch of %d bytes)", n, size)
		}
	}
	fixed := b[crcOffset(magic)+4:]
	delta, count := int32(le.Uint32(fixed[3:])), int32(le.Uint32(fixed[19:]))
	if count < 0 || (count == 0 && delta != 0) || (count > 0 && delta != count-1) {
		return nil, fail("record count %d with last offset delta %d (want count-1)", count, delta)
	}
	return b, nil
}

func headerSize(magic int8) int {
	switch magic {
	case MagicV0:
		return HeaderSizeV0
	case MagicV1:
		return HeaderSizeV1
	}
	return HeaderSizeV2
}

func isFlussMagic(m int8) bool { return m == MagicV0 || m == MagicV1 }
func isStromMagic(m int8) bool { return m == MagicV2 }

// ToStrom appends to dst the batches of src, which must be Fluss 0.9.1 V0 or
// V1 batches back to back (a PRODUCE_LOG bucket's records), converted to
// Strom's V2 layout, and returns the extended slice. V0's missing
// LeaderEpoch becomes -1 (the leader sets it on append); V1's is kept.
// StatisticsLength is 0. Every other field and the records are unchanged.
//
// It checks each batch's frame and CRC before converting anything: on error
// (a *BatchError wrapping ErrCorrupt naming the first bad batch) it returns
// dst unchanged. An empty src gives dst unchanged and no error.
func ToStrom(dst, src []byte) ([]byte, error) {
	size, count := 0, 0
	for pos := 0; pos < len(src); count++ {
		b, err := batchAt(src, pos, count, isFlussMagic, "0 or 1 (the layouts Fluss 0.9.1 writes)")
		if err != nil {
			return dst, err
		}
		c := crcOffset(int8(b[magicOffset]))
		if got, want := le.Uint32(b[c:]), crc32.Checksum(b[c+4:], castagnoli); got != want {
			return dst, &BatchError{Index: count, Pos: pos, BaseOffset: int64(le.Uint64(b)),
				Reason: fmt.Sprintf("CRC %#08x does not match the contents (%#08x)", got, want)}
		}
		pos += len(b)
		size += len(b) + HeaderSizeV2 - headerSize(int8(b[magicOffset]))
	}
	out := grow(dst, size)
	for pos := 0; pos < len(src); {
		size := int(int32(le.Uint32(src[pos+lengthOffset:]))) + lengthEnd
		out = appendV2(out, src[pos:pos+size])
		pos += size
	}
	return out, nil
}

// appendV2 appends the V2 form of the V0 or V1 batch b, whose CRC is known
// to be right.
func appendV2(dst, b []byte) []byte {
	magic := int8(b[magicOffset])
	c := crcOffset(magic)
	fixed, records := b[c+4:c+4+fixedLen], b[headerSize(magic):]
	start := len(dst)
	dst = append(dst, b[:epochOffset]...)
	if magic == MagicV0 {
		dst = le.AppendUint32(dst, noLeaderEpoch&0xffffffff)
	} else {
		dst = append(dst, b[epochOffset:epochOffset+4]...)
	}
	// The old CRC covers fixed‖records, the new one fixed‖zeroStats‖records.
	cf := crc32.Checksum(fixed, castagnoli)
	crc := swapPrefix(le.Uint32(b[c:]), cf, crc32.Update(cf, castagnoli, zeroStats[:]), len(records))
	dst = le.AppendUint32(dst, crc)
	dst = append(dst, fixed...)
	dst = append(dst, zeroStats[:]...)
	dst = append(dst, records...)
	le.PutUint32(dst[start+lengthOffset:], uint32(len(dst)-start-lengthEnd))
	dst[start+magicOffset] = byte(MagicV2)
	return dst
}

// ToFluss appends to dst the batches of src, which must be Strom's V2
// batches back to back (what a fetch reads from the log, full or pruned),
// converted to Fluss 0.9.1's V1 layout, and returns the extended slice.
// LeaderEpoch is kept; StatisticsLength and the statistics are dropped, since
// 0.9.1 has neither. The CRC is derived from the stored one, not recomputed:
// a batch the log stored correctly reads as valid in the client's
// ensureValid (client.scanner.log.check-crc, on by default), and a corrupted
// one reads as corrupt there.
//
// It checks each batch's frame but not its CRC (the log checked it on
// append). On error (a *BatchError wrapping ErrCorrupt) it returns dst
// unchanged.
func ToFluss(dst, src []byte) ([]byte, error) {
	size, count := 0, 0
	for pos := 0; pos < len(src); count++ {
		b, err := batchAt(src, pos, count, isStromMagic, "2 (Strom's stored layout)")
		if err != nil {
			return dst, err
		}
		pos += len(b)
		size += len(b) - (HeaderSizeV2 - HeaderSizeV1) - int(le.Uint32(b[52:]))
	}
	out := grow(dst, size)
	for pos := 0; pos < len(src); {
		size := int(int32(le.Uint32(src[pos+lengthOffset:]))) + lengthEnd
		out = appendV1(out, src[pos:pos+size])
		pos += size
	}
	return out, nil
}

// ToFlussInPlace is ToFluss without the copy: it rewrites the V2 batches of
// src (back to back, src the caller's to change) as 0.9.1's V1 batches
// where they are, and appends each to parts. A V1 batch is 4 bytes plus its
// statistics shorter than its V2 form, so each ends where its V2 form ended
// and begins that much later: its header moves forward over the dropped
// StatisticsLength and statistics, its records stay put. The batches are
// therefore no longer back to back: parts holds one slice of src per batch,
// for a vectored write (net.Buffers). n is their total length.
//
// It checks each batch's frame, as ToFluss does, before changing anything:
// on error (a *BatchError wrapping ErrCorrupt) src and parts are unchanged.
func ToFlussInPlace(src []byte, parts [][]byte) ([][]byte, int, error) {
	n := 0
	for pos, count := 0, 0; pos < len(src); count++ {
		b, err := batchAt(src, pos, count, isStromMagic, "2 (Strom's stored layout)")
		if err != nil {
			return parts, 0, err
		}
		pos += len(b)
	}
	for pos := 0; pos < len(src); {
		size := int(int32(le.Uint32(src[pos+lengthOffset:]))) + lengthEnd
		b := src[pos : pos+size]
		statsEnd := HeaderSizeV2 + int(le.Uint32(b[52:]))
		var hdr [HeaderSizeV1]byte
		copy(hdr[:], b[:25]) // up to and with LeaderEpoch
		le.PutUint32(hdr[25:], v1CRC(b, statsEnd))
		copy(hdr[29:], b[29:29+fixedLen])
		le.PutUint32(hdr[lengthOffset:], uint32(HeaderSizeV1+len(b)-statsEnd-lengthEnd))
		hdr[magicOffset] = byte(MagicV1)
		start := statsEnd - HeaderSizeV1
		copy(b[start:], hdr[:])
		parts = append(parts, b[start:])
		n += len(b) - start
		pos += size
	}
	return parts, n, nil
}

// v1CRC is the CRC of the V1 form of the V2 batch b, whose statistics end
// at statsEnd, derived from b's stored CRC: that one covers
// fixed‖StatisticsLength‖statistics‖records, the V1 one fixed‖records.
func v1CRC(b []byte, statsEnd int) uint32 {
	covered := b[29:statsEnd]
	cf := crc32.Checksum(covered[:fixedLen], castagnoli)
	return swapPrefix(le.Uint32(b[25:]), crc32.Update(cf, castagnoli, covered[fixedLen:]), cf, len(b)-statsEnd)
}

// FlussLen is the length of the V1 form of the V2 batch b, as ToFluss
// converts it: b less its StatisticsLength and statistics. b must be one
// whole batch; shorter than a V2 header, it is 0.
func FlussLen(b []byte) int {
	if len(b) < HeaderSizeV2 {
		return 0
	}
	return len(b) - (HeaderSizeV2 - HeaderSizeV1) - int(le.Uint32(b[52:]))
}

// appendV1 appends the 0.9.1 V1 form of the V2 batch b.
func appendV1(dst, b []byte) []byte {
	statsEnd := HeaderSizeV2 + int(le.Uint32(b[52:]))
	start := len(dst)
	dst = append(dst, b[:25]...) // up to and with LeaderEpoch
	dst = le.AppendUint32(dst, v1CRC(b, statsEnd))
	dst = append(dst, b[29:29+fixedLen]...)
	dst = append(dst, b[statsEnd:]...)
	le.PutUint32(dst[start+lengthOffset:], uint32(len(dst)-start-lengthEnd))
	dst[start+magicOffset] = byte(MagicV1)
	return dst
}

// grow returns dst with room for n more bytes. It grows the way append
// does (slices.Grow), not to the exact size: the Fluss listener's projected
// FETCH_LOG converts batch after batch onto one answer, and growing that to
// the exact size each time copied everything before it again, quadratic in
// the answer's batches.
func grow(dst []byte, n int) []byte {
	return slices.Grow(dst, n)
}
