package arrowmsg

import (
	"errors"
	"testing"
)

// The fuzz targets are seeded with real messages of seedSchema: this
// package's, arrow-go's writer's and Arrow C++'s, for every codec, and empty
// ones. Crashers found and fixed stay under testdata/fuzz/<target>.

// FuzzParse: Parse never panics, its errors wrap ErrCorrupt, and what it
// accepts is consistent.
func FuzzParse(f *testing.F) {
	for _, msg := range allSeeds(f) {
		f.Add(msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := Parse(msg)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if m.Size() != len(msg) || m.Length() < 0 {
			t.Fatalf("Size %d of %d bytes, Length %d", m.Size(), len(msg), m.Length())
		}
		var end int64
		for i, b := range m.Buffers() {
			if b.Offset < end || b.Length < 0 || b.Offset+b.Length > int64(len(m.Body())) {
				t.Fatalf("buffer %d %+v outside the %d-byte body", i, b, len(m.Body()))
			}
			end = b.Offset + b.Length
		}
	})
}

// FuzzProject: Project never panics; with valid columns its only errors
// wrap ErrCorrupt; what it writes parses, matches the projected layouts and
// is 8-byte aligned.
func FuzzProject(f *testing.F) {
	for i, msg := range allSeeds(f) {
		f.Add(msg, uint8(i*37))
	}
	layouts, err := LayoutsOf(seedSchema)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte, mask uint8) {
		var cols []int
		var want []ColumnLayout
		for i := range layouts {
			if mask&(1<<i) != 0 {
				cols = append(cols, i)
				want = append(want, layouts[i])
			}
		}
		out, err := Project(nil, msg, layouts, cols)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		m, err := Parse(out)
		if err != nil {
			t.Fatalf("Project wrote a message Parse rejects: %v", err)
		}
		if err := m.CheckLayouts(want); err != nil {
			t.Fatalf("projected message does not match its layouts: %v", err)
		}
		if len(out)%8 != 0 {
			t.Fatalf("projected message of %d bytes", len(out))
		}
		for i, b := range m.Buffers() {
			if b.Offset%8 != 0 {
				t.Fatalf("buffer %d at offset %d", i, b.Offset)
			}
		}
	})
}

// FuzzDecode: Decode never panics and its errors wrap ErrCorrupt.
func FuzzDecode(f *testing.F) {
	for _, msg := range allSeeds(f) {
		f.Add(msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		rec, err := Decode(msg, seedSchema, nil)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		rec.Release()
	})
}

func allSeeds(f *testing.F) [][]byte {
	seeds := seedMessages(f)
	for _, c := range codecs {
		seeds = append(seeds, cppMessages(f)[c])
	}
	return seeds
}
