package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// TypeRoot is the kind of a column type, without its parameters.
//
// The zero value is not a type: a DataType{} is invalid, so a forgotten Root
// is caught by validation instead of silently becoming BOOLEAN.
type TypeRoot uint8

// The type roots Strom supports. The numbering is Strom's own (not Fluss's
// DataTypeRoot ordinal) and never appears on the wire: JSON uses the names.
const (
	Boolean TypeRoot = iota + 1
	TinyInt
	SmallInt
	Int
	BigInt
	Float
	Double
	Decimal
	Char
	String
	Binary
	Bytes
	Date
	Time
	Timestamp
	TimestampLTZ
)

// Bounds and defaults of type parameters, as in Fluss and Flink.
const (
	MaxDecimalPrecision     = 38
	DefaultDecimalPrecision = 10
	DefaultDecimalScale     = 0
	MinLength               = 1 // CHAR(n), BINARY(n)
	MaxLength               = 1<<31 - 1
	DefaultLength           = 1
	MaxTimePrecision        = 9 // TIME, TIMESTAMP, TIMESTAMP_LTZ
	DefaultTimePrecision    = 0 // TIME
	DefaultTimestampPrec    = 6 // TIMESTAMP, TIMESTAMP_LTZ
)

type rootInfo struct {
	sql  string // canonical SQL keyword
	json string // Fluss's DataTypeRoot name, used by DataTypeJsonSerde
}

var roots = [...]rootInfo{
	Boolean:      {"BOOLEAN", "BOOLEAN"},
	TinyInt:      {"TINYINT", "TINYINT"},
	SmallInt:     {"SMALLINT", "SMALLINT"},
	Int:          {"INT", "INTEGER"},
	BigInt:       {"BIGINT", "BIGINT"},
	Float:        {"FLOAT", "FLOAT"},
	Double:       {"DOUBLE", "DOUBLE"},
	Decimal:      {"DECIMAL", "DECIMAL"},
	Char:         {"CHAR", "CHAR"},
	String:       {"STRING", "STRING"},
	Binary:       {"BINARY", "BINARY"},
	Bytes:        {"BYTES", "BYTES"},
	Date:         {"DATE", "DATE"},
	Time:         {"TIME", "TIME_WITHOUT_TIME_ZONE"},
	Timestamp:    {"TIMESTAMP", "TIMESTAMP_WITHOUT_TIME_ZONE"},
	TimestampLTZ: {"TIMESTAMP_LTZ", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"},
}

// knownTypes is the list shown when a type name is not recognized.
const knownTypes = "BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p, s), " +
	"CHAR(n), STRING, BINARY(n), BYTES, DATE, TIME(p), TIMESTAMP(p), TIMESTAMP_LTZ(p)"

// Valid reports whether r is one of the defined roots.
func (r TypeRoot) Valid() bool { return r >= Boolean && r <= TimestampLTZ }

// String returns the SQL keyword of r ("INT", "TIMESTAMP_LTZ").
func (r TypeRoot) String() string {
	if !r.Valid() {
		return "TypeRoot(" + strconv.Itoa(int(r)) + ")"
	}
	return roots[r].sql
}

// DataType is a column type: a root plus its parameters and nullability.
// Parameters that do not apply to the root are zero, so two equal types are
// == equal.
type DataType struct {
	Root      TypeRoot
	Nullable  bool
	Length    int // CHAR(n), BINARY(n)
	Precision int // DECIMAL(p,s), TIME(p), TIMESTAMP(p), TIMESTAMP_LTZ(p)
	Scale     int // DECIMAL
}

// WithNullable returns t with its nullability set to nullable.
func (t DataType) WithNullable(nullable bool) DataType {
	t.Nullable = nullable
	return t
}

// String returns the canonical SQL spelling of t: "BIGINT NOT NULL",
// "DECIMAL(10, 2)", "CHAR(1)", "TIMESTAMP(6)", "TIMESTAMP_LTZ(3)".
// ParseDataType(t.String()) == t for every valid t.
func (t DataType) String() string {
	var b strings.Builder
	b.WriteString(t.Root.String())
	switch t.Root {
	case Char, Binary:
		fmt.Fprintf(&b, "(%d)", t.Length)
	case Decimal:
		fmt.Fprintf(&b, "(%d, %d)", t.Precision, t.Scale)
	case Time, Timestamp, TimestampLTZ:
		fmt.Fprintf(&b, "(%d)", t.Precision)
	}
	if !t.Nullable {
		b.WriteString(" NOT NULL")
	}
	return b.String()
}

// Validate reports whether t is a type Strom can store: a defined root with
// parameters in Fluss's bounds, and zero parameters where none apply. The
// error is an *InvalidError with Field "type".
func (t DataType) Validate() error {
	if reason := t.problem(); reason != "" {
		return &InvalidError{Field: "type", Reason: reason}
	}
	return nil
}

// problem returns why t is invalid, or "" if it is valid.
func (t DataType) problem() string {
	if !t.Root.Valid() {
		return fmt.Sprintf("unknown type root %d; known types are %s", t.Root, knownTypes)
	}
	length, precision, scale := 0, 0, 0
	switch t.Root {
	case Char, Binary:
		length = t.Length
		if t.Length < MinLength || t.Length > MaxLength {
			return fmt.Sprintf("%s length must be between %d and %d, got %d", t.Root, MinLength, MaxLength, t.Length)
		}
	case Decimal:
		precision, scale = t.Precision, t.Scale
		if t.Precision < 1 || t.Precision > MaxDecimalPrecision {
			return fmt.Sprintf("DECIMAL precision must be between 1 and %d, got %d", MaxDecimalPrecision, t.Precision)
		}
		if t.Scale < 0 || t.Scale > t.Precision {
			return fmt.Sprintf("DECIMAL scale must be between 0 and the precision %d, got %d", t.Precision, t.Scale)
		}
	case Time, Timestamp, TimestampLTZ:
		precision = t.Precision
		if t.Precision < 0 || t.Precision > MaxTimePrecision {
			return fmt.Sprintf("%s precision must be between 0 and %d, got %d", t.Root, MaxTimePrecision, t.Precision)
		}
	}
	if t.Length != length || t.Precision != precision || t.Scale != scale {
		return fmt.Sprintf("%s takes no length/precision/scale besides its own parameters, got length %d, precision %d, scale %d",
			t.Root, t.Length, t.Precision, t.Scale)
	}
	return ""
}

// ParseDataType parses the SQL spelling of a type, case-insensitively:
//
//	BOOLEAN, TINYINT, SMALLINT, INT | INTEGER, BIGINT, FLOAT, DOUBLE [PRECISION],
//	DECIMAL | DEC | NUMERIC [(p [, s])], CHAR [(n)], STRING, VARCHAR [(n)],
//	BINARY [(n)], BYTES, VARBINARY [(n)], DATE, TIME [(p)] [WITHOUT TIME ZONE],
//	TIMESTAMP [(p)] [WITHOUT TIME ZONE], TIMESTAMP_LTZ [(p)],
//	TIMESTAMP [(p)] WITH LOCAL TIME ZONE
//
// each optionally followed by NOT NULL or NULL (the default). Defaults and
// bounds are Fluss's: DECIMAL (10, 0) with precision 1..38 and scale 0..p;
// CHAR and BINARY length 1 by default and at least 1; TIME precision 0 by
// default, TIMESTAMP and TIMESTAMP_LTZ 6, all within 0..9. VARCHAR and
// VARBINARY become STRING and BYTES (any length), as Fluss's Flink catalog
// maps them. The error is an *InvalidError with Field "type".
func ParseDataType(s string) (DataType, error) {
	t, reason := parseDataType(s)
	if reason != "" {
		return DataType{}, &InvalidError{Field: "type", Reason: reason}
	}
	return t, nil
}

// typeToken is a word ("DECIMAL", "10"; words are upper-cased) or one of the
// punctuation characters "(", ")", ",".
type typeToken struct {
	text string
	pos  int // byte offset in the input
}

func tokenizeType(s string) ([]typeToken, string) {
	var toks []typeToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')' || c == ',':
			toks = append(toks, typeToken{string(c), i})
			i++
		case isWordByte(c):
			j := i
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			toks = append(toks, typeToken{strings.ToUpper(s[i:j]), i})
			i = j
		default:
			return nil, fmt.Sprintf("unexpected character %q at offset %d in type %q", rune(c), i, s)
		}
	}
	return toks, ""
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// typeParser walks the tokens of one type.
type typeParser struct {
	src  string
	toks []typeToken
	i    int
}

func (p *typeParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i].text
	}
	return ""
}

func (p *typeParser) accept(words ...string) bool {
	if p.i+len(words) > len(p.toks) {
		return false
	}
	for k, w := range words {
		if p.toks[p.i+k].text != w {
			return false
		}
	}
	p.i += len(words)
	return true
}

// params parses an optional "(n [, m ...])" with at most max numbers. It
// returns nil when there are no parentheses.
func (p *typeParser) params(name string, max int) ([]int, string) {
	if !p.accept("(") {
		return nil, ""
	}
	var out []int
	for {
		tok := p.peek()
		if tok == "" {
			return nil, fmt.Sprintf("%s: missing ')' in %q", name, p.src)
		}
		n, err := strconv.ParseInt(tok, 10, 32)
		if err != nil {
			if strings.Trim(tok, "0123456789") == "" {
				return nil, fmt.Sprintf("%s: parameter %s is too large", name, tok)
			}
			return nil, fmt.Sprintf("%s: expected a number, got %q in %q", name, tok, p.src)
		}
		out = append(out, int(n))
		p.i++
		if p.accept(")") {
			break
		}
		if !p.accept(",") {
			if p.peek() == "" {
				return nil, fmt.Sprintf("%s: missing ')' in %q", name, p.src)
			}
			return nil, fmt.Sprintf("%s: expected ',' or ')', got %q in %q", name, p.peek(), p.src)
		}
	}
	if len(out) > max {
		switch max {
		case 0:
			return nil, fmt.Sprintf("%s takes no parameters", name)
		case 1:
			return nil, fmt.Sprintf("%s takes one parameter, got %d", name, len(out))
		default:
			return nil, fmt.Sprintf("%s takes at most %d parameters, got %d", name, max, len(out))
		}
	}
	return out, ""
}

func parseDataType(s string) (DataType, string) {
	toks, reason := tokenizeType(s)
	if reason != "" {
		return DataType{}, reason
	}
	if len(toks) == 0 {
		return DataType{}, "empty type; known types are " + knownTypes
	}
	p := &typeParser{src: s, toks: toks}
	name := p.peek()
	p.i++
	t := DataType{Nullable: true}
	maxParams := 0
	switch name {
	case "BOOLEAN":
		t.Root = Boolean
	case "TINYINT":
		t.Root = TinyInt
	case "SMALLINT":
		t.Root = SmallInt
	case "INT", "INTEGER":
		t.Root = Int
	case "BIGINT":
		t.Root = BigInt
	case "FLOAT":
		t.Root = Float
	case "DOUBLE":
		t.Root = Double
		p.accept("PRECISION")
	case "DECIMAL", "DEC", "NUMERIC":
		t.Root, maxParams = Decimal, 2
	case "CHAR":
		t.Root, maxParams = Char, 1
	case "STRING":
		t.Root = String
	case "VARCHAR":
		t.Root, maxParams = String, 1
	case "BINARY":
		t.Root, maxParams = Binary, 1
	case "BYTES":
		t.Root = Bytes
	case "VARBINARY":
		t.Root, maxParams = Bytes, 1
	case "DATE":
		t.Root = Date
	case "TIME":
		t.Root, maxParams = Time, 1
	case "TIMESTAMP":
		t.Root, maxParams = Timestamp, 1
	case "TIMESTAMP_LTZ":
		t.Root, maxParams = TimestampLTZ, 1
	case "ARRAY", "MAP", "ROW", "MULTISET":
		return DataType{}, fmt.Sprintf("type %s is not supported yet; known types are %s", name, knownTypes)
	case "(", ")", ",":
		return DataType{}, fmt.Sprintf("type %q must start with a type name; known types are %s", s, knownTypes)
	default:
		return DataType{}, fmt.Sprintf("unknown type %q; known types are %s", name, knownTypes)
	}
	args, reason := p.params(name, maxParams)
	if reason != "" {
		return DataType{}, reason
	}
	switch t.Root {
	case Decimal:
		t.Precision, t.Scale = DefaultDecimalPrecision, DefaultDecimalScale
		if len(args) >= 1 {
			t.Precision = args[0]
			t.Scale = 0
		}
		if len(args) == 2 {
			t.Scale = args[1]
		}
	case Char, Binary:
		t.Length = DefaultLength
		if len(args) == 1 {
			t.Length = args[0]
		}
	case String, Bytes:
		// VARCHAR(n) and VARBINARY(n): the length is checked, then dropped.
		if len(args) == 1 && args[0] < MinLength {
			return DataType{}, fmt.Sprintf("%s length must be between %d and %d, got %d", name, MinLength, MaxLength, args[0])
		}
	case Time:
		t.Precision = DefaultTimePrecision
		if len(args) == 1 {
			t.Precision = args[0]
		}
		p.accept("WITHOUT", "TIME", "ZONE")
	case Timestamp, TimestampLTZ:
		t.Precision = DefaultTimestampPrec
		if len(args) == 1 {
			t.Precision = args[0]
		}
		if t.Root == Timestamp {
			switch {
			case p.accept("WITH", "LOCAL", "TIME", "ZONE"):
				t.Root = TimestampLTZ
			case p.accept("WITHOUT", "TIME", "ZONE"):
			case p.accept("WITH", "TIME", "ZONE"):
				return DataType{}, "TIMESTAMP WITH TIME ZONE is not supported; use TIMESTAMP_LTZ (TIMESTAMP WITH LOCAL TIME ZONE)"
			}
		}
	}
	switch {
	case p.accept("NOT", "NULL"):
		t.Nullable = false
	case p.accept("NULL"):
	}
	if p.i < len(p.toks) {
		tok := p.toks[p.i]
		return DataType{}, fmt.Sprintf("unexpected %q at offset %d after type %s in %q", tok.text, tok.pos, name, s)
	}
	if reason := t.problem(); reason != "" {
		return DataType{}, reason
	}
	return t, ""
}

// jsonString appends the JSON encoding of s to b without HTML escaping, as
// Jackson writes it in Fluss.
func jsonString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	b.Truncate(b.Len() - 1)
}

// MarshalJSON writes t in the shape of Fluss's DataTypeJsonSerde:
// {"type":"BIGINT","nullable":false}; "nullable" only when false; "length"
// for CHAR and BINARY; "precision" for TIME, TIMESTAMP and TIMESTAMP_LTZ;
// "precision" and "scale" for DECIMAL.
func (t DataType) MarshalJSON() ([]byte, error) {
	if reason := t.problem(); reason != "" {
		return nil, fmt.Errorf("record: marshal type: %s", reason)
	}
	var b bytes.Buffer
	t.appendJSON(&b)
	return b.Bytes(), nil
}

// appendJSON writes t, which must be valid.
func (t DataType) appendJSON(b *bytes.Buffer) {
	b.WriteString(`{"type":"`)
	b.WriteString(roots[t.Root].json)
	b.WriteByte('"')
	if !t.Nullable {
		b.WriteString(`,"nullable":false`)
	}
	switch t.Root {
	case Char, Binary:
		fmt.Fprintf(b, `,"length":%d`, t.Length)
	case Decimal:
		fmt.Fprintf(b, `,"precision":%d,"scale":%d`, t.Precision, t.Scale)
	case Time, Timestamp, TimestampLTZ:
		fmt.Fprintf(b, `,"precision":%d`, t.Precision)
	}
	b.WriteByte('}')
}

// dataTypeJSON is the decoding side of DataTypeJsonSerde.
type dataTypeJSON struct {
	Type      *string `json:"type"`
	Nullable  *bool   `json:"nullable"`
	Length    *int    `json:"length"`
	Precision *int    `json:"precision"`
	Scale     *int    `json:"scale"`
}

// UnmarshalJSON reads the shape MarshalJSON writes. "nullable" defaults to
// true, as in Fluss; the parameters the type needs are required, and a type
// Strom does not support yet (ARRAY, MAP, ROW) is an error.
func (t *DataType) UnmarshalJSON(data []byte) error {
	var j dataTypeJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("record: data type: %w", err)
	}
	if j.Type == nil {
		return fmt.Errorf(`record: data type: missing "type" in %s`, data)
	}
	var out DataType
	for r := Boolean; r <= TimestampLTZ; r++ {
		if roots[r].json == *j.Type {
			out.Root = r
		}
	}
	if out.Root == 0 {
		names := make([]string, 0, len(roots))
		for r := Boolean; r <= TimestampLTZ; r++ {
			names = append(names, roots[r].json)
		}
		return fmt.Errorf("record: data type: unsupported type %q; supported are %s", *j.Type, strings.Join(names, ", "))
	}
	out.Nullable = j.Nullable == nil || *j.Nullable
	need := func(field string, v *int) (int, error) {
		if v == nil {
			return 0, fmt.Errorf("record: data type %s: missing %q", *j.Type, field)
		}
		return *v, nil
	}
	var err error
	switch out.Root {
	case Char, Binary:
		out.Length, err = need("length", j.Length)
	case Decimal:
		if out.Precision, err = need("precision", j.Precision); err == nil {
			out.Scale, err = need("scale", j.Scale)
		}
	case Time, Timestamp, TimestampLTZ:
		out.Precision, err = need("precision", j.Precision)
	}
	if err != nil {
		return err
	}
	if reason := out.problem(); reason != "" {
		return fmt.Errorf("record: data type: %s", reason)
	}
	*t = out
	return nil
}
