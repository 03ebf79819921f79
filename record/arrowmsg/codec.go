package arrowmsg

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a message's body compression. The values of LZ4Frame and ZSTD are
// Arrow's CompressionType, which the metadata stores; None is a message
// without BodyCompression.
type Codec int8

const (
	// CodecNone is an uncompressed body.
	CodecNone Codec = -1
	// CodecLZ4Frame compresses each buffer as an LZ4 frame.
	CodecLZ4Frame Codec = 0
	// CodecZSTD compresses each buffer as a Zstandard frame.
	CodecZSTD Codec = 1
)

// String returns Fluss's name of the codec (table.log.arrow.compression.type).
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "NONE"
	case CodecLZ4Frame:
		return "LZ4_FRAME"
	case CodecZSTD:
		return "ZSTD"
	}
	return fmt.Sprintf("Codec(%d)", int8(c))
}

// rawLength is the uncompressed-length prefix of a buffer stored uncompressed
// in a compressed body.
const rawLength = -1

// maxDecodedLen bounds the decompressed body Decode builds. No Fluss batch
// comes near it; it stops a decompression bomb from exhausting memory.
const maxDecodedLen = 1 << 31

// lz4MaxRatio bounds how much an LZ4 frame can expand: a match costs at least
// one byte per 255 bytes it produces.
const lz4MaxRatio = 256

// zstdMaxRatio bounds how much a ZSTD frame can expand: a block of up to
// 128 KiB takes at least 4 bytes (github.com/klauspost/compress bounds its own
// allocations the same way).
const zstdMaxRatio = 32 << 10

// Encode returns rec as one RecordBatch message (no Schema message, no
// end-of-stream marker), its body compressed per buffer with codec as Arrow
// Java does it: each buffer is its int64 LE uncompressed length followed by
// the compressed data; an empty buffer is just the length 0; a buffer that
// would grow is stored raw after the length -1. ZSTD uses zstdLevel (1 to 22,
// mapped to the nearest level github.com/klauspost/compress implements; Fluss's
// default is 3), ignored for other codecs. LZ4_FRAME writes LZ4 frames with
// 64 KB independent blocks and no checksums.
//
// A record of 0 rows gives a valid message too; a Fluss batch with no records
// carries no message at all, which is for the caller to decide. Every column
// type must be one LayoutOf supports. mem (nil: the default allocator) is used
// for arrow-go's temporary buffers; the result is ordinary Go memory owned by
// the caller.
func Encode(rec arrow.RecordBatch, codec Codec, zstdLevel int, mem memory.Allocator) ([]byte, error) {
	switch codec {
	case CodecNone, CodecLZ4Frame:
	case CodecZSTD:
		if zstdLevel < 1 || zstdLevel > 22 {
			return nil, fmt.Errorf("arrowmsg: ZSTD level %d not in [1, 22]", zstdLevel)
		}
	default:
		return nil, fmt.Errorf("arrowmsg: unknown codec %d", int8(codec))
	}
	if _, err := LayoutsOf(rec.Schema()); err != nil {
		return nil, fmt.Errorf("arrowmsg: encode: %w", err)
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}

	// arrow-go lays out the uncompressed message; compression is ours, since
	// arrow-go has neither a ZSTD level nor Java's store-raw-if-larger rule.
	p, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(mem))
	if err != nil {
		return nil, fmt.Errorf("arrowmsg: encode: %w", err)
	}
	defer p.Release()
	// Sized first: growing it by doubling copied the batch ~twice more.
	var size byteCounter
	if err := p.SerializeBody(&size); err != nil {
		return nil, fmt.Errorf("arrowmsg: encode: %w", err)
	}
	m := p.Meta()
	size += byteCounter(16 + m.Len())
	m.Release()
	var plain bytes.Buffer
	plain.Grow(int(size))
	if _, err := p.WritePayload(&plain); err != nil {
		return nil, fmt.Errorf("arrowmsg: encode: %w", err)
	}
	h, err := parse(plain.Bytes())
	if err != nil {
		return nil, fmt.Errorf("arrowmsg: encode: arrow-go wrote a message this package cannot read: %w", err)
	}

	metaLen := metadataLen(h.nNodes, h.nBuffers, codec != CodecNone)
	head := 8 + metaLen
	out := make([]byte, head, head+len(h.body)+8*h.nBuffers)
	buffers := make([]Buffer, h.nBuffers)
	var zenc *zstd.Encoder
	if codec == CodecZSTD {
		if zenc, err = zstdEncoder(zstdLevel); err != nil {
			return nil, err
		}
	}
	for i := range buffers {
		src := h.bufferBytes(i)
		start := len(out)
		switch {
		case codec == CodecNone:
			out = append(out, src...)
		case len(src) == 0:
			out = le.AppendUint64(out, 0)
		default:
			out = le.AppendUint64(out, uint64(len(src)))
			if codec == CodecZSTD {
				out = zenc.EncodeAll(src, out)
			} else if out, err = appendLZ4(out, src); err != nil {
				return nil, fmt.Errorf("arrowmsg: encode: %w", err)
			}
			if len(out)-start-8 > len(src) {
				out = le.AppendUint64(out[:start], math.MaxUint64) // rawLength
				out = append(out, src...)
			}
		}
		buffers[i] = Buffer{Offset: int64(start - head), Length: int64(len(out) - start)}
		out = append(out, make([]byte, pad8(len(out))-len(out))...)
	}

	le.PutUint32(out, continuation)
	le.PutUint32(out[4:], uint32(metaLen))
	meta := out[8:head]
	nodesAt, buffersAt := putMetadata(meta, h.rows, int64(len(out)-head), h.nNodes, h.nBuffers, codec)
	copy(meta[nodesAt:], h.nodes)
	for i, b := range buffers {
		putStruct(meta[buffersAt+structSize*i:], b.Offset, b.Length)
	}
	return out, nil
}

// byteCounter is an io.Writer that counts the bytes written to it.
type byteCounter int

func (c *byteCounter) Write(p []byte) (int, error) { *c += byteCounter(len(p)); return len(p), nil }

// Decode returns the record that msg holds, given the schema of its columns
// (the message does not carry one). It decompresses LZ4_FRAME and ZSTD bodies,
// accepting every form writers use (raw buffers after the length -1, empty
// buffers with or without their 8-byte length), then decodes with arrow-go
// and validates every column fully, so that a record it returns is safe to
// read. The caller owns the record and must Release it. It does not refer to
// msg: its buffers live in a body Decode allocates from the Go heap (so that
// it is 8-aligned whatever msg's alignment); mem (nil: the default allocator)
// serves what arrow-go allocates besides.
//
// Errors: msg refused by Check (against schema's layouts), or holding bad
// buffers, wraps ErrCorrupt; a schema with a type LayoutOf does not support is
// a plain error. The decompressed body is limited to 2 GiB.
//
// Decode is NewDecoder(schema).Decode(msg, mem); a reader of many messages
// of one schema keeps a Decoder instead.
func Decode(msg []byte, schema *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	d, err := NewDecoder(schema)
	if err != nil {
		return nil, err
	}
	return d.Decode(msg, mem)
}

// Decoder decodes messages of one schema: what Decode does once per schema
// (the columns' layouts, the schema message arrow-go's reader starts from)
// is done once, by NewDecoder. It is safe for concurrent use.
type Decoder struct {
	schema  *arrow.Schema
	layouts []ColumnLayout
	smeta   []byte // the schema's IPC message metadata (flatbuffer)
}

// NewDecoder returns a Decoder of messages of schema; a type LayoutOf does
// not support is an error.
func NewDecoder(schema *arrow.Schema) (*Decoder, error) {
	layouts, err := LayoutsOf(schema)
	if err != nil {
		return nil, fmt.Errorf("arrowmsg: decode: %w", err)
	}
	sp := ipc.GetSchemaPayload(schema, memory.DefaultAllocator)
	defer sp.Release()
	smeta := sp.Meta()
	defer smeta.Release()
	return &Decoder{schema: schema, layouts: layouts, smeta: slices.Clone(smeta.Bytes())}, nil
}

// Decode is Decode(msg, d's schema, mem).
func (d *Decoder) Decode(msg []byte, mem memory.Allocator) (arrow.RecordBatch, error) {
	return d.DecodeWith(msg, mem, nil)
}

// DecodeWith is Decode, with the uncompressed body taken from bodies (nil:
// the Go heap, as Decode) when the buffers' declared lengths are within
// what their bytes can expand to and the bound decodedSizeHint sets; the
// record's buffers hold it, and the last of them released gives it back
// (bodies.Free). bodies need not zero what it hands out (a BodyPool does
// not): every byte of a body is written before it is read.
func (d *Decoder) DecodeWith(msg []byte, mem, bodies memory.Allocator) (arrow.RecordBatch, error) {
	schema := d.schema
	h, err := check(msg, d.layouts)
	if err != nil {
		return nil, err
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}

	// Lay the buffers out uncompressed in a fresh, 8-aligned body, so that
	// arrow-go reads an uncompressed message and the record owns its memory.
	var body, pooled []byte
	if n, ok := decodedSize(&h); bodies != nil && ok {
		// All of pooled's capacity, which bodies.Free may need to keep it
		// (a BodyPool's classes): a frame that expands past n and into it
		// is caught by appendDecompressed's length check.
		pooled = bodies.Allocate(n)
		body = pooled[:0]
	} else {
		body = make([]byte, 0, decodedSizeHint(&h))
	}
	// freeBody gives a pooled body back when no record holds it.
	freeBody := func() {
		if pooled != nil {
			bodies.Free(pooled)
		}
	}
	buffers := make([]Buffer, h.nBuffers)
	for i := range buffers {
		src := h.bufferBytes(i)
		start := len(body)
		if h.codec == CodecNone {
			body = append(body, src...)
		} else if body, err = appendDecompressed(body, h.codec, src); err != nil {
			freeBody()
			return nil, corruptf("buffer %d: %v", i, err)
		}
		buffers[i] = Buffer{Offset: int64(start), Length: int64(len(body) - start)}
		body = append(body, make([]byte, pad8(len(body))-len(body))...) // zeroes the padding
	}
	var bodyBuf *memory.Buffer
	if pooled != nil && len(body) > 0 && &body[0] == &pooled[0] {
		bodyBuf = memory.NewBufferWithAllocator(body, bodies)
	} else {
		freeBody() // not used (no bytes), or outgrown: decodedSize was short
		bodyBuf = memory.NewBufferBytes(body)
	}
	meta := make([]byte, metadataLen(h.nNodes, h.nBuffers, false))
	nodesAt, buffersAt := putMetadata(meta, h.rows, int64(len(body)), h.nNodes, h.nBuffers, CodecNone)
	copy(meta[nodesAt:], h.nodes)
	for i, b := range buffers {
		putStruct(meta[buffersAt+structSize*i:], b.Offset, b.Length)
	}

	mr := &messages{list: []*ipc.Message{
		ipc.NewMessage(memory.NewBufferBytes(d.smeta), memory.NewBufferBytes(nil)),
		ipc.NewMessage(memory.NewBufferBytes(meta), bodyBuf),
	}}
	bodyBuf.Release() // the message holds it, and the record's buffers slices of it
	defer mr.release()
	r, err := ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(mem))
	if err != nil {
		return nil, fmt.Errorf("arrowmsg: decode: %w", err)
	}
	defer r.Release()
	if !r.Next() {
		if err := r.Err(); err != nil {
			return nil, corruptf("%v", err)
		}
		return nil, corruptf("no record")
	}
	rec := r.RecordBatch()
	for i, col := range rec.Columns() {
		if err := validateFull(col); err != nil {
			return nil, corruptf("column %d (%q): %v", i, schema.Field(i).Name, err)
		}
	}
	rec.Retain()
	return rec, nil
}

// validateFull is array.ValidateFull, except that it turns a panic into an
// error: arrow-go v18.8.0's String and Binary ValidateFull slice the data at
// each offset before checking the offset against the data's length, and panic
// on offsets that a bit flip produces. (arrow-go's reader recovers from
// panics in the same way.)
func validateFull(col arrow.Array) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("invalid array: %v", r)
		}
	}()
	return array.ValidateFull(col)
}

// decodedSizeHint returns the size of the uncompressed body Decode builds,
// as far as it can be told without decompressing: what each buffer claims,
// but no more than its codec can expand it to, and in all no more than a few
// times the message's body, so that bogus claims cost little. The body grows
// if the hint is short.
func decodedSizeHint(h *header) int {
	total := 0
	for i := range h.nBuffers {
		src := h.bufferBytes(i)
		n := len(src)
		if h.codec != CodecNone && n >= 8 {
			switch claim := int64(le.Uint64(src)); {
			case claim == rawLength:
				n -= 8
			case h.codec == CodecZSTD:
				n = int(min(claim, int64(n)*zstdMaxRatio))
			default:
				n = int(min(claim, int64(n)*lz4MaxRatio))
			}
		}
		total += pad8(n)
	}
	return min(total, 4*len(h.body)+1<<20)
}

// decodedSize returns the exact size of the uncompressed body Decode
// builds, from the buffers' declared lengths, and whether they can be
// trusted for it: each passes checkCompressed, and the total is within
// decodedSizeHint's bound.
func decodedSize(h *header) (int, bool) {
	total := 0
	for i := range h.nBuffers {
		src := h.bufferBytes(i)
		n := int64(len(src))
		if h.codec != CodecNone {
			var err error
			if n, err = checkCompressed(h.codec, src); err != nil {
				return 0, false
			}
		}
		total += pad8(int(n))
	}
	return total, total <= 4*len(h.body)+1<<20
}

// BodyPool is a memory.Allocator for DecodeWith's bodies, which keeps the
// bodies freed to it for later ones (sync.Pools per power of two, from 4
// KiB). What it hands out is not zeroed, and may hold an earlier body's
// bytes: it is for nothing but DecodeWith, which writes all of a body. It
// is safe for concurrent use.
type BodyPool struct {
	classes [32]sync.Pool // of *[]byte of capacity 1<<class
}

// minBodyClass is the smallest body class: 4 KiB.
const minBodyClass = 12

// NewBodyPool returns an empty BodyPool.
func NewBodyPool() *BodyPool { return &BodyPool{} }

func bodyClass(size int) int { return max(minBodyClass, bits.Len(uint(max(size, 1)-1))) }

// Allocate returns size bytes, not zeroed.
func (p *BodyPool) Allocate(size int) []byte {
	c := bodyClass(size)
	if c >= len(p.classes) {
		return make([]byte, size)
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return (*b)[:size]
	}
	return make([]byte, size, 1<<c)
}

// Reallocate returns size bytes starting with b's (DecodeWith never calls it).
func (p *BodyPool) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free keeps b for a later Allocate, if it came from one.
func (p *BodyPool) Free(b []byte) {
	c := bodyClass(cap(b))
	if c < len(p.classes) && cap(b) == 1<<c {
		b = b[:cap(b)]
		p.classes[c].Put(&b)
	}
}

// messages is an ipc.MessageReader over messages in memory.
type messages struct {
	list []*ipc.Message
	next int
}

func (m *messages) Message() (*ipc.Message, error) {
	if m.next == len(m.list) {
		return nil, io.EOF
	}
	m.next++
	return m.list[m.next-1], nil
}

// Retain and Release are no-ops: the messages live until Decode returns.
func (m *messages) Retain()  {}
func (m *messages) Release() {}

func (m *messages) release() {
	for _, msg := range m.list {
		msg.Release()
	}
}

// appendDecompressed appends the uncompressed bytes of one compressed-body
// buffer to dst. It allocates in proportion to what the data really expands
// to, not to the length the buffer claims.
func appendDecompressed(dst []byte, codec Codec, src []byte) ([]byte, error) {
	n, err := checkCompressed(codec, src)
	switch {
	case err != nil:
		return dst, err
	case len(src) == 0 || n == 0:
		return dst, nil
	case int64(le.Uint64(src)) == rawLength:
		return append(dst, src[8:]...), nil
	case n > maxDecodedLen-int64(len(dst)):
		return dst, fmt.Errorf("uncompressed length %d: the body would exceed %d bytes", n, maxDecodedLen)
	}
	data := src[8:]
	var out []byte
	switch codec {
	case CodecZSTD:
		// Room for what the data can expand to (growing geometrically, so
		// that buffer after buffer costs amortized linear time): DecodeAll
		// would otherwise allocate a new slice of just the frame's size and
		// copy the whole body so far into it. checkCompressed bounded n.
		dst = slices.Grow(dst, int(n))
		out, err = zstdDecoder().DecodeAll(data, dst)
	case CodecLZ4Frame:
		out, err = appendLZ4Decompressed(dst, data, n)
	}
	if err != nil {
		return dst, fmt.Errorf("%s: %w", codec, err)
	}
	if got := int64(len(out) - len(dst)); got != n {
		return dst, fmt.Errorf("%s: %d bytes uncompressed, the prefix says %d", codec, got, n)
	}
	return out, nil
}

// Frame magic numbers, little-endian, at the start of each codec's frame.
const (
	lz4FrameMagic = 0x184D2204
	zstdMagic     = 0xFD2FB528
)

// checkCompressed checks what can be told of one compressed-body buffer
// without decompressing it, and returns its uncompressed length: an empty
// buffer (no bytes, or the length 0) is 0; one stored raw (length -1) is the
// bytes after the prefix; otherwise the prefix's length must be at most
// what the codec can expand the data to (and at most maxDecodedLen), and
// the data must start with the codec's frame magic. parse has checked that
// a non-empty buffer has its 8-byte prefix and that it is ≥ -1.
func checkCompressed(codec Codec, src []byte) (int64, error) {
	if len(src) == 0 {
		return 0, nil
	}
	n := int64(le.Uint64(src))
	data := src[8:]
	switch {
	case n == rawLength:
		return int64(len(data)), nil
	case n == 0:
		return 0, nil
	case n < 0 || n > maxDecodedLen:
		return 0, fmt.Errorf("uncompressed length %d", n)
	case n > maxExpansion(codec, len(data)):
		return 0, fmt.Errorf("%s: uncompressed length %d, more than %d compressed bytes can hold", codec, n, len(data))
	}
	magic := uint32(lz4FrameMagic)
	if codec == CodecZSTD {
		magic = zstdMagic
	}
	if len(data) < 4 || le.Uint32(data) != magic {
		return 0, fmt.Errorf("%s: the data does not start with a frame", codec)
	}
	if size, ok := frameContentSize(codec, data); ok && size != uint64(n) {
		return 0, fmt.Errorf("%s: uncompressed length %d, the frame says %d", codec, n, size)
	}
	return n, nil
}

// frameContentSize returns the content size a frame's header declares, if
// it declares one (Zstandard writers that know the size, which Arrow's do,
// always do; LZ4 ones may).
func frameContentSize(codec Codec, frame []byte) (uint64, bool) {
	if codec == CodecLZ4Frame {
		// magic, FLG (bit 3: content size), BD, then the size.
		if len(frame) < 14 || frame[4]&0x08 == 0 {
			return 0, false
		}
		return le.Uint64(frame[6:]), true
	}
	// magic, Frame_Header_Descriptor, [Window_Descriptor], [Dictionary_ID],
	// [Frame_Content_Size] (RFC 8878 §3.1.1.1).
	if len(frame) < 5 {
		return 0, false
	}
	fhd := frame[4]
	single := fhd&0x20 != 0
	at := 5 + []int{0, 1, 2, 4}[fhd&3]
	if !single {
		at++ // Window_Descriptor
	}
	size := []int{0, 2, 4, 8}[fhd>>6]
	if size == 0 && single {
		size = 1
	}
	if size == 0 || len(frame) < at+size {
		return 0, false
	}
	switch size {
	case 1:
		return uint64(frame[at]), true
	case 2:
		return uint64(le.Uint16(frame[at:])) + 256, true
	case 4:
		return uint64(le.Uint32(frame[at:])), true
	}
	return le.Uint64(frame[at:]), true
}

// maxExpansion is the most that compressed bytes of codec can decompress
// to: see lz4MaxRatio and zstdMaxRatio (an LZ4 frame may also end in a
// last block that is not full).
func maxExpansion(codec Codec, compressed int) int64 {
	if codec == CodecZSTD {
		return int64(compressed) * zstdMaxRatio
	}
	return int64(compressed)*lz4MaxRatio + (64 << 10)
}

func appendLZ4Decompressed(dst, data []byte, n int64) ([]byte, error) {
	r := lz4Readers.Get().(*lz4.Reader)
	defer lz4Readers.Put(r)
	r.Reset(bytes.NewReader(data))
	out := append(dst, make([]byte, n)...) // grows geometrically, like slices.Grow
	if _, err := io.ReadFull(r, out[len(dst):]); err != nil {
		return dst, err
	}
	// The frame must end here.
	var one [1]byte
	if m, err := r.Read(one[:]); m != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = fmt.Errorf("more than %d bytes", n)
		}
		return dst, err
	}
	return out, nil
}

// appendLZ4 appends src as one LZ4 frame: 64 KB independent blocks, no block
// or content checksum, as Arrow's C++ and Go writers do.
func appendLZ4(dst, src []byte) ([]byte, error) {
	w := lz4Writers.Get().(*lz4.Writer)
	defer lz4Writers.Put(w)
	a := appender{b: dst}
	w.Reset(&a)
	if _, err := w.Write(src); err != nil {
		return dst, err
	}
	if err := w.Close(); err != nil {
		return dst, err
	}
	return a.b, nil
}

type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

var (
	lz4Writers = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// Options that cannot fail.
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false), lz4.ConcurrencyOption(1))
		return w
	}}
	lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

	zstdEncoders struct {
		sync.Mutex
		byLevel map[zstd.EncoderLevel]*zstd.Encoder
	}

	// zstdDecoder is shared: DecodeAll is safe for concurrent use.
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		// The output is limited to dst's capacity, which appendDecompressed
		// sets from the buffer's declared length: a frame that expands to
		// more stops there.
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxDecodedLen), zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			panic(err) // only for invalid options
		}
		return d
	})
)

// zstdEncoder returns the shared encoder for a ZSTD level; EncodeAll is safe
// for concurrent use.
func zstdEncoder(level int) (*zstd.Encoder, error) {
	l := zstd.EncoderLevelFromZstd(level)
	zstdEncoders.Lock()
	defer zstdEncoders.Unlock()
	if e := zstdEncoders.byLevel[l]; e != nil {
		return e, nil
	}
	// Entropy-code literals even where nothing matches, as the reference
	// zstd (and so Fluss's zstd-jni) does at every level: klauspost skips it
	// at its two fastest levels, which leaves text without repeats
	// uncompressed.
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithEncoderCRC(false),
		zstd.WithAllLitEntropyCompression(true))
	if err != nil {
		return nil, fmt.Errorf("arrowmsg: zstd level %d: %w", level, err)
	}
	if zstdEncoders.byLevel == nil {
		zstdEncoders.byLevel = make(map[zstd.EncoderLevel]*zstd.Encoder)
	}
	zstdEncoders.byLevel[l] = e
	return e, nil
}
