package arrowmsg

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"pgregory.net/rapid"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// TestProjectProperty: for random flat schemas, rows, nulls, codecs and
// writers, Decode(Project(msg, cols)) equals the record projected to cols,
// and the projected message holds the original buffers byte for byte.
func TestProjectProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(rt, 0)

		ncols := rapid.IntRange(1, 25).Draw(rt, "ncols")
		seed := rapid.Uint64().Draw(rt, "seed")
		r := rand.New(rand.NewPCG(seed, 7))
		fields := make([]arrow.Field, ncols)
		for i := range fields {
			ti := rapid.IntRange(0, len(flatTypes)-1).Draw(rt, "type")
			fields[i] = arrow.Field{
				Name:     "c" + string(rune('a'+i)),
				Type:     flatTypes[ti](r),
				Nullable: rapid.Bool().Draw(rt, "nullable"),
			}
		}
		schema := arrow.NewSchema(fields, nil)
		rows := rapid.IntRange(0, 300).Draw(rt, "rows")
		nullPct := rapid.SampledFrom([]int{0, 10, 50, 100}).Draw(rt, "nullPct")
		codec := rapid.SampledFrom(codecs).Draw(rt, "codec")
		writer := rapid.SampledFrom([]string{"strom", "arrow-go"}).Draw(rt, "writer")

		rec := newRecord(mem, r, schema, rows, nullPct)
		defer rec.Release()

		var msg []byte
		if writer == "strom" {
			var err error
			if msg, err = Encode(rec, codec, rapid.SampledFrom([]int{1, 3, 9, 19}).Draw(rt, "level"), mem); err != nil {
				rt.Fatalf("Encode: %v", err)
			}
		} else {
			msg = arrowGoMessage(rt, rec, codec, rapid.SampledFrom([]float64{0, 0.5, 1}).Draw(rt, "minSavings"))
		}

		var cols []int
		for i := range ncols {
			if rapid.Bool().Draw(rt, "keep") {
				cols = append(cols, i)
			}
		}
		layouts, err := LayoutsOf(schema)
		if err != nil {
			rt.Fatal(err)
		}
		prefix := []byte("dst")
		proj, err := Project(prefix, msg, layouts, cols)
		if err != nil {
			rt.Fatalf("Project(%v): %v", cols, err)
		}
		if !bytes.HasPrefix(proj, []byte("dst")) {
			rt.Fatalf("Project overwrote dst")
		}
		proj = proj[len(prefix):]
		checkProjected(rt, msg, proj, layouts, cols)

		want := projectRecord(rec, cols)
		defer want.Release()
		got, err := Decode(proj, want.Schema(), mem)
		if err != nil {
			rt.Fatalf("Decode(projected): %v", err)
		}
		defer got.Release()
		if !got.Schema().Equal(want.Schema()) || !array.RecordEqual(got, want) {
			rt.Fatalf("decoded projection differs\n got: %v\nwant: %v", got, want)
		}

		full, err := Decode(msg, schema, mem)
		if err != nil {
			rt.Fatalf("Decode(full): %v", err)
		}
		defer full.Release()
		if !array.RecordEqual(full, rec) {
			rt.Fatalf("decoded message differs from the record")
		}
	})
}

// checkProjected checks that proj is orig with only cols: same rows and
// codec, the columns' field nodes, and their buffers byte-identical at
// 8-aligned offsets.
func checkProjected(t tb, orig, proj []byte, layouts []ColumnLayout, cols []int) {
	t.Helper()
	om, err := Parse(orig)
	if err != nil {
		t.Fatalf("Parse(original): %v", err)
	}
	pm, err := Parse(proj)
	if err != nil {
		t.Fatalf("Parse(projected): %v", err)
	}
	if pm.Length() != om.Length() || pm.Codec() != om.Codec() {
		t.Fatalf("projected: %d rows, %s; original %d rows, %s", pm.Length(), pm.Codec(), om.Length(), om.Codec())
	}
	if len(proj)%8 != 0 || pm.Size() != len(proj) {
		t.Fatalf("projected message of %d bytes, Size %d", len(proj), pm.Size())
	}
	var pn, pb int // next node and buffer of the projection
	var on, ob int
	j := 0
	for i, l := range layouts {
		if j < len(cols) && cols[j] == i {
			j++
			for k := range l.Nodes {
				if pm.Nodes()[pn+k] != om.Nodes()[on+k] {
					t.Fatalf("column %d node %d: %+v, want %+v", i, k, pm.Nodes()[pn+k], om.Nodes()[on+k])
				}
			}
			for k := range l.Buffers {
				p, o := pm.Buffers()[pb+k], om.Buffers()[ob+k]
				if p.Offset%8 != 0 {
					t.Fatalf("column %d buffer %d at unaligned offset %d", i, k, p.Offset)
				}
				pbytes := pm.Body()[p.Offset : p.Offset+p.Length]
				obytes := om.Body()[o.Offset : o.Offset+o.Length]
				if !bytes.Equal(pbytes, obytes) {
					t.Fatalf("column %d buffer %d not copied as is", i, k)
				}
			}
			pn += l.Nodes
			pb += l.Buffers
		}
		on += l.Nodes
		ob += l.Buffers
	}
	if pn != len(pm.Nodes()) || pb != len(pm.Buffers()) {
		t.Fatalf("projected message has %d nodes and %d buffers, want %d and %d", len(pm.Nodes()), len(pm.Buffers()), pn, pb)
	}
}

// TestProjectCopiesCompressedBytes: projecting a compressed message copies
// the compressed buffers (length prefix included) and decompresses nothing:
// the projection of a message whose data cannot be decompressed still works.
func TestProjectCopiesCompressedBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	rec := newRecord(memory.DefaultAllocator, r, seedSchema, 200, 20)
	defer rec.Release()
	layouts, _ := LayoutsOf(seedSchema)
	for _, c := range []Codec{CodecLZ4Frame, CodecZSTD} {
		t.Run(c.String(), func(t *testing.T) {
			msg, err := Encode(rec, c, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := Parse(msg)
			compressed := 0
			for _, b := range m.Buffers() {
				if b.Length >= 8 && int64(le.Uint64(m.Body()[b.Offset:])) >= 0 && b.Length > 8 {
					compressed++
				}
			}
			if compressed == 0 {
				t.Fatal("no compressed buffer in the message: test is vacuous")
			}
			cols := []int{1, 3, 4}
			proj, err := Project(nil, msg, layouts, cols)
			if err != nil {
				t.Fatal(err)
			}
			checkProjected(t, msg, proj, layouts, cols)

			// Scramble the compressed data of every buffer (not its length
			// prefix): Project must not care, Decode must fail.
			bad := bytes.Clone(msg)
			bm, _ := Parse(bad)
			for _, b := range bm.Buffers() {
				if b.Length > 16 && int64(le.Uint64(bm.Body()[b.Offset:])) > 0 {
					for i := b.Offset + 8; i < b.Offset+b.Length; i++ {
						bm.Body()[i] ^= 0x5a
					}
				}
			}
			proj, err = Project(nil, bad, layouts, cols)
			if err != nil {
				t.Fatalf("Project of undecompressible message: %v", err)
			}
			checkProjected(t, bad, proj, layouts, cols)
			if rec, err := Decode(bad, seedSchema, nil); err == nil {
				rec.Release()
				t.Fatal("Decode of scrambled compressed data succeeded")
			} else if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode error %v does not wrap ErrCorrupt", err)
			}
		})
	}
}

// TestEncodeCompressionForm: Encode writes Arrow Java's per-buffer form:
// empty buffers as a zero length prefix, incompressible buffers raw after -1,
// others compressed after their uncompressed length.
func TestEncodeCompressionForm(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "noise", Type: arrow.BinaryTypes.Binary},                   // no nulls: empty validity; random data
		{Name: "zeros", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, // compressible
	}, nil)
	mem := memory.DefaultAllocator
	r := rand.New(rand.NewPCG(5, 6))
	bb := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	ib := array.NewInt64Builder(mem)
	for i := range 500 {
		bb.Append(randomBytes(r, 32))
		if i%7 == 0 {
			ib.AppendNull()
		} else {
			ib.Append(0)
		}
	}
	noise, zeros := bb.NewArray(), ib.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{noise, zeros}, 500)
	noise.Release()
	zeros.Release()
	bb.Release()
	ib.Release()
	defer rec.Release()

	for _, c := range []Codec{CodecLZ4Frame, CodecZSTD} {
		t.Run(c.String(), func(t *testing.T) {
			msg, err := Encode(rec, c, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Parse(msg)
			if err != nil {
				t.Fatal(err)
			}
			prefix := func(i int) int64 {
				b := m.Buffers()[i]
				return int64(le.Uint64(m.Body()[b.Offset:]))
			}
			// Buffers: noise validity, offsets, data; zeros validity, values.
			if b := m.Buffers()[0]; b.Length != 8 || prefix(0) != 0 {
				t.Errorf("empty validity buffer: length %d prefix %d, want 8 bytes of 0", b.Length, prefix(0))
			}
			if prefix(2) != -1 || m.Buffers()[2].Length != 8+500*32 {
				t.Errorf("random data buffer: prefix %d length %d, want raw (-1) and %d", prefix(2), m.Buffers()[2].Length, 8+500*32)
			}
			if b := m.Buffers()[4]; prefix(4) != 500*8 || b.Length >= 500*8 {
				t.Errorf("zeros buffer: prefix %d length %d, want compressed 4000 bytes", prefix(4), b.Length)
			}
			got, err := Decode(msg, schema, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if !array.RecordEqual(got, rec) {
				t.Fatal("round trip differs")
			}
		})
	}
}

// TestNested: LayoutOf's nested layouts agree with what arrow-go writes, and
// nested columns project and decode.
func TestNested(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	structType := arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "row", Type: structType, Nullable: true},
		{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64), Nullable: true},
		{Name: "last", Type: arrow.BinaryTypes.String},
	}, nil)
	const rows = 50
	r := rand.New(rand.NewPCG(8, 9))
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		lb := b.Field(1).(*array.ListBuilder)
		if i%5 == 0 {
			lb.AppendNull()
		} else {
			lb.Append(true)
			for range r.IntN(4) {
				lb.ValueBuilder().(*array.StringBuilder).Append(words[r.IntN(len(words))])
			}
		}
		sb := b.Field(2).(*array.StructBuilder)
		sb.Append(i%3 != 0)
		sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
		sb.FieldBuilder(1).(*array.StringBuilder).Append(randomString(r, i%9))
		mb := b.Field(3).(*array.MapBuilder)
		mb.Append(true)
		for k := range r.IntN(3) {
			mb.KeyBuilder().(*array.StringBuilder).Append(words[k])
			mb.ItemBuilder().(*array.Float64Builder).Append(r.Float64())
		}
		b.Field(4).(*array.StringBuilder).Append(randomString(r, 5))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	layouts, err := LayoutsOf(schema)
	if err != nil {
		t.Fatal(err)
	}
	want := []ColumnLayout{{1, 2}, {2, 5}, {3, 6}, {4, 8}, {1, 3}}
	for i := range want {
		if layouts[i] != want[i] {
			t.Errorf("layout of %s: %+v, want %+v", schema.Field(i).Type, layouts[i], want[i])
		}
	}
	for _, c := range codecs {
		msg, err := Encode(rec, c, 3, mem)
		if err != nil {
			t.Fatal(err)
		}
		for _, cols := range [][]int{{1}, {2}, {3}, {0, 2, 4}, {1, 3}, {0, 1, 2, 3, 4}} {
			proj, err := Project(nil, msg, layouts, cols)
			if err != nil {
				t.Fatalf("%s %v: %v", c, cols, err)
			}
			checkProjected(t, msg, proj, layouts, cols)
			wantRec := projectRecord(rec, cols)
			got, err := Decode(proj, wantRec.Schema(), mem)
			if err != nil {
				t.Fatalf("%s %v: Decode: %v", c, cols, err)
			}
			if !array.RecordEqual(got, wantRec) {
				t.Errorf("%s %v: decoded projection differs", c, cols)
			}
			got.Release()
			wantRec.Release()
		}
	}
}

func TestLayoutOf(t *testing.T) {
	for _, tc := range []struct {
		typ  arrow.DataType
		want ColumnLayout
		err  bool
	}{
		{typ: arrow.Null, want: ColumnLayout{1, 0}},
		{typ: arrow.FixedWidthTypes.Boolean, want: ColumnLayout{1, 2}},
		{typ: arrow.PrimitiveTypes.Int32, want: ColumnLayout{1, 2}},
		{typ: &arrow.Decimal128Type{Precision: 38, Scale: 10}, want: ColumnLayout{1, 2}},
		{typ: &arrow.FixedSizeBinaryType{ByteWidth: 16}, want: ColumnLayout{1, 2}},
		{typ: arrow.BinaryTypes.String, want: ColumnLayout{1, 3}},
		{typ: arrow.BinaryTypes.LargeBinary, want: ColumnLayout{1, 3}},
		{typ: arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Int8), want: ColumnLayout{2, 3}},
		{typ: arrow.ListOf(arrow.StructOf(arrow.Field{Name: "x", Type: arrow.BinaryTypes.Binary})), want: ColumnLayout{3, 6}},
		{typ: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, err: true},
		{typ: arrow.BinaryTypes.StringView, err: true},
		{typ: arrow.ListOf(arrow.BinaryTypes.BinaryView), err: true},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			got, err := LayoutOf(tc.typ)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("LayoutOf = %+v, %v; want %+v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// buildMessage lays out a message by hand with this package's metadata
// writer, for tests that need precise control over what it says.
func buildMessage(rows int64, nodes []FieldNode, buffers []Buffer, codec Codec, body []byte) []byte {
	metaLen := metadataLen(len(nodes), len(buffers), codec != CodecNone)
	out := make([]byte, 8+metaLen, 8+metaLen+len(body))
	le.PutUint32(out, continuation)
	le.PutUint32(out[4:], uint32(metaLen))
	na, ba := putMetadata(out[8:], rows, int64(len(body)), len(nodes), len(buffers), codec)
	for i, n := range nodes {
		putStruct(out[8+na+16*i:], n.Length, n.NullCount)
	}
	for i, b := range buffers {
		putStruct(out[8+ba+16*i:], b.Offset, b.Length)
	}
	return append(out, body...)
}

func TestParseErrors(t *testing.T) {
	one := []FieldNode{{Length: 2}}
	good := buildMessage(2, one, []Buffer{{0, 0}, {0, 16}}, CodecNone, make([]byte, 16))
	if _, err := Parse(good); err != nil {
		t.Fatalf("hand-built message: %v", err)
	}
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	// Offsets of metadata fields in buildMessage's output (8 + flatbuf.go's layout).
	const version, headerType, bodyLength, root = 8 + 32, 8 + 34, 8 + 24, 8

	for _, tc := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"empty", nil, "shorter than a message prefix"},
		{"end of stream", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, "end-of-stream"},
		{"unpadded metadata", mutate(func(b []byte) { le.PutUint32(b[4:], le.Uint32(b[4:])-4) }), "not padded"},
		{"metadata overruns", mutate(func(b []byte) { le.PutUint32(b[4:], 1<<20) }), "overruns"},
		{"negative metadata length", mutate(func(b []byte) { le.PutUint32(b[4:], 0xfffffff8) }), "metadata length -8"},
		{"root out of bounds", mutate(func(b []byte) { le.PutUint32(b[root:], 1<<30) }), "Message table"},
		{"vtable out of bounds", mutate(func(b []byte) { le.PutUint32(b[root+16:], 1<<31) }), "Message vtable"},
		{"old version", mutate(func(b []byte) { b[version] = 2 }), "metadata version 2"},
		{"schema header", mutate(func(b []byte) { b[headerType] = 1 }), "header type Schema"},
		{"body too short", good[:len(good)-8], "body length 16, but 8 bytes"},
		{"trailing bytes", append(bytes.Clone(good), 0, 0, 0, 0, 0, 0, 0, 0), "body length 16, but 24 bytes"},
		{"body length wrong", mutate(func(b []byte) { b[bodyLength] = 8 }), "body length 8"},
		{"buffer outside body", buildMessage(2, one, []Buffer{{0, 0}, {8, 16}}, CodecNone, make([]byte, 16)), "buffer 1"},
		{"buffers overlap", buildMessage(2, one, []Buffer{{0, 8}, {4, 8}}, CodecNone, make([]byte, 16)), "buffer 1"},
		{"negative buffer length", buildMessage(2, one, []Buffer{{0, 0}, {0, -1}}, CodecNone, make([]byte, 16)), "buffer 1"},
		{"null count above length", buildMessage(2, []FieldNode{{2, 3}}, nil, CodecNone, nil), "field node 0"},
		{"short compressed buffer", buildMessage(2, one, []Buffer{{0, 0}, {0, 4}}, CodecZSTD, make([]byte, 8)), "shorter than its length prefix"},
		{"bad uncompressed length", buildMessage(2, one, []Buffer{{0, 0}, {0, 16}}, CodecZSTD, bytes.Repeat([]byte{0xfe}, 16)), "uncompressed length -"},
		{"unknown codec", buildMessage(2, one, nil, Codec(5), nil), "unknown compression codec 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.msg)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse: %v; want ErrCorrupt saying %q", err, tc.want)
			}
		})
	}

	// arrow-go's Schema message is a valid message, not a RecordBatch.
	rec := newRecord(memory.DefaultAllocator, rand.New(rand.NewPCG(1, 1)), seedSchema, 1, 0)
	defer rec.Release()
	stream := arrowGoStream(t, rec, CodecNone, 0)
	schemaMsg := stream[:8+int(le.Uint32(stream[4:]))]
	if _, err := Parse(schemaMsg); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "header type Schema") {
		t.Fatalf("Parse(Schema message): %v", err)
	}
}

func TestParseLegacyFraming(t *testing.T) {
	for _, msg := range seedMessages(t) {
		m, err := Parse(msg)
		if err != nil {
			t.Fatal(err)
		}
		metaLen := int(le.Uint32(msg[4:]))
		// Legacy: int32 length, metadata, padded so that 4 + length is a
		// multiple of 8, then the body.
		legacy := le.AppendUint32(nil, uint32(metaLen+4))
		legacy = append(legacy, msg[8:8+metaLen]...)
		legacy = append(legacy, 0, 0, 0, 0)
		legacy = append(legacy, m.Body()...)
		lm, err := Parse(legacy)
		if err != nil {
			t.Fatalf("Parse(legacy): %v", err)
		}
		if lm.Length() != m.Length() || len(lm.Nodes()) != len(m.Nodes()) || len(lm.Buffers()) != len(m.Buffers()) || lm.Size() != len(legacy) {
			t.Fatal("legacy form parses differently")
		}
		layouts, _ := LayoutsOf(seedSchema)
		proj, err := Project(nil, legacy, layouts, []int{0, 1, 2, 3, 4, 5})
		if err != nil {
			t.Fatal(err)
		}
		if le.Uint32(proj) != continuation {
			t.Fatal("Project did not write the modern framing")
		}
	}
}

func TestProjectErrors(t *testing.T) {
	msg := seedMessages(t)[3]
	layouts, _ := LayoutsOf(seedSchema)
	for _, tc := range []struct {
		name    string
		layouts []ColumnLayout
		cols    []int
		corrupt bool
		want    string
	}{
		{"column out of range", layouts, []int{0, 6}, false, "out of range"},
		{"negative column", layouts, []int{-1}, false, "out of range"},
		{"not increasing", layouts, []int{2, 1}, false, "not strictly increasing"},
		{"duplicate", layouts, []int{1, 1}, false, "not strictly increasing"},
		{"invalid layout", append([]ColumnLayout{{0, 2}}, layouts[1:]...), []int{1}, false, "invalid layout"},
		{"too few layouts", layouts[:5], []int{1}, true, "layouts of 5 columns need"},
		{"too many layouts", append(layouts, ColumnLayout{1, 2}), []int{1}, true, "too few for the layouts"},
		{"wrong layout", append([]ColumnLayout{{1, 3}}, layouts[1:]...), []int{1}, true, "too few for the layouts"},
		{"child as column", append([]ColumnLayout{{1, 1}, {1, 1}}, layouts[1:]...), []int{1}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := Project(dst, msg, tc.layouts, tc.cols)
			if err == nil || errors.Is(err, ErrCorrupt) != tc.corrupt || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Project: %v; want error saying %q, corrupt %v", err, tc.want, tc.corrupt)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed on error: %q", out)
			}
		})
	}
}

// TestProjectNoColumns: an empty projection keeps the row count.
func TestProjectNoColumns(t *testing.T) {
	layouts, _ := LayoutsOf(seedSchema)
	for _, msg := range seedMessages(t) {
		proj, err := Project(nil, msg, layouts, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := Parse(msg)
		rec, err := Decode(proj, arrow.NewSchema(nil, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		if rec.NumRows() != m.Length() || rec.NumCols() != 0 {
			t.Fatalf("got %d rows %d columns, want %d rows", rec.NumRows(), rec.NumCols(), m.Length())
		}
		rec.Release()
	}
}

// TestDecodeSchemaMismatch: a schema that does not fit the message is
// reported, not decoded into garbage.
func TestDecodeSchemaMismatch(t *testing.T) {
	msg := seedMessages(t)[3]
	for _, tc := range []struct {
		name   string
		schema *arrow.Schema
	}{
		{"fewer columns", arrow.NewSchema(seedSchema.Fields()[:5], nil)},
		{"string for int64", arrow.NewSchema(append([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, seedSchema.Fields()[1:]...), nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := Decode(msg, tc.schema, nil)
			if err == nil {
				rec.Release()
				t.Fatal("Decode succeeded")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode: %v does not wrap ErrCorrupt", err)
			}
		})
	}
	dict := arrow.NewSchema([]arrow.Field{{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}}}, nil)
	if _, err := Decode(msg, dict, nil); err == nil || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Decode with unsupported type: %v, want a plain error", err)
	}
}

// TestTruncated: every strict prefix of a message is an error, never a panic.
func TestTruncated(t *testing.T) {
	layouts, _ := LayoutsOf(seedSchema)
	for _, msg := range seedMessages(t) {
		for n := range len(msg) {
			if _, err := Parse(msg[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Parse(%d of %d bytes): %v", n, len(msg), err)
			}
			if _, err := Project(nil, msg[:n], layouts, []int{1, 2}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Project(%d of %d bytes): %v", n, len(msg), err)
			}
		}
	}
}

// TestBitFlips: flipping any bit of the metadata and framing, or bits of the
// body, never makes Parse, Project or Decode panic; their errors wrap
// ErrCorrupt, and what they accept is consistent.
func TestBitFlips(t *testing.T) {
	layouts, _ := LayoutsOf(seedSchema)
	msgs := seedMessages(t)
	for _, msg := range msgs[len(msgs)-6:] { // the 40-row messages
		m, _ := Parse(msg)
		head := len(msg) - len(m.Body())
		bad := bytes.Clone(msg)
		for bit := range 8 * len(msg) {
			if bit >= 8*head && bit%13 != 0 {
				continue // every bit of the framing and metadata, some of the body
			}
			bad[bit/8] ^= 1 << (bit % 8)
			checkNoPanic(t, bad, layouts)
			bad[bit/8] ^= 1 << (bit % 8)
		}
	}
}

func checkNoPanic(t *testing.T, msg []byte, layouts []ColumnLayout) {
	t.Helper()
	if _, err := Parse(msg); err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Parse: %v", err)
	}
	out, err := Project(nil, msg, layouts, []int{0, 1, 3})
	if err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Project: %v", err)
	}
	if err == nil {
		if _, err := Parse(out); err != nil {
			t.Fatalf("Project wrote an unparsable message: %v", err)
		}
	}
	rec, err := Decode(msg, seedSchema, nil)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Decode: %v", err)
	}
	if err == nil {
		rec.Release()
	}
}

// TestGolden pins the exact bytes of a projected message: the metadata
// layout of flatbuf.go, the 8-byte alignment of buffers and the padding.
func TestGolden(t *testing.T) {
	body := []byte{
		0xff, 0, 0, 0, 0, 0, 0, 0, // col 0 validity (1 byte + pad)
		1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, // col 0 values (12 bytes + pad)
		0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 6, 0, 0, 0, // col 1 offsets
		'a', 'b', 'c', 'd', 'e', 'f', 0, 0, // col 1 data (6 bytes + pad)
	}
	msg := buildMessage(3,
		[]FieldNode{{3, 0}, {3, 0}},
		[]Buffer{{0, 1}, {8, 12}, {24, 0}, {24, 16}, {40, 6}},
		CodecNone, body)
	layouts := []ColumnLayout{{1, 2}, {1, 3}}
	proj, err := Project(nil, msg, layouts, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	got := hex.Dump(proj)
	path := filepath.Join("testdata", "project_utf8_column.hexdump")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("projected bytes differ from %s (go test -update to rewrite)\n got:\n%s\nwant:\n%s", path, got, want)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	rec, err := Decode(proj, schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if s := rec.Column(0).String(); s != `["a" "bc" "def"]` {
		t.Fatalf("decoded %s", s)
	}
}

// cppMessages returns the messages Arrow C++ wrote for the record in
// testdata/cpp/want.arrows (see testdata/cpp/gen.py), by codec.
func cppMessages(t tb) map[Codec][]byte {
	t.Helper()
	out := make(map[Codec][]byte)
	for c, name := range map[Codec]string{CodecNone: "none", CodecLZ4Frame: "lz4", CodecZSTD: "zstd"} {
		b, err := os.ReadFile(filepath.Join("testdata", "cpp", name+".msg"))
		if err != nil {
			t.Fatal(err)
		}
		out[c] = b
	}
	return out
}

// TestArrowCppMessages: messages that another Arrow implementation wrote
// (C++, through pyarrow) parse, project and decode. (The other way round was
// checked once by hand: pyarrow 26.0.1 reads Encode's and Project's messages
// of every codec, with full validation, as equal to the original.)
func TestArrowCppMessages(t *testing.T) {
	stream, err := os.ReadFile(filepath.Join("testdata", "cpp", "want.arrows"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ipc.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatal(r.Err())
	}
	want := r.RecordBatch()
	layouts, _ := LayoutsOf(seedSchema)
	for c, msg := range cppMessages(t) {
		t.Run(c.String(), func(t *testing.T) {
			m, err := Parse(msg)
			if err != nil {
				t.Fatal(err)
			}
			if m.Codec() != c || m.Length() != want.NumRows() {
				t.Fatalf("codec %s, %d rows; want %s, %d", m.Codec(), m.Length(), c, want.NumRows())
			}
			got, err := Decode(msg, seedSchema, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if !array.RecordEqual(got, want) {
				t.Fatal("decoded record differs")
			}
			for _, cols := range [][]int{{0}, {1, 3, 4}, {2, 5}} {
				proj, err := Project(nil, msg, layouts, cols)
				if err != nil {
					t.Fatal(err)
				}
				checkProjected(t, msg, proj, layouts, cols)
				wantProj := projectRecord(want, cols)
				gotProj, err := Decode(proj, wantProj.Schema(), nil)
				if err != nil {
					t.Fatal(err)
				}
				if !array.RecordEqual(gotProj, wantProj) {
					t.Fatalf("%v: decoded projection differs", cols)
				}
				gotProj.Release()
				wantProj.Release()
			}
		})
	}
}
