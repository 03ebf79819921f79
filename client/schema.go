package client

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// Column types for SchemaBuilder.Column, named after Fluss's DataTypes.
// Each is nullable; NotNull makes a column NOT NULL (primary-key columns are
// made NOT NULL on creation).
func Boolean() record.DataType  { return nullable(record.Boolean) }
func TinyInt() record.DataType  { return nullable(record.TinyInt) }
func SmallInt() record.DataType { return nullable(record.SmallInt) }
func Int() record.DataType      { return nullable(record.Int) }
func BigInt() record.DataType   { return nullable(record.BigInt) }
func Float() record.DataType    { return nullable(record.Float) }
func Double() record.DataType   { return nullable(record.Double) }
func String() record.DataType   { return nullable(record.String) }
func Bytes() record.DataType    { return nullable(record.Bytes) }
func Date() record.DataType     { return nullable(record.Date) }

// Decimal is DECIMAL(precision, scale).
func Decimal(precision, scale int) record.DataType {
	return record.DataType{Root: record.Decimal, Nullable: true, Precision: precision, Scale: scale}
}

// Char is CHAR(length), Binary BINARY(length).
func Char(length int) record.DataType {
	return record.DataType{Root: record.Char, Nullable: true, Length: length}
}
func Binary(length int) record.DataType {
	return record.DataType{Root: record.Binary, Nullable: true, Length: length}
}

// Time is TIME(precision), Timestamp TIMESTAMP(precision) and TimestampLTZ
// TIMESTAMP_LTZ(precision): fractional digits of a second, 0 to 9.
func Time(precision int) record.DataType { return withPrecision(record.Time, precision) }
func Timestamp(precision int) record.DataType {
	return withPrecision(record.Timestamp, precision)
}
func TimestampLTZ(precision int) record.DataType {
	return withPrecision(record.TimestampLTZ, precision)
}

func nullable(r record.TypeRoot) record.DataType { return record.DataType{Root: r, Nullable: true} }

func withPrecision(r record.TypeRoot, p int) record.DataType {
	return record.DataType{Root: r, Nullable: true, Precision: p}
}

// ColumnOption refines one column of a SchemaBuilder.
type ColumnOption func(*record.Column)

// NotNull makes the column NOT NULL.
func NotNull() ColumnOption { return func(c *record.Column) { c.Type.Nullable = false } }

// Comment sets the column's comment.
func Comment(text string) ColumnOption { return func(c *record.Column) { c.Comment = text } }

// SchemaBuilder builds a table's schema (Fluss's Schema.newBuilder()):
// typed columns in order and the primary key. Mistakes are reported by
// TableBuilder's Descriptor, all at once.
type SchemaBuilder struct{ s record.Schema }

// NewSchema starts a schema with no columns.
func NewSchema() *SchemaBuilder { return &SchemaBuilder{} }

// Column adds a column of type t.
func (b *SchemaBuilder) Column(name string, t record.DataType, opts ...ColumnOption) *SchemaBuilder {
	c := record.Column{Name: name, Type: t}
	for _, o := range opts {
		o(&c)
	}
	b.s.Columns = append(b.s.Columns, c)
	return b
}

// PrimaryKey makes the table a primary-key table keyed by columns.
func (b *SchemaBuilder) PrimaryKey(columns ...string) *SchemaBuilder {
	b.s.PrimaryKey = slices.Clone(columns)
	return b
}

// TableBuilder builds a table descriptor (Fluss's TableDescriptor.builder()).
// Unset, the bucket count is the cluster's default.bucket.number and the
// bucket keys are the primary key (none for a log table).
type TableBuilder struct{ d record.TableDescriptor }

// NewTable starts a descriptor of a table with schema s.
func NewTable(s *SchemaBuilder) *TableBuilder {
	return &TableBuilder{d: record.TableDescriptor{Schema: s.s, Properties: map[string]string{}}}
}

// DistributedBy sets the bucket count and the bucket keys (none: the
// primary key without partition keys; a log table's rows are then spread
// without a key).
func (b *TableBuilder) DistributedBy(buckets int, keys ...string) *TableBuilder {
	b.d.BucketCount, b.d.BucketKeys = buckets, slices.Clone(keys)
	return b
}

// PartitionedBy sets the partition keys.
func (b *TableBuilder) PartitionedBy(keys ...string) *TableBuilder {
	b.d.PartitionKeys = slices.Clone(keys)
	return b
}

// Property sets a table option (the record.Opt* keys, Fluss's table.*
// options); a key without the "table." prefix is a custom property, stored
// and never interpreted.
func (b *TableBuilder) Property(key, value string) *TableBuilder {
	b.d.Properties[key] = value
	return b
}

// Comment sets the table's comment.
func (b *TableBuilder) Comment(text string) *TableBuilder {
	b.d.Comment = text
	return b
}

// Descriptor checks the table as the server would and returns it as the
// API's message. The error names every problem at once (errors.Join of
// *record.InvalidError, each naming its field).
func (b *TableBuilder) Descriptor() (*stromv1.TableDescriptor, error) {
	d := b.d
	if _, err := d.Normalize(record.DefaultBucketNumber); err != nil {
		return nil, fmt.Errorf("client: table descriptor: %w", err)
	}
	out := &stromv1.TableDescriptor{
		Schema:        &stromv1.Schema{PrimaryKey: slices.Clone(d.Schema.PrimaryKey)},
		Comment:       d.Comment,
		PartitionKeys: slices.Clone(d.PartitionKeys),
		BucketKeys:    slices.Clone(d.BucketKeys),
		BucketCount:   int32(d.BucketCount),
		Properties:    maps.Clone(d.Properties),
	}
	for _, c := range d.Schema.Columns {
		out.Schema.Columns = append(out.Schema.Columns, &stromv1.Column{Name: c.Name, Type: c.Type.String(), Comment: c.Comment})
	}
	return out, nil
}

// Create registers table db.name as b describes it and returns it as
// stored; with ignoreIfExists an existing table is not an error (Fluss's
// Admin.createTable). CreateTable takes the raw request instead.
func (a *Admin) Create(ctx context.Context, db, name string, b *TableBuilder, ignoreIfExists bool) (*stromv1.TableInfo, error) {
	d, err := b.Descriptor()
	if err != nil {
		return nil, err
	}
	return a.CreateTable(ctx, &stromv1.CreateTableRequest{Database: db, Table: name, Descriptor_: d, IgnoreIfExists: ignoreIfExists})
}
