package record

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/record/arrowmsg"
)

// ARROW log batches (FORMATS.md §4.3, DESIGN.md §3): the records section of
// a batch is the change-type vector (one byte per row, absent when the batch
// is append-only) followed by exactly one Arrow IPC RecordBatch message with
// per-buffer body compression, and nothing at all when the batch has no
// rows. The Arrow schema is not in the batch: it follows from the table
// schema the batch's SchemaId names (ArrowSchema).

// codecOf maps a compression type to the message codec.
func codecOf(c ArrowCompressionType) (arrowmsg.Codec, error) {
	switch c {
	case CompressionNone:
		return arrowmsg.CodecNone, nil
	case CompressionLZ4Frame:
		return arrowmsg.CodecLZ4Frame, nil
	case CompressionZSTD:
		return arrowmsg.CodecZSTD, nil
	}
	return 0, fmt.Errorf("record: unknown Arrow compression type %d", c)
}

// columnLayout is arrowmsg.LayoutOf(ArrowType(t)) without building the
// Arrow type: every Strom type is flat, with a validity and a values buffer,
// plus an offsets buffer for the variable-length ones.
func columnLayout(t DataType) arrowmsg.ColumnLayout {
	switch t.Root {
	case Char, String, Bytes:
		return arrowmsg.ColumnLayout{Nodes: 1, Buffers: 3}
	}
	return arrowmsg.ColumnLayout{Nodes: 1, Buffers: 2}
}

func columnLayouts(s Schema) []arrowmsg.ColumnLayout {
	out := make([]arrowmsg.ColumnLayout, len(s.Columns))
	for i, c := range s.Columns {
		out[i] = columnLayout(c.Type)
	}
	return out
}

// ArrowBuilder accumulates rows into one ARROW log batch. It is used by
// clients (one per bucket being written) and by the server (changelogs).
// It is not safe for concurrent use.
type ArrowBuilder struct {
	schema      Schema
	mem         memory.Allocator
	rb          *array.RecordBuilder
	appenders   []func(v any)
	changeTypes []byte
	appendOnly  bool
	varBytes    []int // per column: bytes of variable-length values so far
}

// NewArrowBuilder returns an empty builder for rows of s. mem (nil: the
// default Go allocator) holds the Arrow buffers; Release returns them.
func NewArrowBuilder(s Schema, mem memory.Allocator) (*ArrowBuilder, error) {
	as, err := ArrowSchema(s)
	if err != nil {
		return nil, err
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	b := &ArrowBuilder{
		schema:     s,
		mem:        mem,
		rb:         array.NewRecordBuilder(mem, as),
		appenders:  make([]func(any), len(s.Columns)),
		appendOnly: true,
		varBytes:   make([]int, len(s.Columns)),
	}
	for i, c := range s.Columns {
		b.appenders[i] = newAppender(b.rb.Field(i), c.Type)
	}
	return b, nil
}

// newAppender returns a function appending a value of type t (checked, nil
// for NULL) to fb, which ArrowType(t) made.
func newAppender(fb array.Builder, t DataType) func(any) {
	switch t.Root {
	case Boolean:
		bb := fb.(*array.BooleanBuilder)
		return func(v any) { bb.Append(v.(bool)) }
	case TinyInt:
		bb := fb.(*array.Int8Builder)
		return func(v any) { bb.Append(v.(int8)) }
	case SmallInt:
		bb := fb.(*array.Int16Builder)
		return func(v any) { bb.Append(v.(int16)) }
	case Int:
		bb := fb.(*array.Int32Builder)
		return func(v any) { bb.Append(v.(int32)) }
	case BigInt:
		bb := fb.(*array.Int64Builder)
		return func(v any) { bb.Append(v.(int64)) }
	case Float:
		bb := fb.(*array.Float32Builder)
		return func(v any) { bb.Append(v.(float32)) }
	case Double:
		bb := fb.(*array.Float64Builder)
		return func(v any) { bb.Append(v.(float64)) }
	case Decimal:
		bb := fb.(*array.Decimal128Builder)
		return func(v any) {
			d := v.(DecimalValue)
			if u, ok := d.UnscaledInt64(); ok {
				bb.Append(decimal128.FromI64(u))
			} else {
				bb.Append(decimal128.FromBigInt(d.big)) // at most 38 digits: fits
			}
		}
	case Char, String:
		bb := fb.(*array.StringBuilder)
		return func(v any) { bb.Append(v.(string)) }
	case Binary:
		bb := fb.(*array.FixedSizeBinaryBuilder)
		return func(v any) { bb.Append(v.([]byte)) }
	case Bytes:
		bb := fb.(*array.BinaryBuilder)
		return func(v any) { bb.Append(v.([]byte)) }
	case Date:
		bb := fb.(*array.Date32Builder)
		return func(v any) { bb.Append(arrow.Date32(v.(DateValue))) }
	case Time:
		switch timeUnit(t.Precision) {
		case arrow.Second:
			bb := fb.(*array.Time32Builder)
			return func(v any) { bb.Append(arrow.Time32(v.(TimeOfDay) / 1000)) }
		case arrow.Millisecond:
			bb := fb.(*array.Time32Builder)
			return func(v any) { bb.Append(arrow.Time32(v.(TimeOfDay))) }
		case arrow.Microsecond:
			bb := fb.(*array.Time64Builder)
			return func(v any) { bb.Append(arrow.Time64(v.(TimeOfDay)) * 1000) }
		default:
			bb := fb.(*array.Time64Builder)
			return func(v any) { bb.Append(arrow.Time64(v.(TimeOfDay)) * 1e6) }
		}
	case Timestamp, TimestampLTZ:
		bb := fb.(*array.TimestampBuilder)
		unit := timeUnit(t.Precision)
		ltz := t.Root == TimestampLTZ
		return func(v any) {
			var millis int64
			var nano int32
			if ltz {
				x := v.(Instant)
				millis, nano = x.EpochMillis, x.NanoOfMilli
			} else {
				x := v.(TimestampNTZ)
				millis, nano = x.Millis, x.NanoOfMilli
			}
			bb.Append(arrow.Timestamp(toTimestampUnit(millis, nano, unit)))
		}
	}
	panic(fmt.Sprintf("record: no Arrow appender for %s", t)) // ArrowSchema accepted t
}

func toTimestampUnit(millis int64, nano int32, unit arrow.TimeUnit) int64 {
	switch unit {
	case arrow.Second:
		return floorDiv(millis, 1000)
	case arrow.Millisecond:
		return millis
	case arrow.Microsecond:
		return millis*1000 + int64(nano)/1000
	}
	return millis*1e6 + int64(nano)
}

func fromTimestampUnit(v int64, unit arrow.TimeUnit) (int64, int32) {
	switch unit {
	case arrow.Second:
		return v * 1000, 0
	case arrow.Millisecond:
		return v, 0
	case arrow.Microsecond:
		return floorDiv(v, 1000), int32(floorMod(v, 1000) * 1000)
	}
	return floorDiv(v, 1e6), int32(floorMod(v, 1e6))
}

// Schema returns the schema of the rows the builder takes.
func (b *ArrowBuilder) Schema() Schema { return b.schema }

// Append adds r with change type ct. The row is checked first (s.CheckRow)
// and nothing is added when it fails; the error is then errors.Join of
// *InvalidError naming the columns, or one on "change_type". r is not
// retained.
func (b *ArrowBuilder) Append(r Row, ct ChangeType) error {
	if err := b.schema.CheckRow(r); err != nil {
		return err
	}
	return b.AppendChecked(r, ct)
}

// AppendChecked is Append for a row that passed s.CheckRow already (a
// writer checks a row before it takes it): it checks only ct.
func (b *ArrowBuilder) AppendChecked(r Row, ct ChangeType) error {
	if !ct.Valid() {
		return &InvalidError{Field: "change_type", Reason: fmt.Sprintf("%d is not a change type", ct)}
	}
	for i, v := range r {
		if v == nil {
			b.rb.Field(i).AppendNull()
			continue
		}
		b.appenders[i](v)
		switch x := v.(type) {
		case string:
			b.varBytes[i] += len(x)
		case []byte:
			b.varBytes[i] += len(x)
		}
	}
	b.changeTypes = append(b.changeTypes, byte(ct))
	b.appendOnly = b.appendOnly && ct == AppendOnly
	return nil
}

// Reserve makes room for rows more rows whose variable-length values take
// varBytes[i] more bytes in column i (varBytes may be short or nil), so
// that appending them grows no buffer step by step. A writer passes the
// shape of its previous batch.
func (b *ArrowBuilder) Reserve(rows int, varBytes []int) {
	for i := range b.schema.Columns {
		f := b.rb.Field(i)
		f.Reserve(rows)
		if d, ok := f.(interface{ ReserveData(int) }); ok && i < len(varBytes) {
			d.ReserveData(varBytes[i])
		}
	}
	b.changeTypes = slices.Grow(b.changeTypes, rows)
}

// VarBytes returns, per column, the bytes of the variable-length values
// appended since the last Build or Reset (0 for fixed-width columns).
func (b *ArrowBuilder) VarBytes() []int { return slices.Clone(b.varBytes) }

// Len returns the number of rows appended since the last Build or Reset.
func (b *ArrowBuilder) Len() int { return len(b.changeTypes) }

// EstimatedSize returns the size in bytes of the batch Build would make
// without compression (header, change types, Arrow metadata and padded
// buffers), which bounds the compressed size closely enough for batch-size
// limits: compression only shrinks a buffer (a buffer that would grow is
// stored raw) and adds at most 8 bytes to it.
func (b *ArrowBuilder) EstimatedSize() int {
	n := b.Len()
	size := BatchHeaderSize
	if n == 0 {
		return size
	}
	if !b.appendOnly {
		size += n
	}
	nbuf := 0
	body := 0
	for i, c := range b.schema.Columns {
		l := columnLayout(c.Type)
		nbuf += l.Buffers
		body += arrowPad8((n+7)/8) + 8 // validity, and a compressed buffer's length prefix
		switch c.Type.Root {
		case Char, String, Bytes:
			body += arrowPad8(4*(n+1)) + arrowPad8(b.varBytes[i]) + 16
		case Boolean:
			body += arrowPad8((n+7)/8) + 8
		default:
			body += arrowPad8(n*fixedWidth(c.Type)) + 8
		}
	}
	// Message prefix and flatbuffer metadata: a fixed part plus 16 bytes per
	// field node and per buffer.
	return size + 8 + 192 + 16*(len(b.schema.Columns)+nbuf) + body
}

func arrowPad8(n int) int { return (n + 7) &^ 7 }

// fixedWidth is the byte width of a fixed-width column's Arrow values.
func fixedWidth(t DataType) int {
	switch t.Root {
	case TinyInt:
		return 1
	case SmallInt:
		return 2
	case Int, Float, Date:
		return 4
	case BigInt, Double, Timestamp, TimestampLTZ:
		return 8
	case Decimal:
		return 16
	case Binary:
		return t.Length
	case Time:
		if t.Precision <= 3 {
			return 4
		}
		return 8
	}
	return 0
}

// Reset discards the rows appended since the last Build.
func (b *ArrowBuilder) Reset() {
	rec := b.rb.NewRecordBatch() // the simplest way to empty every column builder
	rec.Release()
	b.resetState()
}

func (b *ArrowBuilder) resetState() {
	b.changeTypes = b.changeTypes[:0]
	b.appendOnly = true
	clear(b.varBytes)
}

// Release frees the builder's Arrow memory; the builder must not be used
// afterwards.
func (b *ArrowBuilder) Release() {
	b.rb.Release()
	b.changeTypes = nil
}

// Build appends a V2 log batch of the rows appended since the last Build or
// Reset to dst (via AppendBatch: BaseOffset 0, CommitTimestamp 0, CRC set)
// and returns the extended slice and the batch within it. The header's
// SchemaID, WriterID and BatchSequence are h's; its AppendOnly is ignored:
// the batch is append-only (attribute bit 0, no change-type vector) exactly
// when every row was +A, which includes a batch of no rows. A batch of no rows
// has no Arrow message, as in Fluss. The Arrow buffers are compressed with c.
//
// The builder is empty afterwards, ready for the next batch; on error (an
// invalid c) it is left unchanged.
func (b *ArrowBuilder) Build(dst []byte, h BatchHeader, c ArrowCompression) ([]byte, Batch, error) {
	codec, err := codecOf(c.Type)
	if err != nil {
		return dst, nil, err
	}
	if codec == arrowmsg.CodecZSTD && (c.ZstdLevel < 1 || c.ZstdLevel > 22) {
		return dst, nil, fmt.Errorf("record: ZSTD level %d is not between 1 and 22", c.ZstdLevel)
	}
	n := b.Len()
	h.AppendOnly = b.appendOnly
	var records []byte
	if n > 0 {
		rec := b.rb.NewRecordBatch()
		msg, err := arrowmsg.Encode(rec, codec, c.ZstdLevel, b.mem)
		rec.Release()
		if err != nil {
			// Cannot happen for a valid codec and Strom's types; the rows are lost.
			b.resetState()
			return dst, nil, fmt.Errorf("record: encode Arrow batch: %w", err)
		}
		if h.AppendOnly {
			records = msg
		} else {
			records = make([]byte, 0, n+len(msg))
			records = append(records, b.changeTypes...)
			records = append(records, msg...)
		}
	}
	dst, batch := AppendBatch(dst, h, n, records)
	b.resetState()
	return dst, batch, nil
}

// corruptf returns an error wrapping ErrCorruptBatch.
func arrowCorruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptBatch, fmt.Sprintf(format, args...))
}

// ArrowBatch is a decoded ARROW log batch. It owns an Arrow record; Release
// it when done. Values returned by Row are copies and stay valid after
// Release; the Record does not. Not safe for concurrent Release.
type ArrowBatch struct {
	schema      Schema
	rec         arrow.RecordBatch
	changeTypes []byte // nil when append-only
	readers     []func(i int) any
}

// DecodeArrowBatch decodes an ARROW log batch whose columns are those of s:
// the table's schema for a full batch, or s.Project(cols) for one that
// ProjectBatch pruned. It runs CheckArrowBatch's checks (not the CRC: call
// b.Validate for bytes from outside), then decompresses the Arrow buffers
// into mem (nil: the default allocator) and validates every column fully.
// Errors about the bytes wrap ErrCorruptBatch; an invalid s is a plain
// error.
//
// It is NewArrowDecoder(s) and its Decode(b, mem); a reader of many batches
// of one schema keeps an ArrowDecoder instead.
func DecodeArrowBatch(b Batch, s Schema, mem memory.Allocator) (*ArrowBatch, error) {
	d, err := NewArrowDecoder(s)
	if err != nil {
		return nil, err
	}
	return d.Decode(b, mem)
}

// ArrowDecoder decodes ARROW batches whose columns are those of one schema
// (as DecodeArrowBatch does), with the work that depends only on the
// schema (its Arrow schema, the columns' layouts, the schema message
// arrow-go's reader starts from) done once, by NewArrowDecoder. It is safe
// for concurrent use.
type ArrowDecoder struct {
	s   Schema
	as  *arrow.Schema
	dec *arrowmsg.Decoder
}

// NewArrowDecoder returns a decoder of batches of s; an invalid s (a type
// with no Arrow form) is an error.
func NewArrowDecoder(s Schema) (*ArrowDecoder, error) {
	as, err := ArrowSchema(s)
	if err != nil {
		return nil, err
	}
	dec, err := arrowmsg.NewDecoder(as)
	if err != nil {
		return nil, fmt.Errorf("record: decode Arrow batch: %w", err)
	}
	return &ArrowDecoder{s: s, as: as, dec: dec}, nil
}

// Schema returns the schema the decoder was made for.
func (d *ArrowDecoder) Schema() Schema { return d.s }

// Decode is DecodeArrowBatch(b, the decoder's schema, mem).
func (d *ArrowDecoder) Decode(b Batch, mem memory.Allocator) (*ArrowBatch, error) {
	return d.DecodeWith(b, mem, nil)
}

// NewArrowBodyPool returns an allocator of the uncompressed bodies of
// decoded batches (arrowmsg.BodyPool) for DecodeWith: a body is given back
// when the batch is released (the last of its record's buffers), and the
// next batch's decompresses into it without the zeroing a fresh allocation
// costs. A batch's values read after its Release may then be another
// batch's.
func NewArrowBodyPool() memory.Allocator { return arrowmsg.NewBodyPool() }

// DecodeWith is Decode with the batch's uncompressed Arrow body taken from
// bodies (nil: the Go heap, as Decode), made by NewArrowBodyPool.
func (d *ArrowDecoder) DecodeWith(b Batch, mem, bodies memory.Allocator) (*ArrowBatch, error) {
	s, as := d.s, d.as
	changeTypes, msg, err := checkArrow(b, s)
	if err != nil {
		return nil, err
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	var rec arrow.RecordBatch
	if len(msg) == 0 {
		rb := array.NewRecordBuilder(mem, as)
		rec = rb.NewRecordBatch()
		rb.Release()
	} else if rec, err = d.dec.DecodeWith(msg, mem, bodies); err != nil {
		if errors.Is(err, arrowmsg.ErrCorrupt) {
			return nil, fmt.Errorf("%w: %w", ErrCorruptBatch, err)
		}
		return nil, fmt.Errorf("record: decode Arrow batch: %w", err)
	}
	// A copy: b may be a reply's buffer reused once its batches are decoded.
	ab := &ArrowBatch{schema: s, rec: rec, changeTypes: slices.Clone(changeTypes), readers: make([]func(int) any, len(s.Columns))}
	for i, c := range s.Columns {
		ab.readers[i] = newReader(rec.Column(i), c.Type)
	}
	return ab, nil
}

// splitArrowRecords splits the records section of an ARROW batch of n rows
// into the change-type vector (nil when append-only) and the Arrow message
// (empty when n is 0), checking the change types.
func splitArrowRecords(b Batch, n int) ([]byte, []byte, error) {
	records := b.Records()
	var changeTypes []byte
	if !b.AppendOnly() {
		if len(records) < n {
			return nil, nil, arrowCorruptf("records section of %d bytes is shorter than the change-type vector of %d rows", len(records), n)
		}
		changeTypes, records = records[:n], records[n:]
		for i, c := range changeTypes {
			if !ChangeType(c).Valid() {
				return nil, nil, arrowCorruptf("row %d has change type %d", i, int8(c))
			}
		}
	}
	if n == 0 && len(records) > 0 {
		return nil, nil, arrowCorruptf("a batch of no records has %d bytes of records", len(records))
	}
	if n > 0 && len(records) == 0 {
		return nil, nil, arrowCorruptf("a batch of %d records has no Arrow message", n)
	}
	return changeTypes, records, nil
}

// newReader returns a function reading row i of col (an array of
// ArrowType(t)) as a Row value; strings and bytes are copied.
func newReader(col arrow.Array, t DataType) func(int) any {
	nullable := func(get func(int) any) func(int) any {
		if col.NullN() == 0 {
			return get
		}
		return func(i int) any {
			if col.IsNull(i) {
				return nil
			}
			return get(i)
		}
	}
	switch a := col.(type) {
	case *array.Boolean:
		return nullable(func(i int) any { return a.Value(i) })
	case *array.Int8:
		return nullable(func(i int) any { return a.Value(i) })
	case *array.Int16:
		return nullable(func(i int) any { return a.Value(i) })
	case *array.Int32:
		return nullable(func(i int) any { return a.Value(i) })
	case *array.Int64:
		return nullable(func(i int) any { return a.Value(i) })
	case *array.Float32:
		return nullable(func(i int) any { return a.Value(i) })
	case *array.Float64:
		return nullable(func(i int) any { return a.Value(i) })
	case *array.Decimal128:
		p, s := int32(t.Precision), int32(t.Scale)
		return nullable(func(i int) any {
			num := a.Value(i)
			lo, hi := num.LowBits(), num.HighBits()
			d := DecimalValue{Precision: p, Scale: s}
			if hi == 0 && lo>>63 == 0 || hi == -1 && lo>>63 == 1 {
				d.small = int64(lo)
			} else {
				d.big = num.BigInt()
			}
			return d
		})
	case *array.String:
		return nullable(func(i int) any { return strings.Clone(a.Value(i)) })
	case *array.Binary:
		return nullable(func(i int) any { return append([]byte{}, a.Value(i)...) })
	case *array.FixedSizeBinary:
		return nullable(func(i int) any { return append([]byte{}, a.Value(i)...) })
	case *array.Date32:
		return nullable(func(i int) any { return DateValue(a.Value(i)) })
	case *array.Time32:
		mul := arrow.Time32(1)
		if t.Precision == 0 {
			mul = 1000
		}
		return nullable(func(i int) any { return TimeOfDay(a.Value(i) * mul) })
	case *array.Time64:
		div := arrow.Time64(1000)
		if t.Precision > 6 {
			div = 1e6
		}
		return nullable(func(i int) any { return TimeOfDay(floorDiv(int64(a.Value(i)), int64(div))) })
	case *array.Timestamp:
		unit := timeUnit(t.Precision)
		if t.Root == TimestampLTZ {
			return nullable(func(i int) any {
				m, n := fromTimestampUnit(int64(a.Value(i)), unit)
				return Instant{m, n}
			})
		}
		return nullable(func(i int) any {
			m, n := fromTimestampUnit(int64(a.Value(i)), unit)
			return TimestampNTZ{m, n}
		})
	}
	panic(fmt.Sprintf("record: no reader for Arrow type %s", col.DataType())) // Decode used ArrowSchema
}

// Schema returns the schema of the batch's columns.
func (a *ArrowBatch) Schema() Schema { return a.schema }

// Record returns the Arrow record, for consumers that read columns without
// converting rows. It belongs to the ArrowBatch and is valid until Release
// (Retain it to keep it longer).
func (a *ArrowBatch) Record() arrow.RecordBatch { return a.rec }

// Len returns the number of rows.
func (a *ArrowBatch) Len() int { return int(a.rec.NumRows()) }

// AppendOnly reports whether every row is +A (the batch has no change-type
// vector).
func (a *ArrowBatch) AppendOnly() bool { return a.changeTypes == nil }

// ChangeType returns the change type of row i.
func (a *ArrowBatch) ChangeType(i int) ChangeType {
	if a.changeTypes == nil {
		if i < 0 || i >= a.Len() {
			panic(fmt.Sprintf("record: row %d out of range [0, %d)", i, a.Len()))
		}
		return AppendOnly
	}
	return ChangeType(a.changeTypes[i])
}

// Row returns row i as a new Row (values as documented on Row).
func (a *ArrowBatch) Row(i int) Row {
	if i < 0 || i >= a.Len() {
		panic(fmt.Sprintf("record: row %d out of range [0, %d)", i, a.Len()))
	}
	r := make(Row, len(a.readers))
	for c, read := range a.readers {
		r[c] = read(i)
	}
	return r
}

// Value returns column col of row i, as Row does.
func (a *ArrowBatch) Value(i, col int) any {
	if i < 0 || i >= a.Len() {
		panic(fmt.Sprintf("record: row %d out of range [0, %d)", i, a.Len()))
	}
	return a.readers[col](i)
}

// Release frees the Arrow record. The ArrowBatch must not be used
// afterwards, except that Release may be called again.
func (a *ArrowBatch) Release() {
	if a.rec != nil {
		a.rec.Release()
		a.rec = nil
	}
}

// ValidateArrowBatch is CheckArrowBatch (cheap) with the CRC checked first
// (b.Validate): for an ARROW batch from outside.
func ValidateArrowBatch(b Batch, s Schema) error {
	if err := b.Validate(); err != nil {
		return err
	}
	return CheckArrowBatch(b, s, false)
}

// CheckArrowBatch checks an ARROW batch that a produce request brings
// against s, the schema its SchemaId names, with the code the readers run
// (ProjectBatch, DecodeArrowBatch), so that what it accepts they serve:
//
//   - always (cheap: the metadata and the first bytes of each buffer, no
//     decompression): the frame; the change types; exactly one Arrow
//     RecordBatch message that arrowmsg.Check accepts for s's columns (the
//     check arrowmsg.Project and Decode run) with RecordCount rows; no NULL
//     in a NOT NULL column (its null count is 0); every buffer at least as
//     long, uncompressed, as the rows need; and each compressed buffer
//     starting with its codec's frame magic and long enough to expand to
//     the length it declares (Message.UncompressedSize). ProjectBatch
//     projects what passes this.
//   - with full: DecodeArrowBatch too, which decompresses every buffer and
//     validates every column (Kafka's broker-side validation of compressed
//     batches). DecodeArrowBatch decodes what passes this, the batch and
//     every projection of it.
//
// The CRC is not checked: the log checks it on append (it is the one check
// that reads every byte; it is done once). Errors wrap ErrCorruptBatch and
// name the column when one is at fault; an invalid s is a plain error.
func CheckArrowBatch(b Batch, s Schema, full bool) error {
	if !full {
		_, _, err := checkArrow(b, s)
		return err
	}
	ab, err := DecodeArrowBatch(b, s, nil)
	if err != nil {
		return err
	}
	ab.Release()
	return nil
}

// checkArrow is the cheap part of CheckArrowBatch, which every reader runs
// first; it returns the change types (nil when append-only) and the Arrow
// message (empty for a batch of no rows).
func checkArrow(b Batch, s Schema) (changeTypes, msg []byte, err error) {
	for _, c := range s.Columns {
		if reason := c.Type.problem(); reason != "" {
			return nil, nil, fmt.Errorf("record: Arrow batch: column %q: %s", c.Name, reason)
		}
	}
	if err := b.validateFrame(); err != nil {
		return nil, nil, err
	}
	n := int(b.RecordCount())
	if changeTypes, msg, err = splitArrowRecords(b, n); err != nil || n == 0 {
		return changeTypes, msg, err
	}
	m, err := arrowmsg.Check(msg, columnLayouts(s))
	if err != nil {
		if errors.Is(err, arrowmsg.ErrCorrupt) {
			return nil, nil, fmt.Errorf("%w: %w; the %d columns of the schema are %s",
				ErrCorruptBatch, err, len(s.Columns), strings.Join(s.ColumnNames(), ", "))
		}
		return nil, nil, fmt.Errorf("record: Arrow batch: %w", err)
	}
	if m.Length() != int64(n) {
		return nil, nil, arrowCorruptf("Arrow message has %d rows, the batch header says %d", m.Length(), n)
	}
	buf := 0
	for i, c := range s.Columns {
		node := m.Nodes()[i] // one node per column: every Strom type is flat
		if node.NullCount > 0 && !c.Type.Nullable {
			return nil, nil, arrowCorruptf("column %q is NOT NULL but holds %d NULLs", c.Name, node.NullCount)
		}
		for k, need := range minBufferSizes(c.Type, n, node.NullCount) {
			size, err := m.UncompressedSize(buf + k)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: column %q: %w", ErrCorruptBatch, c.Name, err)
			}
			if size < int64(need) {
				return nil, nil, arrowCorruptf("column %q: buffer %d holds %d bytes, %d rows need at least %d", c.Name, k, size, n, need)
			}
		}
		buf += columnLayout(c.Type).Buffers
	}
	return changeTypes, msg, nil
}

// minBufferSizes returns the least uncompressed size of each buffer of a
// column of type t with n rows: the validity bitmap (which writers may omit
// when there is no NULL), then the values, or the offsets and the data.
func minBufferSizes(t DataType, n int, nulls int64) []int {
	validity := (n + 7) / 8
	if nulls == 0 {
		validity = 0
	}
	switch t.Root {
	case Char, String, Bytes:
		return []int{validity, 4 * (n + 1), 0}
	case Boolean:
		return []int{validity, (n + 7) / 8}
	}
	return []int{validity, n * fixedWidth(t)}
}

// ProjectBatch appends to dst a copy of the ARROW batch b (a V2 batch whose
// columns are those of s) that holds only the columns cols, strictly
// increasing indexes into s, and returns the extended slice and the new
// batch; DecodeArrowBatch reads it with s.Project(cols).
//
// The header is copied (offsets, timestamps, epoch, writer, sequence, schema
// id, attributes, record count), the statistics are dropped
// (StatisticsLength 0), the change-type vector is kept, and the Arrow message
// is pruned by arrowmsg.Project, which copies the chosen buffers still
// compressed: nothing is decompressed or decoded. Length is recomputed and the
// CRC is computed afresh (Fluss keeps the stale CRC; Strom's projected batches
// validate), after b's own CRC is checked: a batch damaged where it is stored
// gives an error wrapping ErrCorruptBatch, not a copy with a valid CRC. It
// runs CheckArrowBatch's cheap checks, so it projects what they accept. On
// error dst is returned unchanged.
func ProjectBatch(dst []byte, b Batch, s Schema, cols []int) ([]byte, Batch, error) {
	if err := s.CheckProjection(cols); err != nil {
		return dst, nil, err
	}
	for i := 1; i < len(cols); i++ {
		if cols[i] <= cols[i-1] {
			return dst, nil, &InvalidError{Field: "projection", Reason: fmt.Sprintf("column indexes %v are not in increasing order", cols)}
		}
	}
	if err := b.Validate(); err != nil {
		return dst, nil, err
	}
	if b.Magic() != MagicV2 {
		return dst, nil, fmt.Errorf("record: project: batch has magic %d; only V2 batches are projected", b.Magic())
	}
	changeTypes, msg, err := checkArrow(b, s)
	if err != nil {
		return dst, nil, err
	}
	start := len(dst)
	dst = append(dst, b[:BatchHeaderSize]...)
	dst = append(dst, changeTypes...)
	if len(msg) > 0 {
		dst, err = arrowmsg.Project(dst, msg, columnLayouts(s), cols)
		if err != nil {
			dst = dst[:start]
			if errors.Is(err, arrowmsg.ErrCorrupt) {
				return dst, nil, fmt.Errorf("%w: %w", ErrCorruptBatch, err)
			}
			return dst, nil, fmt.Errorf("record: project: %w", err)
		}
	}
	out := Batch(dst[start:])
	le.PutUint32(out[8:], uint32(len(out)-lengthFieldEnd))
	le.PutUint32(out[layoutV2.statisticsLength:], 0)
	out.UpdateCRC()
	return dst, out, nil
}
