package record

import (
	"testing"
)

// FuzzDecodeArrowBatch feeds arbitrary bytes, seeded with real ARROW batches
// of every codec, with and without change types, to the decoder, the
// validator and the projector: none may panic, and whatever decodes must
// render as JSON.
func FuzzDecodeArrowBatch(f *testing.F) {
	s := everyTypeSchema(f)
	rows := everyTypeRows(f)
	for _, c := range arrowCodecs {
		f.Add([]byte(buildArrow(f, s, rows, nil, c, nil)))
		f.Add([]byte(buildArrow(f, s, rows, everyChangeType(len(rows)), c, nil)))
		f.Add([]byte(buildArrow(f, s, rows[:1], []ChangeType{Delete}, c, nil)))
	}
	f.Add([]byte(buildArrow(f, s, nil, nil, DefaultArrowCompression, nil)))
	cols := []int{0, 5, 11, 13, 21}
	ps := s.Project(cols)
	f.Fuzz(func(t *testing.T, data []byte) {
		b := Batch(data)
		_ = ValidateArrowBatch(b, s)
		_ = CheckArrowBatch(b, s) // past the CRC, as a produce handler does
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
