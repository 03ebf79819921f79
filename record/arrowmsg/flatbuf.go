package arrowmsg

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// This file reads and writes the few flatbuffer tables of Arrow's
// format/Message.fbs that a RecordBatch message uses, by hand: arrow-go keeps
// its generated flatbuffer code internal, and a handful of fields do not
// justify generated code. Field ids are the schema's declaration order; the
// vtable slot of field id i is at byte 4+2i of the vtable.

var le = binary.LittleEndian

// ErrCorrupt marks bytes that are not a valid Arrow IPC RecordBatch message.
var ErrCorrupt = errors.New("arrowmsg: corrupt Arrow message")

// corruptf returns an error wrapping ErrCorrupt that says what is wrong.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Field ids (format/Message.fbs, format/Schema.fbs).
const (
	// table Message
	fMessageVersion    = 0 // MetadataVersion (short)
	fMessageHeaderType = 1 // MessageHeader union type (ubyte)
	fMessageHeader     = 2 // MessageHeader union value (offset to table)
	fMessageBodyLength = 3 // long
	// fMessageCustomMetadata = 4 ([KeyValue]; ignored, never written)

	// table RecordBatch
	fBatchLength      = 0 // long: rows
	fBatchNodes       = 1 // [FieldNode]: struct {length: long; null_count: long}
	fBatchBuffers     = 2 // [Buffer]: struct {offset: long; length: long}
	fBatchCompression = 3 // BodyCompression table
	fBatchVariadic    = 4 // [long]: variadicBufferCounts (view types only)

	// table BodyCompression
	fCompressionCodec  = 0 // CompressionType (byte): LZ4_FRAME = 0, ZSTD = 1
	fCompressionMethod = 1 // BodyCompressionMethod (byte): BUFFER = 0
)

const (
	headerRecordBatch = 3 // MessageHeader.RecordBatch
	metadataV4        = 3 // MetadataVersion.V4
	metadataV5        = 4 // MetadataVersion.V5
	methodBuffer      = 0 // BodyCompressionMethod.BUFFER

	structSize = 16 // FieldNode and Buffer are both two longs
)

var headerNames = [...]string{"NONE", "Schema", "DictionaryBatch", "RecordBatch", "Tensor", "SparseTensor"}

func headerName(t uint8) string {
	if int(t) < len(headerNames) {
		return headerNames[t]
	}
	return fmt.Sprintf("MessageHeader(%d)", t)
}

// fbTable is a flatbuffer table inside buf whose table start and vtable have
// been bounds-checked. Every accessor checks bounds again for the field it
// reads, so no input makes one panic.
type fbTable struct {
	name  string // for errors: "Message", "RecordBatch", ...
	buf   []byte
	pos   int // table start (its soffset to the vtable)
	vt    int // vtable start
	vtLen int // vtable size in bytes
}

// tableAt checks the table starting at pos in buf and its vtable.
func tableAt(buf []byte, pos int64, name string) (fbTable, error) {
	n := int64(len(buf))
	if pos < 0 || pos > n-4 {
		return fbTable{}, corruptf("%s table at %d is outside the %d-byte metadata", name, pos, n)
	}
	vt := pos - int64(int32(le.Uint32(buf[pos:])))
	if vt < 0 || vt > n-4 {
		return fbTable{}, corruptf("%s vtable at %d is outside the %d-byte metadata", name, vt, n)
	}
	vtLen := int64(le.Uint16(buf[vt:]))
	if vtLen < 4 || vtLen%2 != 0 || vtLen > n-vt {
		return fbTable{}, corruptf("%s vtable at %d has bad size %d", name, vt, vtLen)
	}
	inline := int64(le.Uint16(buf[vt+2:]))
	if inline < 4 || inline > n-pos {
		return fbTable{}, corruptf("%s table at %d has bad size %d", name, pos, inline)
	}
	return fbTable{name: name, buf: buf, pos: int(pos), vt: int(vt), vtLen: int(vtLen)}, nil
}

// field returns the position in buf of field id's value of size bytes, or -1
// if the field is absent (the reader then uses the default).
func (t fbTable) field(id, size int) (int, error) {
	slot := 4 + 2*id
	if slot+2 > t.vtLen {
		return -1, nil
	}
	off := int(le.Uint16(t.buf[t.vt+slot:]))
	if off == 0 {
		return -1, nil
	}
	if off < 4 || t.pos+off > len(t.buf)-size {
		return -1, corruptf("%s field %d at offset %d is outside the metadata", t.name, id, off)
	}
	return t.pos + off, nil
}

func (t fbTable) int64(id int) (int64, error) {
	p, err := t.field(id, 8)
	if p < 0 {
		return 0, err
	}
	return int64(le.Uint64(t.buf[p:])), nil
}

func (t fbTable) int16(id int) (int16, error) {
	p, err := t.field(id, 2)
	if p < 0 {
		return 0, err
	}
	return int16(le.Uint16(t.buf[p:])), nil
}

func (t fbTable) uint8(id int) (uint8, error) {
	p, err := t.field(id, 1)
	if p < 0 {
		return 0, err
	}
	return t.buf[p], nil
}

// ref follows the offset stored in field id and returns its target, or -1 if
// the field is absent.
func (t fbTable) ref(id int) (int64, error) {
	p, err := t.field(id, 4)
	if p < 0 {
		return -1, err
	}
	return int64(p) + int64(le.Uint32(t.buf[p:])), nil
}

// table returns the table that field id refers to; ok is false if absent.
func (t fbTable) table(id int, name string) (sub fbTable, ok bool, err error) {
	target, err := t.ref(id)
	if target < 0 {
		return fbTable{}, false, err
	}
	sub, err = tableAt(t.buf, target, name)
	return sub, err == nil, err
}

// vector returns the elements of the vector that field id refers to, each
// elemSize bytes, and their count; an absent vector is empty.
func (t fbTable) vector(id, elemSize int, name string) ([]byte, int, error) {
	target, err := t.ref(id)
	if target < 0 {
		return nil, 0, err
	}
	n := int64(len(t.buf))
	if target > n-4 {
		return nil, 0, corruptf("%s vector at %d is outside the %d-byte metadata", name, target, n)
	}
	count := int64(le.Uint32(t.buf[target:]))
	start := target + 4
	if count > (n-start)/int64(elemSize) {
		return nil, 0, corruptf("%s vector of %d elements at %d overruns the %d-byte metadata", name, count, target, n)
	}
	return t.buf[start : start+count*int64(elemSize)], int(count), nil
}

// The metadata this package writes always has the same shape, laid out front
// to back so that every scalar is aligned to its size relative to the
// flatbuffer start (which is 8 bytes into the message, so also relative to the
// message start):
//
//	 0  uoffset root -> Message table at 16
//	 4  Message vtable: size 12, table size 24, version@16 header_type@18 header@4 bodyLength@8
//	16  Message table: soffset 12 | header uoffset -> 52 | bodyLength i64 | version i16 = V5 | header_type u8 = 3 | pad
//	40  RecordBatch vtable: size 12, table size 24, length@4 nodes@12 buffers@16 compression@20 (0 if none)
//	52  RecordBatch table: soffset 12 | length i64 | nodes uoffset | buffers uoffset | compression uoffset
//	76  [only when compressed] BodyCompression vtable: size 8, table size 8, codec@4 method@5
//	84  [only when compressed] BodyCompression table: soffset 8 | codec i8 | method i8 = BUFFER | pad
//	V   nodes vector: u32 count, then count FieldNode structs (V = 76, or 92 when compressed)
//	    4 bytes pad, buffers vector: u32 count, then count Buffer structs
//
// V+4 is 8-aligned, and so are both vectors' elements and the total length.
const (
	metaBase        = 88 // metadata bytes without BodyCompression and vectors
	metaCompression = 16 // BodyCompression vtable and table
)

// metadataLen returns the length of the metadata putMetadata writes: a
// multiple of 8, so it is also the padded metadata length of the prefix.
func metadataLen(nodes, buffers int, compressed bool) int {
	n := metaBase + structSize*(nodes+buffers)
	if compressed {
		n += metaCompression
	}
	return n
}

// putMetadata writes a Message flatbuffer with a RecordBatch header into b,
// which must be exactly metadataLen(nodes, buffers, codec != CodecNone) bytes.
// It leaves the node and buffer structs zero and returns where they start in
// b: node i goes at nodesAt+16i, buffer i at buffersAt+16i.
func putMetadata(b []byte, rows, bodyLen int64, nodes, buffers int, codec Codec) (nodesAt, buffersAt int) {
	clear(b)
	le.PutUint32(b[0:], 16) // root -> Message table

	// Message vtable.
	le.PutUint16(b[4:], 12)
	le.PutUint16(b[6:], 24)
	le.PutUint16(b[8:], 16)  // version
	le.PutUint16(b[10:], 18) // header_type
	le.PutUint16(b[12:], 4)  // header
	le.PutUint16(b[14:], 8)  // bodyLength
	// Message table.
	le.PutUint32(b[16:], 16-4)  // soffset to its vtable
	le.PutUint32(b[20:], 52-20) // header -> RecordBatch table
	le.PutUint64(b[24:], uint64(bodyLen))
	le.PutUint16(b[32:], metadataV5)
	b[34] = headerRecordBatch

	// RecordBatch vtable.
	le.PutUint16(b[40:], 12)
	le.PutUint16(b[42:], 24)
	le.PutUint16(b[44:], 4)  // length
	le.PutUint16(b[46:], 12) // nodes
	le.PutUint16(b[48:], 16) // buffers
	// RecordBatch table.
	le.PutUint32(b[52:], 52-40)
	le.PutUint64(b[56:], uint64(rows))

	vec := 76
	if codec != CodecNone {
		le.PutUint16(b[50:], 20)    // compression
		le.PutUint32(b[72:], 84-72) // compression -> BodyCompression table
		// BodyCompression vtable.
		le.PutUint16(b[76:], 8)
		le.PutUint16(b[78:], 8)
		le.PutUint16(b[80:], 4) // codec
		le.PutUint16(b[82:], 5) // method
		// BodyCompression table.
		le.PutUint32(b[84:], 84-76)
		b[88] = byte(codec)
		b[89] = methodBuffer
		vec = 92
	}

	le.PutUint32(b[64:], uint32(vec-64)) // nodes -> vector
	le.PutUint32(b[vec:], uint32(nodes))
	nodesAt = vec + 4
	bvec := nodesAt + structSize*nodes + 4
	le.PutUint32(b[68:], uint32(bvec-68)) // buffers -> vector
	le.PutUint32(b[bvec:], uint32(buffers))
	buffersAt = bvec + 4
	return nodesAt, buffersAt
}

// putStruct writes one FieldNode or Buffer struct: two little-endian longs.
func putStruct(b []byte, a, c int64) {
	le.PutUint64(b, uint64(a))
	le.PutUint64(b[8:], uint64(c))
}
