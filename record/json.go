package record

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Rows as JSON (DESIGN.md §7), for the API, the CLI's input and its output:
//
//	BOOLEAN            true / false
//	TINYINT..BIGINT    number (BIGINT also accepted as a string)
//	FLOAT, DOUBLE      number; "NaN", "Infinity", "-Infinity" as strings
//	                   (a number in a string is accepted on input)
//	DECIMAL            string "123.45" with exactly s fraction digits (a number
//	                   is accepted on input)
//	CHAR, STRING       string
//	BINARY, BYTES      base64 string (standard alphabet, padded)
//	DATE               "2026-11-30"
//	TIME(p)            "13:45:00.123" with exactly p fraction digits
//	TIMESTAMP(p)       "2026-11-30T13:45:00.123456" with exactly p fraction digits
//	                   (input: any number of digits up to 9, or none; ' ' for 'T')
//	TIMESTAMP_LTZ(p)   RFC 3339, written in UTC: "2026-11-30T13:45:00.123Z"
//	                   (input: any zone, "Z" or "+02:00")
//	NULL               null
//
// The CSV form (RowFromCSV, ParseValue) uses the same texts unquoted, with
// the empty field as NULL.

// RowFromJSON reads a JSON object whose keys are column names as a row of s.
// A missing column is NULL; an unknown column, a column given twice, a value
// of the wrong JSON kind, a number out of its type's range and anything
// CheckValue rejects are errors. Every problem is reported at once, as
// errors.Join of *InvalidError whose Field is the column's name ("row" when
// obj is not a JSON object).
func RowFromJSON(s Schema, obj []byte) (Row, error) {
	var p problems
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	notObject := func(err error) (Row, error) {
		p.add("row", "not a JSON object: %v", err)
		return nil, p.err()
	}
	tok, err := dec.Token()
	if err != nil {
		return notObject(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return notObject(fmt.Errorf("starts with %s", describeToken(tok)))
	}
	row := make(Row, len(s.Columns))
	seen := make([]bool, len(s.Columns))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return notObject(err)
		}
		name, _ := tok.(string) // inside an object, Token returns keys as strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return notObject(err)
		}
		_, i, ok := s.Column(name)
		if !ok {
			p.add(name, "unknown column; the columns are %s", strings.Join(s.ColumnNames(), ", "))
			continue
		}
		if seen[i] {
			p.add(name, "given twice")
			continue
		}
		seen[i] = true
		t := s.Columns[i].Type
		v, reason := valueFromJSON(t, raw)
		if reason == "" {
			reason = valueProblem(t, v)
		}
		if reason != "" {
			p.add(name, "%s", reason)
			continue
		}
		row[i] = v
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return notObject(err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return notObject(err)
		}
		return notObject(fmt.Errorf("%s after the object", describeToken(tok)))
	}
	for i, c := range s.Columns {
		if !seen[i] && !c.Type.Nullable {
			p.add(c.Name, "missing, and the column is %s", c.Type)
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return row, nil
}

func describeToken(tok any) string {
	switch t := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(t))
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

// jsonKind names the kind of a JSON value by its first byte.
func jsonKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// valueFromJSON converts one JSON value (valid JSON, as the decoder checked)
// to a value of type t, without the CheckValue checks.
func valueFromJSON(t DataType, raw []byte) (any, string) {
	kind := jsonKind(raw)
	if kind == "null" {
		return nil, ""
	}
	want := func(what string) (any, string) {
		return nil, fmt.Sprintf("a %s column takes %s, got %s", t.Root, what, kind)
	}
	var str string
	if kind == "a string" {
		if err := json.Unmarshal(raw, &str); err != nil {
			return nil, fmt.Sprintf("bad string: %v", err)
		}
	}
	switch t.Root {
	case Boolean:
		if kind != "a boolean" {
			return want("true or false")
		}
		return raw[0] == 't', ""
	case TinyInt, SmallInt, Int:
		if kind != "a number" {
			return want("a number")
		}
		return parseText(t, string(raw))
	case BigInt:
		switch kind {
		case "a number":
			return parseText(t, string(raw))
		case "a string":
			return parseText(t, str)
		}
		return want("a number or a string of digits")
	case Float, Double:
		switch kind {
		case "a number":
			return parseText(t, string(raw))
		case "a string":
			return parseText(t, str)
		}
		return want(`a number or "NaN", "Infinity", "-Infinity"`)
	case Decimal:
		switch kind {
		case "a number":
			return parseText(t, string(raw))
		case "a string":
			return parseText(t, str)
		}
		return want(`a string like "123.45" or a number`)
	case Char, String:
		if kind != "a string" {
			return want("a string")
		}
		return str, ""
	case Binary, Bytes:
		if kind != "a string" {
			return want("a base64 string")
		}
		return parseText(t, str)
	case Date, Time, Timestamp, TimestampLTZ:
		if kind != "a string" {
			return want("a string like " + textExample(t))
		}
		return parseText(t, str)
	}
	return nil, fmt.Sprintf("unsupported column type %s", t)
}

// RowFromCSV reads the fields of one CSV line as a row of s, one field per
// column in column order. An empty field is NULL (so a CSV row cannot hold an
// empty STRING); the other fields use the texts of ParseValue. Every problem
// is reported at once, as errors.Join of *InvalidError whose Field is the
// column's name ("row" for a wrong field count).
func RowFromCSV(s Schema, fields []string) (Row, error) {
	var p problems
	if len(fields) != len(s.Columns) {
		p.add("row", "has %d fields, the schema has %d columns (%s)", len(fields), len(s.Columns), strings.Join(s.ColumnNames(), ", "))
		return nil, p.err()
	}
	row := make(Row, len(s.Columns))
	for i, c := range s.Columns {
		var v any
		reason := ""
		if fields[i] != "" {
			v, reason = parseText(c.Type, fields[i])
		}
		if reason == "" {
			reason = valueProblem(c.Type, v)
		}
		if reason != "" {
			p.add(c.Name, "%s", reason)
			continue
		}
		row[i] = v
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return row, nil
}

// ParseValue reads the text form of a value of type t (the JSON texts without
// quotes; BOOLEAN true/false in any case) and checks it with CheckValue. It
// never returns NULL: every text is a value. The error is an *InvalidError
// with Field "value".
func ParseValue(t DataType, s string) (any, error) {
	v, reason := parseText(t, s)
	if reason == "" {
		reason = valueProblem(t, v)
	}
	if reason != "" {
		return nil, &InvalidError{Field: "value", Reason: reason}
	}
	return v, nil
}

func textExample(t DataType) string {
	switch t.Root {
	case Date:
		return `"2026-11-30"`
	case Time:
		return `"13:45:00.123"`
	case Timestamp:
		return `"2026-11-30T13:45:00.123456"`
	case TimestampLTZ:
		return `"2026-11-30T13:45:00.123Z"`
	}
	return ""
}

// parseText converts the text form of a value; the result is of t's Go type
// but not yet checked by valueProblem.
func parseText(t DataType, s string) (any, string) {
	switch t.Root {
	case Boolean:
		switch {
		case strings.EqualFold(s, "true"):
			return true, ""
		case strings.EqualFold(s, "false"):
			return false, ""
		}
		return nil, fmt.Sprintf("%q is not a BOOLEAN; use true or false", s)
	case TinyInt, SmallInt, Int, BigInt:
		bits := map[TypeRoot]int{TinyInt: 8, SmallInt: 16, Int: 32, BigInt: 64}[t.Root]
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				lo, hi := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
				return nil, fmt.Sprintf("%s is out of range for %s (%d..%d)", s, t.Root, lo, hi)
			}
			return nil, fmt.Sprintf("%q is not an integer", s)
		}
		switch t.Root {
		case TinyInt:
			return int8(n), ""
		case SmallInt:
			return int16(n), ""
		case Int:
			return int32(n), ""
		}
		return n, ""
	case Float, Double:
		bits := 64
		if t.Root == Float {
			bits = 32
		}
		var f float64
		switch s {
		case "NaN":
			f = math.NaN()
		case "Infinity", "+Infinity":
			f = math.Inf(1)
		case "-Infinity":
			f = math.Inf(-1)
		default:
			if !isDecimalNumber(s) {
				return nil, fmt.Sprintf(`%q is not a number (or "NaN", "Infinity", "-Infinity")`, s)
			}
			var err error
			f, err = strconv.ParseFloat(s, bits)
			if err != nil {
				return nil, fmt.Sprintf("%s is out of range for %s", s, t.Root)
			}
		}
		if bits == 32 {
			return float32(f), ""
		}
		return f, ""
	case Decimal:
		d, reason := parseDecimal(s, int32(t.Precision), int32(t.Scale))
		if reason != "" {
			return nil, reason
		}
		return d, ""
	case Char, String:
		return s, ""
	case Binary, Bytes:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			b, err = base64.RawStdEncoding.DecodeString(s)
		}
		if err != nil {
			return nil, "not base64 (standard alphabet): " + err.Error()
		}
		return b, ""
	case Date:
		days, ok := parseDate(s)
		if !ok {
			return nil, fmt.Sprintf("%q is not a DATE; write it as %s", s, textExample(t))
		}
		return DateValue(days), ""
	case Time:
		nanos, ok := parseClock(s)
		if !ok {
			return nil, fmt.Sprintf("%q is not a TIME; write it as %s", s, textExample(t))
		}
		if nanos%1e6 != 0 {
			return nil, fmt.Sprintf("%q has digits below the millisecond, which TIME does not hold", s)
		}
		return TimeOfDay(nanos / 1e6), ""
	case Timestamp:
		millis, nano, ok := parseTimestamp(s, false)
		if !ok {
			return nil, fmt.Sprintf("%q is not a TIMESTAMP; write it as %s (no time zone)", s, textExample(t))
		}
		return TimestampNTZ{millis, nano}, ""
	case TimestampLTZ:
		millis, nano, ok := parseTimestamp(s, true)
		if !ok {
			return nil, fmt.Sprintf("%q is not a TIMESTAMP_LTZ; write it as RFC 3339 with a zone, like %s or \"2026-11-30T14:45:00+01:00\"", s, textExample(t))
		}
		return Instant{millis, nano}, ""
	}
	return nil, fmt.Sprintf("unsupported column type %s", t)
}

// isDecimalNumber reports whether s is a plain decimal float literal (no hex,
// no underscores, no "inf"), so that ParseFloat's extensions stay out.
func isDecimalNumber(s string) bool {
	if s == "" {
		return false
	}
	digits := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digits = true
		case c == '.' || c == '+' || c == '-' || c == 'e' || c == 'E':
		default:
			return false
		}
	}
	return digits
}

// digitsAt reads n decimal digits at s[i:].
func digitsAt(s string, i, n int) (int, bool) {
	if i+n > len(s) {
		return 0, false
	}
	v := 0
	for _, c := range []byte(s[i : i+n]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// parseDate reads "YYYY-MM-DD" (years 0000..9999) as days since the epoch.
func parseDate(s string) (int64, bool) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	y, ok1 := digitsAt(s, 0, 4)
	m, ok2 := digitsAt(s, 5, 2)
	d, ok3 := digitsAt(s, 8, 2)
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 {
		return 0, false
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Day() != d { // February 30th and the like
		return 0, false
	}
	return floorDiv(t.Unix(), 86400), true
}

// parseClock reads "HH:MM:SS" with an optional fraction of 1 to 9 digits as
// nanoseconds of the day.
func parseClock(s string) (int64, bool) {
	if len(s) < 8 || s[2] != ':' || s[5] != ':' {
		return 0, false
	}
	h, ok1 := digitsAt(s, 0, 2)
	m, ok2 := digitsAt(s, 3, 2)
	sec, ok3 := digitsAt(s, 6, 2)
	if !ok1 || !ok2 || !ok3 || h > 23 || m > 59 || sec > 59 {
		return 0, false
	}
	nanos := (int64(h)*3600 + int64(m)*60 + int64(sec)) * 1e9
	if len(s) == 8 {
		return nanos, true
	}
	frac := s[9:]
	if s[8] != '.' || len(frac) < 1 || len(frac) > 9 {
		return 0, false
	}
	f, ok := digitsAt(frac, 0, len(frac))
	if !ok {
		return 0, false
	}
	for i := len(frac); i < 9; i++ {
		f *= 10
	}
	return nanos + int64(f), true
}

// parseTimestamp reads "YYYY-MM-DDTHH:MM:SS[.fffffffff]" ('T' or ' '); with
// zone, a zone must follow ("Z" or "±HH:MM") and the result is UTC.
func parseTimestamp(s string, zone bool) (int64, int32, bool) {
	if len(s) < 19 || s[10] != 'T' && s[10] != ' ' && s[10] != 't' {
		return 0, 0, false
	}
	days, ok := parseDate(s[:10])
	if !ok {
		return 0, 0, false
	}
	clock := s[11:]
	offset := int64(0)
	if zone {
		switch {
		case strings.HasSuffix(clock, "Z") || strings.HasSuffix(clock, "z"):
			clock = clock[:len(clock)-1]
		case len(clock) >= 6 && (clock[len(clock)-6] == '+' || clock[len(clock)-6] == '-') && clock[len(clock)-3] == ':':
			z := clock[len(clock)-6:]
			oh, ok1 := digitsAt(z, 1, 2)
			om, ok2 := digitsAt(z, 4, 2)
			if !ok1 || !ok2 || oh > 23 || om > 59 {
				return 0, 0, false
			}
			offset = int64(oh*60+om) * 60000
			if z[0] == '-' {
				offset = -offset
			}
			clock = clock[:len(clock)-6]
		default:
			return 0, 0, false
		}
	}
	nanos, ok := parseClock(clock)
	if !ok {
		return 0, 0, false
	}
	millis := days*msPerDay + nanos/1e6 - offset
	return millis, int32(nanos % 1e6), true
}

// AppendRowJSON appends r as one JSON object with the columns of s in order,
// in the formats RowFromJSON reads (see the table above), so that
// RowFromJSON(AppendRowJSON(r)) equals r and the output of equal rows is
// byte-identical. r must pass s.CheckRow: AppendRowJSON panics when a value
// has the wrong Go type for its column, or when len(r) != len(s.Columns).
func AppendRowJSON(dst []byte, s Schema, r Row) []byte {
	if len(r) != len(s.Columns) {
		panic(fmt.Sprintf("record: AppendRowJSON: row has %d values, schema has %d columns", len(r), len(s.Columns)))
	}
	dst = append(dst, '{')
	for i, c := range s.Columns {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, c.Name)
		dst = append(dst, ':')
		var ok bool
		dst, ok = appendValueJSON(dst, c.Type, r[i])
		if !ok {
			panic(fmt.Sprintf("record: AppendRowJSON: column %q: a %s column takes a %s, got %T",
				c.Name, c.Type.Root, goTypeName(c.Type.Root), r[i]))
		}
	}
	return append(dst, '}')
}

// AppendValueJSON appends v, a value of type t (nil for NULL), in the JSON
// form AppendRowJSON writes. It panics when v has the wrong Go type for t.
func AppendValueJSON(dst []byte, t DataType, v any) []byte {
	dst, ok := appendValueJSON(dst, t, v)
	if !ok {
		panic(fmt.Sprintf("record: AppendValueJSON: a %s column takes a %s, got %T", t.Root, goTypeName(t.Root), v))
	}
	return dst
}

func appendValueJSON(dst []byte, t DataType, v any) ([]byte, bool) {
	if v == nil {
		return append(dst, "null"...), true
	}
	switch t.Root {
	case Boolean:
		x, ok := v.(bool)
		return strconv.AppendBool(dst, x), ok
	case TinyInt:
		x, ok := v.(int8)
		return strconv.AppendInt(dst, int64(x), 10), ok
	case SmallInt:
		x, ok := v.(int16)
		return strconv.AppendInt(dst, int64(x), 10), ok
	case Int:
		x, ok := v.(int32)
		return strconv.AppendInt(dst, int64(x), 10), ok
	case BigInt:
		x, ok := v.(int64)
		return strconv.AppendInt(dst, x, 10), ok
	case Float:
		x, ok := v.(float32)
		return appendJSONFloat(dst, float64(x), 32), ok
	case Double:
		x, ok := v.(float64)
		return appendJSONFloat(dst, x, 64), ok
	case Decimal:
		x, ok := v.(DecimalValue)
		if !ok {
			return dst, false
		}
		dst = append(dst, '"')
		dst = append(dst, x.String()...)
		return append(dst, '"'), true
	case Char, String:
		x, ok := v.(string)
		return appendJSONString(dst, x), ok
	case Binary, Bytes:
		x, ok := v.([]byte)
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, x)
		return append(dst, '"'), ok
	case Date:
		x, ok := v.(DateValue)
		dst = append(dst, '"')
		dst = appendDate(dst, int64(x))
		return append(dst, '"'), ok
	case Time:
		x, ok := v.(TimeOfDay)
		dst = append(dst, '"')
		dst = appendTimeOfDay(dst, int64(x)*1e6, t.Precision)
		return append(dst, '"'), ok
	case Timestamp:
		x, ok := v.(TimestampNTZ)
		dst = append(dst, '"')
		dst = appendTimestamp(dst, x.Millis, x.NanoOfMilli, t.Precision, false)
		return append(dst, '"'), ok
	case TimestampLTZ:
		x, ok := v.(Instant)
		dst = append(dst, '"')
		dst = appendTimestamp(dst, x.EpochMillis, x.NanoOfMilli, t.Precision, true)
		return append(dst, '"'), ok
	}
	return dst, false
}

// AppendValueText appends v, a value of type t, in the text form ParseValue
// and RowFromCSV read: the JSON form without quotes or escapes (strings as
// they are, NaN and Infinity bare), and nothing for NULL. It panics when v
// has the wrong Go type for t.
func AppendValueText(dst []byte, t DataType, v any) []byte {
	switch x := v.(type) {
	case nil:
		return dst
	case string:
		if t.Root == Char || t.Root == String {
			return append(dst, x...)
		}
	}
	start := len(dst)
	dst = AppendValueJSON(dst, t, v)
	if n := len(dst); n-start >= 2 && dst[start] == '"' {
		// Every quoted form but strings (handled above) is plain ASCII with
		// nothing escaped: drop the quotes.
		copy(dst[start:], dst[start+1:n-1])
		dst = dst[:n-2]
	}
	return dst
}

// appendJSONFloat writes f as encoding/json does (shortest representation
// that reads back to the same float of that size; exponent form below 1e-6
// and from 1e21), and NaN and the infinities as the strings "NaN",
// "Infinity" and "-Infinity".
func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string, escaping as encoding/json does
// but without HTML escaping; invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
