package record

import (
	"reflect"
	"testing"
)

func FuzzParseDataType(f *testing.F) {
	for _, s := range []string{
		"BOOLEAN", "tinyint not null", "SMALLINT NULL", "INT", "INTEGER", "BIGINT NOT NULL", "FLOAT",
		"DOUBLE PRECISION", "DECIMAL", "DECIMAL(10)", "DECIMAL(38, 18) NOT NULL", "NUMERIC(5,2)",
		"CHAR", "CHAR(10)", "STRING", "VARCHAR(255)", "BINARY(16)", "BYTES", "VARBINARY", "DATE",
		"TIME", "TIME(3) WITHOUT TIME ZONE", "TIMESTAMP", "TIMESTAMP(9) NOT NULL", "TIMESTAMP_LTZ(3)",
		"TIMESTAMP(3) WITH LOCAL TIME ZONE", "DECIMAL(", "CHAR(2147483648)", "ARRAY<INT>", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dt, err := ParseDataType(s)
		if err != nil {
			return
		}
		if err := dt.Validate(); err != nil {
			t.Fatalf("ParseDataType(%q) = %#v, which does not validate: %v", s, dt, err)
		}
		again, err := ParseDataType(dt.String())
		if err != nil || again != dt {
			t.Fatalf("ParseDataType(%q) = %#v; its String %q parses to %#v, %v", s, dt, dt.String(), again, err)
		}
		b, err := dt.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON(%#v): %v", dt, err)
		}
		var back DataType
		if err := back.UnmarshalJSON(b); err != nil || back != dt {
			t.Fatalf("JSON %s reads back as %#v, %v; want %#v", b, back, err, dt)
		}
	})
}

func FuzzParseColumns(f *testing.F) {
	for _, s := range []string{
		"a BIGINT NOT NULL, b STRING, c DECIMAL(10, 2) COMMENT 'x'",
		"`order id` INT COMMENT 'it''s', `a``b` STRING",
		"a INT,", "a DECIMAL(10, 2, b INT", "a INT COMMENT 'unterminated",
		"größe DOUBLE, comment STRING COMMENT ''",
		"a INT, PRIMARY KEY (a) NOT ENFORCED", "`` INT", "a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cols, err := ParseColumns(s)
		if err != nil {
			if len(InvalidErrors(err)) == 0 {
				t.Fatalf("ParseColumns(%q) error %v has no *InvalidError", s, err)
			}
			return
		}
		if len(cols) == 0 {
			t.Fatalf("ParseColumns(%q) returned no columns and no error", s)
		}
		text := FormatColumns(cols)
		again, err := ParseColumns(text)
		if err != nil || !reflect.DeepEqual(again, cols) {
			t.Fatalf("ParseColumns(%q) = %#v; FormatColumns %q parses to %#v, %v", s, cols, text, again, err)
		}
		schema := Schema{Columns: cols}
		b, err := schema.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		var back Schema
		if err := back.UnmarshalJSON(b); err != nil || !reflect.DeepEqual(back, schema) {
			t.Fatalf("schema JSON %s reads back as %#v, %v", b, back, err)
		}
	})
}

func FuzzSchemaJSON(f *testing.F) {
	f.Add(`{"version":1,"columns":[{"name":"a","data_type":{"type":"INTEGER","nullable":false},"comment":"c","id":0}],"primary_key":["a"],"highest_field_id":0}`)
	f.Add(`{"columns":[{"name":"b","data_type":{"type":"DECIMAL","precision":10,"scale":2}}]}`)
	f.Add(`{"columns":[{"name":"t","data_type":{"type":"TIMESTAMP_WITH_LOCAL_TIME_ZONE","precision":3}},{"name":"c","data_type":{"type":"CHAR","length":2}}]}`)
	f.Add(`{"version":2}`)
	f.Fuzz(func(t *testing.T, s string) {
		var schema Schema
		if err := schema.UnmarshalJSON([]byte(s)); err != nil {
			return
		}
		b, err := schema.MarshalJSON()
		if err != nil {
			t.Fatalf("schema read from %q does not marshal: %v", s, err)
		}
		var back Schema
		if err := back.UnmarshalJSON(b); err != nil || !reflect.DeepEqual(back, schema) {
			t.Fatalf("%s reads back as %#v, %v; want %#v", b, back, err, schema)
		}
	})
}
