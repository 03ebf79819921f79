package arrowmsg

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// ColumnLayout says how many field nodes and buffers one top-level column
// takes in a RecordBatch (Arrow's columnar format, metadata version V5).
// LayoutOf derives it from the column's Arrow type.
type ColumnLayout struct {
	// Nodes is the number of field nodes: 1 plus those of the children.
	Nodes int
	// Buffers is the number of buffers, the children's included.
	Buffers int
}

// LayoutOf returns the layout of a column of type t:
//
//   - Null: 1 node, no buffers;
//   - Bool, integers, floats, decimals, Date32/64, Time32/64, Timestamp,
//     Duration, intervals, FixedSizeBinary: 1 node, 2 buffers (validity,
//     values);
//   - Utf8, Binary and their Large forms: 1 node, 3 buffers (validity,
//     offsets, data);
//   - List, LargeList, Map: 1 node, 2 buffers (validity, offsets), then the
//     child's (a Map's child is its entries struct);
//   - FixedSizeList: 1 node, 1 buffer (validity), then the child's;
//   - Struct: 1 node, 1 buffer (validity), then each field's;
//   - an extension type: its storage type's.
//
// Dictionary, union, run-end-encoded and view types are not supported: an
// error.
func LayoutOf(t arrow.DataType) (ColumnLayout, error) {
	switch t := t.(type) {
	case *arrow.NullType:
		return ColumnLayout{Nodes: 1}, nil
	case *arrow.BooleanType,
		*arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type,
		*arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type,
		*arrow.Decimal32Type, *arrow.Decimal64Type, *arrow.Decimal128Type, *arrow.Decimal256Type,
		*arrow.Date32Type, *arrow.Date64Type, *arrow.Time32Type, *arrow.Time64Type,
		*arrow.TimestampType, *arrow.DurationType,
		*arrow.MonthIntervalType, *arrow.DayTimeIntervalType, *arrow.MonthDayNanoIntervalType,
		*arrow.FixedSizeBinaryType:
		return ColumnLayout{Nodes: 1, Buffers: 2}, nil
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		return ColumnLayout{Nodes: 1, Buffers: 3}, nil
	case *arrow.ListType:
		return withChildren(ColumnLayout{Nodes: 1, Buffers: 2}, t.Elem())
	case *arrow.LargeListType:
		return withChildren(ColumnLayout{Nodes: 1, Buffers: 2}, t.Elem())
	case *arrow.MapType:
		return withChildren(ColumnLayout{Nodes: 1, Buffers: 2}, t.Elem())
	case *arrow.FixedSizeListType:
		return withChildren(ColumnLayout{Nodes: 1, Buffers: 1}, t.Elem())
	case *arrow.StructType:
		children := make([]arrow.DataType, t.NumFields())
		for i := range children {
			children[i] = t.Field(i).Type
		}
		return withChildren(ColumnLayout{Nodes: 1, Buffers: 1}, children...)
	case arrow.ExtensionType:
		return LayoutOf(t.StorageType())
	case nil:
		return ColumnLayout{}, fmt.Errorf("arrowmsg: no type")
	}
	return ColumnLayout{}, fmt.Errorf("arrowmsg: Arrow type %s is not supported", t)
}

func withChildren(l ColumnLayout, children ...arrow.DataType) (ColumnLayout, error) {
	for _, c := range children {
		cl, err := LayoutOf(c)
		if err != nil {
			return ColumnLayout{}, err
		}
		l.Nodes += cl.Nodes
		l.Buffers += cl.Buffers
	}
	return l, nil
}

// LayoutsOf returns the layout of each field of schema, in order.
func LayoutsOf(schema *arrow.Schema) ([]ColumnLayout, error) {
	layouts := make([]ColumnLayout, schema.NumFields())
	for i, f := range schema.Fields() {
		l, err := LayoutOf(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %d (%q): %w", i, f.Name, err)
		}
		layouts[i] = l
	}
	return layouts, nil
}

// Project appends to dst a message that holds only the top-level columns cols
// of msg, and returns the extended slice. layouts describes every column of
// msg in order (see LayoutOf); cols are indexes into it, strictly increasing,
// possibly none.
//
// The new message has the same row count and body compression, the chosen
// columns' field nodes unchanged, and their buffers copied byte for byte, each
// at an 8-byte-aligned offset: nothing is decompressed, decoded or
// re-encoded, so the cost is one copy of the chosen buffers whatever the
// codec. The output is in the modern framing (continuation marker) with
// metadata version V5, and drops the message's custom metadata.
//
// Errors: cols out of range or not increasing, or an invalid layout, are
// plain errors; a message Check refuses gives its error (wrapping
// ErrCorrupt). On error dst is returned unchanged.
func Project(dst, msg []byte, layouts []ColumnLayout, cols []int) ([]byte, error) {
	for i, c := range cols {
		if c < 0 || c >= len(layouts) {
			return dst, fmt.Errorf("arrowmsg: column %d out of range [0, %d)", c, len(layouts))
		}
		if i > 0 && c <= cols[i-1] {
			return dst, fmt.Errorf("arrowmsg: columns %v not strictly increasing", cols)
		}
	}
	h, err := check(msg, layouts)
	if err != nil {
		return dst, err
	}

	// First pass: sizes.
	var nodes, buffers, bodyLen int
	j := 0 // next entry of cols
	bufStart := 0
	for i, l := range layouts {
		if j < len(cols) && cols[j] == i {
			j++
			nodes += l.Nodes
			buffers += l.Buffers
			for k := range l.Buffers {
				bodyLen += pad8(int(h.buffer(bufStart + k).Length))
			}
		}
		bufStart += l.Buffers
	}
	metaLen := metadataLen(nodes, buffers, h.codec != CodecNone)
	total := 8 + metaLen + bodyLen

	start := len(dst)
	dst = slices.Grow(dst, total)[:start+total]
	out := dst[start:]
	le.PutUint32(out, continuation)
	le.PutUint32(out[4:], uint32(metaLen))
	meta := out[8 : 8+metaLen]
	body := out[8+metaLen:]
	nodesAt, buffersAt := putMetadata(meta, h.rows, int64(bodyLen), nodes, buffers, h.codec)

	// Second pass: copy.
	j, bufStart = 0, 0
	nodeStart, off := 0, 0
	for i, l := range layouts {
		if j < len(cols) && cols[j] == i {
			j++
			// A column's nodes are contiguous: copy the structs as they are.
			nodesAt += copy(meta[nodesAt:], h.nodes[structSize*nodeStart:structSize*(nodeStart+l.Nodes)])
			for k := range l.Buffers {
				src := h.bufferBytes(bufStart + k)
				putStruct(meta[buffersAt:], int64(off), int64(len(src)))
				buffersAt += structSize
				n := copy(body[off:], src)
				clear(body[off+n : off+pad8(n)])
				off += pad8(n)
			}
		}
		nodeStart += l.Nodes
		bufStart += l.Buffers
	}
	return dst, nil
}

// pad8 rounds n up to a multiple of 8.
func pad8(n int) int { return (n + 7) &^ 7 }
