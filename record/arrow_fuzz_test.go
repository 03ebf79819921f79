package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// arrowFuzzSeeds returns real ARROW batches of s: every codec, append-only
// and with change types, a few rows (buffers stored raw: too small to
// compress) and many (buffers compressed), and a batch of no rows.
func arrowFuzzSeeds(f *testing.F, s Schema) [][]byte {
	rows := everyTypeRows(f)
	var many []Row // enough rows that most buffers compress
	for range 8 {
		many = append(many, rows...)
	}
	var out [][]byte
	for _, c := range arrowCodecs {
		out = append(out,
			buildArrow(f, s, rows, nil, c, nil),
			buildArrow(f, s, rows, everyChangeType(len(rows)), c, nil),
			buildArrow(f, s, rows[:1], []ChangeType{Delete}, c, nil),
			buildArrow(f, s, many, nil, c, nil),
			buildArrow(f, s, many, everyChangeType(len(many)), c, nil))
	}
	return append(out, buildArrow(f, s, nil, nil, DefaultArrowCompression, nil))
}

// FuzzDecodeArrowBatch feeds arbitrary bytes, seeded with real ARROW batches,
// to the decoder, the validator and the projector: none may panic, and
// whatever decodes must render as JSON.
func FuzzDecodeArrowBatch(f *testing.F) {
	s := everyTypeSchema(f)
	for _, b := range arrowFuzzSeeds(f, s) {
		f.Add(b)
	}
	cols := []int{0, 5, 11, 13, 21}
	ps := s.Project(cols)
	f.Fuzz(func(t *testing.T, data []byte) {
		b := Batch(data)
		_ = ValidateArrowBatch(b, s)
		if ab, err := DecodeArrowBatch(b, s, nil); err == nil {
			for i := range ab.Len() {
				_ = ab.ChangeType(i)
				_ = AppendRowJSON(nil, s, ab.Row(i))
			}
			ab.Release()
		}
		if _, p, err := ProjectBatch(nil, b, s, cols); err == nil {
			if err := p.Validate(); err != nil {
				t.Fatalf("projected batch does not validate: %v", err)
			}
			if ab, err := DecodeArrowBatch(p, ps, nil); err == nil {
				for i := range ab.Len() {
					_ = AppendRowJSON(nil, ps, ab.Row(i))
				}
				ab.Release()
			}
		}
	})
}

// FuzzArrowServable is the property that produce and fetch agree: a batch
// that produce's validation accepts is served. Produce checks the magic (V2)
// and CheckArrowBatch; the log checks the CRC, so inputs get theirs fixed
// and the fuzzer explores what lies past it. Then:
//
//   - what the cheap check accepts, ProjectBatch projects to any columns
//     (see projections), with a valid CRC: a projected fetch serves it;
//   - what the full check accepts, the cheap check accepts too, and the
//     batch and each of those projections decode (DecodeArrowBatch), every
//     row reads and renders as a JSON object: a full, projected and JSON
//     fetch serve it.
func FuzzArrowServable(f *testing.F) {
	s := everyTypeSchema(f)
	for i, b := range arrowFuzzSeeds(f, s) {
		f.Add(b, uint32(i)*0x9E3779B9)
	}
	n := len(s.Columns)
	f.Fuzz(func(t *testing.T, data []byte, mask uint32) {
		b := Batch(data)
		if b.validateFrame() != nil || b.Magic() != CurrentMagic {
			return
		}
		b.UpdateCRC()
		full := CheckArrowBatch(b, s, true)
		cheap := CheckArrowBatch(b, s, false)
		if full == nil && cheap != nil {
			t.Fatalf("the full check accepts what the cheap one refuses: %v", cheap)
		}
		for _, err := range []error{full, cheap} {
			if err != nil && !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("error %v does not wrap ErrCorruptBatch", err)
			}
		}
		if cheap != nil {
			return
		}
		if full == nil {
			servedAsJSON(t, b, s)
		}
		for _, cols := range projections(n, mask) {
			_, p, err := ProjectBatch(nil, b, s, cols)
			if err != nil {
				t.Fatalf("accepted batch does not project to %v: %v", cols, err)
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("projection to %v does not validate: %v", cols, err)
			}
			if full == nil {
				servedAsJSON(t, p, s.Project(cols))
			}
		}
	})
}

// projections returns the column subsets FuzzArrowServable projects to:
// the columns of mask, the others, one column (chosen by mask) alone, and
// all but that one. Over the inputs, mask draws every kind of subset.
func projections(n int, mask uint32) [][]int {
	var in, others, allBut []int
	one := int(mask % uint32(n))
	for i := range n {
		if mask&(1<<(i%32)) != 0 {
			in = append(in, i)
		} else {
			others = append(others, i)
		}
		if i != one {
			allBut = append(allBut, i)
		}
	}
	var out [][]int
	for _, cols := range [][]int{in, others, {one}, allBut} {
		if len(cols) > 0 {
			out = append(out, cols)
		}
	}
	return out
}

// servedAsJSON decodes b, reads every row and renders it as a JSON object
// as FetchLog's JSON rows do, failing t on any error.
func servedAsJSON(t *testing.T, b Batch, s Schema) {
	t.Helper()
	ab, err := DecodeArrowBatch(b, s, nil)
	if err != nil {
		t.Fatalf("accepted batch (%d columns) does not decode: %v", len(s.Columns), err)
	}
	defer ab.Release()
	for i := range ab.Len() {
		if ct := ab.ChangeType(i); !ct.Valid() {
			t.Fatalf("row %d: change type %d", i, ct)
		}
		js := AppendRowJSON(nil, s, ab.Row(i))
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("row %d renders as invalid JSON %q: %v", i, js, err)
		}
	}
}
