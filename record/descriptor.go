package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// DefaultBucketNumber is Fluss's default.bucket.number: the bucket count of a
// table that names none, unless the cluster configures another.
const DefaultBucketNumber = 1

// MaxBucketCount bounds the bucket count of a table (of each partition, for
// a partitioned table). It is the default of Fluss's cluster option
// max.bucket.num.
const MaxBucketCount = 128000

// TableDescriptor is what a user asks for when creating a table. A table has
// a primary key (a primary-key table: upserts, deletes, changelog) or not (a
// log table: append-only).
type TableDescriptor struct {
	Schema  Schema
	Comment string
	// PartitionKeys are STRING columns; each distinct combination of their
	// values is a partition with its own buckets.
	PartitionKeys []string
	// BucketKeys choose a row's bucket by hash. Empty on a log table means
	// rows are spread without a key.
	BucketKeys []string
	// BucketCount is the number of buckets (per partition); 0 means the
	// cluster's default.
	BucketCount int
	// Properties are the table.* options, as given: Fluss stores only what
	// the user set, and defaults come from OptionDefault.
	Properties map[string]string
	// CustomProperties are stored with the table and never interpreted.
	CustomProperties map[string]string
}

// HasPrimaryKey reports whether the table has a primary key.
func (d TableDescriptor) HasPrimaryKey() bool { return d.Schema.HasPrimaryKey() }

// IsPartitioned reports whether the table has partition keys.
func (d TableDescriptor) IsPartitioned() bool { return len(d.PartitionKeys) > 0 }

// Option returns the value of a table option: the one given in Properties,
// else Fluss's default; false when neither exists.
func (d TableDescriptor) Option(key string) (string, bool) {
	if v, ok := d.Properties[key]; ok {
		return v, true
	}
	return OptionDefault(key)
}

// Normalize validates d and fills in what a user may leave out. It returns
// the normalized copy, or every problem at once (errors.Join of
// *InvalidError) with d unchanged; d itself is never modified.
//
// Filled in: primary-key columns become NOT NULL; BucketKeys default to the
// primary key minus the partition keys (none for a log table); BucketCount 0
// becomes defaultBuckets (DefaultBucketNumber when defaultBuckets < 1);
// Properties keys without the "table." prefix move to CustomProperties.
// Option defaults are not copied into Properties.
//
// The rules checked are listed in the package's DESIGN.md.
func (d TableDescriptor) Normalize(defaultBuckets int) (TableDescriptor, error) {
	var p problems
	out := TableDescriptor{
		Schema:           d.Schema.clone(),
		Comment:          d.Comment,
		PartitionKeys:    nilIfEmpty(slices.Clone(d.PartitionKeys)),
		BucketKeys:       nilIfEmpty(slices.Clone(d.BucketKeys)),
		BucketCount:      d.BucketCount,
		Properties:       map[string]string{},
		CustomProperties: map[string]string{},
	}
	s := &out.Schema
	out.Schema.PrimaryKey = nilIfEmpty(out.Schema.PrimaryKey)

	// Columns.
	if len(s.Columns) == 0 {
		p.add("schema.columns", "a table needs at least one column")
	}
	firstAt := map[string]int{}
	for i, c := range s.Columns {
		reason := columnNameProblem(c.Name)
		if reason != "" {
			p.add(fmt.Sprintf("schema.columns[%d].name", i), "%s", reason)
		}
		// A column with a bad name still counts as existing, so keys that
		// name it are not reported a second time.
		if j, dup := firstAt[c.Name]; !dup {
			firstAt[c.Name] = i
		} else if reason == "" {
			p.add(fmt.Sprintf("schema.columns[%d].name", i), "duplicate column name %q (also schema.columns[%d]); names are case-sensitive", c.Name, j)
		}
		if reason := c.Type.problem(); reason != "" {
			p.add(fmt.Sprintf("schema.columns[%d].type", i), "%s", reason)
		}
	}
	columnList := strings.Join(s.ColumnNames(), ", ")
	exists := func(name string) bool { _, ok := firstAt[name]; return ok }
	missing := func(what, name string) string {
		if len(s.Columns) == 0 {
			return fmt.Sprintf("%s %q is not a column; the table has no columns", what, name)
		}
		return fmt.Sprintf("%s %q is not a column; columns are %s", what, name, columnList)
	}

	// Primary key: existing, distinct columns, which become NOT NULL.
	pk := s.PrimaryKey
	inPK := map[string]bool{}
	for _, k := range pk {
		switch {
		case inPK[k]:
			p.add("primary_key", "column %q appears twice in the primary key", k)
		case !exists(k):
			p.add("primary_key", "%s", missing("primary-key column", k))
		default:
			i := firstAt[k]
			s.Columns[i].Type.Nullable = false
		}
		inPK[k] = true
	}

	// Partition keys: existing, distinct STRING columns, inside the primary key.
	inPart := map[string]bool{}
	for _, k := range out.PartitionKeys {
		switch {
		case inPart[k]:
			p.add("partition_keys", "column %q appears twice in the partition keys", k)
		case !exists(k):
			p.add("partition_keys", "%s", missing("partition key", k))
		default:
			if t := s.Columns[firstAt[k]].Type; t.Root != String {
				p.add("partition_keys", "partition key %q is %s; partition keys must be STRING", k, t.Root)
			}
			if len(pk) > 0 && !inPK[k] {
				p.add("partition_keys", "partition key %q is not in the primary key (%s); a partitioned primary-key table must include every partition key in its primary key",
					k, strings.Join(pk, ", "))
			}
		}
		inPart[k] = true
	}

	// Bucket keys: existing, distinct, not partition keys; for a primary-key
	// table a subset of the primary key without the partition keys, which is
	// also the default.
	var pkBucket []string
	for _, k := range pk {
		if !inPart[k] {
			pkBucket = append(pkBucket, k)
		}
	}
	inBucket := map[string]bool{}
	for _, k := range out.BucketKeys {
		switch {
		case inBucket[k]:
			p.add("bucket_keys", "column %q appears twice in the bucket keys", k)
		case !exists(k):
			p.add("bucket_keys", "%s", missing("bucket key", k))
		case inPart[k]:
			p.add("bucket_keys", "bucket key %q is a partition key; a bucket key must not include partition keys", k)
		case len(pk) > 0 && !inPK[k]:
			p.add("bucket_keys", "bucket key %q is not in the primary key; a primary-key table's bucket keys must be a subset of the primary key without the partition keys (%s)",
				k, strings.Join(pkBucket, ", "))
		}
		inBucket[k] = true
	}
	if len(pk) > 0 && len(pkBucket) == 0 && len(out.PartitionKeys) > 0 {
		p.add("primary_key", "the primary key (%s) consists of partition keys only; add a column that is not a partition key",
			strings.Join(pk, ", "))
	}
	if len(out.BucketKeys) == 0 && len(pk) > 0 {
		out.BucketKeys = pkBucket
	}

	// Bucket count.
	switch {
	case out.BucketCount == 0:
		out.BucketCount = max(defaultBuckets, DefaultBucketNumber)
	case out.BucketCount < 0:
		p.add("bucket_count", "%d buckets: the bucket count must be at least 1 (or 0 for the cluster default)", out.BucketCount)
	case out.BucketCount > MaxBucketCount:
		p.add("bucket_count", "%d buckets: the bucket count must be at most %d", out.BucketCount, MaxBucketCount)
	}

	// Options and custom properties.
	maps.Copy(out.CustomProperties, d.CustomProperties)
	for _, k := range slices.Sorted(maps.Keys(d.Properties)) {
		v := d.Properties[k]
		field := "options." + k
		switch {
		case k == "":
			p.add("options", "an option has an empty key")
		case strings.HasPrefix(k, TablePrefix):
			o, ok := LookupOption(k)
			if !ok {
				if sug := suggestOption(k); sug != "" {
					p.add(field, "unknown table option; did you mean %q?", sug)
				} else {
					p.add(field, "unknown table option: Strom knows Fluss's table.* options only; keys without the %q prefix are custom properties", TablePrefix)
				}
				continue
			}
			if reason := o.checkValue(v); reason != "" {
				p.add(field, "%s", reason)
				continue
			}
			if o.PrimaryKeyOnly && len(pk) == 0 {
				p.add(field, "applies to primary-key tables only, and this table has no primary key")
				continue
			}
			out.Properties[k] = v
		case k == "bucket.num" || k == "bucket.key":
			p.add(field, "%q is a Flink connector option; set BucketCount and BucketKeys of the descriptor instead", k)
		default:
			if _, ok := optionIndex[TablePrefix+k]; ok {
				p.add(field, "not a table option; did you mean %q?", TablePrefix+k)
				continue
			}
			if old, ok := d.CustomProperties[k]; ok && old != v {
				p.add(field, "also given as a custom property with another value (%q vs %q)", v, old)
				continue
			}
			out.CustomProperties[k] = v
		}
	}
	checkOptionRules(&p, out)

	if err := p.err(); err != nil {
		return d, err
	}
	return out, nil
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// checkOptionRules checks the rules that tie options to each other and to
// the schema. It sees only the options that passed their own checks, so a
// bad value is reported once.
func checkOptionRules(p *problems, d TableDescriptor) {
	props := d.Properties
	get := func(key string) string {
		v, _ := d.Option(key)
		return v
	}
	enum := func(key string) string {
		o, _ := LookupOption(key)
		return o.enumValue(get(key))
	}
	set := func(key string) bool { _, ok := props[key]; return ok }
	hasPK := d.HasPrimaryKey()

	// Log format: a primary-key table with the COMPACTED kv format logs in
	// ARROW or COMPACTED.
	if hasPK && enum(OptKvFormat) == "COMPACTED" && enum(OptLogFormat) == "INDEXED" {
		p.add("options."+OptLogFormat, "a primary-key table with %s COMPACTED needs %s ARROW or COMPACTED, not INDEXED",
			OptKvFormat, OptLogFormat)
	}

	// Merge engines.
	switch enum(OptMergeEngine) {
	case "VERSIONED":
		col := get(OptMergeEngineVersionColumn)
		if !set(OptMergeEngineVersionColumn) {
			p.add("options."+OptMergeEngineVersionColumn, "must be set for the versioned merge engine; name an INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ column")
		} else if c, _, ok := d.Schema.Column(col); !ok {
			p.add("options."+OptMergeEngineVersionColumn, "version column %q is not a column; columns are %s", col, strings.Join(d.Schema.ColumnNames(), ", "))
		} else if r := c.Type.Root; r != Int && r != BigInt && r != Timestamp && r != TimestampLTZ {
			p.add("options."+OptMergeEngineVersionColumn, "version column %q is %s; it must be INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ", col, r)
		}
	case "AGGREGATION":
		if enum(OptChangelogImage) == "WAL" {
			p.add("options."+OptChangelogImage, "the aggregation merge engine needs the FULL changelog image, not WAL; remove the option or set it to FULL")
		}
	}

	// Delete behavior: first_row and versioned cannot delete.
	if me := enum(OptMergeEngine); (me == "FIRST_ROW" || me == "VERSIONED") && set(OptDeleteBehavior) && enum(OptDeleteBehavior) == "ALLOW" {
		p.add("options."+OptDeleteBehavior, "the %s merge engine does not support deletes; set IGNORE or DISABLE, or remove the option",
			strings.ToLower(me))
	}

	// Auto-partitioning.
	if strings.EqualFold(get(OptAutoPartitionEnabled), "true") {
		switch n := len(d.PartitionKeys); {
		case n == 0:
			p.add("options."+OptAutoPartitionEnabled, "auto-partitioning needs a partitioned table; add partition keys or set it to false")
		case n > 1:
			key := get(OptAutoPartitionKey)
			if strings.TrimSpace(key) == "" {
				p.add("options."+OptAutoPartitionKey, "must be set when auto-partitioning a table with several partition keys; name one of %s",
					strings.Join(d.PartitionKeys, ", "))
			} else if !slices.Contains(d.PartitionKeys, key) {
				p.add("options."+OptAutoPartitionKey, "%q is not a partition key; partition keys are %s", key, strings.Join(d.PartitionKeys, ", "))
			}
			// Unset, Fluss uses 0 for several keys; set, it must be 0.
			if n, _ := strconv.Atoi(props[OptAutoPartitionNumPrecreate]); n > 0 {
				p.add("options."+OptAutoPartitionNumPrecreate, "pre-creating partitions is not supported with several partition keys; set it to 0")
			}
		}
	}

	// Statistics columns: '*' or existing columns of supported types.
	if set(OptStatisticsColumns) {
		v := props[OptStatisticsColumns]
		if strings.TrimSpace(v) != "*" {
			var names []string
			for n := range strings.SplitSeq(v, ",") {
				if n = strings.TrimSpace(n); n != "" {
					names = append(names, n)
				}
			}
			if len(names) == 0 {
				p.add("options."+OptStatisticsColumns, "names no column; use '*' for all supported columns, or remove the option")
			}
			for _, n := range names {
				c, _, ok := d.Schema.Column(n)
				switch {
				case !ok:
					p.add("options."+OptStatisticsColumns, "%q is not a column; columns are %s", n, strings.Join(d.Schema.ColumnNames(), ", "))
				case c.Type.Root == Binary || c.Type.Root == Bytes:
					p.add("options."+OptStatisticsColumns, "column %q is %s, which has no statistics; statistics cover every type but BINARY and BYTES", n, c.Type.Root)
				}
			}
		}
	}
}

// descriptorJSONVersion is the "version" TableDescriptorJsonSerde writes.
const descriptorJSONVersion = 1

// MarshalJSON writes d in the shape of Fluss's TableDescriptorJsonSerde:
//
//	{"version":1,"schema":{...},"comment":"...","partition_key":["p"],
//	 "bucket_key":["a"],"bucket_count":4,"properties":{...},"custom_properties":{...}}
//
// "comment" only when set, "bucket_count" only when not 0; map keys sorted.
func (d TableDescriptor) MarshalJSON() ([]byte, error) {
	schema, err := d.Schema.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"version":%d,"schema":`, descriptorJSONVersion)
	b.Write(schema)
	if d.Comment != "" {
		b.WriteString(`,"comment":`)
		jsonString(&b, d.Comment)
	}
	b.WriteString(`,"partition_key":`)
	appendStrings(&b, d.PartitionKeys)
	b.WriteString(`,"bucket_key":`)
	appendStrings(&b, d.BucketKeys)
	if d.BucketCount != 0 {
		fmt.Fprintf(&b, `,"bucket_count":%d`, d.BucketCount)
	}
	b.WriteString(`,"properties":`)
	appendMap(&b, d.Properties)
	b.WriteString(`,"custom_properties":`)
	appendMap(&b, d.CustomProperties)
	b.WriteByte('}')
	return b.Bytes(), nil
}

func appendMap(b *bytes.Buffer, m map[string]string) {
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(',')
		}
		jsonString(b, k)
		b.WriteByte(':')
		jsonString(b, m[k])
	}
	b.WriteByte('}')
}

type descriptorJSON struct {
	Version          *int              `json:"version"`
	Schema           *Schema           `json:"schema"`
	Comment          *string           `json:"comment"`
	PartitionKey     []string          `json:"partition_key"`
	PartitionExprs   json.RawMessage   `json:"partition_expressions"`
	BucketKey        []string          `json:"bucket_key"`
	BucketCount      *int              `json:"bucket_count"`
	Properties       map[string]string `json:"properties"`
	CustomProperties map[string]string `json:"custom_properties"`
}

// UnmarshalJSON reads the shape MarshalJSON writes. It does not validate:
// call Normalize for that. Partition expressions, which Strom does not
// support yet, are an error.
func (d *TableDescriptor) UnmarshalJSON(data []byte) error {
	var j descriptorJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("record: table descriptor: %w", err)
	}
	if j.Version != nil && *j.Version != descriptorJSONVersion {
		return fmt.Errorf("record: table descriptor: unsupported version %d, want %d", *j.Version, descriptorJSONVersion)
	}
	if j.Schema == nil {
		return fmt.Errorf(`record: table descriptor: missing "schema"`)
	}
	if len(j.PartitionExprs) > 0 && string(j.PartitionExprs) != "null" && string(j.PartitionExprs) != "[]" {
		return fmt.Errorf("record: table descriptor: partition expressions are not supported yet")
	}
	out := TableDescriptor{
		Schema:           *j.Schema,
		PartitionKeys:    nilIfEmpty(j.PartitionKey),
		BucketKeys:       nilIfEmpty(j.BucketKey),
		Properties:       j.Properties,
		CustomProperties: j.CustomProperties,
	}
	if j.Comment != nil {
		out.Comment = *j.Comment
	}
	if j.BucketCount != nil {
		out.BucketCount = *j.BucketCount
	}
	*d = out
	return nil
}
