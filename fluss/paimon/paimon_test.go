package paimon

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"strom/record"
)

// The cases: a Fluss table descriptor (testdata/NAME.desc.json, Fluss's
// TableDescriptor JSON as Strom stores a table) and the schema-0 that
// Fluss 0.9.1's own PaimonLakeCatalog.createTable wrote for it with Paimon
// 1.3.1 (testdata/NAME.schema-0, from `javacheck/PaimonCheck create`):
// every type Strom has, a comment on the table and on a column, custom
// properties with and without paimon.; a log table without bucket keys
// (Paimon's bucket -1) and with them.
var goldenCases = []string{"all-types", "log", "log-keyed"}

func descriptor(t *testing.T, name string) record.TableDescriptor {
	t.Helper()
	js, err := os.ReadFile(filepath.Join("testdata", name+".desc.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d record.TableDescriptor
	if err := json.Unmarshal(js, &d); err != nil {
		t.Fatal(err)
	}
	d, err = d.Normalize(1)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTableSchemaMatchesFluss(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			got, err := TableSchema(descriptor(t, name), time.UnixMilli(1))
			if err != nil {
				t.Fatal(err)
			}
			js, err := os.ReadFile(filepath.Join("testdata", name+".schema-0"))
			if err != nil {
				t.Fatal(err)
			}
			var want Schema
			if err := json.Unmarshal(js, &want); err != nil {
				t.Fatal(err)
			}
			want.TimeMillis = 1
			if !reflect.DeepEqual(got, want) {
				t.Errorf("schema\n got %+v\nwant %+v", got, want)
			}
			// The file as written reads back as the same schema.
			data, err := got.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			var back Schema
			if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(back, got) {
				t.Errorf("round trip: %v\n%s", err, data)
			}
		})
	}
}

func TestTableSchemaRefuses(t *testing.T) {
	cols := []record.Column{{Name: "a", Type: record.DataType{Root: record.Int, Nullable: true}},
		{Name: "__offset", Type: record.DataType{Root: record.BigInt, Nullable: true}}}
	d := record.TableDescriptor{Schema: record.Schema{Columns: cols}, BucketCount: 1,
		CustomProperties: map[string]string{"paimon.bucket": "4"}}
	_, err := TableSchema(d, time.Now())
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "__offset") || !strings.Contains(err.Error(), "paimon.bucket") {
		t.Errorf("got %v, want ErrUnsupported naming __offset and paimon.bucket", err)
	}
}

func TestOpenWarehouse(t *testing.T) {
	for _, tc := range []struct{ in, dir string }{
		{"/w/paimon", "/w/paimon"}, {"file:///w/paimon/", "/w/paimon"}, {"file:/w/p", "/w/p"},
	} {
		w, err := OpenWarehouse(tc.in)
		if err != nil || w.Dir() != tc.dir {
			t.Errorf("OpenWarehouse(%q) = %q, %v; want %q", tc.in, w.Dir(), err, tc.dir)
		}
	}
	for _, in := range []string{"s3://bucket/paimon", "relative/dir", "hdfs://nn/p"} {
		if _, err := OpenWarehouse(in); !errors.Is(err, ErrUnsupported) {
			t.Errorf("OpenWarehouse(%q): %v, want ErrUnsupported", in, err)
		}
	}
}

func TestCreateTable(t *testing.T) {
	w, err := OpenWarehouse(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := descriptor(t, "all-types")
	s, err := TableSchema(d, time.UnixMilli(1000))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable("fluss", "t", s); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(w.Dir(), "fluss.db", "t", "schema", "schema-0")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var back Schema
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("schema-0 reads back as %+v, %v", back, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// Again (a retried CREATE_TABLE, another time): accepted, file kept.
	s2 := s
	s2.TimeMillis = 2000
	if err := w.CreateTable("fluss", "t", s2); err != nil {
		t.Errorf("same schema again: %v", err)
	}
	if again, _ := os.ReadFile(file); string(again) != string(data) {
		t.Error("schema-0 rewritten")
	}
	// Another schema under the name: refused.
	other, err := TableSchema(descriptor(t, "log"), time.UnixMilli(1000))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable("fluss", "t", other); !errors.Is(err, ErrTableExists) {
		t.Errorf("another schema: %v, want ErrTableExists", err)
	}
	// The same schema once Paimon has committed data: refused.
	if err := os.MkdirAll(filepath.Join(w.Dir(), "fluss.db", "t", "snapshot"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable("fluss", "t", s); !errors.Is(err, ErrTableExists) {
		t.Errorf("table with data: %v, want ErrTableExists", err)
	}
}

// TestWriteWarehouse writes the golden cases' tables into
// $PAIMON_CHECK_WAREHOUSE for javacheck/check.sh, where real Paimon opens,
// writes and reads each; skipped without it.
func TestWriteWarehouse(t *testing.T) {
	dir := os.Getenv("PAIMON_CHECK_WAREHOUSE")
	if dir == "" {
		t.Skip("PAIMON_CHECK_WAREHOUSE not set (javacheck/check.sh sets it)")
	}
	w, err := OpenWarehouse(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range goldenCases {
		s, err := TableSchema(descriptor(t, name), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.CreateTable("fluss", name, s); err != nil {
			t.Fatal(err)
		}
	}
}
