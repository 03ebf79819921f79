package record

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// codecVectors are the sections of testdata/fluss-vectors.json (produced by
// Fluss's own Java classes) that the bucketing, key, row and KV batch codecs
// reproduce. FORMATS.md §6 says how to read them.
type codecVectors struct {
	Bucketing []struct {
		KeyHex     string `json:"key_hex"`
		NumBuckets int    `json:"num_buckets"`
		Hash       int32  `json:"hash"`
		Mixed      uint32 `json:"mixed"`
		Bucket     *int   `json:"bucket"`
		Error      string `json:"error"`
		Note       string `json:"note"`
	} `json:"bucketing"`
	CompactedKey []struct {
		Types  []string          `json:"types"`
		Values []json.RawMessage `json:"values"`
		Hex    *string           `json:"hex"`
		Error  string            `json:"error"`
	} `json:"compacted_key"`
	CompactedRow []struct {
		Types      []string          `json:"types"`
		Values     []json.RawMessage `json:"values"`
		Hex        string            `json:"hex"`
		SchemaID   int16             `json:"schema_id"`
		KvValueHex string            `json:"kv_value_hex"`
	} `json:"compacted_row"`
	BucketOfRow []struct {
		Types         []string          `json:"types"`
		Names         []string          `json:"names"`
		Values        []json.RawMessage `json:"values"`
		BucketKey     []string          `json:"bucket_key"`
		NumBuckets    int               `json:"num_buckets"`
		BucketKeyHex  string            `json:"bucket_key_hex"`
		Bucket        int               `json:"bucket"`
		PrimaryKey    []string          `json:"primary_key"`
		PrimaryKeyHex string            `json:"primary_key_hex"`
	} `json:"bucket_of_row"`
	KvBatch []struct {
		Magic         int8     `json:"magic"`
		SchemaID      int16    `json:"schema_id"`
		WriterID      int64    `json:"writer_id"`
		BatchSequence int32    `json:"batch_sequence"`
		Types         []string `json:"types"`
		PrimaryKey    []string `json:"primary_key"`
		Records       []struct {
			KeyHex string            `json:"key_hex"`
			Values []json.RawMessage `json:"values"`
			RowHex *string           `json:"row_hex"`
		} `json:"records"`
		HeaderSize int    `json:"header_size"`
		HeaderHex  string `json:"header_hex"`
		Hex        string `json:"hex"`
		Note       string `json:"note"`
	} `json:"kv_batch"`
}

func loadCodecVectors(t testing.TB) codecVectors {
	t.Helper()
	data, err := os.ReadFile("testdata/fluss-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v codecVectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Bucketing) == 0 || len(v.CompactedKey) == 0 || len(v.CompactedRow) == 0 || len(v.BucketOfRow) == 0 || len(v.KvBatch) == 0 {
		t.Fatal("a vector section is empty")
	}
	return v
}

// codecVectorColumns returns columns f0, f1, ... (Fluss's RowType.of names) of
// the given type strings, or the given names.
func codecVectorColumns(t testing.TB, types []string, names []string) []Column {
	t.Helper()
	cols := make([]Column, len(types))
	for i, s := range types {
		dt, err := ParseDataType(s)
		if err != nil {
			t.Fatalf("type %q: %v", s, err)
		}
		cols[i] = Column{Name: "f" + strconv.Itoa(i), Type: dt}
		if names != nil {
			cols[i].Name = names[i]
		}
	}
	return cols
}

// codecVectorRow reads a vector's values (FORMATS.md §6.1) as a Row.
func codecVectorRow(t testing.TB, cols []Column, raw []json.RawMessage) Row {
	t.Helper()
	if len(raw) != len(cols) {
		t.Fatalf("%d values for %d columns", len(raw), len(cols))
	}
	row := make(Row, len(raw))
	for i, r := range raw {
		v, err := codecVectorValue(cols[i].Type, r)
		if err != nil {
			t.Fatalf("value %d (%s) %s: %v", i, cols[i].Type, r, err)
		}
		row[i] = v
	}
	return row
}

func codecVectorValue(dt DataType, raw json.RawMessage) (any, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	num := func(bits int) (int64, error) {
		n, ok := v.(json.Number)
		if !ok {
			return 0, fmt.Errorf("want a number, got %T", v)
		}
		return strconv.ParseInt(string(n), 10, bits)
	}
	str := func() (string, error) {
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("want a string, got %T", v)
		}
		return s, nil
	}
	switch dt.Root {
	case Boolean:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("want a bool, got %T", v)
		}
		return b, nil
	case TinyInt:
		n, err := num(8)
		return int8(n), err
	case SmallInt:
		n, err := num(16)
		return int16(n), err
	case Int:
		n, err := num(32)
		return int32(n), err
	case Date:
		n, err := num(32)
		return DateValue(n), err
	case Time:
		n, err := num(32)
		return TimeOfDay(n), err
	case BigInt:
		s, err := str()
		if err != nil {
			return nil, err
		}
		return strconv.ParseInt(s, 10, 64)
	case Float:
		s, err := str()
		if err != nil {
			return nil, err
		}
		f, err := strconv.ParseFloat(s, 32)
		if f != f {
			return math.Float32frombits(canonicalNaN32), err // Java's Float.NaN
		}
		return float32(f), err
	case Double:
		s, err := str()
		if err != nil {
			return nil, err
		}
		f, err := strconv.ParseFloat(s, 64)
		if f != f {
			return math.Float64frombits(canonicalNaN64), err // Java's Double.NaN
		}
		return f, err
	case Decimal:
		s, err := str()
		if err != nil {
			return nil, err
		}
		return ParseDecimal(s, int32(dt.Precision), int32(dt.Scale))
	case Char, String:
		return str()
	case Binary, Bytes:
		s, err := str()
		if err != nil {
			return nil, err
		}
		return hex.DecodeString(s)
	case Timestamp, TimestampLTZ:
		var ts struct {
			Millis *int64 `json:"millis"`
			Nanos  *int32 `json:"nanos"`
		}
		if err := json.Unmarshal(raw, &ts); err != nil || ts.Millis == nil || ts.Nanos == nil {
			return nil, fmt.Errorf("want {millis, nanos}: %v", err)
		}
		if dt.Root == Timestamp {
			return TimestampNTZ{Millis: *ts.Millis, NanoOfMilli: *ts.Nanos}, nil
		}
		return Instant{EpochMillis: *ts.Millis, NanoOfMilli: *ts.Nanos}, nil
	}
	return nil, fmt.Errorf("unsupported type %s", dt)
}

// codecStoredRow is what decoding the encoding of row gives back: timestamps of
// precision ≤ 3 lose their sub-millisecond digits, as in Fluss.
func codecStoredRow(cols []Column, row Row) Row {
	out := append(Row(nil), row...)
	for i, c := range cols {
		if c.Type.Precision > maxCompactTimestampPrecision {
			continue
		}
		switch v := out[i].(type) {
		case TimestampNTZ:
			v.NanoOfMilli = 0
			out[i] = v
		case Instant:
			v.NanoOfMilli = 0
			out[i] = v
		}
	}
	return out
}

// codecVectorName is a subtest name made of a vector's types and values.
func codecVectorName(i int, types []string, values []json.RawMessage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%03d/%s=", i, strings.Join(types, ","))
	for j, v := range values {
		if j > 0 {
			b.WriteByte(',')
		}
		b.Write(v)
	}
	name := b.String()
	if len(name) > 80 {
		name = name[:80]
	}
	return name
}

func codecHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
