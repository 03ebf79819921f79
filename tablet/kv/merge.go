package kv

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"strom/record"
)

// The merge engines (Fluss's RowMerger implementations): how a write merges
// with the row stored under its key. Each returns the new row and whether
// anything changed; an unchanged result is a no-op that writes no
// changelog row (Fluss compares the merged value with the old one by
// reference, which is the same thing for these engines).

type mergeEngine uint8

const (
	engineDefault mergeEngine = iota // last write wins (Fluss DefaultRowMerger)
	engineFirstRow
	engineVersioned
	engineAggregation
)

func (m mergeEngine) String() string {
	return [...]string{"default", "first_row", "versioned", "aggregation"}[m]
}

type deleteBehavior uint8

const (
	deleteAllow deleteBehavior = iota
	deleteIgnore
	deleteDisable
)

// engine is the immutable merge configuration of a tablet.
type engine struct {
	schema    record.Schema
	kind      mergeEngine
	deletes   deleteBehavior
	walImage  bool   // table.changelog.image = WAL
	isKey     []bool // per column
	verCol    int    // versioned: the version column
	aggs      []aggFunc
	listDelim []string
}

// newEngine reads the merge configuration from c's table options and
// aggregation functions, reporting every problem at once.
func newEngine(c Config) (*engine, error) {
	s := c.Table.Schema
	e := &engine{schema: s, verCol: -1, isKey: make([]bool, len(s.Columns))}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("kv: Config.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	for _, i := range s.PrimaryKeyIndexes() {
		if i < 0 {
			bad("Table", "primary key %v names a column that does not exist", s.PrimaryKey)
			return nil, errors.Join(errs...)
		}
		e.isKey[i] = true
	}
	switch me := c.option(record.OptMergeEngine); me {
	case "":
		e.kind = engineDefault
	case "FIRST_ROW":
		e.kind = engineFirstRow
	case "VERSIONED":
		e.kind = engineVersioned
		name, _ := c.Table.Option(record.OptMergeEngineVersionColumn)
		col, i, ok := s.Column(name)
		switch r := col.Type.Root; {
		case !ok:
			bad("Table", "%s %q is not a column", record.OptMergeEngineVersionColumn, name)
		case r != record.Int && r != record.BigInt && r != record.Timestamp && r != record.TimestampLTZ:
			bad("Table", "version column %q is %s; it must be INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ", name, r)
		default:
			e.verCol = i
		}
	case "AGGREGATION":
		e.kind = engineAggregation
	default:
		bad("Table", "%s %q is not a merge engine", record.OptMergeEngine, me)
	}
	switch db := c.option(record.OptDeleteBehavior); {
	case db == "ALLOW" && c.Table.Properties[record.OptDeleteBehavior] == "" && e.kind != engineDefault:
		// Fluss: first_row, versioned and aggregation ignore deletes unless
		// told otherwise.
		e.deletes = deleteIgnore
	case db == "ALLOW":
		e.deletes = deleteAllow
	case db == "IGNORE":
		e.deletes = deleteIgnore
	case db == "DISABLE":
		e.deletes = deleteDisable
	default:
		bad("Table", "%s %q is not ALLOW, IGNORE or DISABLE", record.OptDeleteBehavior, db)
	}
	if e.deletes == deleteAllow && (e.kind == engineFirstRow || e.kind == engineVersioned) {
		bad("Table", "the %s merge engine does not support deletes; set %s IGNORE or DISABLE", e.kind, record.OptDeleteBehavior)
	}
	switch img := c.option(record.OptChangelogImage); img {
	case "FULL":
	case "WAL":
		e.walImage = true
		if e.kind == engineAggregation {
			bad("Table", "the aggregation merge engine needs %s FULL", record.OptChangelogImage)
		}
	default:
		bad("Table", "%s %q is not FULL or WAL", record.OptChangelogImage, img)
	}
	if len(c.Aggregations) > 0 && e.kind != engineAggregation {
		bad("Aggregations", "set, but the merge engine is %s, not aggregation", e.kind)
	}
	if e.kind == engineAggregation {
		e.aggs = make([]aggFunc, len(s.Columns))
		e.listDelim = make([]string, len(s.Columns))
		for i := range e.aggs {
			e.aggs[i] = aggLastValueIgnoreNulls
			e.listDelim[i] = ","
		}
		names := make([]string, 0, len(c.Aggregations))
		for n := range c.Aggregations {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, name := range names {
			fn := c.Aggregations[name]
			col, i, ok := s.Column(name)
			if !ok {
				bad("Aggregations", "%q is not a column; columns are %s", name, strings.Join(s.ColumnNames(), ", "))
				continue
			}
			if e.isKey[i] {
				bad("Aggregations", "%q is a primary-key column, which is never aggregated", name)
				continue
			}
			f, ok := parseAggFunc(fn)
			if !ok {
				bad("Aggregations", "column %q: %q is not an aggregate function; use one of %s", name, fn, strings.Join(aggNames[1:], ", "))
				continue
			}
			if !f.supports(col.Type.Root) {
				bad("Aggregations", "column %q: %s does not apply to %s", name, f, col.Type.Root)
				continue
			}
			e.aggs[i] = f
		}
		for name, d := range c.ListaggDelimiters {
			_, i, ok := s.Column(name)
			if !ok || e.aggs[i] != aggListagg {
				bad("ListaggDelimiters", "%q is not a listagg column", name)
				continue
			}
			e.listDelim[i] = d
		}
	} else if len(c.ListaggDelimiters) > 0 {
		bad("ListaggDelimiters", "set, but the merge engine is %s, not aggregation", e.kind)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return e, nil
}

// targets returns the per-column mask of a partial update, or nil for a
// full-row write. It checks Fluss's PartialUpdater rules: the targets
// include every key column, every other column is nullable, and the merge
// engine supports partial updates.
func (e *engine) targets(cols []int) ([]bool, error) {
	if cols == nil {
		return nil, nil
	}
	n := len(e.schema.Columns)
	mask := make([]bool, n)
	for _, c := range cols {
		if c < 0 || c >= n {
			return nil, fmt.Errorf("%w: target column %d is not a column index (the table has %d columns)", ErrPartialUpdateUnsupported, c, n)
		}
		mask[c] = true
	}
	if !slices.Contains(mask, false) {
		return nil, nil // every column: a full-row write
	}
	if e.kind == engineFirstRow || e.kind == engineVersioned {
		return nil, fmt.Errorf("%w: the %s merge engine does not support partial updates", ErrPartialUpdateUnsupported, e.kind)
	}
	for i, c := range e.schema.Columns {
		if e.isKey[i] && !mask[i] {
			return nil, fmt.Errorf("%w: the target columns must include the primary key column %q", ErrPartialUpdateUnsupported, c.Name)
		}
		if !e.isKey[i] && !c.Type.Nullable {
			return nil, fmt.Errorf("%w: column %q is NOT NULL; a partial update needs every non-key column nullable", ErrPartialUpdateUnsupported, c.Name)
		}
	}
	return mask, nil
}

// insert returns the row stored for a write of row to an absent key: row
// itself, with the non-target columns of a partial update NULL.
func (e *engine) insert(row record.Row, target []bool) record.Row {
	if target == nil {
		return row
	}
	out := make(record.Row, len(row))
	for i, v := range row {
		if target[i] {
			out[i] = v
		}
	}
	return out
}

// merge merges a write of row into the stored old row. It returns the new
// row and whether it differs from old (false: nothing to write), or the
// column whose aggregation failed.
func (e *engine) merge(old, row record.Row, target []bool) (record.Row, bool, int, error) {
	switch e.kind {
	case engineFirstRow:
		return old, false, 0, nil
	case engineVersioned:
		if !versionNewer(row[e.verCol], old[e.verCol]) {
			return old, false, 0, nil
		}
		return row, true, 0, nil
	case engineAggregation:
		out := slices.Clone(old)
		for i := range out {
			if e.isKey[i] || (target != nil && !target[i]) {
				continue
			}
			v, err := e.aggs[i].apply(old[i], row[i], e.listDelim[i], e.schema.Columns[i].Type)
			if err != nil {
				return nil, false, i, err
			}
			out[i] = v
		}
		return out, true, 0, nil
	default:
		if target == nil {
			return row, true, 0, nil
		}
		out := slices.Clone(old)
		for i := range out {
			if target[i] {
				out[i] = row[i]
			}
		}
		return out, true, 0, nil
	}
}

// remove applies a delete to the stored old row (the caller has handled the
// delete behaviour). It returns nil for a deleted row, or the row left by a
// partial delete (Fluss PartialUpdater.deleteRow: the target non-key
// columns become NULL; the row is deleted only when every non-key column
// is then NULL).
func (e *engine) remove(old record.Row, target []bool) record.Row {
	if target == nil || e.kind == engineAggregation {
		return nil
	}
	out := slices.Clone(old)
	allNull := true
	for i := range out {
		if e.isKey[i] {
			continue
		}
		if target[i] {
			out[i] = nil
		}
		allNull = allNull && out[i] == nil
	}
	if allNull {
		return nil
	}
	return out
}

// versionNewer reports whether version v replaces version old: Fluss's
// versioned merge engine updates when the new version is greater than or
// equal to the stored one, and never for a NULL new version. A NULL stored
// version is replaced by any non-NULL one.
func versionNewer(v, old any) bool {
	if v == nil {
		return false
	}
	if old == nil {
		return true
	}
	switch x := v.(type) {
	case int32:
		return x >= old.(int32)
	case int64:
		return x >= old.(int64)
	case record.TimestampNTZ:
		o := old.(record.TimestampNTZ)
		return x.Millis > o.Millis || x.Millis == o.Millis && x.NanoOfMilli >= o.NanoOfMilli
	case record.Instant:
		o := old.(record.Instant)
		return x.EpochMillis > o.EpochMillis || x.EpochMillis == o.EpochMillis && x.NanoOfMilli >= o.NanoOfMilli
	}
	return false
}
