package record

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

const rowsGolden = "testdata/rows.jsonl"

// TestJSONGolden writes everyTypeRows as JSON lines and compares them with
// testdata/rows.jsonl (-update rewrites it), then reads the file back: the
// rows must be equal and their JSON byte-identical.
func TestJSONGolden(t *testing.T) {
	s := everyTypeSchema(t)
	rows := everyTypeRows(t)
	var out []byte
	for _, r := range rows {
		out = AppendRowJSON(out, s, r)
		out = append(out, '\n')
	}
	if *update {
		if err := os.WriteFile(rowsGolden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(rowsGolden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("JSON of the rows differs from %s (run with -update if the change is intended):\n got: %s\nwant: %s", rowsGolden, out, want)
	}
	lines := bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n"))
	if len(lines) != len(rows) {
		t.Fatalf("%s has %d lines, want %d", rowsGolden, len(lines), len(rows))
	}
	for i, line := range lines {
		if !json.Valid(line) {
			t.Errorf("line %d is not valid JSON: %s", i, line)
		}
		r, err := RowFromJSON(s, line)
		if err != nil {
			t.Errorf("line %d: %v", i, err)
			continue
		}
		if !r.Equal(rows[i]) {
			t.Errorf("line %d reads as\n%#v\nwant\n%#v", i, r, rows[i])
		}
		if again := AppendRowJSON(nil, s, r); !bytes.Equal(again, line) {
			t.Errorf("line %d: JSON → Row → JSON gives\n%s\nwant\n%s", i, again, line)
		}
	}
}

// TestJSONInputForms checks the forms accepted on input beyond the canonical
// output.
func TestJSONInputForms(t *testing.T) {
	cols, err := ParseColumns("b BIGINT, f FLOAT, d DOUBLE, dec DECIMAL(10, 2), bin BYTES, ts TIMESTAMP(6), " +
		"ts3 TIMESTAMP(3), ltz TIMESTAMP_LTZ(3), t TIME(3), dt DATE")
	if err != nil {
		t.Fatal(err)
	}
	s := Schema{Columns: cols}
	for _, tc := range []struct{ in, want string }{
		{`{"b":"-9223372036854775808"}`, `"b":-9223372036854775808`},
		{`{"b":9223372036854775807}`, `"b":9223372036854775807`},
		{`{"f":"1.5","d":"-2"}`, `"f":1.5,"d":-2`},
		{`{"f":1e-7,"d":1e21}`, `"f":1e-7,"d":1e+21`},
		{`{"f":"NaN","d":"-Infinity"}`, `"f":"NaN","d":"-Infinity"`},
		{`{"f":"+Infinity"}`, `"f":"Infinity"`},
		{`{"d":-0}`, `"d":-0`},
		{`{"dec":12.5}`, `"dec":"12.50"`},
		{`{"dec":"-1e2"}`, `"dec":"-100.00"`},
		{`{"bin":"AQI"}`, `"bin":"AQI="`},
		{`{"ts":"2026-11-30 13:45:00"}`, `"ts":"2026-11-30T13:45:00.000000"`},
		{`{"ts":"2026-11-30T13:45:00.1"}`, `"ts":"2026-11-30T13:45:00.100000"`},
		{`{"ts3":"2026-11-30T13:45:00.123000000"}`, `"ts3":"2026-11-30T13:45:00.123"`},
		{`{"ltz":"2026-11-30T13:45:00.123+01:30"}`, `"ltz":"2026-11-30T12:15:00.123Z"`},
		{`{"ltz":"2026-11-30T13:45:00-00:00"}`, `"ltz":"2026-11-30T13:45:00.000Z"`},
		{`{"ltz":"2026-11-30 13:45:00z"}`, `"ltz":"2026-11-30T13:45:00.000Z"`},
		{`{"t":"13:45:00"}`, `"t":"13:45:00.000"`},
		{`{"t":"13:45:00.5"}`, `"t":"13:45:00.500"`},
		{`{"dt":"2024-02-29"}`, `"dt":"2024-02-29"`},
		{` { } `, `"b":null`},
	} {
		r, err := RowFromJSON(s, []byte(tc.in))
		if err != nil {
			t.Errorf("RowFromJSON(%s): %v", tc.in, err)
			continue
		}
		if got := string(AppendRowJSON(nil, s, r)); !strings.Contains(got, tc.want) {
			t.Errorf("RowFromJSON(%s) writes %s; want it to contain %s", tc.in, got, tc.want)
		}
	}
}

func TestJSONErrors(t *testing.T) {
	s := everyTypeSchema(t)
	for _, tc := range []struct {
		in     string
		field  string // of the first problem
		reason string
	}{
		{`[1]`, "row", `not a JSON object: starts with "["`},
		{`"x"`, "row", "not a JSON object: starts with a string"},
		{``, "row", "not a JSON object: EOF"},
		{`{"id":1`, "row", "not a JSON object"},
		{`{"id":1} {}`, "row", `not a JSON object: "{" after the object`},
		{`{"id":1,}`, "row", "not a JSON object"},
		{`{"nope":1,"id":1}`, "nope", "unknown column; the columns are id, c_bool, c_tinyint,"},
		{`{"id":1,"id":2}`, "id", "given twice"},
		{`{}`, "id", "missing, and the column is INT NOT NULL"},
		{`{"id":null}`, "id", "NULL in a NOT NULL column of type INT NOT NULL"},
		{`{"id":"1"}`, "id", "a INT column takes a number, got a string"},
		{`{"id":2147483648}`, "id", "2147483648 is out of range for INT (-2147483648..2147483647)"},
		{`{"id":1.5}`, "id", `"1.5" is not an integer`},
		{`{"id":1e2}`, "id", `"1e2" is not an integer`},
		{`{"id":1,"c_tinyint":128}`, "c_tinyint", "out of range for TINYINT (-128..127)"},
		{`{"id":1,"c_smallint":-32769}`, "c_smallint", "out of range for SMALLINT"},
		{`{"id":1,"c_bigint":"9223372036854775808"}`, "c_bigint", "out of range for BIGINT"},
		{`{"id":1,"c_bigint":"12x"}`, "c_bigint", `"12x" is not an integer`},
		{`{"id":1,"c_bigint":true}`, "c_bigint", "a BIGINT column takes a number or a string of digits, got a boolean"},
		{`{"id":1,"c_bool":"true"}`, "c_bool", "a BOOLEAN column takes true or false, got a string"},
		{`{"id":1,"c_float":1e39}`, "c_float", "1e39 is out of range for FLOAT"},
		{`{"id":1,"c_double":"nan"}`, "c_double", `"nan" is not a number`},
		{`{"id":1,"c_double":"0x1p3"}`, "c_double", "is not a number"},
		{`{"id":1,"c_double":[1]}`, "c_double", "got an array"},
		{`{"id":1,"c_dec":"1.234"}`, "c_dec", "more than 2 fraction digits"},
		{`{"id":1,"c_dec":123456789}`, "c_dec", "too many integer digits for DECIMAL(10, 2) (at most 8)"},
		{`{"id":1,"c_dec":{}}`, "c_dec", "got an object"},
		{`{"id":1,"c_char":"abcdef"}`, "c_char", "6 characters, more than CHAR(5) holds"},
		{`{"id":1,"c_string":5}`, "c_string", "a STRING column takes a string, got a number"},
		{`{"id":1,"c_binary":"AQID"}`, "c_binary", "3 bytes; BINARY(4) takes exactly 4"},
		{`{"id":1,"c_bytes":"!!"}`, "c_bytes", "not base64"},
		{`{"id":1,"c_date":"2026-02-30"}`, "c_date", `"2026-02-30" is not a DATE; write it as "2026-11-30"`},
		{`{"id":1,"c_date":"26-11-30"}`, "c_date", "is not a DATE"},
		{`{"id":1,"c_date":20261130}`, "c_date", `a DATE column takes a string like "2026-11-30", got a number`},
		{`{"id":1,"c_time3":"24:00:00"}`, "c_time3", "is not a TIME"},
		{`{"id":1,"c_time3":"13:45:00.1234"}`, "c_time3", "digits below the millisecond"},
		{`{"id":1,"c_time0":"13:45:00.5"}`, "c_time0", "more than the precision 0 of TIME(0)"},
		{`{"id":1,"c_ts3":"2026-11-30T13:45:00.1234"}`, "c_ts3", "more than the precision 3 of TIMESTAMP(3)"},
		{`{"id":1,"c_ts3":"2026-11-30T13:45:00Z"}`, "c_ts3", "(no time zone)"},
		{`{"id":1,"c_ts3":"2026-11-30T13:45"}`, "c_ts3", "is not a TIMESTAMP"},
		{`{"id":1,"c_ts9":"2262-04-12T00:00:00"}`, "c_ts9", "holds nanoseconds in an int64"},
		{`{"id":1,"c_ltz3":"2026-11-30T13:45:00"}`, "c_ltz3", "RFC 3339 with a zone"},
		{`{"id":1,"c_ltz3":"2026-11-30T13:45:00+25:00"}`, "c_ltz3", "is not a TIMESTAMP_LTZ"},
		{`{"id":1,"c_ltz3":"0000-01-01T00:00:00+01:00"}`, "c_ltz3", "outside years 0000..9999"},
	} {
		r, err := RowFromJSON(s, []byte(tc.in))
		if err == nil {
			t.Errorf("RowFromJSON(%s) = %v, want an error", tc.in, r)
			continue
		}
		ies := InvalidErrors(err)
		if len(ies) == 0 || ies[0].Field != tc.field || !strings.Contains(ies[0].Reason, tc.reason) {
			t.Errorf("RowFromJSON(%s) = %v; want field %q with reason containing %q", tc.in, err, tc.field, tc.reason)
		}
	}
	// Every problem at once.
	_, err := RowFromJSON(s, []byte(`{"x":1,"c_tinyint":300,"c_date":"no"}`))
	var fields []string
	for _, ie := range InvalidErrors(err) {
		fields = append(fields, ie.Field)
	}
	if got := strings.Join(fields, ","); got != "x,c_tinyint,c_date,id" {
		t.Errorf("problems on %s, want x,c_tinyint,c_date,id: %v", got, err)
	}
}

func TestJSONAppendPanicsOnWrongType(t *testing.T) {
	s := Schema{Columns: []Column{{Name: "a", Type: DataType{Root: Int, Nullable: true}}}}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `column "a": a INT column takes a int32, got int`) {
			t.Errorf("recovered %v", r)
		}
	}()
	AppendRowJSON(nil, s, Row{1})
}

func TestJSONFloatFormat(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		bits int
		want string
	}{
		{1.1, 64, "1.1"},
		{float64(float32(1.1)), 32, "1.1"},
		{1e20, 64, "100000000000000000000"},
		{1e21, 64, "1e+21"},
		{1e-6, 64, "0.000001"},
		{1e-7, 64, "1e-7"},
		{float64(float32(1e-7)), 32, "1e-7"},
		{math.MaxFloat64, 64, "1.7976931348623157e+308"},
		{math.Copysign(0, -1), 64, "-0"},
		{math.Inf(1), 64, `"Infinity"`},
	} {
		if got := string(appendJSONFloat(nil, tc.f, tc.bits)); got != tc.want {
			t.Errorf("appendJSONFloat(%v, %d) = %s, want %s", tc.f, tc.bits, got, tc.want)
		}
	}
}

func TestJSONStringEscaping(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\x00\x1f\n\r\t", "<>&", "\u2028\u2029", "日本", "\xff", "a\xc3"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("appendJSONString(%q) = %s, not JSON: %v", s, got, err)
			continue
		}
		want, _ := json.Marshal(s) // encoding/json replaces invalid UTF-8 the same way
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("appendJSONString(%q) reads back as %q, want %q", s, back, wantBack)
		}
	}
	if got := string(appendJSONString(nil, "<&>")); got != `"<&>"` {
		t.Errorf("HTML escaped: %s", got)
	}
}

// TestCSVRoundTrip writes each value in its text form and reads it back with
// RowFromCSV.
func TestCSVRoundTrip(t *testing.T) {
	s := everyTypeSchema(t)
	for i, r := range everyTypeRows(t) {
		fields := make([]string, len(r))
		for j, v := range r {
			fields[j] = string(AppendValueText(nil, s.Columns[j].Type, v))
		}
		back, err := RowFromCSV(s, fields)
		if err != nil {
			t.Errorf("row %d: RowFromCSV(%q): %v", i, fields, err)
			continue
		}
		for j := range r {
			if fields[j] == "" {
				r[j] = nil // the empty field is NULL: "" and empty BYTES do not survive
			}
		}
		if !back.Equal(r) {
			t.Errorf("row %d: RowFromCSV(%q) = %#v, want %#v", i, fields, back, r)
		}
	}
	if got := string(AppendValueText(nil, DataType{Root: Float}, float32(math.NaN()))); got != "NaN" {
		t.Errorf("NaN as text = %q", got)
	}
}

func TestCSVErrors(t *testing.T) {
	cols, _ := ParseColumns("a INT NOT NULL, b BOOLEAN, c DATE")
	s := Schema{Columns: cols}
	if r, err := RowFromCSV(s, []string{"1", "TRUE", "2026-11-30"}); err != nil || r[1] != true || r[2] != DateOf(2026, 11, 30) {
		t.Errorf("RowFromCSV = %v, %v", r, err)
	}
	_, err := RowFromCSV(s, []string{"", "yes", "x"})
	var got []string
	for _, ie := range InvalidErrors(err) {
		got = append(got, ie.Field+": "+ie.Reason)
	}
	want := []string{
		"a: NULL in a NOT NULL column of type INT NOT NULL",
		`b: "yes" is not a BOOLEAN; use true or false`,
		`c: "x" is not a DATE; write it as "2026-11-30"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_, err = RowFromCSV(s, []string{"1"})
	if ies := InvalidErrors(err); len(ies) != 1 || ies[0].Field != "row" || !strings.Contains(ies[0].Reason, "has 1 fields, the schema has 3 columns (a, b, c)") {
		t.Errorf("short line: %v", err)
	}
}

func TestJSONParseValue(t *testing.T) {
	v, err := ParseValue(DataType{Root: Decimal, Precision: 5, Scale: 1, Nullable: true}, "12.3")
	if err != nil || v.(DecimalValue).String() != "12.3" {
		t.Errorf("ParseValue = %v, %v", v, err)
	}
	if _, err := ParseValue(DataType{Root: Char, Length: 1}, "ab"); err == nil || !strings.HasPrefix(err.Error(), "value: ") {
		t.Errorf("ParseValue(CHAR(1), ab) = %v", err)
	}
}

func TestChangeType(t *testing.T) {
	for i, want := range []string{"+A", "+I", "-U", "+U", "-D"} {
		c := ChangeType(i)
		if c.String() != want || !c.Valid() {
			t.Errorf("ChangeType(%d) = %s, valid %v", i, c, c.Valid())
		}
		back, err := ParseChangeType(want)
		if err != nil || back != c {
			t.Errorf("ParseChangeType(%q) = %v, %v", want, back, err)
		}
	}
	if AppendOnly != 0 || Insert != 1 || UpdateBefore != 2 || UpdateAfter != 3 || Delete != 4 {
		t.Error("change type bytes are Fluss's")
	}
	if ChangeType(5).Valid() || ChangeType(-1).Valid() || ChangeType(5).String() != "ChangeType(5)" {
		t.Error("invalid change types")
	}
	if _, err := ParseChangeType("+X"); err == nil || !strings.Contains(err.Error(), "use +A, +I, -U, +U or -D") {
		t.Errorf("ParseChangeType(+X) = %v", err)
	}
}
