package record

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCompactedKeyVectors(t *testing.T) {
	for i, v := range loadCodecVectors(t).CompactedKey {
		t.Run(codecVectorName(i, v.Types, v.Values), func(t *testing.T) {
			cols := codecVectorColumns(t, v.Types, nil)
			row := codecVectorRow(t, cols, v.Values)
			names := make([]string, len(cols))
			for i, c := range cols {
				names[i] = c.Name
			}
			k, err := NewKeyCodec(cols, names)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.AppendRow(nil, row)
			if v.Hex == nil {
				if err == nil || v.Error == "" {
					t.Fatalf("AppendRow = %x, %v; want an error like Fluss's %q", got, err, v.Error)
				}
				if !strings.Contains(err.Error(), "null is not allowed in a key column") || len(InvalidErrors(err)) != 1 {
					t.Fatalf("error %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("AppendRow: %v", err)
			}
			if hex.EncodeToString(got) != *v.Hex {
				t.Fatalf("AppendRow = %x, want %s", got, *v.Hex)
			}
			byKey, err := k.Append(nil, row) // every column is a key column, in order
			if err != nil || !bytes.Equal(byKey, got) {
				t.Fatalf("Append = %x, %v", byKey, err)
			}
			back, err := k.Decode(got)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if want := codecStoredRow(cols, row); !back.Equal(want) {
				t.Fatalf("Decode = %v, want %v", back, want)
			}
		})
	}
}

// TestCompactedKeyRoundTrip encodes and decodes every edge value of every
// type as a key, then random keys picked out of random rows.
func TestCompactedKeyRoundTrip(t *testing.T) {
	types := parseCodecTypes(t)
	for _, dt := range types {
		t.Run(dt.String(), func(t *testing.T) {
			cols := []Column{{Name: "pad", Type: DataType{Root: String, Nullable: true}}, {Name: "a", Type: dt}, {Name: "b", Type: dt}}
			k, err := NewKeyCodec(cols, []string{"b", "a"})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range codecEdgeValues(t, dt) {
				key, err := k.AppendRow(nil, Row{nil, v, v})
				if err != nil {
					t.Fatalf("AppendRow(%v): %v", v, err)
				}
				back, err := k.Decode(key)
				if err != nil || !back.Equal(Row{v, v}) {
					t.Fatalf("Decode(%x) = %v, %v; want [%v %v]", key, back, err, v, v)
				}
			}
		})
	}
	t.Run("random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		for range 2000 {
			cols := codecRandomColumns(rng, types, 1+rng.IntN(12))
			row := codecRandomRow(rng, cols, 0)
			keys := codecRandomKeyNames(rng, cols)
			k, err := NewKeyCodec(cols, keys)
			if err != nil {
				t.Fatal(err)
			}
			key, err := k.AppendRow(nil, row)
			if err != nil {
				t.Fatalf("AppendRow(%v): %v", row, err)
			}
			back, err := k.Decode(key)
			if err != nil {
				t.Fatalf("Decode(%x): %v", key, err)
			}
			for i, name := range keys {
				_, pos, _ := Schema{Columns: cols}.Column(name)
				if !ValueEqual(back[i], row[pos]) {
					t.Fatalf("key column %s: got %v, want %v", name, back[i], row[pos])
				}
			}
		}
	})
}

// codecRandomKeyNames picks a random non-empty subset of cols in random order.
func codecRandomKeyNames(rng *rand.Rand, cols []Column) []string {
	perm := rng.Perm(len(cols))[:1+rng.IntN(len(cols))]
	names := make([]string, len(perm))
	for i, p := range perm {
		names[i] = cols[p].Name
	}
	return names
}

// TestCompactedKeyPrefix checks the property prefix lookups and bucket keys
// rely on: the key of a prefix of the key columns is a byte prefix of the
// whole key.
func TestCompactedKeyPrefix(t *testing.T) {
	types := parseCodecTypes(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		cols := codecRandomColumns(rng, types, 1+rng.IntN(10))
		row := codecRandomRow(rng, cols, 0)
		pk := codecRandomKeyNames(rng, cols)
		full, err := NewKeyCodec(cols, pk)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := full.AppendRow(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + rng.IntN(len(pk))
		prefix, err := NewKeyCodec(cols, pk[:n])
		if err != nil {
			t.Fatal(err)
		}
		part, err := prefix.AppendRow(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(whole, part) || (n == len(pk)) != (len(part) == len(whole)) {
			t.Fatalf("key of %v over %v is %x; over %v it is %x, not a prefix", row, pk, whole, pk[:n], part)
		}
	}
}

func TestCompactedKeyErrors(t *testing.T) {
	cols := []Column{
		{Name: "id", Type: DataType{Root: BigInt}},
		{Name: "name", Type: DataType{Root: String, Nullable: true}},
	}
	for _, tc := range []struct {
		name   string
		keys   []string
		fields []string
	}{
		{"no keys", nil, []string{"keys"}},
		{"unknown", []string{"id", "nope"}, []string{"keys[1]"}},
		{"case-sensitive", []string{"ID"}, []string{"keys[0]"}},
		{"repeated", []string{"id", "name", "id"}, []string{"keys[2]"}},
		{"all at once", []string{"x", "id", "id"}, []string{"keys[0]", "keys[2]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewKeyCodec(cols, tc.keys)
			ies := InvalidErrors(err)
			if len(ies) != len(tc.fields) {
				t.Fatalf("error %v, want problems on %v", err, tc.fields)
			}
			for i, f := range tc.fields {
				if ies[i].Field != f {
					t.Fatalf("error %v, want problems on %v", err, tc.fields)
				}
			}
		})
	}
	if _, err := NewKeyCodec([]Column{{Name: "a", Type: DataType{}}}, []string{"a"}); len(InvalidErrors(err)) != 1 {
		t.Fatalf("invalid type: %v", err)
	}

	k, err := NewKeyCodec(cols, []string{"name", "id"})
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Columns(); len(got) != 2 || got[0].Name != "name" || got[1].Name != "id" {
		t.Fatalf("Columns = %v", got)
	}
	dst := []byte("keep")
	for _, tc := range []struct {
		name   string
		append func() ([]byte, error)
		fields []string
	}{
		{"null", func() ([]byte, error) { return k.AppendRow(dst, Row{int64(1), nil}) }, []string{"name"}},
		{"wrong types", func() ([]byte, error) { return k.Append(dst, Row{1, "x"}) }, []string{"name", "id"}},
		{"short row", func() ([]byte, error) { return k.AppendRow(dst, Row{int64(1)}) }, []string{"row"}},
		{"long key", func() ([]byte, error) { return k.Append(dst, Row{"a", int64(1), int64(2)}) }, []string{"key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.append()
			if string(out) != "keep" {
				t.Fatalf("dst changed to %q", out)
			}
			ies := InvalidErrors(err)
			if len(ies) != len(tc.fields) {
				t.Fatalf("error %v, want problems on %v", err, tc.fields)
			}
			for i, f := range tc.fields {
				if ies[i].Field != f {
					t.Fatalf("error %v, want problems on %v", err, tc.fields)
				}
			}
		})
	}
	for _, b := range []string{"", "01", "0161", "016180", "01610101"} {
		if _, err := k.Decode(codecHex(t, b)); !errors.Is(err, ErrCorruptKey) {
			t.Fatalf("Decode(%s) = %v, want ErrCorruptKey", b, err)
		}
	}
}
