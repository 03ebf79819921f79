package record

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/record/arrowmsg"
)

// stringViewBatch is an ARROW batch of one STRING column whose message
// arrow-go wrote for a string_view column: one field node and three buffers
// (validity, views, one data buffer) as a STRING column has, plus the
// variadicBufferCounts vector that no Strom type has.
func stringViewBatch(t *testing.T) Batch {
	t.Helper()
	b := array.NewStringViewBuilder(memory.DefaultAllocator)
	defer b.Release()
	for _, s := range []string{"a value longer than twelve bytes", "another long value, out of line"} {
		b.Append(s)
	}
	col := b.NewArray()
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.StringView}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 2)
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	stream := buf.Bytes()
	schemaLen := 8 + int(le.Uint32(stream[4:]))
	msg := stream[schemaLen : len(stream)-8]
	_, out := AppendBatch(nil, BatchHeader{SchemaID: 1, AppendOnly: true, WriterID: NoWriterID, BatchSequence: NoBatchSequence}, 2, msg)
	return out
}

// compressedBuffer returns the position in b of the first buffer whose data
// is compressed (length prefix > 0), and its length.
func compressedBuffer(t *testing.T, b Batch) (pos, n int) {
	t.Helper()
	msg := b.Records() // append-only
	m, err := arrowmsg.Parse(msg)
	if err != nil {
		t.Fatal(err)
	}
	bodyAt := len(b) - len(m.Body())
	for _, buf := range m.Buffers() {
		if buf.Length > 64 && int64(le.Uint64(m.Body()[buf.Offset:])) > 0 {
			return bodyAt + int(buf.Offset), int(buf.Length)
		}
	}
	t.Fatal("no compressed buffer")
	return 0, 0
}

func TestCheckArrowBatchRefusesWhatReadersRefuse(t *testing.T) {
	s := everyTypeSchema(t)
	var many []Row
	for range 20 {
		many = append(many, everyTypeRows(t)...)
	}
	zstd := buildArrow(t, s, many, nil, ArrowCompression{Type: CompressionZSTD, ZstdLevel: 3}, nil)
	lz4 := buildArrow(t, s, many, nil, ArrowCompression{Type: CompressionLZ4Frame}, nil)
	edit := func(b Batch, fn func(b Batch, pos, n int)) Batch {
		out := append(Batch{}, b...)
		pos, n := compressedBuffer(t, out)
		fn(out, pos, n)
		out.UpdateCRC()
		return out
	}
	for _, tc := range []struct {
		name   string
		b      Batch
		s      Schema
		cheap  string // the cheap check's error, "" if it accepts
		reason string // what the full check and the decoder say
	}{
		{"variadic buffer counts", stringViewBatch(t), Schema{Columns: []Column{{Name: "s", Type: DataType{Root: String, Nullable: true}}}},
			"variadic buffer counts", "variadic buffer counts"},
		{"ZSTD frame magic", edit(zstd, func(b Batch, pos, _ int) { b[pos+8] ^= 0xff }), s, "does not start with a frame", "does not start with a frame"},
		{"LZ4 frame magic", edit(lz4, func(b Batch, pos, _ int) { b[pos+9] ^= 0xff }), s, "does not start with a frame", "does not start with a frame"},
		{"declared length beyond what the bytes expand to", edit(zstd, func(b Batch, pos, n int) {
			le.PutUint64(b[pos:], uint64(n)*40000)
		}), s, "more than", "more than"},
		{"ZSTD data damaged past the magic", edit(zstd, func(b Batch, pos, n int) {
			// Past the length prefix, the frame magic and the frame header.
			for i := pos + 30; i < pos+n; i++ {
				b[i] ^= 0x5a
			}
		}), s, "", "ZSTD"},
		{"LZ4 data damaged past the magic", edit(lz4, func(b Batch, pos, n int) {
			for i := pos + 30; i < pos+n; i++ {
				b[i] ^= 0x5a
			}
		}), s, "", "LZ4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.b.Validate(); err != nil {
				t.Fatal(err)
			}
			cheap := CheckArrowBatch(tc.b, tc.s, false)
			if tc.cheap == "" && cheap != nil {
				t.Errorf("cheap check: %v, want it to accept", cheap)
			}
			if tc.cheap != "" && (cheap == nil || !strings.Contains(cheap.Error(), tc.cheap) || !errors.Is(cheap, ErrCorruptBatch)) {
				t.Errorf("cheap check: %v, want a corrupt batch error containing %q", cheap, tc.cheap)
			}
			if cheap != nil {
				// What produce refuses, the projector refuses alike.
				if _, _, err := ProjectBatch(nil, tc.b, tc.s, []int{0}); err == nil {
					t.Errorf("ProjectBatch accepts a batch the check refuses")
				}
			}
			full := CheckArrowBatch(tc.b, tc.s, true)
			if full == nil || !strings.Contains(full.Error(), tc.reason) || !errors.Is(full, ErrCorruptBatch) {
				t.Errorf("full check: %v, want a corrupt batch error containing %q", full, tc.reason)
			}
			if _, err := DecodeArrowBatch(tc.b, tc.s, nil); err == nil || err.Error() != full.Error() {
				t.Errorf("DecodeArrowBatch: %v, want the full check's error %v", err, full)
			}
		})
	}
	// The real batches pass both checks.
	for _, b := range []Batch{zstd, lz4} {
		if err := CheckArrowBatch(b, s, false); err != nil {
			t.Error(err)
		}
		if err := CheckArrowBatch(b, s, true); err != nil {
			t.Error(err)
		}
	}
}

// A batch damaged where it is stored is refused by the projector, not
// served with a fresh, valid CRC.
func TestProjectBatchChecksTheStoredCRC(t *testing.T) {
	s := everyTypeSchema(t)
	for _, c := range arrowCodecs {
		b := buildArrow(t, s, everyTypeRows(t), nil, c, nil)
		b[len(b)-20] ^= 0x01
		_, p, err := ProjectBatch(nil, b, s, []int{0, 11})
		if err == nil || !errors.Is(err, ErrCorruptBatch) || !strings.Contains(err.Error(), "CRC") {
			t.Errorf("%s: ProjectBatch of a damaged batch = %v, %v; want a CRC error", c, p != nil, err)
		}
	}
}
