package paimon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"strom/record"
)

// The system columns Fluss's PaimonLakeCatalog appends to every lake table
// (PaimonLakeCatalog.SYSTEM_COLUMNS, in this order): the Fluss bucket, log
// offset and commit timestamp of each tiered row.
const (
	BucketColumn    = "__bucket"
	OffsetColumn    = "__offset"
	TimestampColumn = "__timestamp"
)

// schemaVersion is TableSchema.CURRENT_VERSION of Paimon 1.3.1, the
// "version" of the schema files it writes.
const schemaVersion = 3

// Errors.
var (
	// ErrTableExists: a Paimon table of that name exists with another
	// schema, or already holds data (Fluss: LakeTableAlreadyExistException).
	ErrTableExists = errors.New("paimon: lake table already exists")
	// ErrUnsupported: the table cannot be a Paimon lake table here.
	ErrUnsupported = errors.New("paimon: not supported")
)

// Field is one column of a Paimon schema.
type Field struct {
	ID          int    `json:"id"`
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
}

// Schema is a Paimon TableSchema as its schema files hold it.
type Schema struct {
	Version        int               `json:"version"`
	ID             int64             `json:"id"`
	Fields         []Field           `json:"fields"`
	HighestFieldID int               `json:"highestFieldId"`
	PartitionKeys  []string          `json:"partitionKeys"`
	PrimaryKeys    []string          `json:"primaryKeys"`
	Options        map[string]string `json:"options"`
	Comment        string            `json:"comment,omitempty"`
	TimeMillis     int64             `json:"timeMillis"`
}

// TableSchema returns the Paimon schema Fluss 0.9.1's PaimonConversions.
// toPaimonSchema makes of a Fluss table descriptor (normalized, with the
// coordinator's defaults applied, as CREATE_TABLE hands it to the lake
// catalog), as schema 0 created at now:
//   - the table's columns, then __bucket INT, __offset BIGINT and
//     __timestamp TIMESTAMP(3) WITH LOCAL TIME ZONE; a column of one of
//     those names is refused;
//   - the primary key (its columns NOT NULL, as Paimon makes them) and
//     the partition keys;
//   - options: partition.legacy-name false; bucket and bucket-key from the
//     bucket count and keys (no bucket keys: bucket -1, Paimon's dynamic
//     bucket); changelog-producer input for a primary-key table; every
//     table property and custom property as fluss.KEY, except paimon.KEY,
//     which goes in as KEY, and table.datalake.paimon.* (the lake
//     catalog's options), which is left out.
func TableSchema(d record.TableDescriptor, now time.Time) (Schema, error) {
	var problems []error
	opts := map[string]string{"partition.legacy-name": "false"}
	if len(d.BucketKeys) > 0 {
		opts["bucket"] = strconv.Itoa(d.BucketCount)
		opts["bucket-key"] = strings.Join(d.BucketKeys, ",")
	} else {
		opts["bucket"] = "-1"
	}
	for _, props := range []map[string]string{d.Properties, d.CustomProperties} {
		for _, k := range slices.Sorted(maps.Keys(props)) {
			pk := strings.TrimPrefix(k, "paimon.")
			if pk == "bucket" || pk == "bucket-key" || pk == "path" || pk == "partition.legacy-name" {
				problems = append(problems, fmt.Errorf("%w: the Paimon option %s is set by Fluss and cannot be set on the table", ErrUnsupported, k))
				continue
			}
			switch {
			case strings.HasPrefix(k, "paimon."):
				opts[pk] = props[k]
			case !strings.HasPrefix(k, "table.datalake.paimon."):
				opts["fluss."+k] = props[k]
			}
		}
	}
	pk := map[string]bool{}
	for _, k := range d.Schema.PrimaryKey {
		pk[k] = true
	}
	if len(pk) > 0 {
		opts["changelog-producer"] = "input"
	}
	s := Schema{
		Version:       schemaVersion,
		PartitionKeys: append([]string{}, d.PartitionKeys...),
		PrimaryKeys:   append([]string{}, d.Schema.PrimaryKey...),
		Options:       opts,
		Comment:       d.Comment,
		TimeMillis:    now.UnixMilli(),
	}
	for _, c := range d.Schema.Columns {
		if c.Name == BucketColumn || c.Name == OffsetColumn || c.Name == TimestampColumn {
			problems = append(problems, fmt.Errorf("%w: column %s conflicts with a system column name of paimon table, please rename the column", ErrUnsupported, c.Name))
			continue
		}
		t := c.Type
		if pk[c.Name] {
			t.Nullable = false
		}
		typ, err := typeString(t)
		if err != nil {
			problems = append(problems, fmt.Errorf("column %s: %w", c.Name, err))
			continue
		}
		s.Fields = append(s.Fields, Field{ID: len(s.Fields), Name: c.Name, Type: typ, Description: c.Comment})
	}
	for _, sys := range []Field{
		{Name: BucketColumn, Type: "INT"},
		{Name: OffsetColumn, Type: "BIGINT"},
		{Name: TimestampColumn, Type: "TIMESTAMP(3) WITH LOCAL TIME ZONE"},
	} {
		sys.ID = len(s.Fields)
		s.Fields = append(s.Fields, sys)
	}
	s.HighestFieldID = len(s.Fields) - 1
	if len(problems) > 0 {
		return Schema{}, errors.Join(problems...)
	}
	return s, nil
}

// typeString is a type's Paimon SQL spelling (DataType.asSQLString, which
// its JSON serializer writes for every atomic type): STRING is
// VARCHAR(2147483647)'s, TIMESTAMP_LTZ(p) is TIMESTAMP(p) WITH LOCAL TIME
// ZONE, BYTES VARBINARY(2147483647)'s.
func typeString(t record.DataType) (string, error) {
	var s string
	switch t.Root {
	case record.Boolean, record.TinyInt, record.SmallInt, record.Int, record.BigInt,
		record.Float, record.Double, record.String, record.Bytes, record.Date:
		s = t.Root.String()
	case record.Decimal:
		s = fmt.Sprintf("DECIMAL(%d, %d)", t.Precision, t.Scale)
	case record.Char:
		s = fmt.Sprintf("CHAR(%d)", t.Length)
	case record.Binary:
		s = fmt.Sprintf("BINARY(%d)", t.Length)
	case record.Time:
		s = fmt.Sprintf("TIME(%d)", t.Precision)
	case record.Timestamp:
		s = fmt.Sprintf("TIMESTAMP(%d)", t.Precision)
	case record.TimestampLTZ:
		s = fmt.Sprintf("TIMESTAMP(%d) WITH LOCAL TIME ZONE", t.Precision)
	default:
		return "", fmt.Errorf("%w: type %s has no Paimon type here", ErrUnsupported, t)
	}
	if !t.Nullable {
		s += " NOT NULL"
	}
	return s, nil
}

// Marshal is the schema file's content, as Paimon's JSON serializer
// writes it (pretty-printed, fields in its order).
func (s Schema) Marshal() ([]byte, error) {
	if s.PartitionKeys == nil {
		s.PartitionKeys = []string{}
	}
	if s.PrimaryKeys == nil {
		s.PrimaryKeys = []string{}
	}
	return json.MarshalIndent(s, "", "  ")
}

// Warehouse is a filesystem Paimon warehouse (datalake.paimon.metastore
// filesystem): a local directory.
type Warehouse struct {
	dir string
}

// OpenWarehouse returns the warehouse at path, a local directory or a
// file: URI (datalake.paimon.warehouse). Other schemes (s3://, hdfs://)
// are ErrUnsupported. The directory need not exist yet.
func OpenWarehouse(path string) (Warehouse, error) {
	dir := path
	if strings.Contains(path, "://") || strings.HasPrefix(path, "file:") {
		u, err := url.Parse(path)
		if err != nil {
			return Warehouse{}, fmt.Errorf("paimon: warehouse %q: %w", path, err)
		}
		if u.Scheme != "file" {
			return Warehouse{}, fmt.Errorf("%w: warehouse %q: only a local directory (or file:) is supported, not %s://", ErrUnsupported, path, u.Scheme)
		}
		dir = u.Path
	}
	if !filepath.IsAbs(dir) {
		return Warehouse{}, fmt.Errorf("%w: warehouse %q: the path must be absolute", ErrUnsupported, path)
	}
	return Warehouse{dir: filepath.Clean(dir)}, nil
}

// Dir is the warehouse's directory.
func (w Warehouse) Dir() string { return w.dir }

// TableDir is the directory of table db.name: DIR/db.db/name.
func (w Warehouse) TableDir(db, name string) string {
	return filepath.Join(w.dir, db+".db", name)
}

// CreateTable creates Paimon table db.name with schema s, as Fluss's
// PaimonLakeCatalog.createTable does for a new Fluss table: the database
// directory if missing, then schema/schema-0, written to a temporary file
// and linked into place so that a reader never sees half a file and two
// creators cannot both win. A table that exists already is accepted when
// its schema is compatible (the same fields, keys and options but for the
// time) and it holds no snapshot yet (a retried CREATE_TABLE); otherwise
// ErrTableExists.
func (w Warehouse) CreateTable(db, name string, s Schema) error {
	data, err := s.Marshal()
	if err != nil {
		return err
	}
	dir := filepath.Join(w.TableDir(db, name), "schema")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("paimon: create table %s.%s: %w", db, name, err)
	}
	final := filepath.Join(dir, "schema-0")
	tmp, err := os.CreateTemp(dir, ".schema-0-*.tmp")
	if err != nil {
		return fmt.Errorf("paimon: create table %s.%s: %w", db, name, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("paimon: create table %s.%s: %w", db, name, err)
	}
	err = os.Link(tmp.Name(), final)
	if errors.Is(err, fs.ErrExist) {
		return w.checkExisting(db, name, final, s)
	}
	if err != nil {
		return fmt.Errorf("paimon: create table %s.%s: %w", db, name, err)
	}
	return syncDir(dir)
}

// checkExisting accepts an existing table of a compatible schema and no
// snapshot.
func (w Warehouse) checkExisting(db, name, file string, want Schema) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("paimon: table %s.%s: %w", db, name, err)
	}
	var have Schema
	if err := json.Unmarshal(data, &have); err != nil {
		return fmt.Errorf("%w: %s.%s, whose schema-0 cannot be read: %v", ErrTableExists, db, name, err)
	}
	have.TimeMillis, want.TimeMillis = 0, 0
	a, _ := have.Marshal()
	b, _ := want.Marshal()
	if !bytes.Equal(a, b) {
		return fmt.Errorf("%w: %s.%s exists in the Paimon warehouse with another schema; drop it there or use a new table name", ErrTableExists, db, name)
	}
	if _, err := os.Stat(filepath.Join(w.TableDir(db, name), "snapshot")); err == nil {
		return fmt.Errorf("%w: %s.%s exists in the Paimon warehouse and holds data; drop it there or use a new table name", ErrTableExists, db, name)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
