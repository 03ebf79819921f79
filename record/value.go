package record

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Row is one row of a table: one value per column, in column order; nil is
// NULL. The Go type of a value is fixed by its column's type root, following
// Fluss's internal data structures so that Fluss's binary codecs map one to
// one:
//
//	BOOLEAN        bool
//	TINYINT        int8
//	SMALLINT       int16
//	INT            int32
//	BIGINT         int64
//	FLOAT          float32
//	DOUBLE         float64
//	DECIMAL(p, s)  DecimalValue, with Precision p and Scale s (Fluss's Decimal)
//	CHAR(n), STRING     string (valid UTF-8; Fluss's BinaryString)
//	BINARY(n), BYTES    []byte
//	DATE           DateValue: days since 1970-01-01
//	TIME(p)        TimeOfDay: milliseconds of the day
//	TIMESTAMP(p)   TimestampNTZ (Fluss's TimestampNtz)
//	TIMESTAMP_LTZ(p)    Instant (Fluss's TimestampLtz)
//
// CheckValue and Schema.CheckRow say whether a row fits a schema; encoders
// may assume a row they are given passed CheckRow. Rows from the decoders
// always do.
type Row []any

// Equal reports whether r and o hold the same values: the same Go types and
// equal values; floats compare by their bits (so NaN equals the same NaN and
// -0 differs from 0), []byte by content (nil equals empty), decimals by
// DecimalValue.Equal.
func (r Row) Equal(o Row) bool {
	if len(r) != len(o) {
		return false
	}
	for i := range r {
		if !ValueEqual(r[i], o[i]) {
			return false
		}
	}
	return true
}

// ValueEqual reports whether two values are equal in the sense of Row.Equal.
func ValueEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case float32:
		y, ok := b.(float32)
		return ok && math.Float32bits(x) == math.Float32bits(y)
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case DecimalValue:
		y, ok := b.(DecimalValue)
		return ok && x.Equal(y)
	case bool, int8, int16, int32, int64, string, DateValue, TimeOfDay, TimestampNTZ, Instant:
		return a == b
	}
	return false
}

// MaxCompactDecimalPrecision is the largest precision whose unscaled values
// always fit an int64: Fluss stores such decimals "compact" (a long) and
// larger ones as a BigDecimal, and its binary codecs differ accordingly.
const MaxCompactDecimalPrecision = 18

// DecimalValue is a DECIMAL(p, s) value: Unscaled × 10^-Scale, with at most
// Precision digits in the unscaled value (Fluss's Decimal). The zero
// DecimalValue has precision 0 and is not a value of any column; build values
// with NewDecimal, DecimalFromInt64 or ParseDecimal.
//
// It is an immutable value: copies share nothing that changes. Compare with
// Equal, not ==.
type DecimalValue struct {
	// Precision and Scale are the column type's: a value of a DECIMAL(10, 2)
	// column has Precision 10 and Scale 2.
	Precision, Scale int32
	small            int64
	big              *big.Int // the unscaled value when it does not fit small; never modified
}

var bigTen = big.NewInt(10)

// pow10Big returns 10^n.
func pow10Big(n int) *big.Int {
	return new(big.Int).Exp(bigTen, big.NewInt(int64(n)), nil)
}

// decimalTypeProblem checks precision and scale as DataType.Validate does.
func decimalTypeProblem(precision, scale int32) string {
	if precision < 1 || precision > MaxDecimalPrecision {
		return fmt.Sprintf("DECIMAL precision must be between 1 and %d, got %d", MaxDecimalPrecision, precision)
	}
	if scale < 0 || scale > precision {
		return fmt.Sprintf("DECIMAL scale must be between 0 and the precision %d, got %d", precision, scale)
	}
	return ""
}

// NewDecimal returns unscaled × 10^-scale as a DECIMAL(precision, scale)
// value. It fails when the type is invalid or the unscaled value has more
// than precision digits. unscaled is not retained.
func NewDecimal(unscaled *big.Int, precision, scale int32) (DecimalValue, error) {
	if reason := decimalTypeProblem(precision, scale); reason != "" {
		return DecimalValue{}, &InvalidError{Field: "value", Reason: reason}
	}
	d := DecimalValue{Precision: precision, Scale: scale}
	if unscaled.IsInt64() {
		d.small = unscaled.Int64()
	} else {
		d.big = new(big.Int).Set(unscaled)
	}
	if reason := d.digitsProblem(); reason != "" {
		return DecimalValue{}, &InvalidError{Field: "value", Reason: reason}
	}
	return d, nil
}

// DecimalFromInt64 is NewDecimal for an unscaled value that fits an int64.
func DecimalFromInt64(unscaled int64, precision, scale int32) (DecimalValue, error) {
	return NewDecimal(big.NewInt(unscaled), precision, scale)
}

// ParseDecimal reads a decimal number ("123.45", "-0.5", "1e3", "+7") as a
// DECIMAL(precision, scale) value. It never rounds: a value with non-zero
// digits beyond scale, or with more than precision-scale integer digits, is
// an error that says so.
func ParseDecimal(s string, precision, scale int32) (DecimalValue, error) {
	if reason := decimalTypeProblem(precision, scale); reason != "" {
		return DecimalValue{}, &InvalidError{Field: "value", Reason: reason}
	}
	d, reason := parseDecimal(s, precision, scale)
	if reason != "" {
		return DecimalValue{}, &InvalidError{Field: "value", Reason: reason}
	}
	return d, nil
}

// maxDecimalExponent bounds the exponent ParseDecimal accepts, so that
// "1e999999999" fails fast instead of building a huge number.
const maxDecimalExponent = 1000

func parseDecimal(s string, precision, scale int32) (DecimalValue, string) {
	typ := fmt.Sprintf("DECIMAL(%d, %d)", precision, scale)
	bad := func() (DecimalValue, string) {
		return DecimalValue{}, fmt.Sprintf("%q is not a decimal number", s)
	}
	i := 0
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	var digits strings.Builder
	intDigits, fracDigits := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		digits.WriteByte(s[i])
		i++
		intDigits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			digits.WriteByte(s[i])
			i++
			fracDigits++
		}
	}
	if intDigits+fracDigits == 0 {
		return bad()
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		start := i
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) {
			return bad()
		}
		for j := i; j < len(s); j++ {
			if s[j] < '0' || s[j] > '9' {
				return bad()
			}
		}
		e, err := strconv.Atoi(s[start:])
		if err != nil || e > maxDecimalExponent || e < -maxDecimalExponent {
			return DecimalValue{}, fmt.Sprintf("%q: exponent out of range for %s", s, typ)
		}
		exp, i = e, len(s)
	}
	if i != len(s) {
		return bad()
	}
	m, ok := new(big.Int).SetString(digits.String(), 10)
	if !ok {
		return bad()
	}
	// value = m × 10^(exp-fracDigits); unscaled = m × 10^(scale+exp-fracDigits).
	shift := int(scale) + exp - fracDigits
	switch {
	case shift > 0:
		if m.Sign() != 0 {
			if m.BitLen()+4*shift > 4*(MaxDecimalPrecision+2) { // surely too many digits
				return DecimalValue{}, fmt.Sprintf("%q has too many integer digits for %s (at most %d)", s, typ, precision-scale)
			}
			m.Mul(m, pow10Big(shift))
		}
	case shift < 0:
		if m.Sign() != 0 {
			q, r := new(big.Int).QuoRem(m, pow10Big(-shift), new(big.Int))
			if r.Sign() != 0 {
				return DecimalValue{}, fmt.Sprintf("%q has more than %d fraction digits, which %s holds; round it first", s, scale, typ)
			}
			m = q
		}
	}
	if neg {
		m.Neg(m)
	}
	d := DecimalValue{Precision: precision, Scale: scale}
	if m.IsInt64() {
		d.small = m.Int64()
	} else {
		d.big = m
	}
	if d.digitsProblem() != "" {
		return DecimalValue{}, fmt.Sprintf("%q has too many integer digits for %s (at most %d)", s, typ, precision-scale)
	}
	return d, ""
}

// digitsProblem says whether the unscaled value has more than Precision digits.
func (d DecimalValue) digitsProblem() string {
	if d.Precision < 1 || d.Precision > MaxDecimalPrecision {
		return fmt.Sprintf("DECIMAL precision must be between 1 and %d, got %d", MaxDecimalPrecision, d.Precision)
	}
	if d.big == nil && (d.Precision > MaxCompactDecimalPrecision || compactDigitsFit(d.small, int(d.Precision))) {
		return "" // |int64| < 10^19, or checked without allocating
	}
	u := d.Unscaled()
	if u.CmpAbs(pow10Big(int(d.Precision))) >= 0 {
		return fmt.Sprintf("%s has %d digits, more than the precision %d", d, len(u.Text(10))-boolInt(u.Sign() < 0), d.Precision)
	}
	return ""
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Unscaled returns the unscaled value (value × 10^Scale) as a new big.Int
// the caller may modify.
func (d DecimalValue) Unscaled() *big.Int {
	if d.big != nil {
		return new(big.Int).Set(d.big)
	}
	return big.NewInt(d.small)
}

// UnscaledInt64 returns the unscaled value when it fits an int64, which it
// always does when Precision <= MaxCompactDecimalPrecision.
func (d DecimalValue) UnscaledInt64() (int64, bool) {
	if d.big != nil {
		return 0, false
	}
	return d.small, true
}

// IsCompact reports whether Fluss holds the value as a long: Precision <=
// MaxCompactDecimalPrecision. It depends on the type, never on the value.
func (d DecimalValue) IsCompact() bool { return d.Precision <= MaxCompactDecimalPrecision }

// Sign returns -1, 0 or +1.
func (d DecimalValue) Sign() int {
	if d.big != nil {
		return d.big.Sign()
	}
	switch {
	case d.small < 0:
		return -1
	case d.small > 0:
		return 1
	}
	return 0
}

// Equal reports whether d and o have the same precision, scale and value.
func (d DecimalValue) Equal(o DecimalValue) bool {
	if d.Precision != o.Precision || d.Scale != o.Scale {
		return false
	}
	if d.big == nil && o.big == nil {
		return d.small == o.small
	}
	return d.Unscaled().Cmp(o.Unscaled()) == 0
}

// String returns the value in plain notation with exactly Scale fraction
// digits: "123.45", "-0.50", "7".
func (d DecimalValue) String() string {
	var digits string
	if d.big != nil {
		digits = new(big.Int).Abs(d.big).Text(10)
	} else if d.small < 0 {
		digits = strconv.FormatUint(-uint64(d.small), 10)
	} else {
		digits = strconv.FormatInt(d.small, 10)
	}
	var b strings.Builder
	if d.Sign() < 0 {
		b.WriteByte('-')
	}
	scale := int(max(d.Scale, 0))
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	b.WriteString(digits[:len(digits)-scale])
	if scale > 0 {
		b.WriteByte('.')
		b.WriteString(digits[len(digits)-scale:])
	}
	return b.String()
}

// DateValue is a DATE value: days since 1970-01-01 (negative before).
type DateValue int32

// Date range: 0000-01-01 to 9999-12-31, Flink's and Fluss's SQL range.
const (
	MinDate  DateValue = -719528  // 0000-01-01
	MaxDate  DateValue = 2932896  // 9999-12-31
	msPerDay           = 86400000 // milliseconds in a day
)

// DateOf returns the DATE value of a civil date.
func DateOf(year int, month time.Month, day int) DateValue {
	return DateValue(floorDiv(time.Date(year, month, day, 0, 0, 0, 0, time.UTC).Unix(), 86400))
}

// Time returns the date as midnight UTC.
func (d DateValue) Time() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// String returns the date as "2026-11-30".
func (d DateValue) String() string { return string(appendDate(nil, int64(d))) }

// TimeOfDay is a TIME value: milliseconds of the day, 0 to 86 399 999. As in
// Fluss, sub-millisecond digits are not representable, whatever the
// precision of the column.
type TimeOfDay int32

// TimeOfDayOf returns the TIME value of a clock time.
func TimeOfDayOf(hour, minute, second, milli int) TimeOfDay {
	return TimeOfDay(((hour*60+minute)*60+second)*1000 + milli)
}

// String returns the time as "13:45:00", or "13:45:00.123" when it has
// milliseconds.
func (t TimeOfDay) String() string {
	p := 0
	if t%1000 != 0 {
		p = 3
	}
	return string(appendTimeOfDay(nil, int64(t)*1e6, p))
}

// TimestampNTZ is a TIMESTAMP value (Fluss's TimestampNtz): a date and time
// without a time zone, as Millis since 1970-01-01T00:00 plus NanoOfMilli
// (0 to 999 999).
type TimestampNTZ struct {
	Millis      int64
	NanoOfMilli int32
}

// TimestampNTZOf returns the wall-clock date and time of t (its zone is
// dropped, not converted) as a TIMESTAMP value.
func TimestampNTZOf(t time.Time) TimestampNTZ {
	y, mo, d := t.Date()
	wall := time.Date(y, mo, d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	m, n := splitNanos(wall)
	return TimestampNTZ{m, n}
}

// Time returns the timestamp as a time.Time in UTC.
func (t TimestampNTZ) Time() time.Time { return joinNanos(t.Millis, t.NanoOfMilli) }

// String returns "2026-11-30T13:45:00.123456789" with trailing zero groups
// of the fraction dropped (milli, micro or nano digits).
func (t TimestampNTZ) String() string {
	return string(appendTimestamp(nil, t.Millis, t.NanoOfMilli, naturalPrecision(t.Millis, t.NanoOfMilli), false))
}

// Instant is a TIMESTAMP_LTZ value (Fluss's TimestampLtz): a point on the
// time line, as EpochMillis since 1970-01-01T00:00Z plus NanoOfMilli (0 to
// 999 999). It has no zone; it is shown in UTC.
type Instant struct {
	EpochMillis int64
	NanoOfMilli int32
}

// InstantOf returns t as a TIMESTAMP_LTZ value.
func InstantOf(t time.Time) Instant {
	m, n := splitNanos(t)
	return Instant{m, n}
}

// Time returns the instant as a time.Time in UTC.
func (t Instant) Time() time.Time { return joinNanos(t.EpochMillis, t.NanoOfMilli) }

// String returns RFC 3339 in UTC, "2026-11-30T13:45:00.123Z", with trailing
// zero groups of the fraction dropped.
func (t Instant) String() string {
	return string(appendTimestamp(nil, t.EpochMillis, t.NanoOfMilli, naturalPrecision(t.EpochMillis, t.NanoOfMilli), true))
}

func splitNanos(t time.Time) (int64, int32) {
	sec := t.Unix()
	ns := int64(t.Nanosecond())
	return sec*1000 + ns/1e6, int32(ns % 1e6)
}

func joinNanos(millis int64, nano int32) time.Time {
	return time.Unix(floorDiv(millis, 1000), floorMod(millis, 1000)*1e6+int64(nano)).UTC()
}

// naturalPrecision is the shortest of 0, 3, 6, 9 fraction digits that shows
// the value exactly.
func naturalPrecision(millis int64, nano int32) int {
	switch {
	case nano%1000 != 0:
		return 9
	case nano != 0:
		return 6
	case floorMod(millis, 1000) != 0:
		return 3
	}
	return 0
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// Timestamp ranges: years 0000 to 9999 for every precision, and for
// precisions 7 to 9 (stored in Arrow as int64 nanoseconds) also the range of
// an int64 of nanoseconds, about 1677-09-21 to 2262-04-11.
const (
	minTimestampMillis = int64(MinDate) * msPerDay
	maxTimestampMillis = (int64(MaxDate)+1)*msPerDay - 1
	minNanoMillis      = -9223372036855 // floorDiv(MinInt64, 1e6); nano-of-milli >= 224192 there
	maxNanoMillis      = 9223372036854  // MaxInt64 / 1e6; nano-of-milli <= 775807 there
)

// timestampProblem checks a TIMESTAMP or TIMESTAMP_LTZ value against the
// column's precision.
func timestampProblem(t DataType, millis int64, nano int32) string {
	if nano < 0 || nano > 999999 {
		return fmt.Sprintf("nano-of-millisecond %d is out of range 0..999999", nano)
	}
	if millis < minTimestampMillis || millis > maxTimestampMillis {
		return fmt.Sprintf("%d ms since the epoch is outside years 0000..9999", millis)
	}
	if t.Precision >= 7 && (millis < minNanoMillis || millis == minNanoMillis && nano < 224192 ||
		millis > maxNanoMillis || millis == maxNanoMillis && nano > 775807) {
		return fmt.Sprintf("%s holds nanoseconds in an int64: only 1677-09-21T00:12:43.145224192 to 2262-04-11T23:47:16.854775807", t.Root)
	}
	if digits := naturalDigits(millis, nano); digits > t.Precision {
		return fmt.Sprintf("%s has %d fraction digits, more than the precision %d of %s; round or truncate it first",
			string(appendTimestamp(nil, millis, nano, 9, t.Root == TimestampLTZ)), digits, t.Precision, t)
	}
	return ""
}

// naturalDigits is the number of fraction-of-second digits needed to show a
// timestamp exactly (0..9).
func naturalDigits(millis int64, nano int32) int {
	ns := floorMod(millis, 1000)*1e6 + int64(nano)
	if ns == 0 {
		return 0
	}
	d := 9
	for ns%10 == 0 {
		ns /= 10
		d--
	}
	return d
}

// CheckValue reports whether v is a value of type t: the Go type its root
// takes (see Row), within range, and nil only when t is nullable. The checks
// beyond the Go type: CHAR(n) at most n characters and STRING valid UTF-8;
// BINARY(n) exactly n bytes; DECIMAL with t's precision and scale; DATE and
// timestamps within years 0000..9999 (TIMESTAMP(7..9) and TIMESTAMP_LTZ(7..9)
// within int64 nanoseconds); TIME within a day; TIME, TIMESTAMP and
// TIMESTAMP_LTZ without fraction digits beyond t's precision (nothing is
// rounded silently). The error is an *InvalidError with Field "value".
func CheckValue(t DataType, v any) error {
	if reason := valueProblem(t, v); reason != "" {
		return &InvalidError{Field: "value", Reason: reason}
	}
	return nil
}

// CheckRow reports whether r is a row of s: one value per column, each
// passing CheckValue. Every problem is reported at once, as errors.Join of
// *InvalidError whose Field is the column's name ("row" for a wrong count).
func (s Schema) CheckRow(r Row) error {
	var p problems
	if len(r) != len(s.Columns) {
		p.add("row", "has %d values, the schema has %d columns (%s)", len(r), len(s.Columns), strings.Join(s.ColumnNames(), ", "))
		return p.err()
	}
	for i, c := range s.Columns {
		if reason := valueProblem(c.Type, r[i]); reason != "" {
			p.add(c.Name, "%s", reason)
		}
	}
	return p.err()
}

// goTypeName names the Go type a root's values have.
func goTypeName(r TypeRoot) string {
	switch r {
	case Boolean:
		return "bool"
	case TinyInt:
		return "int8"
	case SmallInt:
		return "int16"
	case Int:
		return "int32"
	case BigInt:
		return "int64"
	case Float:
		return "float32"
	case Double:
		return "float64"
	case Decimal:
		return "record.DecimalValue"
	case Char, String:
		return "string"
	case Binary, Bytes:
		return "[]byte"
	case Date:
		return "record.DateValue"
	case Time:
		return "record.TimeOfDay"
	case Timestamp:
		return "record.TimestampNTZ"
	case TimestampLTZ:
		return "record.Instant"
	}
	return "?"
}

func valueProblem(t DataType, v any) string {
	if v == nil {
		if !t.Nullable {
			return fmt.Sprintf("NULL in a NOT NULL column of type %s", t)
		}
		return ""
	}
	wrong := func() string {
		return fmt.Sprintf("a %s column takes a %s, got %T", t.Root, goTypeName(t.Root), v)
	}
	switch t.Root {
	case Boolean:
		if _, ok := v.(bool); !ok {
			return wrong()
		}
	case TinyInt:
		if _, ok := v.(int8); !ok {
			return wrong()
		}
	case SmallInt:
		if _, ok := v.(int16); !ok {
			return wrong()
		}
	case Int:
		if _, ok := v.(int32); !ok {
			return wrong()
		}
	case BigInt:
		if _, ok := v.(int64); !ok {
			return wrong()
		}
	case Float:
		if _, ok := v.(float32); !ok {
			return wrong()
		}
	case Double:
		if _, ok := v.(float64); !ok {
			return wrong()
		}
	case Decimal:
		d, ok := v.(DecimalValue)
		if !ok {
			return wrong()
		}
		if int(d.Precision) != t.Precision || int(d.Scale) != t.Scale {
			return fmt.Sprintf("value %s is a DECIMAL(%d, %d), the column is %s; build it with ParseDecimal(s, %d, %d)",
				d, d.Precision, d.Scale, t, t.Precision, t.Scale)
		}
		if reason := d.digitsProblem(); reason != "" {
			return reason
		}
	case Char, String:
		s, ok := v.(string)
		if !ok {
			return wrong()
		}
		if !utf8.ValidString(s) {
			return fmt.Sprintf("%q is not valid UTF-8", s)
		}
		if t.Root == Char {
			if n := utf8.RuneCountInString(s); n > t.Length {
				return fmt.Sprintf("%q has %d characters, more than %s holds", s, n, t)
			}
		}
	case Binary, Bytes:
		b, ok := v.([]byte)
		if !ok {
			return wrong()
		}
		if t.Root == Binary && len(b) != t.Length {
			return fmt.Sprintf("%d bytes; %s takes exactly %d", len(b), t, t.Length)
		}
	case Date:
		d, ok := v.(DateValue)
		if !ok {
			return wrong()
		}
		if d < MinDate || d > MaxDate {
			return fmt.Sprintf("%d days since 1970-01-01 is outside years 0000..9999", d)
		}
	case Time:
		tod, ok := v.(TimeOfDay)
		if !ok {
			return wrong()
		}
		if tod < 0 || tod >= msPerDay {
			return fmt.Sprintf("%d ms is not a time of day (0..86399999)", tod)
		}
		if digits := naturalDigits(int64(tod), 0); digits > t.Precision {
			return fmt.Sprintf("%s has %d fraction digits, more than the precision %d of %s; round or truncate it first",
				tod, digits, t.Precision, t)
		}
	case Timestamp:
		ts, ok := v.(TimestampNTZ)
		if !ok {
			return wrong()
		}
		return timestampProblem(t, ts.Millis, ts.NanoOfMilli)
	case TimestampLTZ:
		ts, ok := v.(Instant)
		if !ok {
			return wrong()
		}
		return timestampProblem(t, ts.EpochMillis, ts.NanoOfMilli)
	default:
		return fmt.Sprintf("unsupported column type %s", t)
	}
	return ""
}

// appendDate writes days since the epoch as "2026-11-30" (years 0000..9999
// with four digits; others as Go prints them).
func appendDate(dst []byte, days int64) []byte {
	y, m, d := time.Unix(days*86400, 0).UTC().Date()
	dst = appendPadded(dst, y, 4)
	dst = append(dst, '-')
	dst = appendPadded(dst, int(m), 2)
	dst = append(dst, '-')
	return appendPadded(dst, d, 2)
}

// appendTimeOfDay writes nanoseconds of the day as "13:45:00" plus exactly
// precision fraction digits.
func appendTimeOfDay(dst []byte, nanos int64, precision int) []byte {
	sec := nanos / 1e9
	dst = appendPadded(dst, int(sec/3600), 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, int(sec/60%60), 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, int(sec%60), 2)
	if precision > 0 {
		var frac [9]byte
		ns := nanos % 1e9
		for i := 8; i >= 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		dst = append(dst, '.')
		dst = append(dst, frac[:precision]...)
	}
	return dst
}

// appendTimestamp writes "2026-11-30T13:45:00" plus exactly precision
// fraction digits, and "Z" when utc.
func appendTimestamp(dst []byte, millis int64, nano int32, precision int, utc bool) []byte {
	days := floorDiv(millis, msPerDay)
	dst = appendDate(dst, days)
	dst = append(dst, 'T')
	dst = appendTimeOfDay(dst, floorMod(millis, msPerDay)*1e6+int64(nano), precision)
	if utc {
		dst = append(dst, 'Z')
	}
	return dst
}

func appendPadded(dst []byte, v, width int) []byte {
	if v < 0 {
		dst = append(dst, '-')
		v = -v
	}
	s := strconv.Itoa(v)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}
