package record

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/record/arrowmsg"
)

var arrowCodecs = []ArrowCompression{
	{Type: CompressionNone},
	{Type: CompressionLZ4Frame},
	{Type: CompressionZSTD, ZstdLevel: 3},
}

func TestArrowTypeMapping(t *testing.T) {
	for _, tc := range []struct{ typ, arrow string }{
		{"BOOLEAN", "bool"},
		{"TINYINT", "int8"},
		{"SMALLINT", "int16"},
		{"INT", "int32"},
		{"BIGINT", "int64"},
		{"FLOAT", "float32"},
		{"DOUBLE", "float64"},
		{"DECIMAL(10, 2)", "decimal(10, 2)"},
		{"DECIMAL(38, 0)", "decimal(38, 0)"},
		{"CHAR(3)", "utf8"},
		{"STRING", "utf8"},
		{"BINARY(16)", "fixed_size_binary[16]"},
		{"BYTES", "binary"},
		{"DATE", "date32"},
		{"TIME(0)", "time32[s]"},
		{"TIME(1)", "time32[ms]"},
		{"TIME(3)", "time32[ms]"},
		{"TIME(4)", "time64[us]"},
		{"TIME(6)", "time64[us]"},
		{"TIME(7)", "time64[ns]"},
		{"TIME(9)", "time64[ns]"},
		{"TIMESTAMP(0)", "timestamp[s]"},
		{"TIMESTAMP(2)", "timestamp[ms]"},
		{"TIMESTAMP(3)", "timestamp[ms]"},
		{"TIMESTAMP(5)", "timestamp[us]"},
		{"TIMESTAMP(6)", "timestamp[us]"},
		{"TIMESTAMP(8)", "timestamp[ns]"},
		{"TIMESTAMP_LTZ(0)", "timestamp[s]"},
		{"TIMESTAMP_LTZ(3)", "timestamp[ms]"},
		{"TIMESTAMP_LTZ(6)", "timestamp[us]"},
		{"TIMESTAMP_LTZ(9)", "timestamp[ns]"},
	} {
		dt, err := ParseDataType(tc.typ)
		if err != nil {
			t.Fatal(err)
		}
		at, err := ArrowType(dt)
		if err != nil {
			t.Errorf("ArrowType(%s): %v", tc.typ, err)
			continue
		}
		if got := at.String(); got != tc.arrow { // timestamps print no zone: there is none
			t.Errorf("ArrowType(%s) = %s, want %s", tc.typ, got, tc.arrow)
		}
		l, err := arrowmsg.LayoutOf(at)
		if err != nil || l != columnLayout(dt) {
			t.Errorf("%s: columnLayout = %+v, arrowmsg.LayoutOf = %+v, %v", tc.typ, columnLayout(dt), l, err)
		}
	}
	s := everyTypeSchema(t)
	as, err := ArrowSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range as.Fields() {
		if f.Name != s.Columns[i].Name || f.Nullable != s.Columns[i].Type.Nullable {
			t.Errorf("field %d = %s nullable %v, want column %s", i, f.Name, f.Nullable, s.Columns[i])
		}
	}
	if as.Metadata().Len() != 0 {
		t.Error("schema has metadata")
	}
	bad := Schema{Columns: []Column{{Name: "ok", Type: DataType{Root: Int}}, {Name: "x", Type: DataType{Root: Decimal, Precision: 40}}}}
	if _, err := ArrowSchema(bad); err == nil || !strings.Contains(err.Error(), `schema.columns[1].type: column "x": DECIMAL precision`) {
		t.Errorf("ArrowSchema(bad) = %v", err)
	}
}

func TestCompressionOf(t *testing.T) {
	for _, tc := range []struct {
		props map[string]string
		want  ArrowCompression
		err   string
	}{
		{nil, ArrowCompression{CompressionZSTD, 3}, ""},
		{map[string]string{OptLogArrowCompressionType: "lz4_frame"}, ArrowCompression{CompressionLZ4Frame, 3}, ""},
		{map[string]string{OptLogArrowCompressionType: "NONE"}, ArrowCompression{CompressionNone, 3}, ""},
		{map[string]string{OptLogArrowZstdLevel: "9"}, ArrowCompression{CompressionZSTD, 9}, ""},
		{map[string]string{OptLogArrowCompressionType: "gzip"}, ArrowCompression{}, `"gzip" is not one of NONE, LZ4_FRAME, ZSTD`},
		{map[string]string{OptLogArrowZstdLevel: "23"}, ArrowCompression{}, "not a ZSTD level"},
	} {
		got, err := CompressionOf(TableDescriptor{Properties: tc.props})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("CompressionOf(%v) = %v, %v; want error %q", tc.props, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CompressionOf(%v) = %v, %v; want %v", tc.props, got, err, tc.want)
		}
	}
	if s := DefaultArrowCompression.String(); s != "ZSTD(3)" {
		t.Errorf("String = %s", s)
	}
}

// arrowTB is what the Arrow test helpers need of a test: testing.TB and
// *rapid.T both have it.
type arrowTB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

func checkedAllocator(t arrowTB) memory.Allocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// buildArrow builds one batch of rows with change types cts (nil: all +A).
func buildArrow(t arrowTB, s Schema, rows []Row, cts []ChangeType, c ArrowCompression, mem memory.Allocator) Batch {
	t.Helper()
	b, err := NewArrowBuilder(s, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	for i, r := range rows {
		ct := AppendOnly
		if cts != nil {
			ct = cts[i]
		}
		if err := b.Append(r, ct); err != nil {
			t.Fatalf("Append row %d: %v", i, err)
		}
	}
	h := BatchHeader{SchemaID: 7, WriterID: 42, BatchSequence: 3}
	_, batch, err := b.Build(nil, h, c)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

func decodeRows(t arrowTB, b Batch, s Schema, mem memory.Allocator) ([]Row, []ChangeType) {
	t.Helper()
	ab, err := DecodeArrowBatch(b, s, mem)
	if err != nil {
		t.Fatalf("DecodeArrowBatch: %v", err)
	}
	defer ab.Release()
	rows := make([]Row, ab.Len())
	cts := make([]ChangeType, ab.Len())
	for i := range rows {
		rows[i] = ab.Row(i)
		cts[i] = ab.ChangeType(i)
	}
	return rows, cts
}

func everyChangeType(n int) []ChangeType {
	out := make([]ChangeType, n)
	for i := range out {
		out[i] = ChangeType(i % 5)
	}
	return out
}

func TestArrowRoundTrip(t *testing.T) {
	s := everyTypeSchema(t)
	rows := everyTypeRows(t)
	for _, c := range arrowCodecs {
		for _, withCT := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/changeTypes=%v", c, withCT), func(t *testing.T) {
				mem := checkedAllocator(t)
				var cts []ChangeType
				if withCT {
					cts = everyChangeType(len(rows))
				}
				b := buildArrow(t, s, rows, cts, c, mem)
				if err := b.Validate(); err != nil {
					t.Fatal(err)
				}
				if err := ValidateArrowBatch(b, s); err != nil {
					t.Fatalf("ValidateArrowBatch: %v", err)
				}
				if b.AppendOnly() == withCT {
					t.Errorf("AppendOnly = %v", b.AppendOnly())
				}
				if b.RecordCount() != int32(len(rows)) || b.SchemaID() != 7 || b.WriterID() != 42 || b.BatchSequence() != 3 ||
					b.LastOffsetDelta() != int32(len(rows)-1) || b.Magic() != MagicV2 {
					t.Errorf("header: count %d schema %d writer %d seq %d delta %d", b.RecordCount(), b.SchemaID(), b.WriterID(), b.BatchSequence(), b.LastOffsetDelta())
				}
				msg := b.Records()
				if withCT {
					msg = msg[len(rows):]
				}
				m, err := arrowmsg.Parse(msg)
				if err != nil {
					t.Fatal(err)
				}
				wantCodec, _ := codecOf(c.Type)
				if m.Codec() != wantCodec {
					t.Errorf("message codec %v, want %v", m.Codec(), wantCodec)
				}
				got, gotCT := decodeRows(t, b, s, mem)
				if len(got) != len(rows) {
					t.Fatalf("decoded %d rows, want %d", len(got), len(rows))
				}
				for i := range rows {
					if !got[i].Equal(rows[i]) {
						t.Errorf("row %d:\n got %v\nwant %v", i, got[i], rows[i])
					}
					want := AppendOnly
					if withCT {
						want = cts[i]
					}
					if gotCT[i] != want {
						t.Errorf("row %d change type %v, want %v", i, gotCT[i], want)
					}
				}
				// Rows outlive the batch.
				if got[0][11].(string) != rows[0][11].(string) {
					t.Error("string changed after Release")
				}
			})
		}
	}
}

func TestArrowEmptyBatch(t *testing.T) {
	s := everyTypeSchema(t)
	mem := checkedAllocator(t)
	b := buildArrow(t, s, nil, nil, DefaultArrowCompression, mem)
	if len(b) != BatchHeaderSize || b.RecordCount() != 0 || !b.AppendOnly() || len(b.Records()) != 0 {
		t.Errorf("empty batch: %d bytes, count %d, append-only %v", len(b), b.RecordCount(), b.AppendOnly())
	}
	if err := ValidateArrowBatch(b, s); err != nil {
		t.Error(err)
	}
	ab, err := DecodeArrowBatch(b, s, mem)
	if err != nil {
		t.Fatal(err)
	}
	if ab.Len() != 0 || ab.Record().NumCols() != int64(len(s.Columns)) {
		t.Errorf("decoded %d rows, %d columns", ab.Len(), ab.Record().NumCols())
	}
	ab.Release()
	ab.Release()
	p, pb, err := ProjectBatch(nil, b, s, []int{1, 2})
	if err != nil || len(p) != BatchHeaderSize || pb.Validate() != nil {
		t.Errorf("ProjectBatch(empty) = %d bytes, %v", len(p), err)
	}
}

func TestArrowBuilderLifecycle(t *testing.T) {
	s := everyTypeSchema(t)
	rows := everyTypeRows(t)
	mem := checkedAllocator(t)
	b, err := NewArrowBuilder(s, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if err := b.Append(rows[0], Insert); err != nil {
		t.Fatal(err)
	}
	// A bad row adds nothing.
	bad := append(Row{}, rows[1]...)
	bad[0] = nil
	bad[5] = 1.5 // float64 in a FLOAT column
	err = b.Append(bad, Insert)
	if ies := InvalidErrors(err); len(ies) != 2 || ies[0].Field != "id" || ies[1].Field != "c_float" {
		t.Errorf("Append(bad) = %v", err)
	}
	if err := b.Append(rows[1], ChangeType(9)); err == nil || !strings.Contains(err.Error(), "change_type") {
		t.Errorf("Append with change type 9 = %v", err)
	}
	if b.Len() != 1 {
		t.Errorf("Len = %d after a rejected row", b.Len())
	}
	if err := b.Append(rows[2], Delete); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Build(nil, BatchHeader{}, ArrowCompression{Type: CompressionZSTD}); err == nil {
		t.Error("Build with ZSTD level 0 succeeded")
	}
	if b.Len() != 2 {
		t.Errorf("failed Build changed the builder: Len %d", b.Len())
	}
	est := b.EstimatedSize()
	dst := []byte("prefix")
	dst, batch, err := b.Build(dst, BatchHeader{AppendOnly: true}, ArrowCompression{Type: CompressionNone})
	if err != nil {
		t.Fatal(err)
	}
	if string(dst[:6]) != "prefix" || !bytes.Equal(dst[6:], batch) {
		t.Error("Build did not append to dst")
	}
	if batch.AppendOnly() {
		t.Error("a batch with +I and -D rows is append-only (BatchHeader.AppendOnly must be ignored)")
	}
	if est < len(batch) || est > len(batch)+len(batch)/2+512 {
		t.Errorf("EstimatedSize %d for a batch of %d bytes", est, len(batch))
	}
	got, cts := decodeRows(t, batch, s, mem)
	if len(got) != 2 || !got[0].Equal(rows[0]) || !got[1].Equal(rows[2]) || cts[0] != Insert || cts[1] != Delete {
		t.Errorf("decoded %v %v", got, cts)
	}
	if b.Len() != 0 || b.EstimatedSize() != BatchHeaderSize {
		t.Errorf("after Build: Len %d, EstimatedSize %d", b.Len(), b.EstimatedSize())
	}
	// Reset discards; the next batch holds only what follows.
	_ = b.Append(rows[0], UpdateBefore)
	b.Reset()
	_ = b.Append(rows[3], AppendOnly)
	_, batch, err = b.Build(nil, BatchHeader{}, DefaultArrowCompression)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = decodeRows(t, batch, s, mem)
	if len(got) != 1 || !got[0].Equal(rows[3]) || !batch.AppendOnly() {
		t.Errorf("after Reset: %v, append-only %v", got, batch.AppendOnly())
	}
}

// arrowGoldenRows is the fixed row set of the golden ARROW batches.
func arrowGoldenRows(t testing.TB) (Schema, []Row, []ChangeType) {
	rows := everyTypeRows(t)
	return everyTypeSchema(t), rows, everyChangeType(len(rows))
}

// TestArrowGolden compares batches built from a fixed row set with
// testdata/arrow_<codec>.hex (-update rewrites them): the encoding must not
// drift unnoticed. ZSTD output is deterministic for a fixed level and
// version of klauspost/compress.
func TestArrowGolden(t *testing.T) {
	s, rows, cts := arrowGoldenRows(t)
	for _, c := range arrowCodecs {
		name := "testdata/arrow_" + strings.ToLower(c.Type.String()) + ".hex"
		b := buildArrow(t, s, rows, cts, c, nil)
		again := buildArrow(t, s, rows, cts, c, nil)
		if !bytes.Equal(b, again) {
			t.Errorf("%s: building twice gives different bytes", c)
		}
		text := hexLines(b)
		if *update {
			if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if text != string(want) {
			t.Errorf("%s differs from %s (run with -update if the change is intended)", c, name)
		}
		wb, err := hex.DecodeString(strings.ReplaceAll(string(want), "\n", ""))
		if err != nil {
			t.Fatal(err)
		}
		got, gotCT := decodeRows(t, Batch(wb), s, nil)
		for i := range rows {
			if !got[i].Equal(rows[i]) || gotCT[i] != cts[i] {
				t.Errorf("%s row %d reads as %v %v", name, i, gotCT[i], got[i])
			}
		}
	}
}

func hexLines(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		n := min(32, len(b))
		sb.WriteString(hex.EncodeToString(b[:n]))
		sb.WriteByte('\n')
		b = b[n:]
	}
	return sb.String()
}

// rebatch returns a copy of b with its records section replaced, Length and
// CRC fixed.
func rebatch(b Batch, records []byte) Batch {
	out := append(Batch{}, b[:BatchHeaderSize+len(b.Statistics())]...)
	out = append(out, records...)
	le.PutUint32(out[8:], uint32(len(out)-lengthFieldEnd))
	out.UpdateCRC()
	return out
}

func TestValidateArrowBatch(t *testing.T) {
	s := everyTypeSchema(t)
	rows := everyTypeRows(t)
	nullable := Schema{Columns: append([]Column{}, s.Columns...)}
	nullable.Columns[0].Type.Nullable = true
	withNull := append([]Row{}, rows...)
	withNull[1] = append(Row{}, rows[1]...)
	withNull[1][0] = nil

	for _, c := range arrowCodecs {
		t.Run(c.String(), func(t *testing.T) {
			good := buildArrow(t, s, rows, everyChangeType(len(rows)), c, nil)
			if err := ValidateArrowBatch(good, s); err != nil {
				t.Fatal(err)
			}
			msgStart := len(good) - len(good.Records()) + len(rows)

			type tc struct {
				name   string
				b      Batch
				s      Schema
				reason string
			}
			cases := []tc{
				{"NULL in a NOT NULL column", buildArrow(t, nullable, withNull, nil, c, nil), s,
					`column "id" is NOT NULL but holds 1 NULLs`},
				{"a column fewer", buildArrow(t, s.Project(seq(1, len(s.Columns))), projectRows(rows, seq(1, len(s.Columns))), nil, c, nil), s,
					"message has 25 field nodes and 53 buffers, too few for the layouts of 26 columns; the 26 columns of the schema are id, c_bool"},
				{"a column more", good, Schema{Columns: append(append([]Column{}, s.Columns...), Column{Name: "extra", Type: DataType{Root: Int, Nullable: true}})},
					"the 27 columns of the schema are"},
				{"INT read as BIGINT", good, retype(s, 0, DataType{Root: BigInt}), `column "id": buffer 1 holds 20 bytes, 5 rows need at least 40`},
				{"STRING read as INT", good, retype(s, 11, DataType{Root: Int, Nullable: true}), "field nodes and"},
				{"CHAR read as BINARY", good, retype(s, 10, DataType{Root: Binary, Length: 2, Nullable: true}), "field nodes and"},
			}
			flipped := append(Batch{}, good...)
			flipped[len(flipped)-3] ^= 0x10
			cases = append(cases, tc{"flipped CRC", flipped, s, "CRC"})
			flippedCRC := append(Batch{}, good...)
			flippedCRC[25] ^= 1
			cases = append(cases, tc{"flipped CRC field", flippedCRC, s, "CRC"})
			truncated := rebatch(good, good.Records()[:len(good.Records())-9])
			cases = append(cases, tc{"truncated message", truncated, s, "arrowmsg"})
			noMsg := rebatch(good, good.Records()[:len(rows)])
			cases = append(cases, tc{"no message", noMsg, s, "has no Arrow message"})
			badCT := rebatch(good, append([]byte{7}, good.Records()[1:]...))
			cases = append(cases, tc{"bad change type", badCT, s, "row 0 has change type 7"})
			twoMsgs := rebatch(good, append(append([]byte{}, good.Records()...), good[msgStart:]...))
			cases = append(cases, tc{"two messages", twoMsgs, s, "arrowmsg"})
			countOff := append(Batch{}, good...)
			le.PutUint32(countOff[48:], 4)
			le.PutUint32(countOff[32:], 3)
			countOff = rebatch(countOff, append(append([]byte{}, good.Records()[:4]...), good[msgStart:]...))
			cases = append(cases, tc{"record count differs", countOff, s, "Arrow message has 5 rows, the batch header says 4"})

			for _, tc := range cases {
				err := ValidateArrowBatch(tc.b, tc.s)
				if err == nil || !strings.Contains(err.Error(), tc.reason) {
					t.Errorf("%s: ValidateArrowBatch = %v; want an error containing %q", tc.name, err, tc.reason)
				}
				if err != nil && !errors.Is(err, ErrCorruptBatch) {
					t.Errorf("%s: %v does not wrap ErrCorruptBatch", tc.name, err)
				}
				// The decoder rejects them too (CRC aside: it does not check it).
				if strings.Contains(tc.name, "CRC") {
					continue
				}
				if ab, err := DecodeArrowBatch(tc.b, tc.s, nil); err == nil {
					ab.Release()
					if tc.name != "INT read as BIGINT" { // arrow-go checks the buffer size on decode too
						t.Errorf("%s: DecodeArrowBatch succeeded", tc.name)
					}
				} else if !errors.Is(err, ErrCorruptBatch) {
					t.Errorf("%s: DecodeArrowBatch error %v does not wrap ErrCorruptBatch", tc.name, err)
				}
			}
		})
	}
}

func seq(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func projectRows(rows []Row, cols []int) []Row {
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = make(Row, len(cols))
		for j, c := range cols {
			out[i][j] = r[c]
		}
	}
	return out
}

func retype(s Schema, col int, t DataType) Schema {
	out := Schema{Columns: append([]Column{}, s.Columns...)}
	out.Columns[col].Type = t
	return out
}

func TestProjectBatch(t *testing.T) {
	s := everyTypeSchema(t)
	rows := everyTypeRows(t)
	for _, c := range arrowCodecs {
		t.Run(c.String(), func(t *testing.T) {
			mem := checkedAllocator(t)
			b := buildArrow(t, s, rows, everyChangeType(len(rows)), c, mem)
			b.SetBaseOffset(1000)
			b.SetCommitTimestamp(1234)
			b.SetLeaderEpoch(5)
			// Add statistics, which projection drops.
			stats := []byte{1, 2, 3, 4, 5}
			withStats := append(append(append(Batch{}, b[:BatchHeaderSize]...), stats...), b.Records()...)
			le.PutUint32(withStats[8:], uint32(len(withStats)-lengthFieldEnd))
			le.PutUint32(withStats[52:], uint32(len(stats)))
			withStats.UpdateCRC()
			if err := withStats.Validate(); err != nil {
				t.Fatal(err)
			}
			for _, cols := range [][]int{{0}, {11}, {0, 7, 9, 12, 21}, seq(0, len(s.Columns)), {25}} {
				dst := []byte("x")
				dst, p, err := ProjectBatch(dst, withStats, s, cols)
				if err != nil {
					t.Fatalf("ProjectBatch(%v): %v", cols, err)
				}
				if string(dst[:1]) != "x" || !bytes.Equal(dst[1:], p) {
					t.Error("ProjectBatch did not append to dst")
				}
				if err := p.Validate(); err != nil {
					t.Errorf("projected batch: %v", err)
				}
				ps := s.Project(cols)
				if err := ValidateArrowBatch(p, ps); err != nil {
					t.Errorf("ValidateArrowBatch(projected %v): %v", cols, err)
				}
				if len(p.Statistics()) != 0 || p.BaseOffset() != 1000 || p.CommitTimestamp() != 1234 || p.LeaderEpoch() != 5 ||
					p.SchemaID() != b.SchemaID() || p.WriterID() != b.WriterID() || p.RecordCount() != b.RecordCount() || p.AppendOnly() {
					t.Errorf("projected header differs")
				}
				got, cts := decodeRows(t, p, ps, mem)
				want := projectRows(rows, cols)
				for i := range want {
					if !got[i].Equal(want[i]) || cts[i] != ChangeType(i%5) {
						t.Errorf("cols %v row %d: %v %v, want %v", cols, i, cts[i], got[i], want[i])
					}
				}
			}
			for _, cols := range [][]int{nil, {-1}, {26}, {3, 3}, {4, 2}} {
				dst, _, err := ProjectBatch([]byte("x"), b, s, cols)
				if err == nil || string(dst) != "x" {
					t.Errorf("ProjectBatch(%v) = %v, dst %q", cols, err, dst)
				}
			}
		})
	}
}

func TestSchemaProject(t *testing.T) {
	cols, _ := ParseColumns("a INT NOT NULL, b STRING, c BIGINT NOT NULL")
	s := Schema{Columns: cols, PrimaryKey: []string{"c", "a"}}
	if p := s.Project([]int{2, 0}); p.Columns[0].Name != "c" || p.Columns[1].Name != "a" || len(p.PrimaryKey) != 2 {
		t.Errorf("Project(2, 0) = %+v", p)
	}
	if p := s.Project([]int{1, 2}); len(p.Columns) != 2 || p.PrimaryKey != nil {
		t.Errorf("Project(1, 2) = %+v", p)
	}
	for _, tc := range []struct {
		cols []int
		want string
	}{
		{nil, "selects no columns"},
		{[]int{3}, "column index 3 is out of range; the table has 3 columns"},
		{[]int{0, 0}, `column index 0 ("a") is selected twice`},
	} {
		if err := s.CheckProjection(tc.cols); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckProjection(%v) = %v, want %q", tc.cols, err, tc.want)
		}
	}
	if err := s.CheckProjection([]int{2, 0}); err != nil {
		t.Error(err)
	}
}

// A builder that reserved room (too little for some buffers, too much for
// others) builds the same batch as one that grew its buffers; and
// VarBytes reports the variable-length bytes appended.
func TestArrowBuilderReserve(t *testing.T) {
	s, rows, _ := benchDataset(t)
	want := buildArrow(t, s, rows, nil, ArrowCompression{Type: CompressionZSTD, ZstdLevel: 3}, nil)
	b, err := NewArrowBuilder(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	for _, r := range rows[:10] {
		if err := b.Append(r, AppendOnly); err != nil {
			t.Fatal(err)
		}
	}
	shape := b.VarBytes()
	b.Reset()
	b.Reserve(len(rows)/2, shape)
	for _, r := range rows {
		if err := b.AppendChecked(r, AppendOnly); err != nil {
			t.Fatal(err)
		}
	}
	var total int
	for _, n := range b.VarBytes() {
		total += n
	}
	if total == 0 {
		t.Fatal("VarBytes: no variable-length bytes in a dataset of strings")
	}
	_, got, err := b.Build(nil, BatchHeader{SchemaID: 7, WriterID: 42, BatchSequence: 3}, ArrowCompression{Type: CompressionZSTD, ZstdLevel: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("a builder that reserved room built another batch")
	}
}

// A decoded batch refers to nothing of the bytes it was decoded from (a
// client reuses a reply's buffer once its batches are decoded): before,
// its change types were a slice of them.
func TestDecodedArrowBatchOwnsItsMemory(t *testing.T) {
	s, rows, _ := benchDataset(t)
	rows = rows[:50]
	cts := make([]ChangeType, len(rows))
	for i := range cts {
		cts[i] = []ChangeType{Insert, UpdateBefore, Delete}[i%3]
	}
	b := buildArrow(t, s, rows, cts, ArrowCompression{Type: CompressionNone}, nil)
	ab, err := DecodeArrowBatch(b, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ab.Release()
	for i := range b {
		b[i] = 0xff
	}
	for i := range rows {
		if ab.ChangeType(i) != cts[i] || fmt.Sprint(ab.Row(i)) != fmt.Sprint(rows[i]) {
			t.Fatalf("row %d changed with the bytes it was decoded from: %v %v", i, ab.ChangeType(i), ab.Row(i))
		}
	}
}
