package record

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"unicode/utf8"
)

// One field of a compacted row or key (FORMATS.md §2.1): the encoding Fluss's
// CompactedRowWriter and CompactedKeyWriter share, and CompactedRowReader
// reads. Values are the Go types Row documents (value.go).

// Canonical NaNs: Java's Float.NaN and Double.NaN. Go's math.NaN has another
// payload; writing Java's keeps a NaN key equal to the key a Java client
// writes.
const (
	canonicalNaN32 uint32 = 0x7fc00000
	canonicalNaN64 uint64 = 0x7ff8000000000000
)

// maxCompactTimestampPrecision is the largest TIMESTAMP precision stored as
// milliseconds alone (Fluss's TimestampNtz/TimestampLtz.isCompact).
const maxCompactTimestampPrecision = 3

// pow10Int64 holds 10^0..10^18, the bounds of compact decimals.
var pow10Int64 = func() (p [MaxCompactDecimalPrecision + 1]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// compactDigitsFit reports whether v has at most precision (≤ 18) digits.
func compactDigitsFit(v int64, precision int) bool {
	if v < 0 {
		if v == math.MinInt64 {
			return false
		}
		v = -v
	}
	return v < pow10Int64[precision]
}

// appendCompactedField appends the encoding of v, a non-nil value of type t. It
// returns a reason instead when v does not have t's Go type or cannot be
// encoded (see CompactedRowCodec.Append); dst is then returned unchanged.
func appendCompactedField(dst []byte, t DataType, v any) ([]byte, string) {
	switch t.Root {
	case Boolean:
		x, ok := v.(bool)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		if x {
			return append(dst, 1), ""
		}
		return append(dst, 0), ""
	case TinyInt:
		x, ok := v.(int8)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		return append(dst, byte(x)), ""
	case SmallInt:
		x, ok := v.(int16)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		return le.AppendUint16(dst, uint16(x)), ""
	case Int:
		x, ok := v.(int32)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		return appendVarInt32(dst, x), ""
	case Date:
		x, ok := v.(DateValue)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		return appendVarInt32(dst, int32(x)), ""
	case Time:
		x, ok := v.(TimeOfDay)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		if x < 0 || x >= msPerDay {
			return dst, fmt.Sprintf("%d ms is not a time of day (0..%d)", x, msPerDay-1)
		}
		return appendVarInt32(dst, int32(x)), ""
	case BigInt:
		x, ok := v.(int64)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		return appendVarInt64(dst, x), ""
	case Float:
		x, ok := v.(float32)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		bits := math.Float32bits(x)
		if x != x {
			bits = canonicalNaN32
		}
		return le.AppendUint32(dst, bits), ""
	case Double:
		x, ok := v.(float64)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		bits := math.Float64bits(x)
		if x != x {
			bits = canonicalNaN64
		}
		return le.AppendUint64(dst, bits), ""
	case Char, String:
		x, ok := v.(string)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		if !utf8.ValidString(x) {
			return dst, fmt.Sprintf("%q is not valid UTF-8", x)
		}
		if len(x) > math.MaxInt32 {
			return dst, fmt.Sprintf("%d bytes, longer than %d", len(x), math.MaxInt32)
		}
		return append(appendVarInt32(dst, int32(len(x))), x...), ""
	case Binary, Bytes:
		x, ok := v.([]byte)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		if len(x) > math.MaxInt32 {
			return dst, fmt.Sprintf("%d bytes, longer than %d", len(x), math.MaxInt32)
		}
		return append(appendVarInt32(dst, int32(len(x))), x...), ""
	case Decimal:
		x, ok := v.(DecimalValue)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		return appendCompactedDecimal(dst, t, x)
	case Timestamp:
		x, ok := v.(TimestampNTZ)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		return appendTimestampField(dst, t, x.Millis, x.NanoOfMilli)
	case TimestampLTZ:
		x, ok := v.(Instant)
		if !ok {
			return dst, wrongCompactedGoType(t, v)
		}
		return appendTimestampField(dst, t, x.EpochMillis, x.NanoOfMilli)
	}
	return dst, fmt.Sprintf("unsupported column type %s", t)
}

func wrongCompactedGoType(t DataType, v any) string {
	return fmt.Sprintf("a %s column takes a %s, got %T", t.Root, goTypeName(t.Root), v)
}

// appendVarInt32 writes v's 32-bit two's-complement pattern as an unsigned
// LEB128 varint: negative values take 5 bytes.
func appendVarInt32(dst []byte, v int32) []byte {
	return binary.AppendUvarint(dst, uint64(uint32(v)))
}

// appendVarInt64 writes v's 64-bit pattern as an unsigned LEB128 varint:
// negative values take 10 bytes.
func appendVarInt64(dst []byte, v int64) []byte {
	return binary.AppendUvarint(dst, uint64(v))
}

// appendCompactedDecimal writes x, which must have t's precision and scale: a VarInt64
// unscaled value for a compact precision, else the length-prefixed
// big-endian two's complement of minimal length (Java's
// BigInteger.toByteArray), as Fluss's writeDecimal.
func appendCompactedDecimal(dst []byte, t DataType, x DecimalValue) ([]byte, string) {
	if int(x.Precision) != t.Precision || int(x.Scale) != t.Scale {
		return dst, fmt.Sprintf("value %s is a DECIMAL(%d, %d), the column is %s", x, x.Precision, x.Scale, t)
	}
	if x.IsCompact() {
		u, ok := x.UnscaledInt64()
		if !ok || !compactDigitsFit(u, t.Precision) {
			return dst, fmt.Sprintf("value %s has more than %d digits", x, t.Precision)
		}
		return appendVarInt64(dst, u), ""
	}
	if reason := x.digitsProblem(); reason != "" {
		return dst, reason
	}
	b := twosComplement(x.Unscaled())
	return append(appendVarInt32(dst, int32(len(b))), b...), ""
}

// appendTimestampField writes epoch milliseconds, then, above precision 3,
// the nanoseconds within the millisecond; at precision 3 or less those are
// dropped, as Fluss does.
func appendTimestampField(dst []byte, t DataType, millis int64, nanoOfMilli int32) ([]byte, string) {
	if nanoOfMilli < 0 || nanoOfMilli > 999_999 {
		return dst, fmt.Sprintf("nano-of-millisecond %d is out of range 0..999999", nanoOfMilli)
	}
	dst = appendVarInt64(dst, millis)
	if t.Precision > maxCompactTimestampPrecision {
		dst = appendVarInt32(dst, nanoOfMilli)
	}
	return dst, ""
}

// twosComplement is Java's BigInteger.toByteArray: big-endian two's
// complement in ⌊bitlen/8⌋+1 bytes, bitlen excluding the sign bit.
func twosComplement(v *big.Int) []byte {
	if v.Sign() >= 0 {
		return v.FillBytes(make([]byte, v.BitLen()/8+1))
	}
	notV := new(big.Int).Not(v) // -v-1 ≥ 0: v's bits without the sign, inverted
	out := notV.FillBytes(make([]byte, notV.BitLen()/8+1))
	for i := range out {
		out[i] = ^out[i]
	}
	return out
}

// fromTwosComplement inverts twosComplement; b is not empty.
func fromTwosComplement(b []byte) *big.Int {
	v := new(big.Int).SetBytes(b)
	if b[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return v
}

// fieldReader reads fields from b, starting at pos. Every read checks bounds
// and canonical form, so any input gives a value or a reason, never a panic.
type fieldReader struct {
	b   []byte
	pos int
}

func (r *fieldReader) remaining() int { return len(r.b) - r.pos }

// varUint reads an unsigned LEB128 varint of at most maxBits bits, in its
// shortest form (Fluss's writers never write another, and a key must have
// one encoding only).
func (r *fieldReader) varUint(maxBits int) (uint64, string) {
	v, n := binary.Uvarint(r.b[r.pos:])
	switch {
	case n == 0:
		return 0, "varint runs past the end"
	case n < 0:
		return 0, "varint overflows 64 bits"
	case n > 1 && r.b[r.pos+n-1] == 0:
		return 0, "varint is not in its shortest form"
	case maxBits < 64 && v>>maxBits != 0:
		return 0, fmt.Sprintf("varint overflows %d bits", maxBits)
	}
	r.pos += n
	return v, ""
}

func (r *fieldReader) varInt32() (int32, string) {
	v, reason := r.varUint(32)
	return int32(uint32(v)), reason
}

func (r *fieldReader) varInt64() (int64, string) {
	v, reason := r.varUint(64)
	return int64(v), reason
}

// fixed returns the next n bytes (aliasing b).
func (r *fieldReader) fixed(n int) ([]byte, string) {
	if n > r.remaining() {
		return nil, fmt.Sprintf("needs %d bytes, %d left", n, r.remaining())
	}
	out := r.b[r.pos : r.pos+n]
	r.pos += n
	return out, ""
}

// lengthPrefixed returns the bytes after a VarInt32 length (aliasing b).
func (r *fieldReader) lengthPrefixed() ([]byte, string) {
	n, reason := r.varUint(32)
	if reason != "" {
		return nil, "length: " + reason
	}
	if n > uint64(r.remaining()) {
		return nil, fmt.Sprintf("length %d is more than the %d bytes left", int32(uint32(n)), r.remaining())
	}
	return r.fixed(int(n))
}

// field reads one non-null field of type t. Returned values never alias b.
func (r *fieldReader) field(t DataType) (any, string) {
	switch t.Root {
	case Boolean:
		b, reason := r.fixed(1)
		if reason != "" {
			return nil, reason
		}
		if b[0] > 1 {
			return nil, fmt.Sprintf("BOOLEAN byte is %#02x, not 0 or 1", b[0])
		}
		return b[0] == 1, ""
	case TinyInt:
		b, reason := r.fixed(1)
		if reason != "" {
			return nil, reason
		}
		return int8(b[0]), ""
	case SmallInt:
		b, reason := r.fixed(2)
		if reason != "" {
			return nil, reason
		}
		return int16(le.Uint16(b)), ""
	case Int:
		return r.varInt32()
	case Date:
		v, reason := r.varInt32()
		return DateValue(v), reason
	case Time:
		v, reason := r.varInt32()
		if reason != "" {
			return nil, reason
		}
		if v < 0 || v >= msPerDay {
			return nil, fmt.Sprintf("%d ms is not a time of day", v)
		}
		return TimeOfDay(v), ""
	case BigInt:
		return r.varInt64()
	case Float:
		b, reason := r.fixed(4)
		if reason != "" {
			return nil, reason
		}
		return math.Float32frombits(le.Uint32(b)), ""
	case Double:
		b, reason := r.fixed(8)
		if reason != "" {
			return nil, reason
		}
		return math.Float64frombits(le.Uint64(b)), ""
	case Char, String:
		b, reason := r.lengthPrefixed()
		if reason != "" {
			return nil, reason
		}
		if !utf8.Valid(b) {
			return nil, "string is not valid UTF-8"
		}
		return string(b), ""
	case Binary, Bytes:
		b, reason := r.lengthPrefixed()
		if reason != "" {
			return nil, reason
		}
		return append([]byte{}, b...), ""
	case Decimal:
		return r.decimal(t)
	case Timestamp, TimestampLTZ:
		millis, reason := r.varInt64()
		if reason != "" {
			return nil, reason
		}
		var nanos int32
		if t.Precision > maxCompactTimestampPrecision {
			if nanos, reason = r.varInt32(); reason != "" {
				return nil, "nano-of-millisecond: " + reason
			}
			if nanos < 0 || nanos > 999_999 {
				return nil, fmt.Sprintf("nano-of-millisecond %d is not in 0..999999", nanos)
			}
		}
		if t.Root == Timestamp {
			return TimestampNTZ{Millis: millis, NanoOfMilli: nanos}, ""
		}
		return Instant{EpochMillis: millis, NanoOfMilli: nanos}, ""
	}
	return nil, fmt.Sprintf("unsupported column type %s", t)
}

func (r *fieldReader) decimal(t DataType) (any, string) {
	p, s := int32(t.Precision), int32(t.Scale)
	if t.Precision <= MaxCompactDecimalPrecision {
		v, reason := r.varInt64()
		if reason != "" {
			return nil, reason
		}
		if !compactDigitsFit(v, t.Precision) {
			return nil, fmt.Sprintf("unscaled decimal %d has more than %d digits", v, t.Precision)
		}
		return DecimalValue{Precision: p, Scale: s, small: v}, ""
	}
	b, reason := r.lengthPrefixed()
	if reason != "" {
		return nil, reason
	}
	if len(b) == 0 {
		return nil, "decimal has no bytes"
	}
	if len(b) > 1 && (b[0] == 0 && b[1]&0x80 == 0 || b[0] == 0xff && b[1]&0x80 != 0) {
		return nil, "decimal bytes are not in their shortest form"
	}
	if len(b) > 17 { // 10^38 < 2^127: no valid unscaled value needs more
		return nil, fmt.Sprintf("decimal of %d bytes has more than %d digits", len(b), t.Precision)
	}
	d, err := NewDecimal(fromTwosComplement(b), p, s)
	if err != nil {
		return nil, fmt.Sprintf("unscaled decimal %s has more than %d digits", fromTwosComplement(b), t.Precision)
	}
	return d, ""
}
