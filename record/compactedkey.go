package record

import (
	"errors"
	"fmt"
	"strings"
)

// The compacted key (FORMATS.md §2), Fluss's CompactedKeyEncoder (through
// KeyEncoder.of for non-lake tables) and CompactedKeyWriter: the fields of
// the key columns, in key order, back to back, with no header, bitset or
// terminator. Each field delimits itself, so the key of a prefix of the key
// columns is a byte prefix of the key: a bucket key that is a prefix of the
// primary key, or a prefix lookup, is a byte-prefix scan.

// ErrCorruptKey marks bytes that are not a compacted key of the key columns
// they were decoded with.
var ErrCorruptKey = errors.New("record: corrupt key")

// KeyCodec encodes and decodes compacted keys: primary keys (the KV store's
// keys, PutKv, Lookup and PrefixLookup keys) and bucket keys (the input of
// BucketOf). It is immutable and safe for concurrent use. Values have the Go
// types Row documents; a key never holds a null.
type KeyCodec struct {
	cols    []Column // the key columns, in key order
	indexes []int    // their positions in a full row
	rowLen  int      // the number of columns of a full row
}

// NewKeyCodec returns the codec of the key made of the columns named keys,
// in that order (the primary key's order, or bucket.key's; not the table's
// column order), out of rows with columns cols. Names are case-sensitive.
// The error joins an *InvalidError per problem: no keys, a name that is not
// a column or is repeated (Field "keys[i]"), an invalid column type.
func NewKeyCodec(cols []Column, keys []string) (*KeyCodec, error) {
	if err := checkCodecColumns(cols); err != nil {
		return nil, err
	}
	var p problems
	if len(keys) == 0 {
		p.add("keys", "a key needs at least one column")
	}
	k := &KeyCodec{rowLen: len(cols)}
	seen := make(map[string]int, len(keys))
	for i, name := range keys {
		field := fmt.Sprintf("keys[%d]", i)
		if j, dup := seen[name]; dup {
			p.add(field, "key column %q is repeated (also keys[%d])", name, j)
			continue
		}
		seen[name] = i
		pos := -1
		for j, c := range cols {
			if c.Name == name {
				pos = j
				break
			}
		}
		if pos < 0 {
			names := make([]string, len(cols))
			for j, c := range cols {
				names[j] = c.Name
			}
			p.add(field, "key column %q is not a column; columns are %s", name, strings.Join(names, ", "))
			continue
		}
		k.cols = append(k.cols, cols[pos])
		k.indexes = append(k.indexes, pos)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return k, nil
}

// Columns returns the key columns in key order; the caller must not modify
// them.
func (k *KeyCodec) Columns() []Column { return k.cols }

// Append appends the key of the key values key — one per key column, in key
// order, none nil — to dst. Lookups, which hold only the key, use it. Values
// are written as CompactedRowCodec.Append writes them. On error dst is
// returned at its original length and the error joins an *InvalidError per
// offending value, its Field the column name.
func (k *KeyCodec) Append(dst []byte, key Row) ([]byte, error) {
	if len(key) != len(k.cols) {
		return dst, &InvalidError{Field: "key", Reason: fmt.Sprintf("key has %d values, the key has %d columns", len(key), len(k.cols))}
	}
	return k.append(dst, func(i int) any { return key[i] })
}

// AppendRow appends the key of row, a full row with a value per column of
// the columns NewKeyCodec was given. Errors are Append's.
func (k *KeyCodec) AppendRow(dst []byte, row Row) ([]byte, error) {
	if len(row) != k.rowLen {
		return dst, &InvalidError{Field: "row", Reason: fmt.Sprintf("row has %d values, the schema has %d columns", len(row), k.rowLen)}
	}
	return k.append(dst, func(i int) any { return row[k.indexes[i]] })
}

func (k *KeyCodec) append(dst []byte, value func(i int) any) ([]byte, error) {
	start := len(dst)
	var p problems
	for i, col := range k.cols {
		v := value(i)
		if v == nil {
			p.add(col.Name, "null is not allowed in a key column (%s)", col.Type)
			continue
		}
		var reason string
		if dst, reason = appendCompactedField(dst, col.Type, v); reason != "" {
			p.add(col.Name, "%s", reason)
		}
	}
	if err := p.err(); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// Decode decodes a whole key into its values, in key order. Like
// CompactedRowCodec.Decode it is strict and never panics; the error wraps
// ErrCorruptKey. Decoded values never alias b.
func (k *KeyCodec) Decode(b []byte) (Row, error) {
	out := make(Row, len(k.cols))
	r := fieldReader{b: b}
	for i, col := range k.cols {
		at := r.pos
		v, reason := r.field(col.Type)
		if reason != "" {
			return nil, fmt.Errorf("%w: key column %d %q (%s) at byte %d: %s", ErrCorruptKey, i, col.Name, col.Type, at, reason)
		}
		out[i] = v
	}
	if r.pos != len(b) {
		return nil, fmt.Errorf("%w: %d bytes after the last key column", ErrCorruptKey, len(b)-r.pos)
	}
	return out, nil
}
