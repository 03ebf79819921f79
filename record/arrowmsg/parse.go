package arrowmsg

import "fmt"

// continuation is the marker that starts every message since Arrow 0.15.
const continuation = 0xFFFFFFFF

// FieldNode is one entry of a RecordBatch's field nodes: a column, or a child
// of a nested column, in depth-first order.
type FieldNode struct {
	// Length is the number of values at this level.
	Length int64
	// NullCount is the number of nulls among them.
	NullCount int64
}

// Buffer is one entry of a RecordBatch's buffers: where a buffer sits in the
// message body. With body compression, the bytes there are the int64 LE
// uncompressed length (-1: stored raw) followed by the compressed data, or
// nothing at all for an empty buffer.
type Buffer struct {
	// Offset is the buffer's start, relative to the body start.
	Offset int64
	// Length is the buffer's length in the body, without padding.
	Length int64
}

// Message is a parsed RecordBatch message. It refers to the bytes it was
// parsed from, which must not change while it is in use. Its methods are safe
// for concurrent use.
type Message struct {
	h       header
	nodes   []FieldNode
	buffers []Buffer
}

// header is what parse learns about a message, without allocating: the
// vectors stay raw flatbuffer structs inside the message bytes.
type header struct {
	size     int    // bytes of the whole message
	prefix   int    // 8 (marker and length), or 4 for the legacy form
	metaLen  int    // metadata length including padding
	body     []byte // the body, exactly bodyLength bytes
	rows     int64
	nodes    []byte // FieldNode structs, 16 bytes each
	buffers  []byte // Buffer structs, 16 bytes each
	nNodes   int
	nBuffers int
	codec    Codec
	variadic int // entries of variadicBufferCounts
}

func (h *header) node(i int) FieldNode {
	b := h.nodes[structSize*i:]
	return FieldNode{Length: int64(le.Uint64(b)), NullCount: int64(le.Uint64(b[8:]))}
}

func (h *header) buffer(i int) Buffer {
	b := h.buffers[structSize*i:]
	return Buffer{Offset: int64(le.Uint64(b)), Length: int64(le.Uint64(b[8:]))}
}

// bufferBytes returns buffer i's bytes in the body; parse has checked that
// they are there.
func (h *header) bufferBytes(i int) []byte {
	b := h.buffer(i)
	return h.body[b.Offset : b.Offset+b.Length]
}

// Parse checks that msg is exactly one Arrow IPC message with a RecordBatch
// header and returns it parsed. It checks the framing (continuation marker,
// metadata length and its padding; the legacy form without the marker is
// accepted too), every flatbuffer offset it follows, the metadata version
// (V4 or V5), the body length against the bytes that follow the metadata, the
// body compression, and that the buffers lie inside the body, in order,
// without overlapping. It does not look at what the buffers hold, except the
// 8-byte uncompressed-length prefix of each compressed buffer.
//
// Errors wrap ErrCorrupt. The Message refers to msg.
func Parse(msg []byte) (*Message, error) {
	h, err := parse(msg)
	if err != nil {
		return nil, err
	}
	return newMessage(h), nil
}

// Check is the validation Project and Decode run before they touch a
// buffer, for a caller that must know beforehand whether they will accept
// msg (a produce handler): Parse, then CheckLayouts against layouts, and no
// variadic buffer counts (only view types, which LayoutOf rejects, have
// them). What Check accepts, Project projects; Decode may still find bad
// buffer contents, which only decompressing and decoding can tell (see
// Message.UncompressedSize for what can be told without).
//
// Errors are those of Parse and CheckLayouts. The Message refers to msg.
func Check(msg []byte, layouts []ColumnLayout) (*Message, error) {
	h, err := check(msg, layouts)
	if err != nil {
		return nil, err
	}
	return newMessage(h), nil
}

// check: see Check.
func check(msg []byte, layouts []ColumnLayout) (header, error) {
	h, err := parse(msg)
	if err != nil {
		return h, err
	}
	if err := h.checkLayouts(layouts); err != nil {
		return h, err
	}
	if h.variadic > 0 {
		// ColumnLayout cannot describe view types, so no layouts match.
		return h, corruptf("variadic buffer counts, but no column has a view type")
	}
	return h, nil
}

func newMessage(h header) *Message {
	m := &Message{
		h:       h,
		nodes:   make([]FieldNode, h.nNodes),
		buffers: make([]Buffer, h.nBuffers),
	}
	for i := range m.nodes {
		m.nodes[i] = h.node(i)
	}
	for i := range m.buffers {
		m.buffers[i] = h.buffer(i)
	}
	return m
}

// Length returns the number of rows.
func (m *Message) Length() int64 { return m.h.rows }

// Nodes returns the field nodes in depth-first column order. The slice
// belongs to m: do not modify it.
func (m *Message) Nodes() []FieldNode { return m.nodes }

// Buffers returns the buffers in depth-first column order. The slice belongs
// to m: do not modify it.
func (m *Message) Buffers() []Buffer { return m.buffers }

// Codec returns the body compression.
func (m *Message) Codec() Codec { return m.h.codec }

// Body returns the message body, which the buffer offsets are relative to. It
// is part of the parsed bytes.
func (m *Message) Body() []byte { return m.h.body }

// Size returns the length in bytes of the whole message: prefix, metadata,
// padding and body. Parse accepts no trailing bytes, so it is the length of
// the parsed slice.
func (m *Message) Size() int { return m.h.size }

// UncompressedSize returns the size of buffer i uncompressed, as far as it
// can be told without decompressing: its length in an uncompressed body, or
// when it is stored raw (length prefix -1) or empty; otherwise the length its
// prefix declares, once it is checked that the compressed data starts with
// the codec's frame magic and is long enough to expand to that length (the
// bounds Decode holds it to). Errors wrap ErrCorrupt; i must be in range.
func (m *Message) UncompressedSize(i int) (int64, error) {
	src := m.h.bufferBytes(i)
	if m.h.codec == CodecNone {
		return int64(len(src)), nil
	}
	n, err := checkCompressed(m.h.codec, src)
	if err != nil {
		return 0, corruptf("buffer %d: %v", i, err)
	}
	return n, nil
}

// CheckLayouts reports whether the message has the columns that layouts
// describe: as many field nodes and buffers in total, and each top-level
// column as long as the batch. An invalid layout is a plain error; a message
// that does not match wraps ErrCorrupt, since the layouts come from the
// schema that the batch names.
func (m *Message) CheckLayouts(layouts []ColumnLayout) error {
	return m.h.checkLayouts(layouts)
}

func parse(msg []byte) (header, error) {
	var h header
	if len(msg) < 8 {
		return h, corruptf("%d bytes, shorter than a message prefix", len(msg))
	}
	var metaLen int64
	if le.Uint32(msg) == continuation {
		h.prefix = 8
		metaLen = int64(int32(le.Uint32(msg[4:])))
	} else {
		// Before Arrow 0.15 a message started with the metadata length alone.
		h.prefix = 4
		metaLen = int64(int32(le.Uint32(msg)))
	}
	switch {
	case metaLen == 0:
		return h, corruptf("end-of-stream marker, not a message")
	case metaLen < 8:
		return h, corruptf("metadata length %d", metaLen)
	case (int64(h.prefix)+metaLen)%8 != 0:
		return h, corruptf("metadata length %d is not padded to make the prefix and metadata a multiple of 8", metaLen)
	case metaLen > int64(len(msg)-h.prefix):
		return h, corruptf("metadata length %d overruns the %d-byte message", metaLen, len(msg))
	}
	h.metaLen = int(metaLen)
	h.size = len(msg)
	meta := msg[h.prefix : h.prefix+h.metaLen]

	m, err := tableAt(meta, int64(le.Uint32(meta)), "Message")
	if err != nil {
		return h, err
	}
	version, err := m.int16(fMessageVersion)
	if err != nil {
		return h, err
	}
	if version < metadataV4 || version > metadataV5 {
		return h, corruptf("metadata version %d, want V4 (%d) or V5 (%d)", version, metadataV4, metadataV5)
	}
	htype, err := m.uint8(fMessageHeaderType)
	if err != nil {
		return h, err
	}
	if htype != headerRecordBatch {
		return h, corruptf("header type %s, want RecordBatch", headerName(htype))
	}
	bodyLen, err := m.int64(fMessageBodyLength)
	if err != nil {
		return h, err
	}
	if rest := len(msg) - h.prefix - h.metaLen; bodyLen != int64(rest) {
		return h, corruptf("body length %d, but %d bytes follow the metadata", bodyLen, rest)
	}
	h.body = msg[h.prefix+h.metaLen:]

	rb, ok, err := m.table(fMessageHeader, "RecordBatch")
	if err != nil {
		return h, err
	}
	if !ok {
		return h, corruptf("RecordBatch header missing")
	}
	if h.rows, err = rb.int64(fBatchLength); err != nil {
		return h, err
	}
	if h.rows < 0 {
		return h, corruptf("negative row count %d", h.rows)
	}
	if h.nodes, h.nNodes, err = rb.vector(fBatchNodes, structSize, "nodes"); err != nil {
		return h, err
	}
	if h.buffers, h.nBuffers, err = rb.vector(fBatchBuffers, structSize, "buffers"); err != nil {
		return h, err
	}
	if _, h.variadic, err = rb.vector(fBatchVariadic, 8, "variadicBufferCounts"); err != nil {
		return h, err
	}
	h.codec = CodecNone
	bc, ok, err := rb.table(fBatchCompression, "BodyCompression")
	if err != nil {
		return h, err
	}
	if ok {
		codec, err := bc.uint8(fCompressionCodec)
		if err != nil {
			return h, err
		}
		method, err := bc.uint8(fCompressionMethod)
		if err != nil {
			return h, err
		}
		if c := Codec(codec); c != CodecLZ4Frame && c != CodecZSTD {
			return h, corruptf("unknown compression codec %d", int8(codec))
		}
		if method != methodBuffer {
			return h, corruptf("unknown body compression method %d", int8(method))
		}
		h.codec = Codec(codec)
	}

	for i := range h.nNodes {
		n := h.node(i)
		if n.Length < 0 || n.NullCount < 0 || n.NullCount > n.Length {
			return h, corruptf("field node %d: length %d, null count %d", i, n.Length, n.NullCount)
		}
	}
	var end int64 // end of the previous buffer
	for i := range h.nBuffers {
		b := h.buffer(i)
		if b.Offset < end || b.Length < 0 || b.Offset > bodyLen || b.Length > bodyLen-b.Offset {
			return h, corruptf("buffer %d at %d, length %d: not inside the %d-byte body after the previous buffer's end %d",
				i, b.Offset, b.Length, bodyLen, end)
		}
		end = b.Offset + b.Length
		if h.codec == CodecNone || b.Length == 0 {
			continue
		}
		if b.Length < 8 {
			return h, corruptf("compressed buffer %d is %d bytes, shorter than its length prefix", i, b.Length)
		}
		if n := int64(le.Uint64(h.body[b.Offset:])); n < -1 {
			return h, corruptf("compressed buffer %d has uncompressed length %d", i, n)
		}
	}
	return h, nil
}

// checkLayouts: see Message.CheckLayouts.
func (h *header) checkLayouts(layouts []ColumnLayout) error {
	for i, l := range layouts {
		if l.Nodes < 1 || l.Buffers < 0 {
			return fmt.Errorf("arrowmsg: column %d: invalid layout %+v", i, l)
		}
	}
	var nodes, buffers int // first node and buffer of column i
	for i, l := range layouts {
		if l.Nodes > h.nNodes-nodes || l.Buffers > h.nBuffers-buffers {
			return corruptf("message has %d field nodes and %d buffers, too few for the layouts of %d columns",
				h.nNodes, h.nBuffers, len(layouts))
		}
		if n := h.node(nodes).Length; n != h.rows {
			return corruptf("column %d has %d values in a batch of %d rows", i, n, h.rows)
		}
		nodes += l.Nodes
		buffers += l.Buffers
	}
	if nodes != h.nNodes || buffers != h.nBuffers {
		return corruptf("message has %d field nodes and %d buffers, the layouts of %d columns need %d and %d",
			h.nNodes, h.nBuffers, len(layouts), nodes, buffers)
	}
	return nil
}
