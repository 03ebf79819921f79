package record

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func TestParseColumns(t *testing.T) {
	tests := []struct {
		name string
		ddl  string
		want []Column
	}{
		{
			name: "one column",
			ddl:  "a BIGINT NOT NULL",
			want: []Column{{Name: "a", Type: DataType{Root: BigInt}}},
		},
		{
			name: "commas inside parentheses and comments",
			ddl:  "a BIGINT NOT NULL, b STRING, c DECIMAL(10, 2) COMMENT 'x, (y)'",
			want: []Column{
				{Name: "a", Type: DataType{Root: BigInt}},
				{Name: "b", Type: DataType{Root: String, Nullable: true}},
				{Name: "c", Type: DataType{Root: Decimal, Nullable: true, Precision: 10, Scale: 2}, Comment: "x, (y)"},
			},
		},
		{
			name: "backticks and escapes",
			ddl:  "`order id` INT comment 'it''s the id', `a``b` STRING, `select` DATE, `primary` INT",
			want: []Column{
				{Name: "order id", Type: DataType{Root: Int, Nullable: true}, Comment: "it's the id"},
				{Name: "a`b", Type: DataType{Root: String, Nullable: true}},
				{Name: "select", Type: DataType{Root: Date, Nullable: true}},
				{Name: "primary", Type: DataType{Root: Int, Nullable: true}},
			},
		},
		{
			name: "every type",
			ddl: `c_bool BOOLEAN, c_tiny TINYINT, c_small SMALLINT, c_int INT NOT NULL, c_big BIGINT,
				c_float FLOAT, c_double DOUBLE, c_dec DECIMAL(20, 4), c_char CHAR(3), c_str STRING,
				c_bin BINARY(16), c_bytes BYTES, c_date DATE, c_time TIME(3), c_ts TIMESTAMP(6),
				c_ltz TIMESTAMP_LTZ(3) COMMENT 'when'`,
			want: []Column{
				{Name: "c_bool", Type: DataType{Root: Boolean, Nullable: true}},
				{Name: "c_tiny", Type: DataType{Root: TinyInt, Nullable: true}},
				{Name: "c_small", Type: DataType{Root: SmallInt, Nullable: true}},
				{Name: "c_int", Type: DataType{Root: Int}},
				{Name: "c_big", Type: DataType{Root: BigInt, Nullable: true}},
				{Name: "c_float", Type: DataType{Root: Float, Nullable: true}},
				{Name: "c_double", Type: DataType{Root: Double, Nullable: true}},
				{Name: "c_dec", Type: DataType{Root: Decimal, Nullable: true, Precision: 20, Scale: 4}},
				{Name: "c_char", Type: DataType{Root: Char, Nullable: true, Length: 3}},
				{Name: "c_str", Type: DataType{Root: String, Nullable: true}},
				{Name: "c_bin", Type: DataType{Root: Binary, Nullable: true, Length: 16}},
				{Name: "c_bytes", Type: DataType{Root: Bytes, Nullable: true}},
				{Name: "c_date", Type: DataType{Root: Date, Nullable: true}},
				{Name: "c_time", Type: DataType{Root: Time, Nullable: true, Precision: 3}},
				{Name: "c_ts", Type: DataType{Root: Timestamp, Nullable: true, Precision: 6}},
				{Name: "c_ltz", Type: DataType{Root: TimestampLTZ, Nullable: true, Precision: 3}, Comment: "when"},
			},
		},
		{
			name: "unicode names and a column called comment",
			ddl:  "größe DOUBLE, comment STRING COMMENT '', Ünïcode_1$ INT",
			want: []Column{
				{Name: "größe", Type: DataType{Root: Double, Nullable: true}},
				{Name: "comment", Type: DataType{Root: String, Nullable: true}},
				{Name: "Ünïcode_1$", Type: DataType{Root: Int, Nullable: true}},
			},
		},
		{
			name: "case-sensitive names are distinct",
			ddl:  "a INT, A INT",
			want: []Column{
				{Name: "a", Type: DataType{Root: Int, Nullable: true}},
				{Name: "A", Type: DataType{Root: Int, Nullable: true}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseColumns(tc.ddl)
			if err != nil {
				t.Fatalf("ParseColumns: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseColumns =\n%#v\nwant\n%#v", got, tc.want)
			}
			again, err := ParseColumns(FormatColumns(got))
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("ParseColumns(FormatColumns(...)) = %v, %v; FormatColumns = %s", again, err, FormatColumns(got))
			}
		})
	}
}

func TestParseColumnsErrors(t *testing.T) {
	tests := []struct {
		name string
		ddl  string
		want []string // each must appear among the problems, in order
	}{
		{"empty", "", []string{"columns: no columns given"}},
		{"blank", "  \n ", []string{"columns: no columns given"}},
		{"missing type", "a BIGINT, b", []string{`columns[1]: ` + "`b`" + `: missing type for column "b"`}},
		{"missing type before comment", "a COMMENT 'x'", []string{`columns[0]: ` + "`a COMMENT 'x'`" + `: missing type for column "a" before COMMENT`}},
		{"duplicate", "a INT, b INT, a STRING", []string{`columns[2]: ` + "`a STRING`" + `: duplicate column name "a" (also columns[0])`}},
		{"trailing comma", "a INT, b INT,", []string{"columns[2]: empty column definition after the last comma; remove the trailing comma"}},
		{"double comma", "a INT,, b INT", []string{"columns[1]: empty column definition between two commas"}},
		{"unclosed paren", "a INT, b DECIMAL(10, 2, c INT", []string{"columns[1]: `b DECIMAL(10, 2, c INT`: unbalanced parentheses: '(' at offset 16 of the column list is never closed"}},
		{"extra close paren", "a INT), b INT", []string{"columns[0]: `a INT), b INT`: unbalanced parentheses: ')' at offset 5 of the column list has no matching '('"}},
		{"unterminated quote", "a INT COMMENT 'oops, b INT", []string{"columns: unterminated quote starting at offset 14 of the column list"}},
		{"unterminated backtick", "`a INT", []string{"columns: unterminated backtick starting at offset 0 of the column list"}},
		{"unknown type", "a INT, b LONG", []string{`columns[1]: ` + "`b LONG`" + `: unknown type "LONG"; known types are BOOLEAN`}},
		{"several problems at once", "a FOO, b, a INT, c CHAR(0),", []string{
			`columns[0]: ` + "`a FOO`" + `: unknown type "FOO"`,
			`columns[1]: ` + "`b`" + `: missing type`,
			`columns[3]: ` + "`c CHAR(0)`" + `: CHAR length must be between 1`,
			`columns[4]: empty column definition after the last comma`,
		}},
		{"bad bare name", "a-b INT", []string{`column name "a-b" is not a plain identifier; quote it with backticks`}},
		{"empty quoted name", "`` INT", []string{"column name is empty"}},
		{"reserved name", "__offset BIGINT", []string{`column name "__offset" is reserved`}},
		{"constraint", "a INT, PRIMARY KEY (a) NOT ENFORCED", []string{"columns[1]: `PRIMARY KEY (a) NOT ENFORCED`: table constraints are not columns"}},
		{"comment without string", "a INT COMMENT x", []string{"COMMENT must be followed by a single-quoted string"}},
		{"text after comment", "a INT COMMENT 'x' NOT NULL", []string{`unexpected "NOT NULL" after the comment`}},
		{"no space after quoted name", "`a`INT", []string{"expected white space after the quoted name `a`"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cols, err := ParseColumns(tc.ddl)
			if err == nil {
				t.Fatalf("ParseColumns(%q) = %v, want error", tc.ddl, cols)
			}
			probs := InvalidErrors(err)
			if len(probs) < len(tc.want) {
				t.Fatalf("got %d problems, want at least %d: %v", len(probs), len(tc.want), err)
			}
			k := 0
			for _, p := range probs {
				if k < len(tc.want) && strings.Contains(p.Error(), tc.want[k]) {
					k++
				}
			}
			if k != len(tc.want) {
				t.Fatalf("problems\n%v\ndo not contain, in order,\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// allTypesSchema has one column of every type, nullable and not, with
// comments that need escaping in JSON.
func allTypesSchema(t *testing.T) Schema {
	t.Helper()
	cols, err := ParseColumns(`id BIGINT NOT NULL COMMENT 'the key', c_bool BOOLEAN, c_tiny TINYINT NOT NULL,
		c_small SMALLINT, c_int INT, c_float FLOAT, c_double DOUBLE, c_dec DECIMAL(20, 4) NOT NULL,
		c_dec_default DECIMAL, c_char CHAR(3), c_str STRING COMMENT 'quotes " and <tags> & ''single''',
		c_bin BINARY(16), c_bytes BYTES, c_date DATE, c_time TIME(3), c_time0 TIME, c_ts TIMESTAMP(6) NOT NULL,
		c_ts3 TIMESTAMP(3), c_ltz TIMESTAMP_LTZ(3), c_ltz9 TIMESTAMP_LTZ(9) COMMENT 'zoned ✓'`)
	if err != nil {
		t.Fatal(err)
	}
	return Schema{Columns: cols, PrimaryKey: []string{"id"}}
}

func TestSchemaJSONGolden(t *testing.T) {
	s := allTypesSchema(t)
	got, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "schema_all_types.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./record -run Golden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("schema JSON differs from %s (run with -update if the change is intended)\ngot:  %s\nwant: %s", path, got, want)
	}
	var back Schema
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip =\n%#v\nwant\n%#v", back, s)
	}
}

func TestSchemaJSON(t *testing.T) {
	// Fluss's SchemaJsonSerdeTest SCHEMA_0, as Fluss writes it now (with column
	// ids) and as Fluss wrote it before column ids existed.
	s := Schema{
		Columns: []Column{
			{Name: "a", Type: DataType{Root: Int}, Comment: "a is first column"},
			{Name: "b", Type: DataType{Root: String, Nullable: true}, Comment: "b is second column"},
			{Name: "c", Type: DataType{Root: Char, Length: 10}, Comment: "c is third column"},
		},
		PrimaryKey: []string{"a", "c"},
	}
	const fluss = `{"version":1,"columns":[{"name":"a","data_type":{"type":"INTEGER","nullable":false},"comment":"a is first column","id":0},{"name":"b","data_type":{"type":"STRING"},"comment":"b is second column","id":1},{"name":"c","data_type":{"type":"CHAR","nullable":false,"length":10},"comment":"c is third column","id":2}],"primary_key":["a","c"],"highest_field_id":2}`
	const flussOld = `{"version":1,"columns":[{"name":"a","data_type":{"type":"INTEGER","nullable":false},"comment":"a is first column"},{"name":"b","data_type":{"type":"STRING"},"comment":"b is second column"},{"name":"c","data_type":{"type":"CHAR","nullable":false,"length":10},"comment":"c is third column"}],"primary_key":["a","c"]}`
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != fluss {
		t.Fatalf("Marshal =\n%s\nwant\n%s", b, fluss)
	}
	for _, in := range []string{fluss, flussOld} {
		var got Schema
		if err := json.Unmarshal([]byte(in), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("Unmarshal(%s) =\n%#v\nwant\n%#v", in, got, s)
		}
	}

	// A log table: no primary_key field.
	log := Schema{Columns: []Column{{Name: "x", Type: DataType{Root: BigInt, Nullable: true}}}}
	b, _ = json.Marshal(log)
	if want := `{"version":1,"columns":[{"name":"x","data_type":{"type":"BIGINT"},"id":0}],"highest_field_id":0}`; string(b) != want {
		t.Fatalf("Marshal = %s, want %s", b, want)
	}

	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			in, want string
		}{
			{`{"version":2,"columns":[]}`, "unsupported version 2"},
			{`{"columns":[{"data_type":{"type":"INTEGER"}}]}`, `missing "name"`},
			{`{"columns":[{"name":"a"}]}`, `missing "data_type"`},
			{`{"columns":[{"name":"a","data_type":{"type":"INTEGER"},"id":5}]}`, "has id 5"},
			{`{"columns":[{"name":"a","data_type":{"type":"INTEGER"}}],"highest_field_id":3}`, "highest_field_id 3"},
			{`{"columns":[{"name":"a","data_type":{"type":"INTEGER"}}],"auto_increment_column":["a"]}`, "auto-increment"},
			{`{"columns":[{"name":"a","data_type":{"type":"INTEGER"},"agg_function":{"type":"sum"}}]}`, "aggregation functions"},
			{`{"columns":[{"name":"a","data_type":{"type":"MAP"}}]}`, `unsupported type "MAP"`},
		}
		for _, tc := range tests {
			var s Schema
			if err := json.Unmarshal([]byte(tc.in), &s); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Unmarshal(%s) = %v, want error containing %q", tc.in, err, tc.want)
			}
		}
	})
	if _, err := json.Marshal(Schema{Columns: []Column{{Name: "a"}}}); err == nil {
		t.Error("Marshal of a schema with an invalid type succeeded")
	}
}

func TestSchemaAccessors(t *testing.T) {
	s := allTypesSchema(t)
	c, i, ok := s.Column("c_dec")
	if !ok || i != 7 || c.Type != (DataType{Root: Decimal, Precision: 20, Scale: 4}) {
		t.Fatalf("Column(c_dec) = %v, %d, %v", c, i, ok)
	}
	if _, i, ok := s.Column("C_DEC"); ok || i != -1 {
		t.Fatalf("Column lookup is not case-sensitive")
	}
	names := s.ColumnNames()
	if len(names) != len(s.Columns) || names[0] != "id" || names[len(names)-1] != "c_ltz9" {
		t.Fatalf("ColumnNames = %v", names)
	}
	if !s.HasPrimaryKey() || !reflect.DeepEqual(s.PrimaryKeyIndexes(), []int{0}) {
		t.Fatalf("primary key: %v %v", s.HasPrimaryKey(), s.PrimaryKeyIndexes())
	}
}
