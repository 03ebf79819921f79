package record

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCompactedRowVectors(t *testing.T) {
	for i, v := range loadCodecVectors(t).CompactedRow {
		t.Run(codecVectorName(i, v.Types, v.Values), func(t *testing.T) {
			cols := codecVectorColumns(t, v.Types, nil)
			row := codecVectorRow(t, cols, v.Values)
			c, err := NewCompactedRowCodec(cols)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Append(nil, row)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			if hex.EncodeToString(got) != v.Hex {
				t.Fatalf("Append = %x, want %s", got, v.Hex)
			}
			kv, err := c.AppendKvValue([]byte("prefix"), v.SchemaID, row)
			if err != nil {
				t.Fatalf("AppendKvValue: %v", err)
			}
			if !bytes.HasPrefix(kv, []byte("prefix")) || hex.EncodeToString(kv[6:]) != v.KvValueHex {
				t.Fatalf("AppendKvValue = %x, want prefix + %s", kv, v.KvValueHex)
			}
			id, rowBytes, err := ParseKvValue(codecHex(t, v.KvValueHex))
			if err != nil || id != v.SchemaID || hex.EncodeToString(rowBytes) != v.Hex {
				t.Fatalf("ParseKvValue = %d, %x, %v", id, rowBytes, err)
			}
			back, err := c.Decode(codecHex(t, v.Hex))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if want := codecStoredRow(cols, row); !back.Equal(want) {
				t.Fatalf("Decode = %v, want %v", back, want)
			}
		})
	}
}

// TestCompactedRowRoundTrip encodes and decodes every edge value of every
// type, alone and beside a null, then random rows.
func TestCompactedRowRoundTrip(t *testing.T) {
	types := parseCodecTypes(t)
	for _, dt := range types {
		t.Run(dt.String(), func(t *testing.T) {
			cols := []Column{{Name: "v", Type: dt}, {Name: "n", Type: dt.WithNullable(true)}}
			c, err := NewCompactedRowCodec(cols)
			if err != nil {
				t.Fatal(err)
			}
			values := codecEdgeValues(t, dt)
			if dt.Nullable {
				values = append(values, nil)
			}
			for _, v := range values {
				assertCodecRowRoundTrip(t, c, Row{v, nil})
				assertCodecRowRoundTrip(t, c, Row{v, v})
			}
		})
	}
	t.Run("random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for range 2000 {
			cols := codecRandomColumns(rng, types, rng.IntN(20))
			c, err := NewCompactedRowCodec(cols)
			if err != nil {
				t.Fatal(err)
			}
			assertCodecRowRoundTrip(t, c, codecRandomRow(rng, cols, 3))
		}
	})
}

func assertCodecRowRoundTrip(t *testing.T, c *CompactedRowCodec, row Row) {
	t.Helper()
	b, err := c.Append(nil, row)
	if err != nil {
		t.Fatalf("Append(%v): %v", row, err)
	}
	back, err := c.Decode(b)
	if err != nil {
		t.Fatalf("Decode(%x) of %v: %v", b, row, err)
	}
	if !back.Equal(row) {
		t.Fatalf("round trip of %v gave %v (bytes %x)", row, back, b)
	}
	if again, err := c.Append(nil, back); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("re-encoding %v gave %x, %v; want %x", back, again, err, b)
	}
}

func TestCompactedRowEmptySchema(t *testing.T) {
	c, err := NewCompactedRowCodec(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Append(nil, Row{})
	if err != nil || len(b) != 0 {
		t.Fatalf("Append = %x, %v", b, err)
	}
	if row, err := c.Decode(nil); err != nil || len(row) != 0 {
		t.Fatalf("Decode = %v, %v", row, err)
	}
	if _, err := c.Decode([]byte{0}); !errors.Is(err, ErrCorruptRow) {
		t.Fatalf("Decode of a trailing byte: %v", err)
	}
}

// TestCompactedRowNaN checks that Go's NaN is written as Java's.
func TestCompactedRowNaN(t *testing.T) {
	c, err := NewCompactedRowCodec([]Column{{Name: "f", Type: DataType{Root: Float}}, {Name: "d", Type: DataType{Root: Double}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Append(nil, Row{float32(math.NaN()), math.NaN()})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(b), "000000c07f000000000000f87f"; got != want {
		t.Fatalf("NaNs encode to %s, want %s", got, want)
	}
}

func TestCompactedRowEncodeErrors(t *testing.T) {
	mustType := func(s string) DataType {
		dt, err := ParseDataType(s)
		if err != nil {
			t.Fatal(err)
		}
		return dt
	}
	dec := func(s string, p, sc int32) DecimalValue {
		d, err := ParseDecimal(s, p, sc)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	tests := []struct {
		name  string
		typ   string
		value any
		want  string
	}{
		{"null in NOT NULL", "INT NOT NULL", nil, "null in a INT NOT NULL column"},
		{"wrong Go type", "INT", 5, "a INT column takes a int32, got int"},
		{"int64 for INT", "INT", int64(5), "got int64"},
		{"string for BYTES", "BYTES", "ab", "takes a []byte"},
		{"int32 for DATE", "DATE", int32(3), "takes a record.DateValue"},
		{"time out of day", "TIME(3)", TimeOfDay(msPerDay), "is not a time of day"},
		{"negative time", "TIME(3)", TimeOfDay(-1), "is not a time of day"},
		{"decimal scale", "DECIMAL(10, 2)", dec("1.5", 10, 1), "is a DECIMAL(10, 1), the column is DECIMAL(10, 2)"},
		{"decimal precision", "DECIMAL(20, 2)", dec("1.5", 19, 2), "the column is DECIMAL(20, 2)"},
		{"zero decimal", "DECIMAL(5, 0)", DecimalValue{}, "is a DECIMAL(0, 0)"},
		{"decimal widened by hand", "DECIMAL(2, 0)", func() DecimalValue { d := dec("123", 3, 0); d.Precision = 2; return d }(), "more than 2 digits"},
		{"big decimal widened by hand", "DECIMAL(19, 0)", func() DecimalValue { d := dec("12345678901234567890", 20, 0); d.Precision = 19; return d }(), "more than the precision 19"},
		{"timestamp nanos", "TIMESTAMP(6)", TimestampNTZ{NanoOfMilli: 1_000_000}, "out of range"},
		{"compact timestamp nanos", "TIMESTAMP(3)", TimestampNTZ{NanoOfMilli: -1}, "out of range"},
		{"instant for TIMESTAMP", "TIMESTAMP(3)", Instant{}, "takes a record.TimestampNTZ"},
		{"invalid UTF-8", "STRING", "a\xffb", "not valid UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cols := []Column{{Name: "ok", Type: mustType("INT")}, {Name: "bad", Type: mustType(tc.typ)}}
			c, err := NewCompactedRowCodec(cols)
			if err != nil {
				t.Fatal(err)
			}
			dst := []byte("keep")
			out, err := c.Append(dst, Row{int32(1), tc.value})
			if err == nil {
				t.Fatalf("Append succeeded: %x", out)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed to %q on error", out)
			}
			ies := InvalidErrors(err)
			if len(ies) != 1 || ies[0].Field != "bad" || !strings.Contains(ies[0].Reason, tc.want) {
				t.Fatalf("error %v, want one *InvalidError on %q containing %q", err, "bad", tc.want)
			}
			if _, err := c.AppendKvValue(nil, 1, Row{int32(1), tc.value}); err == nil {
				t.Fatal("AppendKvValue succeeded")
			}
		})
	}
	t.Run("every problem at once", func(t *testing.T) {
		c, err := NewCompactedRowCodec([]Column{{Name: "a", Type: mustType("INT NOT NULL")}, {Name: "b", Type: mustType("BIGINT")}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Append(nil, Row{nil, "x"})
		if ies := InvalidErrors(err); len(ies) != 2 || ies[0].Field != "a" || ies[1].Field != "b" {
			t.Fatalf("error %v, want problems on a and b", err)
		}
	})
	t.Run("wrong count", func(t *testing.T) {
		c, err := NewCompactedRowCodec([]Column{{Name: "a", Type: mustType("INT")}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Append(nil, Row{int32(1), int32(2)}); len(InvalidErrors(err)) != 1 {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("invalid column type", func(t *testing.T) {
		_, err := NewCompactedRowCodec([]Column{{Name: "a", Type: DataType{}}, {Name: "b", Type: DataType{Root: Decimal, Precision: 40}}})
		if ies := InvalidErrors(err); len(ies) != 2 || ies[0].Field != "columns[0].type" {
			t.Fatalf("error %v", err)
		}
	})
}

// TestCompactedRowForeignGoTypes checks that every type rejects a value of
// another type's Go type, naming the Go type it takes.
func TestCompactedRowForeignGoTypes(t *testing.T) {
	types := parseCodecTypes(t)
	c, err := NewCompactedRowCodec([]Column{{Name: "v", Type: DataType{Root: Boolean}}})
	if err != nil || len(c.Columns()) != 1 {
		t.Fatal(err)
	}
	for _, dt := range types {
		t.Run(dt.String(), func(t *testing.T) {
			c, err := NewCompactedRowCodec([]Column{{Name: "v", Type: dt}})
			if err != nil {
				t.Fatal(err)
			}
			for _, other := range types {
				if goTypeName(other.Root) == goTypeName(dt.Root) {
					continue
				}
				v := codecEdgeValues(t, other)[0]
				_, err := c.Append(nil, Row{v})
				if ies := InvalidErrors(err); len(ies) != 1 || !strings.Contains(ies[0].Reason, "takes a "+goTypeName(dt.Root)) {
					t.Fatalf("Append(%T) = %v", v, err)
				}
			}
		})
	}
}

func TestCompactedRowDecodeErrors(t *testing.T) {
	tests := []struct {
		name  string
		types []string
		hex   string
		want  string
	}{
		{"empty", []string{"INT"}, "", "shorter than the null bitset"},
		{"bitset past columns", []string{"INT"}, "0205", "sets bits past column 0"},
		{"null in NOT NULL", []string{"INT NOT NULL"}, "01", "null in a NOT NULL column"},
		{"truncated varint", []string{"INT"}, "0080", "runs past the end"},
		{"varint too long for INT", []string{"INT"}, "00ffffffff1f", "overflows 32 bits"},
		{"varint too long for BIGINT", []string{"BIGINT"}, "00ffffffffffffffffff03", "overflows 64 bits"},
		{"non-minimal varint", []string{"INT"}, "008000", "shortest form"},
		{"trailing bytes", []string{"INT"}, "000505", "1 bytes after the last column"},
		{"boolean 2", []string{"BOOLEAN"}, "0002", "not 0 or 1"},
		{"short smallint", []string{"SMALLINT"}, "0001", "needs 2 bytes"},
		{"short float", []string{"FLOAT"}, "00000000", "needs 4 bytes"},
		{"short double", []string{"DOUBLE"}, "0000000000000000", "needs 8 bytes"},
		{"string past end", []string{"STRING"}, "000561", "more than the 1 bytes left"},
		{"negative string length", []string{"STRING"}, "00ffffffff0f", "length -1"},
		{"invalid UTF-8", []string{"STRING"}, "0001ff", "not valid UTF-8"},
		{"time past the day", []string{"TIME(3)"}, "0080b89929", "not a time of day"},
		{"compact decimal too wide", []string{"DECIMAL(2, 0)"}, "0064", "more than 2 digits"},
		{"compact decimal MinInt64", []string{"DECIMAL(18, 0)"}, "0080808080808080808001", "more than 18 digits"},
		{"decimal no bytes", []string{"DECIMAL(20, 0)"}, "0000", "no bytes"},
		{"decimal non-minimal", []string{"DECIMAL(20, 0)"}, "0002007b", "shortest form"},
		{"decimal non-minimal negative", []string{"DECIMAL(20, 0)"}, "0002ff85", "shortest form"},
		{"decimal too wide", []string{"DECIMAL(20, 0)"}, "000910" + strings.Repeat("00", 8), "more than 20 digits"},
		{"decimal far too long", []string{"DECIMAL(38, 0)"}, "0012" + strings.Repeat("11", 18), "18 bytes"},
		{"nanos out of range", []string{"TIMESTAMP(6)"}, "0000c0843d", "not in 0..999999"},
		{"nanos negative", []string{"TIMESTAMP_LTZ(9)"}, "0000ffffffff0f", "not in 0..999999"},
		{"nanos missing", []string{"TIMESTAMP(6)"}, "0000", "nano-of-millisecond: varint runs past the end"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCompactedRowCodec(codecVectorColumns(t, tc.types, nil))
			if err != nil {
				t.Fatal(err)
			}
			row, err := c.Decode(codecHex(t, tc.hex))
			if !errors.Is(err, ErrCorruptRow) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode = %v, %v; want ErrCorruptRow containing %q", row, err, tc.want)
			}
		})
	}
}

func TestCompactedKvValueShort(t *testing.T) {
	for _, b := range [][]byte{nil, {1}} {
		if _, _, err := ParseKvValue(b); !errors.Is(err, ErrCorruptRow) {
			t.Fatalf("ParseKvValue(%x) = %v", b, err)
		}
	}
	id, row, err := ParseKvValue([]byte{2, 1})
	if err != nil || id != 258 || len(row) != 0 {
		t.Fatalf("ParseKvValue(0201) = %d, %x, %v", id, row, err)
	}
}

// FuzzCompactedRowDecode decodes arbitrary bytes as a row, and as a key, of a
// schema chosen by schema (each byte picks a type of codecTypes). Decoding
// never panics; what decodes re-encodes to the same bytes, except that a NaN
// is re-encoded as Java's canonical NaN.
func FuzzCompactedRowDecode(f *testing.F) {
	v := loadCodecVectors(f)
	index := make(map[string]byte, len(codecTypes))
	for i, s := range codecTypes {
		dt, err := ParseDataType(s)
		if err != nil {
			f.Fatal(err)
		}
		index[dt.String()] = byte(i)
	}
	schemaOf := func(types []string) []byte {
		var sel []byte
		for _, s := range types {
			dt, err := ParseDataType(s)
			if err != nil {
				f.Fatal(err)
			}
			i, ok := index[dt.String()]
			if !ok {
				f.Fatalf("vector type %s is missing from codecTypes", dt)
			}
			sel = append(sel, i)
		}
		return sel
	}
	for _, r := range v.CompactedRow {
		f.Add(schemaOf(r.Types), codecHex(f, r.Hex))
	}
	for _, k := range v.CompactedKey {
		if k.Hex != nil {
			f.Add(schemaOf(k.Types), codecHex(f, *k.Hex))
		}
	}
	f.Add([]byte{5}, []byte("00\xff\xff")) // FLOAT with a NaN that is not Java's
	types := parseCodecTypes(f)
	f.Fuzz(func(t *testing.T, schema, data []byte) {
		if len(schema) > 24 {
			schema = schema[:24]
		}
		cols := make([]Column, len(schema))
		for i, s := range schema {
			cols[i] = Column{Name: "c", Type: types[int(s)%len(types)]}
		}
		c, err := NewCompactedRowCodec(cols)
		if err != nil {
			t.Fatal(err)
		}
		if row, err := c.Decode(data); err == nil {
			again, err := c.Append(nil, row)
			if err != nil {
				t.Fatalf("row %v decoded from %x does not re-encode: %v", row, data, err)
			}
			assertCodecReencoded(t, data, again, row, c.Decode)
		} else if !errors.Is(err, ErrCorruptRow) {
			t.Fatalf("Decode error %v does not wrap ErrCorruptRow", err)
		}
		if len(cols) == 0 {
			return
		}
		for i := range cols {
			cols[i].Name = string(rune('a' + i))
		}
		names := make([]string, len(cols))
		for i := range cols {
			names[i] = cols[i].Name
		}
		k, err := NewKeyCodec(cols, names)
		if err != nil {
			t.Fatal(err)
		}
		if key, err := k.Decode(data); err == nil {
			again, err := k.Append(nil, key)
			if err != nil {
				t.Fatalf("key %v decoded from %x does not re-encode: %v", key, data, err)
			}
			assertCodecReencoded(t, data, again, key, k.Decode)
		} else if !errors.Is(err, ErrCorruptKey) {
			t.Fatalf("key Decode error %v does not wrap ErrCorruptKey", err)
		}
	})
}

// assertCodecReencoded checks that again, the encoding of values decoded from
// data, is data — or, when values hold a NaN that is not Java's, bytes of the
// same length that decode to values with Java's NaN in its place.
func assertCodecReencoded(t *testing.T, data, again []byte, values Row, decode func([]byte) (Row, error)) {
	t.Helper()
	canonical := make(Row, len(values))
	for i, v := range values {
		switch x := v.(type) {
		case float32:
			if x != x {
				v = math.Float32frombits(canonicalNaN32)
			}
		case float64:
			if x != x {
				v = math.Float64frombits(canonicalNaN64)
			}
		}
		canonical[i] = v
	}
	if canonical.Equal(values) {
		if !bytes.Equal(again, data) {
			t.Fatalf("%v decoded from %x re-encodes to %x", values, data, again)
		}
		return
	}
	back, err := decode(again)
	if err != nil || len(again) != len(data) || !back.Equal(canonical) {
		t.Fatalf("%v decoded from %x re-encodes to %x, which decodes to %v, %v", values, data, again, back, err)
	}
}
