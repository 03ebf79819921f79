package record

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"
)

// everyTypeSchema has a column of every type, with several precisions of the
// temporal and decimal types, and one NOT NULL column.
func everyTypeSchema(t testing.TB) Schema {
	t.Helper()
	cols, err := ParseColumns("id INT NOT NULL, c_bool BOOLEAN, c_tinyint TINYINT, c_smallint SMALLINT, " +
		"c_bigint BIGINT, c_float FLOAT, c_double DOUBLE, c_dec DECIMAL(10, 2), c_dec0 DECIMAL(5, 0), " +
		"c_dec_big DECIMAL(38, 10), c_char CHAR(5), c_string STRING, c_binary BINARY(4), c_bytes BYTES, " +
		"c_date DATE, c_time0 TIME(0), c_time3 TIME(3), c_time6 TIME(6), " +
		"c_ts0 TIMESTAMP(0), c_ts3 TIMESTAMP(3), c_ts6 TIMESTAMP(6), c_ts9 TIMESTAMP(9), " +
		"c_ltz0 TIMESTAMP_LTZ(0), c_ltz3 TIMESTAMP_LTZ(3), c_ltz6 TIMESTAMP_LTZ(6), c_ltz9 TIMESTAMP_LTZ(9)")
	if err != nil {
		t.Fatal(err)
	}
	return Schema{Columns: cols}
}

func mustDecimal(t testing.TB, s string, p, sc int32) DecimalValue {
	t.Helper()
	d, err := ParseDecimal(s, p, sc)
	if err != nil {
		t.Fatalf("ParseDecimal(%q, %d, %d): %v", s, p, sc, err)
	}
	return d
}

func ntz(t testing.TB, s string) TimestampNTZ {
	t.Helper()
	m, n, ok := parseTimestamp(s, false)
	if !ok {
		t.Fatalf("bad timestamp %q", s)
	}
	return TimestampNTZ{m, n}
}

func ltz(t testing.TB, s string) Instant {
	t.Helper()
	m, n, ok := parseTimestamp(s, true)
	if !ok {
		t.Fatalf("bad instant %q", s)
	}
	return Instant{m, n}
}

// everyTypeRows are rows of everyTypeSchema: typical values, extremes, and
// NULLs.
func everyTypeRows(t testing.TB) []Row {
	return []Row{
		{int32(1), true, int8(7), int16(-300), int64(1234567890123), float32(1.5), 2.25,
			mustDecimal(t, "123.45", 10, 2), mustDecimal(t, "-42", 5, 0), mustDecimal(t, "1234567890123456789012345678.0123456789", 38, 10),
			"ab", "hello, world", []byte{0xde, 0xad, 0xbe, 0xef}, []byte("bytes"),
			DateOf(2026, 11, 30), TimeOfDayOf(13, 45, 0, 0), TimeOfDayOf(13, 45, 0, 123), TimeOfDayOf(23, 59, 59, 999),
			ntz(t, "2026-11-30T13:45:00"), ntz(t, "2026-11-30T13:45:00.123"), ntz(t, "2026-11-30T13:45:00.123456"), ntz(t, "2026-11-30T13:45:00.123456789"),
			ltz(t, "2026-11-30T13:45:00Z"), ltz(t, "2026-11-30T13:45:00.123Z"), ltz(t, "2026-11-30T14:45:00.123456+01:00"), ltz(t, "2026-11-30T13:45:00.123456789Z")},
		{int32(math.MinInt32), false, int8(math.MinInt8), int16(math.MinInt16), int64(math.MinInt64), float32(math.Inf(-1)), math.NaN(),
			mustDecimal(t, "-99999999.99", 10, 2), mustDecimal(t, "99999", 5, 0), mustDecimal(t, "-9999999999999999999999999999.9999999999", 38, 10),
			"ä\"\\\n\t", "", []byte{0, 0, 0, 0}, []byte{},
			MinDate, TimeOfDay(0), TimeOfDay(0), TimeOfDay(0),
			ntz(t, "0000-01-01T00:00:00"), ntz(t, "1969-12-31T23:59:59.999"), ntz(t, "1969-12-31T23:59:59.999999"), ntz(t, "1677-09-21T00:12:43.145224192"),
			ltz(t, "0000-01-01T00:00:00Z"), ltz(t, "1969-12-31T23:59:59.999Z"), ltz(t, "1900-01-01T00:00:00.000001Z"), ltz(t, "1969-12-31T23:59:59.999999999Z")},
		{int32(math.MaxInt32), nil, int8(math.MaxInt8), int16(math.MaxInt16), int64(math.MaxInt64), float32(math.Copysign(0, -1)), math.Inf(1),
			mustDecimal(t, "0.05", 10, 2), mustDecimal(t, "0", 5, 0), mustDecimal(t, "0.0000000001", 38, 10),
			"5char", "日本語 \u2028 <html> & \x01", []byte{1, 2, 3, 4}, []byte{0xff},
			MaxDate, TimeOfDayOf(23, 59, 59, 0), TimeOfDayOf(0, 0, 0, 1), TimeOfDayOf(0, 0, 0, 1),
			ntz(t, "9999-12-31T23:59:59"), ntz(t, "9999-12-31T23:59:59.999"), ntz(t, "9999-12-31T23:59:59.999999"), ntz(t, "2262-04-11T23:47:16.854775807"),
			ltz(t, "9999-12-31T23:59:59Z"), ltz(t, "9999-12-31T23:59:59.999Z"), ltz(t, "9999-12-31T23:59:59.999999Z"), ltz(t, "2262-04-11T23:47:16.854775807Z")},
		{int32(0), nil, nil, nil, nil, float32(math.SmallestNonzeroFloat32), -1e-300,
			nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
		{int32(-1), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
	}
}

func TestValueEveryTypeRowsCheck(t *testing.T) {
	s := everyTypeSchema(t)
	for i, r := range everyTypeRows(t) {
		if err := s.CheckRow(r); err != nil {
			t.Errorf("row %d: %v", i, err)
		}
	}
}

func TestValueDateRange(t *testing.T) {
	if got := DateOf(0, 1, 1); got != MinDate {
		t.Errorf("DateOf(0000-01-01) = %d, MinDate = %d", got, MinDate)
	}
	if got := DateOf(9999, 12, 31); got != MaxDate {
		t.Errorf("DateOf(9999-12-31) = %d, MaxDate = %d", got, MaxDate)
	}
	if got := DateOf(1969, 12, 31); got != -1 {
		t.Errorf("DateOf(1969-12-31) = %d", got)
	}
	if got := DateValue(-1).String(); got != "1969-12-31" {
		t.Errorf("String = %q", got)
	}
	if got := MinDate.String(); got != "0000-01-01" {
		t.Errorf("MinDate = %q", got)
	}
}

func TestValueTimeConversions(t *testing.T) {
	tm := time.Date(1969, 12, 31, 23, 59, 59, 999_999_001, time.FixedZone("x", 3600))
	i := InstantOf(tm)
	if i.EpochMillis != -3600001 || i.NanoOfMilli != 999001 {
		t.Errorf("InstantOf = %+v", i)
	}
	if !i.Time().Equal(tm) {
		t.Errorf("Instant.Time = %v, want %v", i.Time(), tm)
	}
	n := TimestampNTZOf(tm) // wall clock kept, zone dropped
	if n.Millis != -1 || n.NanoOfMilli != 999001 {
		t.Errorf("TimestampNTZOf = %+v", n)
	}
	if got := n.String(); got != "1969-12-31T23:59:59.999999001" {
		t.Errorf("String = %q", got)
	}
	if got := (Instant{EpochMillis: 1500}).String(); got != "1970-01-01T00:00:01.500Z" {
		t.Errorf("String = %q", got)
	}
	if got := TimeOfDayOf(1, 2, 3, 4).String(); got != "01:02:03.004" {
		t.Errorf("String = %q", got)
	}
}

func TestDecimal(t *testing.T) {
	for _, tc := range []struct {
		in        string
		p, s      int32
		want      string
		unscaled  string
		wantError string
	}{
		{"123.45", 10, 2, "123.45", "12345", ""},
		{"-0.5", 3, 2, "-0.50", "-50", ""},
		{"+7", 5, 0, "7", "7", ""},
		{"7.", 5, 1, "7.0", "70", ""},
		{".5", 5, 1, "0.5", "5", ""},
		{"1e3", 5, 0, "1000", "1000", ""},
		{"1.5E-1", 5, 2, "0.15", "15", ""},
		{"1.230", 5, 2, "1.23", "123", ""}, // trailing zeros beyond the scale are fine
		{"0.000", 1, 0, "0", "0", ""},
		{"-0", 1, 0, "0", "0", ""},
		{"99999999999999999999999999999999999999", 38, 0, "99999999999999999999999999999999999999", "99999999999999999999999999999999999999", ""},
		{"-9.99999999999999999999999999999999999", 38, 37, "-9.9999999999999999999999999999999999900", "-99999999999999999999999999999999999900", ""},
		{"10", 38, 37, "", "", "too many integer digits"},
		{"1.234", 5, 2, "", "", "more than 2 fraction digits"},
		{"1000", 5, 2, "", "", "too many integer digits for DECIMAL(5, 2) (at most 3)"},
		{"1e40", 38, 0, "", "", "too many integer digits"},
		{"1e9999", 38, 0, "", "", "exponent out of range"},
		{"abc", 5, 2, "", "", "not a decimal number"},
		{"", 5, 2, "", "", "not a decimal number"},
		{"1.2.3", 5, 2, "", "", "not a decimal number"},
		{"1e", 5, 2, "", "", "not a decimal number"},
		{"--1", 5, 2, "", "", "not a decimal number"},
		{"1", 0, 0, "", "", "precision must be between 1 and 38"},
		{"1", 5, 6, "", "", "scale must be between 0 and the precision"},
	} {
		d, err := ParseDecimal(tc.in, tc.p, tc.s)
		if tc.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("ParseDecimal(%q, %d, %d) = %v, %v; want error containing %q", tc.in, tc.p, tc.s, d, err, tc.wantError)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseDecimal(%q, %d, %d): %v", tc.in, tc.p, tc.s, err)
			continue
		}
		if got := d.String(); got != tc.want {
			t.Errorf("ParseDecimal(%q, %d, %d) = %s, want %s", tc.in, tc.p, tc.s, got, tc.want)
		}
		if got := d.Unscaled().String(); got != tc.unscaled {
			t.Errorf("ParseDecimal(%q).Unscaled = %s, want %s", tc.in, got, tc.unscaled)
		}
		back, err := ParseDecimal(d.String(), tc.p, tc.s)
		if err != nil || !back.Equal(d) {
			t.Errorf("String %s reads back as %v, %v", d, back, err)
		}
	}
	big19, _ := new(big.Int).SetString("-1234567890123456789012", 10)
	d, err := NewDecimal(big19, 22, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.UnscaledInt64(); ok {
		t.Error("UnscaledInt64 of a 22-digit value reports ok")
	}
	if d.String() != "-1234567890123456789.012" || d.Sign() != -1 || d.IsCompact() {
		t.Errorf("got %s sign %d compact %v", d, d.Sign(), d.IsCompact())
	}
	big19.SetInt64(0) // NewDecimal does not retain its argument
	if d.String() != "-1234567890123456789.012" {
		t.Errorf("NewDecimal retained its argument: %s", d)
	}
	if _, err := NewDecimal(big.NewInt(100000), 5, 0); err == nil {
		t.Error("NewDecimal(100000, 5, 0) accepted a 6-digit value")
	}
	small, _ := DecimalFromInt64(-5, 18, 1)
	if u, ok := small.UnscaledInt64(); !ok || u != -5 || !small.IsCompact() || small.String() != "-0.5" {
		t.Errorf("DecimalFromInt64(-5, 18, 1) = %s %d %v", small, u, ok)
	}
	mn, _ := DecimalFromInt64(math.MinInt64, 19, 0)
	if mn.String() != "-9223372036854775808" {
		t.Errorf("MinInt64 decimal = %s", mn)
	}
	a, b := mustDecimal(t, "1.5", 10, 2), mustDecimal(t, "1.50", 10, 2)
	if !a.Equal(b) || a.Equal(mustDecimal(t, "1.5", 11, 2)) {
		t.Error("Equal compares value, precision and scale")
	}
}

func TestValueCheck(t *testing.T) {
	typ := func(s string) DataType {
		dt, err := ParseDataType(s)
		if err != nil {
			t.Fatal(err)
		}
		return dt
	}
	for _, tc := range []struct {
		typ  string
		v    any
		want string // "" = valid
	}{
		{"INT", int32(1), ""},
		{"INT", nil, ""},
		{"INT NOT NULL", nil, "NULL in a NOT NULL column of type INT NOT NULL"},
		{"INT", 1, "a INT column takes a int32, got int"},
		{"INT", int64(1), "got int64"},
		{"BOOLEAN", "true", "takes a bool, got string"},
		{"TINYINT", int16(1), "takes a int8"},
		{"SMALLINT", int8(1), "takes a int16"},
		{"BIGINT", int32(1), "takes a int64"},
		{"FLOAT", 1.0, "takes a float32, got float64"},
		{"DOUBLE", float32(1), "takes a float64"},
		{"FLOAT", float32(math.NaN()), ""},
		{"CHAR(3)", "abc", ""},
		{"CHAR(3)", "äöü", ""},
		{"CHAR(3)", "abcd", `"abcd" has 4 characters, more than CHAR(3) holds`},
		{"STRING", "\xff", "not valid UTF-8"},
		{"STRING", []byte("x"), "takes a string, got []uint8"},
		{"BINARY(2)", []byte{1, 2}, ""},
		{"BINARY(2)", []byte{1}, "1 bytes; BINARY(2) takes exactly 2"},
		{"BYTES", []byte(nil), ""},
		{"BYTES", "x", "takes a []byte"},
		{"DECIMAL(5, 2)", mustDecimal(t, "1.5", 5, 2), ""},
		{"DECIMAL(5, 2)", mustDecimal(t, "1.5", 6, 2), "is a DECIMAL(6, 2), the column is DECIMAL(5, 2)"},
		{"DECIMAL(5, 2)", DecimalValue{}, "is a DECIMAL(0, 0)"},
		{"DECIMAL(5, 2)", DecimalValue{Precision: 5, Scale: 2, small: 100000}, "has 6 digits, more than the precision 5"},
		{"DECIMAL(5, 2)", "1.5", "takes a record.DecimalValue, got string"},
		{"DATE", DateValue(0), ""},
		{"DATE", MaxDate + 1, "outside years 0000..9999"},
		{"DATE", MinDate - 1, "outside years 0000..9999"},
		{"DATE", int32(0), "takes a record.DateValue, got int32"},
		{"TIME(3)", TimeOfDay(msPerDay - 1), ""},
		{"TIME(3)", TimeOfDay(msPerDay), "not a time of day"},
		{"TIME(3)", TimeOfDay(-1), "not a time of day"},
		{"TIME(0)", TimeOfDay(1000), ""},
		{"TIME(0)", TimeOfDay(1500), "00:00:01.500 has 1 fraction digits, more than the precision 0 of TIME(0)"},
		{"TIME(1)", TimeOfDay(1510), "has 2 fraction digits"},
		{"TIME(9)", TimeOfDay(1), ""},
		{"TIMESTAMP(3)", TimestampNTZ{1, 0}, ""},
		{"TIMESTAMP(3)", TimestampNTZ{1, 1}, "has 9 fraction digits, more than the precision 3"},
		{"TIMESTAMP(6)", TimestampNTZ{1, 1000}, ""},
		{"TIMESTAMP(0)", TimestampNTZ{-1000, 0}, ""},
		{"TIMESTAMP(0)", TimestampNTZ{-1, 0}, "has 3 fraction digits"},
		{"TIMESTAMP(6)", TimestampNTZ{0, 1_000_000}, "nano-of-millisecond 1000000 is out of range"},
		{"TIMESTAMP(6)", TimestampNTZ{0, -1}, "out of range"},
		{"TIMESTAMP(6)", TimestampNTZ{maxTimestampMillis + 1, 0}, "outside years 0000..9999"},
		{"TIMESTAMP(6)", TimestampNTZ{minTimestampMillis, 0}, ""},
		{"TIMESTAMP(9)", TimestampNTZ{maxNanoMillis, 775807}, ""},
		{"TIMESTAMP(9)", TimestampNTZ{maxNanoMillis, 775808}, "holds nanoseconds in an int64"},
		{"TIMESTAMP(9)", TimestampNTZ{minNanoMillis, 224192}, ""},
		{"TIMESTAMP(9)", TimestampNTZ{minNanoMillis, 224191}, "holds nanoseconds in an int64"},
		{"TIMESTAMP(6)", Instant{}, "takes a record.TimestampNTZ, got record.Instant"},
		{"TIMESTAMP_LTZ(6)", TimestampNTZ{}, "takes a record.Instant, got record.TimestampNTZ"},
		{"TIMESTAMP_LTZ(3)", Instant{1, 0}, ""},
		{"TIMESTAMP_LTZ(3)", Instant{1, 5}, "1970-01-01T00:00:00.001000005Z has 9 fraction digits, more than the precision 3 of TIMESTAMP_LTZ(3)"},
	} {
		err := CheckValue(typ(tc.typ), tc.v)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckValue(%s, %#v) = %v", tc.typ, tc.v, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckValue(%s, %#v) = %v; want error containing %q", tc.typ, tc.v, err, tc.want)
		}
		var ie *InvalidError
		if err != nil && (!errors.As(err, &ie) || ie.Field != "value") {
			t.Errorf("CheckValue(%s, %#v) error %v is not an *InvalidError on \"value\"", tc.typ, tc.v, err)
		}
	}
}

func TestRowCheckReportsEveryColumn(t *testing.T) {
	s := everyTypeSchema(t)
	r := everyTypeRows(t)[0]
	r[0] = nil               // id NOT NULL
	r[2] = int32(1)          // c_tinyint
	r[10] = "toolong"        // c_char CHAR(5)
	r[12] = []byte{1}        // c_binary BINARY(4)
	r[16] = TimeOfDay(1_500) // c_time3 fine; c_time0 below
	r[15] = TimeOfDay(1_500)
	err := s.CheckRow(r)
	var fields []string
	for _, ie := range InvalidErrors(err) {
		fields = append(fields, ie.Field)
	}
	if got, want := strings.Join(fields, ","), "id,c_tinyint,c_char,c_binary,c_time0"; got != want {
		t.Errorf("CheckRow reported %s (%v), want %s", got, err, want)
	}
	err = s.CheckRow(Row{int32(1)})
	if ies := InvalidErrors(err); len(ies) != 1 || ies[0].Field != "row" || !strings.Contains(ies[0].Reason, "has 1 values, the schema has 26 columns (id, c_bool,") {
		t.Errorf("short row: %v", err)
	}
}

func TestRowEqual(t *testing.T) {
	a := Row{float32(math.NaN()), []byte(nil), mustDecimal(t, "1", 5, 0), nil, "x"}
	b := Row{float32(math.NaN()), []byte{}, mustDecimal(t, "1.0", 5, 0), nil, "x"}
	if !a.Equal(b) {
		t.Error("rows differ")
	}
	for i, c := range []Row{
		{float32(math.NaN()), []byte{}, mustDecimal(t, "1", 5, 0), nil, "y"},
		{float32(math.NaN()), []byte{}, mustDecimal(t, "1", 5, 0), int32(0), "x"},
		{float64(math.NaN()), []byte{}, mustDecimal(t, "1", 5, 0), nil, "x"},
		{float32(math.NaN()), []byte{}, mustDecimal(t, "1", 5, 0), nil},
	} {
		if a.Equal(c) {
			t.Errorf("case %d: rows equal", i)
		}
	}
	if ValueEqual(float32(0), float32(math.Copysign(0, -1))) {
		t.Error("0 equals -0")
	}
}

// Checking a compact DECIMAL's digits, done for every value written, does
// not allocate; too many digits are still caught.
func TestCompactDecimalDigitsCheck(t *testing.T) {
	ok := DecimalValue{Precision: 10, Scale: 2, small: -9999999999}
	if n := testing.AllocsPerRun(100, func() { _ = ok.digitsProblem() }); n != 0 || ok.digitsProblem() != "" {
		t.Fatalf("%d allocations, problem %q", int(n), ok.digitsProblem())
	}
	for _, d := range []DecimalValue{{Precision: 10, small: 10000000000}, {Precision: 10, small: -10000000000}, {Precision: 18, small: math.MinInt64}} {
		if d.digitsProblem() == "" {
			t.Errorf("%v in DECIMAL(%d): no problem found", d.small, d.Precision)
		}
	}
}
