package logbatch

import (
	"bytes"
	"errors"
	"testing"

	"strom/record"
)

// FuzzConvert runs any bytes through both conversions. Nothing may panic,
// every failure wraps ErrCorrupt and leaves dst as it was, and:
//   - what ToStrom accepts is valid V2 to Strom's record package, batch by
//     batch, and ToFluss then ToStrom gives it back byte for byte;
//   - what ToFluss accepts, from batches whose stored CRC was right, reads
//     as valid in the 0.9.1 client's CRC check, and ToFlussInPlace gives
//     the same bytes.
//
// scripts/test.sh runs it briefly, scripts/fuzz.sh longer.
func FuzzConvert(f *testing.F) {
	v := loadVectors(f)
	for _, x := range v {
		f.Add(unhex(f, x.Hex))
	}
	f.Add(append(unhex(f, v[0].Hex), unhex(f, v[7].Hex)...))
	f.Add([]byte(arrowBatch(f, arrowSchema(f), 7, record.DefaultArrowCompression)))
	f.Fuzz(func(t *testing.T, data []byte) {
		dst := []byte("dst")
		strom, err := ToStrom(dst, data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || string(strom) != "dst" {
				t.Fatalf("ToStrom: %v, dst %q", err, strom)
			}
		} else {
			for rest := strom[3:]; len(rest) > 0; {
				b, r, err := record.NextBatch(rest)
				if err != nil {
					t.Fatalf("ToStrom output: %v", err)
				}
				if err := b.Validate(); err != nil || b.Magic() != record.MagicV2 {
					t.Fatalf("ToStrom output: %v", err)
				}
				rest = r
			}
			fluss, err := ToFluss(nil, strom[3:])
			if err != nil {
				t.Fatalf("ToFluss of ToStrom's output: %v", err)
			}
			again, err := ToStrom(nil, fluss)
			if err != nil || !bytes.Equal(again, strom[3:]) {
				t.Fatalf("round trip: %v", err)
			}
		}

		fluss, err := ToFluss(dst, data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || string(fluss) != "dst" {
				t.Fatalf("ToFluss: %v, dst %q", err, fluss)
			}
			in := append([]byte(nil), data...)
			if _, _, err := ToFlussInPlace(in, nil); !errors.Is(err, ErrCorrupt) || !bytes.Equal(in, data) {
				t.Fatalf("ToFlussInPlace of what ToFluss refuses: %v, input changed %v", err, !bytes.Equal(in, data))
			}
			return
		}
		inPlace := append([]byte(nil), data...)
		parts, n, err := ToFlussInPlace(inPlace, nil)
		if got := bytes.Join(parts, nil); err != nil || n != len(fluss)-3 || !bytes.Equal(got, fluss[3:]) {
			t.Fatalf("ToFlussInPlace: %v, %d bytes, not ToFluss's %d", err, len(got), len(fluss)-3)
		}
		in, out := data, fluss[3:]
		for len(in) > 0 {
			b, r, err := record.NextBatch(in)
			if err != nil {
				t.Fatalf("ToFluss accepted what record cannot frame: %v", err)
			}
			n := int(le.Uint32(out[8:])) + 12
			if b.Validate() == nil && !flussValid(out[:n]) {
				t.Fatalf("a valid V2 batch converts to an invalid V1 one")
			}
			in, out = r, out[n:]
		}
		if len(out) != 0 {
			t.Fatalf("%d bytes left over", len(out))
		}
	})
}
