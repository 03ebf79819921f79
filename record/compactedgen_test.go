package record

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// codecTypes is one type of every root, with the parameter values that change
// the encoding (compact and non-compact DECIMAL and timestamps) and every type
// the vectors use. The fuzz targets pick schemas from it by index, so only
// append to it.
var codecTypes = []string{
	"BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE",
	"DECIMAL(1, 0)", "DECIMAL(5, 2)", "DECIMAL(10, 0)", "DECIMAL(10, 2)", "DECIMAL(12, 2)",
	"DECIMAL(18, 0)", "DECIMAL(18, 4)", "DECIMAL(18, 18)", "DECIMAL(19, 2)", "DECIMAL(20, 0)",
	"DECIMAL(38, 10)", "DECIMAL(38, 0)", "DECIMAL(38, 38)",
	"CHAR(1)", "CHAR(2)", "STRING", "BINARY(1)", "BINARY(4)", "BINARY(20)", "BYTES",
	"DATE", "TIME(0)", "TIME(3)", "TIME(9)",
	"TIMESTAMP(0)", "TIMESTAMP(1)", "TIMESTAMP(3)", "TIMESTAMP(4)", "TIMESTAMP(5)", "TIMESTAMP(6)", "TIMESTAMP(9)",
	"TIMESTAMP_LTZ(0)", "TIMESTAMP_LTZ(1)", "TIMESTAMP_LTZ(3)", "TIMESTAMP_LTZ(4)", "TIMESTAMP_LTZ(5)",
	"TIMESTAMP_LTZ(6)", "TIMESTAMP_LTZ(9)",
	"INT NOT NULL", "BIGINT NOT NULL", "STRING NOT NULL",
}

func parseCodecTypes(t testing.TB) []DataType {
	t.Helper()
	out := make([]DataType, len(codecTypes))
	for i, s := range codecTypes {
		dt, err := ParseDataType(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out[i] = dt
	}
	return out
}

// codecEdgeValues returns the boundary values of t: extremes, zero, empty, and
// the values whose encodings change length.
func codecEdgeValues(t testing.TB, dt DataType) []any {
	t.Helper()
	dec := func(unscaled *big.Int) any {
		d, err := NewDecimal(unscaled, int32(dt.Precision), int32(dt.Scale))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ts := func(millis int64, nanos int32) any {
		if dt.Precision <= maxCompactTimestampPrecision {
			nanos = 0
		}
		if dt.Root == Timestamp {
			return TimestampNTZ{Millis: millis, NanoOfMilli: nanos}
		}
		return Instant{EpochMillis: millis, NanoOfMilli: nanos}
	}
	switch dt.Root {
	case Boolean:
		return []any{true, false}
	case TinyInt:
		return []any{int8(0), int8(1), int8(-1), int8(math.MaxInt8), int8(math.MinInt8)}
	case SmallInt:
		return []any{int16(0), int16(255), int16(256), int16(-1), int16(math.MaxInt16), int16(math.MinInt16)}
	case Int:
		return []any{int32(0), int32(127), int32(128), int32(-1), int32(math.MaxInt32), int32(math.MinInt32)}
	case BigInt:
		return []any{int64(0), int64(127), int64(128), int64(-1), int64(math.MaxInt64), int64(math.MinInt64)}
	case Float:
		return []any{float32(0), float32(math.Copysign(0, -1)), float32(1.5), float32(math.MaxFloat32),
			float32(math.SmallestNonzeroFloat32), float32(math.Inf(1)), float32(math.Inf(-1)),
			math.Float32frombits(canonicalNaN32)}
	case Double:
		return []any{0.0, math.Copysign(0, -1), 15.21, math.MaxFloat64, math.SmallestNonzeroFloat64,
			math.Inf(1), math.Inf(-1), math.Float64frombits(canonicalNaN64)}
	case Decimal:
		maxU := new(big.Int).Sub(pow10Big(dt.Precision), big.NewInt(1))
		out := []any{dec(big.NewInt(0)), dec(big.NewInt(1)), dec(big.NewInt(-1)), dec(maxU), dec(new(big.Int).Neg(maxU))}
		if dt.Precision >= 3 { // ±128: two's complement needs a sign byte for one, not the other
			out = append(out, dec(big.NewInt(128)), dec(big.NewInt(-128)))
		}
		return out
	case Char, String:
		return []any{"", "a", "héllo", "日本語", "😀", strings.Repeat("x", 200)}
	case Binary, Bytes:
		return []any{[]byte{}, []byte{0}, []byte{0xde, 0xad, 0xbe, 0xef}, make([]byte, 300)}
	case Date:
		return []any{DateValue(0), DateValue(-1), MinDate, MaxDate, DateValue(math.MinInt32), DateValue(math.MaxInt32)}
	case Time:
		return []any{TimeOfDay(0), TimeOfDay(1), TimeOfDay(msPerDay - 1)}
	case Timestamp, TimestampLTZ:
		return []any{ts(0, 0), ts(-1, 999_999), ts(1698235273182, 123_456), ts(math.MaxInt64, 999_999), ts(math.MinInt64, 0)}
	}
	t.Fatalf("no edge values for %s", dt)
	return nil
}

// codecRandomValue returns a random non-null value of dt that survives a round
// trip unchanged (so no sub-millisecond digits at timestamp precision ≤ 3,
// and only Java's NaN).
func codecRandomValue(rng *rand.Rand, dt DataType) any {
	switch dt.Root {
	case Boolean:
		return rng.IntN(2) == 1
	case TinyInt:
		return int8(rng.Uint32())
	case SmallInt:
		return int16(rng.Uint32())
	case Int:
		return int32(codecRandomBits(rng, 32))
	case BigInt:
		return int64(codecRandomBits(rng, 64))
	case Float:
		f := math.Float32frombits(rng.Uint32())
		if f != f {
			f = math.Float32frombits(canonicalNaN32)
		}
		return f
	case Double:
		f := math.Float64frombits(rng.Uint64())
		if f != f {
			f = math.Float64frombits(canonicalNaN64)
		}
		return f
	case Decimal:
		digits := make([]byte, 1+rng.IntN(dt.Precision))
		for i := range digits {
			digits[i] = byte('0' + rng.IntN(10))
		}
		u, _ := new(big.Int).SetString(string(digits), 10)
		if rng.IntN(2) == 0 {
			u.Neg(u)
		}
		d, err := NewDecimal(u, int32(dt.Precision), int32(dt.Scale))
		if err != nil {
			panic(err)
		}
		return d
	case Char, String:
		alphabet := []rune("ab-_ 0é日😀\u0000")
		r := make([]rune, rng.IntN(12))
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	case Binary, Bytes:
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	case Date:
		return DateValue(codecRandomBits(rng, 32))
	case Time:
		return TimeOfDay(rng.IntN(msPerDay))
	case Timestamp, TimestampLTZ:
		millis := int64(codecRandomBits(rng, 64))
		var nanos int32
		if dt.Precision > maxCompactTimestampPrecision {
			nanos = rng.Int32N(1_000_000)
		}
		if dt.Root == Timestamp {
			return TimestampNTZ{Millis: millis, NanoOfMilli: nanos}
		}
		return Instant{EpochMillis: millis, NanoOfMilli: nanos}
	}
	panic("no random values for " + dt.String())
}

// codecRandomBits returns a random 64-bit pattern whose magnitude is spread over
// every varint length: a random number of low bits, sometimes negated.
func codecRandomBits(rng *rand.Rand, max int) uint64 {
	v := rng.Uint64() >> (64 - 1 - rng.IntN(max))
	if rng.IntN(4) == 0 {
		v = -v
	}
	return v
}

// codecRandomColumns returns n random columns of codecTypes, named c0, c1, ...
func codecRandomColumns(rng *rand.Rand, types []DataType, n int) []Column {
	cols := make([]Column, n)
	for i := range cols {
		cols[i] = Column{Name: "c" + string(rune('a'+i%26)) + strings.Repeat("_", i/26), Type: types[rng.IntN(len(types))]}
	}
	return cols
}

// codecRandomRow returns a row of cols, with nulls in nullable columns one time
// in nullOneIn (never when nullOneIn is 0).
func codecRandomRow(rng *rand.Rand, cols []Column, nullOneIn int) Row {
	row := make(Row, len(cols))
	for i, c := range cols {
		if c.Type.Nullable && nullOneIn > 0 && rng.IntN(nullOneIn) == 0 {
			continue
		}
		row[i] = codecRandomValue(rng, c.Type)
	}
	return row
}
