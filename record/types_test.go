package record

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseDataType(t *testing.T) {
	tests := []struct {
		in        string
		want      DataType
		canonical string
		json      string // Fluss's DataTypeJsonSerde output
	}{
		{"BOOLEAN", DataType{Root: Boolean, Nullable: true}, "BOOLEAN", `{"type":"BOOLEAN"}`},
		{"boolean not null", DataType{Root: Boolean}, "BOOLEAN NOT NULL", `{"type":"BOOLEAN","nullable":false}`},
		{"TINYINT", DataType{Root: TinyInt, Nullable: true}, "TINYINT", `{"type":"TINYINT"}`},
		{"SmallInt NULL", DataType{Root: SmallInt, Nullable: true}, "SMALLINT", `{"type":"SMALLINT"}`},
		{"INT", DataType{Root: Int, Nullable: true}, "INT", `{"type":"INTEGER"}`},
		{"integer NOT NULL", DataType{Root: Int}, "INT NOT NULL", `{"type":"INTEGER","nullable":false}`},
		{"BIGINT NOT NULL", DataType{Root: BigInt}, "BIGINT NOT NULL", `{"type":"BIGINT","nullable":false}`},
		{"FLOAT", DataType{Root: Float, Nullable: true}, "FLOAT", `{"type":"FLOAT"}`},
		{"DOUBLE", DataType{Root: Double, Nullable: true}, "DOUBLE", `{"type":"DOUBLE"}`},
		{"double precision not null", DataType{Root: Double}, "DOUBLE NOT NULL", `{"type":"DOUBLE","nullable":false}`},
		{"DECIMAL", DataType{Root: Decimal, Nullable: true, Precision: 10}, "DECIMAL(10, 0)", `{"type":"DECIMAL","precision":10,"scale":0}`},
		{"DECIMAL(5)", DataType{Root: Decimal, Nullable: true, Precision: 5}, "DECIMAL(5, 0)", `{"type":"DECIMAL","precision":5,"scale":0}`},
		{"decimal( 15 , 5 ) not null", DataType{Root: Decimal, Precision: 15, Scale: 5}, "DECIMAL(15, 5) NOT NULL", `{"type":"DECIMAL","nullable":false,"precision":15,"scale":5}`},
		{"NUMERIC(38, 38)", DataType{Root: Decimal, Nullable: true, Precision: 38, Scale: 38}, "DECIMAL(38, 38)", `{"type":"DECIMAL","precision":38,"scale":38}`},
		{"DEC(1,0)", DataType{Root: Decimal, Nullable: true, Precision: 1}, "DECIMAL(1, 0)", `{"type":"DECIMAL","precision":1,"scale":0}`},
		{"CHAR", DataType{Root: Char, Nullable: true, Length: 1}, "CHAR(1)", `{"type":"CHAR","length":1}`},
		{"CHAR(5) NOT NULL", DataType{Root: Char, Length: 5}, "CHAR(5) NOT NULL", `{"type":"CHAR","nullable":false,"length":5}`},
		{"STRING", DataType{Root: String, Nullable: true}, "STRING", `{"type":"STRING"}`},
		{"varchar", DataType{Root: String, Nullable: true}, "STRING", `{"type":"STRING"}`},
		{"VARCHAR(100) NOT NULL", DataType{Root: String}, "STRING NOT NULL", `{"type":"STRING","nullable":false}`},
		{"BINARY", DataType{Root: Binary, Nullable: true, Length: 1}, "BINARY(1)", `{"type":"BINARY","length":1}`},
		{"BINARY(100)", DataType{Root: Binary, Nullable: true, Length: 100}, "BINARY(100)", `{"type":"BINARY","length":100}`},
		{"BYTES", DataType{Root: Bytes, Nullable: true}, "BYTES", `{"type":"BYTES"}`},
		{"VARBINARY(8)", DataType{Root: Bytes, Nullable: true}, "BYTES", `{"type":"BYTES"}`},
		{"DATE NOT NULL", DataType{Root: Date}, "DATE NOT NULL", `{"type":"DATE","nullable":false}`},
		{"TIME", DataType{Root: Time, Nullable: true}, "TIME(0)", `{"type":"TIME_WITHOUT_TIME_ZONE","precision":0}`},
		{"TIME(3) WITHOUT TIME ZONE", DataType{Root: Time, Nullable: true, Precision: 3}, "TIME(3)", `{"type":"TIME_WITHOUT_TIME_ZONE","precision":3}`},
		{"TIMESTAMP", DataType{Root: Timestamp, Nullable: true, Precision: 6}, "TIMESTAMP(6)", `{"type":"TIMESTAMP_WITHOUT_TIME_ZONE","precision":6}`},
		{"timestamp(3) without time zone not null", DataType{Root: Timestamp, Precision: 3}, "TIMESTAMP(3) NOT NULL", `{"type":"TIMESTAMP_WITHOUT_TIME_ZONE","nullable":false,"precision":3}`},
		{"TIMESTAMP(9)", DataType{Root: Timestamp, Nullable: true, Precision: 9}, "TIMESTAMP(9)", `{"type":"TIMESTAMP_WITHOUT_TIME_ZONE","precision":9}`},
		{"TIMESTAMP_LTZ", DataType{Root: TimestampLTZ, Nullable: true, Precision: 6}, "TIMESTAMP_LTZ(6)", `{"type":"TIMESTAMP_WITH_LOCAL_TIME_ZONE","precision":6}`},
		{"TIMESTAMP_LTZ(3)", DataType{Root: TimestampLTZ, Nullable: true, Precision: 3}, "TIMESTAMP_LTZ(3)", `{"type":"TIMESTAMP_WITH_LOCAL_TIME_ZONE","precision":3}`},
		{"TIMESTAMP(0) WITH LOCAL TIME ZONE NOT NULL", DataType{Root: TimestampLTZ}, "TIMESTAMP_LTZ(0) NOT NULL", `{"type":"TIMESTAMP_WITH_LOCAL_TIME_ZONE","nullable":false,"precision":0}`},
		{"timestamp with local time zone", DataType{Root: TimestampLTZ, Nullable: true, Precision: 6}, "TIMESTAMP_LTZ(6)", `{"type":"TIMESTAMP_WITH_LOCAL_TIME_ZONE","precision":6}`},
		{"  BIGINT\n\tNOT   NULL  ", DataType{Root: BigInt}, "BIGINT NOT NULL", `{"type":"BIGINT","nullable":false}`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDataType(tc.in)
			if err != nil {
				t.Fatalf("ParseDataType(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Fatalf("ParseDataType(%q) = %#v, want %#v", tc.in, got, tc.want)
			}
			if s := got.String(); s != tc.canonical {
				t.Errorf("String() = %q, want %q", s, tc.canonical)
			}
			again, err := ParseDataType(got.String())
			if err != nil || again != got {
				t.Errorf("ParseDataType(String()) = %#v, %v; want %#v", again, err, got)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(b) != tc.json {
				t.Errorf("JSON = %s, want %s", b, tc.json)
			}
			var back DataType
			if err := json.Unmarshal(b, &back); err != nil || back != got {
				t.Errorf("Unmarshal(%s) = %#v, %v; want %#v", b, back, err, got)
			}
		})
	}
}

func TestParseDataTypeErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string // substrings of the error
	}{
		{"", []string{"empty type", "BOOLEAN", "TIMESTAMP_LTZ(p)"}},
		{"FOO", []string{`unknown type "FOO"`, "known types are BOOLEAN, TINYINT"}},
		{"LONG NOT NULL", []string{`unknown type "LONG"`}},
		{"ARRAY<INT>", []string{"unexpected character '<'"}},
		{"ARRAY", []string{"ARRAY is not supported yet"}},
		{"DECIMAL(0)", []string{"DECIMAL precision must be between 1 and 38, got 0"}},
		{"DECIMAL(39, 2)", []string{"DECIMAL precision must be between 1 and 38, got 39"}},
		{"DECIMAL(5, 6)", []string{"DECIMAL scale must be between 0 and the precision 5, got 6"}},
		{"DECIMAL(1, 2, 3)", []string{"DECIMAL takes at most 2 parameters, got 3"}},
		{"DECIMAL(10", []string{"missing ')'"}},
		{"DECIMAL(10,)", []string{`expected a number, got ")"`}},
		{"DECIMAL(x)", []string{`expected a number, got "X"`}},
		{"CHAR(0)", []string{"CHAR length must be between 1 and 2147483647, got 0"}},
		{"CHAR(2147483648)", []string{"parameter 2147483648 is too large"}},
		{"CHAR(-1)", []string{"unexpected character '-'"}},
		{"BINARY(0)", []string{"BINARY length must be between 1"}},
		{"VARCHAR(0)", []string{"VARCHAR length must be between 1"}},
		{"TIME(10)", []string{"TIME precision must be between 0 and 9, got 10"}},
		{"TIMESTAMP(10)", []string{"TIMESTAMP precision must be between 0 and 9, got 10"}},
		{"TIMESTAMP_LTZ(12)", []string{"TIMESTAMP_LTZ precision must be between 0 and 9, got 12"}},
		{"TIMESTAMP WITH TIME ZONE", []string{"TIMESTAMP WITH TIME ZONE is not supported; use TIMESTAMP_LTZ"}},
		{"STRING(10)", []string{"STRING takes no parameters"}},
		{"INT(3)", []string{"INT takes no parameters"}},
		{"TIME(1, 2)", []string{"TIME takes one parameter, got 2"}},
		{"INT NOT", []string{`unexpected "NOT"`}},
		{"INT NULL NOT NULL", []string{`unexpected "NOT"`}},
		{"BIGINT PRIMARY KEY", []string{`unexpected "PRIMARY"`}},
		{"(INT)", []string{"must start with a type name"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseDataType(tc.in)
			if err == nil {
				t.Fatalf("ParseDataType(%q) succeeded, want error", tc.in)
			}
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Field != "type" {
				t.Errorf("error %v is not an *InvalidError with Field \"type\"", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestDataTypeValidate(t *testing.T) {
	tests := []struct {
		name string
		t    DataType
		want string // "" for valid
	}{
		{"zero value", DataType{}, "unknown type root 0"},
		{"int with precision", DataType{Root: Int, Precision: 3}, "INT takes no length/precision/scale"},
		{"char without length", DataType{Root: Char}, "CHAR length must be between 1"},
		{"decimal zero", DataType{Root: Decimal}, "DECIMAL precision must be between 1 and 38, got 0"},
		{"decimal negative scale", DataType{Root: Decimal, Precision: 5, Scale: -1}, "DECIMAL scale must be between 0"},
		{"time negative", DataType{Root: Time, Precision: -1}, "TIME precision must be between 0 and 9"},
		{"timestamp with length", DataType{Root: Timestamp, Precision: 3, Length: 2}, "TIMESTAMP takes no length"},
		{"valid", DataType{Root: Decimal, Precision: 5, Scale: 2, Nullable: true}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.t.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want error containing %q", err, tc.want)
			}
			if _, err := json.Marshal(tc.t); err == nil {
				t.Errorf("Marshal of an invalid type succeeded")
			}
		})
	}
}

func TestDataTypeUnmarshalErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{`{}`, `missing "type"`},
		{`{"type":"VARCHAR"}`, `unsupported type "VARCHAR"`},
		{`{"type":"ARRAY","element_type":{"type":"INTEGER"}}`, `unsupported type "ARRAY"`},
		{`{"type":"CHAR"}`, `missing "length"`},
		{`{"type":"DECIMAL","precision":10}`, `missing "scale"`},
		{`{"type":"TIME_WITHOUT_TIME_ZONE"}`, `missing "precision"`},
		{`{"type":"DECIMAL","precision":50,"scale":0}`, "precision must be between 1 and 38"},
		{`{"type":"BIGINT","nullable":"no"}`, "cannot unmarshal"},
		{`[1]`, "cannot unmarshal"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var dt DataType
			err := json.Unmarshal([]byte(tc.in), &dt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Unmarshal(%s) = %v, want error containing %q", tc.in, err, tc.want)
			}
		})
	}
	// Extra fields are ignored and nullable defaults to true, as in Fluss.
	var dt DataType
	if err := json.Unmarshal([]byte(`{"type":"INTEGER","extra":1}`), &dt); err != nil || dt != (DataType{Root: Int, Nullable: true}) {
		t.Fatalf("Unmarshal with extra field = %#v, %v", dt, err)
	}
}

func TestWithNullable(t *testing.T) {
	dt := DataType{Root: BigInt, Nullable: true}
	if got := dt.WithNullable(false); got.Nullable || got.Root != BigInt {
		t.Fatalf("WithNullable(false) = %#v", got)
	}
	if !dt.Nullable {
		t.Fatal("WithNullable modified its receiver")
	}
	if got := TypeRoot(99).String(); got != "TypeRoot(99)" {
		t.Fatalf("TypeRoot(99).String() = %q", got)
	}
}
