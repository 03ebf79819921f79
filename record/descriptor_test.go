package record

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func mustColumns(t *testing.T, ddl string) []Column {
	t.Helper()
	cols, err := ParseColumns(ddl)
	if err != nil {
		t.Fatal(err)
	}
	return cols
}

// pkTable is a partitioned primary-key table: dt and region are partition
// keys, id and seq the rest of the key.
func pkTable(t *testing.T) TableDescriptor {
	return TableDescriptor{
		Schema: Schema{
			Columns:    mustColumns(t, "id BIGINT, seq INT, dt STRING, region STRING, v STRING, ts TIMESTAMP(3), b BYTES"),
			PrimaryKey: []string{"id", "seq", "dt", "region"},
		},
		PartitionKeys: []string{"dt", "region"},
	}
}

func logTable(t *testing.T) TableDescriptor {
	return TableDescriptor{Schema: Schema{Columns: mustColumns(t, "a BIGINT, b STRING, c DOUBLE")}}
}

func TestNormalizeDefaults(t *testing.T) {
	t.Run("log table", func(t *testing.T) {
		d := logTable(t)
		got, err := d.Normalize(4)
		if err != nil {
			t.Fatal(err)
		}
		if got.BucketKeys != nil || got.BucketCount != 4 || got.HasPrimaryKey() {
			t.Fatalf("bucket keys %v, count %d, pk %v", got.BucketKeys, got.BucketCount, got.HasPrimaryKey())
		}
		if got.Properties == nil || len(got.Properties) != 0 || got.CustomProperties == nil {
			t.Fatalf("properties %v, custom %v", got.Properties, got.CustomProperties)
		}
		if !reflect.DeepEqual(got.Schema, d.Schema) {
			t.Fatalf("log table schema changed: %v", got.Schema)
		}
	})
	t.Run("primary key becomes NOT NULL, bucket key defaults to pk minus partition keys", func(t *testing.T) {
		d := pkTable(t)
		got, err := d.Normalize(0)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"id", "seq", "dt", "region"} {
			if c, _, _ := got.Schema.Column(name); c.Type.Nullable {
				t.Errorf("primary-key column %s is still nullable", name)
			}
		}
		for _, name := range []string{"v", "ts", "b"} {
			if c, _, _ := got.Schema.Column(name); !c.Type.Nullable {
				t.Errorf("column %s became NOT NULL", name)
			}
		}
		if !reflect.DeepEqual(got.BucketKeys, []string{"id", "seq"}) {
			t.Errorf("BucketKeys = %v, want [id seq]", got.BucketKeys)
		}
		if got.BucketCount != DefaultBucketNumber {
			t.Errorf("BucketCount = %d with defaultBuckets 0, want %d", got.BucketCount, DefaultBucketNumber)
		}
		// The input is untouched.
		if c, _, _ := d.Schema.Column("id"); !c.Type.Nullable || d.BucketKeys != nil {
			t.Errorf("Normalize modified its receiver")
		}
		// Normalizing again changes nothing.
		again, err := got.Normalize(0)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("second Normalize = %+v, %v", again, err)
		}
	})
	t.Run("given bucket keys and count are kept", func(t *testing.T) {
		d := pkTable(t)
		d.BucketKeys = []string{"seq"}
		d.BucketCount = 16
		got, err := d.Normalize(3)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.BucketKeys, []string{"seq"}) || got.BucketCount != 16 {
			t.Fatalf("BucketKeys %v, BucketCount %d", got.BucketKeys, got.BucketCount)
		}
	})
	t.Run("log table with bucket keys", func(t *testing.T) {
		d := logTable(t)
		d.BucketKeys = []string{"b", "a"}
		got, err := d.Normalize(1)
		if err != nil || !reflect.DeepEqual(got.BucketKeys, []string{"b", "a"}) {
			t.Fatalf("BucketKeys %v, %v", got.BucketKeys, err)
		}
	})
	t.Run("options stored as given, defaults not copied, custom properties split", func(t *testing.T) {
		d := logTable(t)
		d.Properties = map[string]string{
			OptLogTTL:            "3days",
			OptLogFormat:         "arrow",
			"my.app.owner":       "team-a",
			"owner":              "x",
			OptStatisticsColumns: "a, b",
		}
		d.CustomProperties = map[string]string{"owner": "x", "other": "y"}
		got, err := d.Normalize(1)
		if err != nil {
			t.Fatal(err)
		}
		wantProps := map[string]string{OptLogTTL: "3days", OptLogFormat: "arrow", OptStatisticsColumns: "a, b"}
		wantCustom := map[string]string{"my.app.owner": "team-a", "owner": "x", "other": "y"}
		if !reflect.DeepEqual(got.Properties, wantProps) || !reflect.DeepEqual(got.CustomProperties, wantCustom) {
			t.Fatalf("Properties %v, CustomProperties %v", got.Properties, wantCustom)
		}
		if len(d.Properties) != 5 || len(d.CustomProperties) != 2 {
			t.Fatalf("Normalize modified the input maps: %v %v", d.Properties, d.CustomProperties)
		}
		if v, ok := got.Option(OptLogTTL); v != "3days" || !ok {
			t.Errorf("Option(ttl) = %q, %v", v, ok)
		}
		if v, ok := got.Option(OptLogArrowCompressionType); v != "ZSTD" || !ok {
			t.Errorf("Option(compression) = %q, %v; want the default ZSTD", v, ok)
		}
		if v, ok := got.Option(OptMergeEngine); v != "" || ok {
			t.Errorf("Option(merge-engine) = %q, %v; want unset", v, ok)
		}
	})
}

// wantProblems checks that err holds exactly the problems want, each given as
// field and a substring of the reason, in order.
func wantProblems(t *testing.T, err error, want [][2]string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %d problems", len(want))
	}
	var ie *InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("errors.As finds no *InvalidError in %v", err)
	}
	got := InvalidErrors(err)
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = got[i].Field == want[i][0] && strings.Contains(got[i].Reason, want[i][1])
	}
	if !ok {
		var b strings.Builder
		for _, g := range got {
			b.WriteString("\n  " + g.Field + ": " + g.Reason)
		}
		b.WriteString("\nwant:")
		for _, w := range want {
			b.WriteString("\n  " + w[0] + ": ..." + w[1] + "...")
		}
		t.Fatalf("problems:%s", b.String())
	}
}

func TestNormalizeErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(d *TableDescriptor)
		base   func(t *testing.T) TableDescriptor
		want   [][2]string
	}{
		{"no columns", func(d *TableDescriptor) { d.Schema.Columns = nil }, logTable,
			[][2]string{{"schema.columns", "at least one column"}}},
		{"bad column name and type", func(d *TableDescriptor) {
			d.Schema.Columns[1].Name = ""
			d.Schema.Columns[2].Type = DataType{Root: Decimal, Precision: 50}
		}, logTable, [][2]string{
			{"schema.columns[1].name", "column name is empty"},
			{"schema.columns[2].type", "DECIMAL precision must be between 1 and 38, got 50"},
		}},
		{"duplicate column, case-sensitive", func(d *TableDescriptor) {
			d.Schema.Columns = append(d.Schema.Columns, Column{Name: "a", Type: DataType{Root: Int}}, Column{Name: "A", Type: DataType{Root: Int}})
		}, logTable, [][2]string{{"schema.columns[3].name", `duplicate column name "a" (also schema.columns[0])`}}},
		{"reserved column", func(d *TableDescriptor) {
			d.Schema.Columns[0].Name = "_change_type"
		}, logTable, [][2]string{{"schema.columns[0].name", "reserved for a system column"}}},
		{"primary key missing and duplicated", func(d *TableDescriptor) {
			d.Schema.PrimaryKey = []string{"a", "nope", "a"}
		}, logTable, [][2]string{
			{"primary_key", `primary-key column "nope" is not a column; columns are a, b, c`},
			{"primary_key", `column "a" appears twice in the primary key`},
		}},
		{"partition key problems", func(d *TableDescriptor) {
			d.PartitionKeys = []string{"c", "x", "b", "b"}
		}, logTable, [][2]string{
			{"partition_keys", `partition key "c" is DOUBLE; partition keys must be STRING`},
			{"partition_keys", `partition key "x" is not a column`},
			{"partition_keys", `column "b" appears twice in the partition keys`},
		}},
		{"partition key outside the primary key", func(d *TableDescriptor) {
			d.Schema.PrimaryKey = []string{"id", "seq", "dt"}
		}, pkTable, [][2]string{{"partition_keys", `partition key "region" is not in the primary key (id, seq, dt)`}}},
		{"primary key of partition keys only", func(d *TableDescriptor) {
			d.Schema.PrimaryKey = []string{"dt", "region"}
		}, pkTable, [][2]string{{"primary_key", "consists of partition keys only"}}},
		{"bucket key problems", func(d *TableDescriptor) {
			d.BucketKeys = []string{"v", "dt", "zz", "id", "id"}
		}, pkTable, [][2]string{
			{"bucket_keys", `bucket key "v" is not in the primary key; a primary-key table's bucket keys must be a subset of the primary key without the partition keys (id, seq)`},
			{"bucket_keys", `bucket key "dt" is a partition key`},
			{"bucket_keys", `bucket key "zz" is not a column`},
			{"bucket_keys", `column "id" appears twice in the bucket keys`},
		}},
		{"log table bucket key on a partition key", func(d *TableDescriptor) {
			d.Schema.Columns[1].Type = DataType{Root: String}
			d.PartitionKeys = []string{"b"}
			d.BucketKeys = []string{"b"}
		}, logTable, [][2]string{{"bucket_keys", `bucket key "b" is a partition key`}}},
		{"negative bucket count", func(d *TableDescriptor) { d.BucketCount = -1 }, logTable,
			[][2]string{{"bucket_count", "must be at least 1"}}},
		{"too many buckets", func(d *TableDescriptor) { d.BucketCount = MaxBucketCount + 1 }, logTable,
			[][2]string{{"bucket_count", "must be at most 128000"}}},
		{"unknown option with suggestion", func(d *TableDescriptor) {
			d.Properties = map[string]string{"table.log.tll": "1d", "table.merge-engine.version-column": "v"}
		}, pkTable, [][2]string{
			{"options.table.log.tll", `unknown table option; did you mean "table.log.ttl"?`},
			{"options.table.merge-engine.version-column", `did you mean "table.merge-engine.versioned.ver-column"?`},
		}},
		{"unknown option without suggestion", func(d *TableDescriptor) {
			d.Properties = map[string]string{"table.completely.different.thing": "1"}
		}, logTable, [][2]string{{"options.table.completely.different.thing", "unknown table option: Strom knows Fluss's table.* options only"}}},
		{"table option without its prefix", func(d *TableDescriptor) {
			d.Properties = map[string]string{"log.ttl": "1d"}
		}, logTable, [][2]string{{"options.log.ttl", `not a table option; did you mean "table.log.ttl"?`}}},
		{"flink connector options", func(d *TableDescriptor) {
			d.Properties = map[string]string{"bucket.num": "4", "bucket.key": "a"}
		}, logTable, [][2]string{
			{"options.bucket.key", "set BucketCount and BucketKeys"},
			{"options.bucket.num", "set BucketCount and BucketKeys"},
		}},
		{"custom property given twice", func(d *TableDescriptor) {
			d.Properties = map[string]string{"owner": "a"}
			d.CustomProperties = map[string]string{"owner": "b"}
		}, logTable, [][2]string{{"options.owner", `also given as a custom property with another value ("a" vs "b")`}}},
		{"empty option key", func(d *TableDescriptor) {
			d.Properties = map[string]string{"": "x"}
		}, logTable, [][2]string{{"options", "empty key"}}},
		{"bad values of every type", func(d *TableDescriptor) {
			d.Properties = map[string]string{
				OptAutoPartitionEnabled:      "yes",
				OptReplicationFactor:         "three",
				OptAutoIncrementCacheSize:    "99999999999999999999",
				OptLogTTL:                    "7 weeks",
				OptDatalakeFreshness:         "-1 min",
				OptLogFormat:                 "parquet",
				OptAutoPartitionTimeZone:     "Mars/Olympus Mons",
				OptLogArrowZstdLevel:         "23",
				OptLogTieredLocalSegments:    "0",
				OptKvFormatVersion:           "3",
				OptAutoPartitionNumRetention: "-1",
			}
		}, pkTable, [][2]string{
			{"options." + OptAutoIncrementCacheSize, `"99999999999999999999" is not a 64-bit integer`},
			{"options." + OptAutoPartitionEnabled, `"yes" is not a boolean; use true or false`},
			{"options." + OptAutoPartitionNumRetention, "-1 is too small; it must be at least 0"},
			{"options." + OptAutoPartitionTimeZone, `"Mars/Olympus Mons" is not a time zone`},
			{"options." + OptDatalakeFreshness, "must start with a non-negative whole number"},
			{"options." + OptKvFormatVersion, "3 is out of range; it must be between 1 and 2"},
			{"options." + OptLogArrowZstdLevel, "23 is out of range; it must be between 1 and 22"},
			{"options." + OptLogFormat, `"parquet" is not one of ARROW, INDEXED, COMPACTED (case-insensitive)`},
			{"options." + OptLogTieredLocalSegments, "0 is too small; it must be at least 1"},
			{"options." + OptLogTTL, `unknown time unit "weeks"`},
			{"options." + OptReplicationFactor, `"three" is not a 32-bit integer`},
		}},
		{"primary-key options on a log table", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptMergeEngine: "first_row", OptDeleteBehavior: "ignore", OptMergeEngineVersionColumn: "a"}
		}, logTable, [][2]string{
			{"options." + OptDeleteBehavior, "applies to primary-key tables only"},
			{"options." + OptMergeEngine, "applies to primary-key tables only"},
			{"options." + OptMergeEngineVersionColumn, "applies to primary-key tables only"},
		}},
		{"versioned without version column", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptMergeEngine: "VERSIONED"}
		}, pkTable, [][2]string{{"options." + OptMergeEngineVersionColumn, "must be set for the versioned merge engine"}}},
		{"versioned with a missing version column", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptMergeEngine: "versioned", OptMergeEngineVersionColumn: "nope"}
		}, pkTable, [][2]string{{"options." + OptMergeEngineVersionColumn, `version column "nope" is not a column`}}},
		{"versioned with a STRING version column", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptMergeEngine: "versioned", OptMergeEngineVersionColumn: "v"}
		}, pkTable, [][2]string{{"options." + OptMergeEngineVersionColumn, `version column "v" is STRING; it must be INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ`}}},
		{"aggregation with WAL", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptMergeEngine: "aggregation", OptChangelogImage: "wal"}
		}, pkTable, [][2]string{{"options." + OptChangelogImage, "needs the FULL changelog image"}}},
		{"first_row allowing deletes", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptMergeEngine: "first_row", OptDeleteBehavior: "Allow"}
		}, pkTable, [][2]string{{"options." + OptDeleteBehavior, "the first_row merge engine does not support deletes"}}},
		{"indexed log with compacted kv", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptLogFormat: "INDEXED"}
		}, pkTable, [][2]string{{"options." + OptLogFormat, "needs table.log.format ARROW or COMPACTED, not INDEXED"}}},
		{"auto-partitioning an unpartitioned table", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptAutoPartitionEnabled: "TRUE"}
		}, logTable, [][2]string{{"options." + OptAutoPartitionEnabled, "needs a partitioned table"}}},
		{"auto-partitioning with several keys and no key", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptAutoPartitionEnabled: "true", OptAutoPartitionNumPrecreate: "2"}
		}, pkTable, [][2]string{
			{"options." + OptAutoPartitionKey, "must be set when auto-partitioning a table with several partition keys; name one of dt, region"},
			{"options." + OptAutoPartitionNumPrecreate, "set it to 0"},
		}},
		{"auto-partition key not a partition key", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptAutoPartitionEnabled: "true", OptAutoPartitionKey: "v"}
		}, pkTable, [][2]string{{"options." + OptAutoPartitionKey, `"v" is not a partition key`}}},
		{"statistics columns", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptStatisticsColumns: "v, nope, b"}
		}, pkTable, [][2]string{
			{"options." + OptStatisticsColumns, `"nope" is not a column`},
			{"options." + OptStatisticsColumns, `column "b" is BYTES, which has no statistics`},
		}},
		{"statistics columns empty", func(d *TableDescriptor) {
			d.Properties = map[string]string{OptStatisticsColumns: " , "}
		}, logTable, [][2]string{{"options." + OptStatisticsColumns, "names no column"}}},
		{"several kinds of problem at once", func(d *TableDescriptor) {
			d.Schema.Columns[0].Type = DataType{Root: Char}
			d.PartitionKeys = []string{"zz"}
			d.BucketKeys = []string{"yy"}
			d.BucketCount = -3
			d.Properties = map[string]string{"table.nope": "1", OptLogTTL: "soon"}
		}, logTable, [][2]string{
			{"schema.columns[0].type", "CHAR length"},
			{"partition_keys", `"zz" is not a column`},
			{"bucket_keys", `"yy" is not a column`},
			{"bucket_count", "at least 1"},
			{"options." + OptLogTTL, "must start with a non-negative whole number"},
			{"options.table.nope", "unknown table option"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.base(t)
			tc.modify(&d)
			before, _ := json.Marshal(d) // may fail for invalid types; compared loosely below
			got, err := d.Normalize(1)
			wantProblems(t, err, tc.want)
			if !reflect.DeepEqual(got, d) {
				t.Errorf("Normalize returned %+v on error, want the input unchanged", got)
			}
			if after, _ := json.Marshal(d); string(after) != string(before) {
				t.Errorf("Normalize modified its input")
			}
		})
	}
}

func TestNormalizeAcceptsValidOptions(t *testing.T) {
	d := pkTable(t)
	d.Properties = map[string]string{
		OptAutoIncrementCacheSize:     "10",
		OptAutoPartitionEnabled:       "True",
		OptAutoPartitionKey:           "dt",
		OptAutoPartitionNumPrecreate:  "0",
		OptAutoPartitionNumRetention:  "30",
		OptAutoPartitionTimeUnit:      "hour",
		OptAutoPartitionTimeZone:      "Asia/Shanghai",
		OptChangelogImage:             "WAL",
		OptDatalakeAutoCompaction:     "false",
		OptDatalakeAutoExpireSnapshot: "FALSE",
		OptDatalakeEnabled:            "true",
		OptDatalakeFormat:             "PAIMON",
		OptDatalakeFreshness:          "30s",
		OptDeleteBehavior:             "disable",
		OptKvFormat:                   "INDEXED",
		OptKvFormatVersion:            "2",
		OptLogArrowCompressionType:    "lz4_frame",
		OptLogArrowZstdLevel:          "22",
		OptLogFormat:                  "INDEXED",
		OptLogTieredLocalSegments:     "1",
		OptLogTTL:                     "168 hours",
		OptMergeEngine:                "versioned",
		OptMergeEngineVersionColumn:   "ts",
		OptReplicationFactor:          "3",
		OptStatisticsColumns:          "*",
		OptUncleanLeaderElection:      "TRUE",
	}
	if len(d.Properties) != len(TableOptions()) {
		t.Fatalf("test sets %d options, there are %d", len(d.Properties), len(TableOptions()))
	}
	got, err := d.Normalize(1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Properties, d.Properties) {
		t.Fatalf("Properties = %v", got.Properties)
	}
	for _, tz := range []string{"UTC", "Z", "+08:00", "-0530", "GMT+8", "UTC-03:30", "Etc/GMT+5", "America/Argentina/Buenos_Aires"} {
		d := pkTable(t)
		d.Properties = map[string]string{OptAutoPartitionTimeZone: tz}
		if _, err := d.Normalize(1); err != nil {
			t.Errorf("time zone %q: %v", tz, err)
		}
	}
	for _, tz := range []string{"", "+19:00", "UTC+", "+8:0", "/x", "9Z"} {
		d := pkTable(t)
		d.Properties = map[string]string{OptAutoPartitionTimeZone: tz}
		if _, err := d.Normalize(1); err == nil {
			t.Errorf("time zone %q accepted", tz)
		}
	}
}

func TestDescriptorJSON(t *testing.T) {
	// Fluss's TableDescriptorJsonSerdeTest's first descriptor, keys sorted.
	d := TableDescriptor{
		Schema: Schema{
			Columns: []Column{
				{Name: "a", Type: DataType{Root: Int}, Comment: "a is first column"},
				{Name: "b", Type: DataType{Root: String, Nullable: true}, Comment: "b is second column"},
				{Name: "c", Type: DataType{Root: Char, Length: 10}, Comment: "c is third column"},
			},
			PrimaryKey: []string{"a", "c"},
		},
		Comment:          "first table",
		PartitionKeys:    []string{"c"},
		BucketKeys:       []string{"a"},
		BucketCount:      16,
		Properties:       map[string]string{"option-2": "200", "option-1": "100"},
		CustomProperties: map[string]string{"custom-1": `"value-1"`},
	}
	const want = `{"version":1,"schema":{"version":1,"columns":[{"name":"a","data_type":{"type":"INTEGER","nullable":false},"comment":"a is first column","id":0},{"name":"b","data_type":{"type":"STRING"},"comment":"b is second column","id":1},{"name":"c","data_type":{"type":"CHAR","nullable":false,"length":10},"comment":"c is third column","id":2}],"primary_key":["a","c"],"highest_field_id":2},"comment":"first table","partition_key":["c"],"bucket_key":["a"],"bucket_count":16,"properties":{"option-1":"100","option-2":"200"},"custom_properties":{"custom-1":"\"value-1\""}}`
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", b, want)
	}
	var back TableDescriptor
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip =\n%+v\nwant\n%+v", back, d)
	}

	minimal := TableDescriptor{Schema: Schema{Columns: []Column{{Name: "x", Type: DataType{Root: Int, Nullable: true}}}}}
	b, _ = json.Marshal(minimal)
	if want := `{"version":1,"schema":{"version":1,"columns":[{"name":"x","data_type":{"type":"INTEGER"},"id":0}],"highest_field_id":0},"partition_key":[],"bucket_key":[],"properties":{},"custom_properties":{}}`; string(b) != want {
		t.Fatalf("Marshal = %s, want %s", b, want)
	}

	for _, tc := range []struct{ in, want string }{
		{`{"version":2,"schema":{"columns":[]}}`, "unsupported version 2"},
		{`{"version":1}`, `missing "schema"`},
		{`{"schema":{"columns":[]},"partition_expressions":[{"x":1}]}`, "partition expressions"},
	} {
		var d TableDescriptor
		if err := json.Unmarshal([]byte(tc.in), &d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Unmarshal(%s) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
}
