package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// The Paimon key (Fluss 0.9.1's PaimonKeyEncoder through KeyEncoder.of):
// with table.datalake.format paimon the 0.9.1 client encodes a primary key
// as a Paimon BinaryRow of the key columns (PaimonBinaryRowWriter): a
// header of null bits (8 bytes per 64 fields, counting an 8-bit row-kind
// header, row kind INSERT = 0), one 8-byte little-endian slot per field,
// then a variable part. INT, DATE, TIME and SMALLINT, TINYINT, BOOLEAN
// fill the low bytes of their slot; BIGINT, FLOAT, DOUBLE all of it;
// DECIMAL(p <= 18) the unscaled long, else 16 bytes of the variable part
// holding the unscaled big-endian two's complement (offset << 32 | length
// in the slot); TIMESTAMP(p <= 3) / TIMESTAMP_LTZ the epoch millis, else 8
// bytes of millis in the variable part (offset << 32 | nano of milli);
// STRING, CHAR, BYTES, BINARY of at most 7 bytes inline (byte 7 of the slot
// 0x80 | length), longer ones in the variable part padded to 8 bytes.
// The bucket of a key is PaimonBucketOf.

// RowKeyEncoder is a primary-key encoding as a KV tablet uses it: the key
// of a row, and a check that bytes are a key of the key columns.
type RowKeyEncoder interface {
	AppendRow(dst []byte, row Row) ([]byte, error)
	CheckKey(key []byte) error
	Columns() []Column
}

// BucketKeyEncoder is the encoding the Fluss 0.9.1 client gives d's bucket
// keys (KeyEncoder.ofBucketKeyEncoder): Paimon keys with
// table.datalake.format paimon, else compacted keys. BucketOfKey is the
// bucket of such a key.
func BucketKeyEncoder(d TableDescriptor) (RowKeyEncoder, error) {
	if d.Properties[OptDatalakeFormat] == "paimon" {
		return NewPaimonKeyCodec(d.Schema.Columns, d.BucketKeys)
	}
	return NewKeyCodec(d.Schema.Columns, d.BucketKeys)
}

// BucketOfKey is the bucket among n of a bucket key BucketKeyEncoder(d)
// made: PaimonBucketOf with table.datalake.format paimon (the client's
// PaimonBucketingFunction), else BucketOf.
func BucketOfKey(d TableDescriptor, key []byte, n int) int {
	if d.Properties[OptDatalakeFormat] == "paimon" {
		return PaimonBucketOf(key, n)
	}
	return BucketOf(key, n)
}

// CheckKey reports whether key decodes as a compacted key.
func (k *KeyCodec) CheckKey(key []byte) error {
	_, err := k.Decode(key)
	return err
}

// PrimaryKeyEncoder is the encoding the Fluss 0.9.1 client gives d's
// primary keys (KeyEncoder.ofPrimaryKeyEncoder): a table with
// table.datalake.format paimon has Paimon keys, unless its
// table.kv.format-version is 2 and its bucket key is not its physical
// primary key (then compacted keys, which prefix lookups need); any other
// table compacted keys.
func PrimaryKeyEncoder(d TableDescriptor) (RowKeyEncoder, error) {
	if PaimonKeyed(d) {
		return NewPaimonKeyCodec(d.Schema.Columns, d.Schema.PrimaryKey)
	}
	return NewKeyCodec(d.Schema.Columns, d.Schema.PrimaryKey)
}

// PaimonKeyed reports whether d's primary keys are Paimon keys.
func PaimonKeyed(d TableDescriptor) bool {
	if d.Properties[OptDatalakeFormat] != "paimon" {
		return false
	}
	v, err := strconv.Atoi(d.Properties[OptKvFormatVersion])
	if err != nil || v != 2 {
		return true
	}
	var physical []string
	for _, k := range d.Schema.PrimaryKey {
		if !slices.Contains(d.PartitionKeys, k) {
			physical = append(physical, k)
		}
	}
	return slices.Equal(d.BucketKeys, physical)
}

// PaimonBucketOf is Fluss 0.9.1's PaimonBucketingFunction: the bucket of a
// Paimon-encoded bucket key among n buckets, abs(hashBytes(key) % n).
func PaimonBucketOf(key []byte, n int) int {
	h := bucketHash(key) % int32(n)
	if h < 0 {
		h = -h
	}
	return int(h)
}

// PaimonKeyCodec encodes Paimon keys (above). It is immutable and safe for
// concurrent use.
type PaimonKeyCodec struct {
	cols    []Column
	indexes []int
	rowLen  int
}

// NewPaimonKeyCodec returns the Paimon key codec of the columns named keys
// out of rows with columns cols; its errors are NewKeyCodec's.
func NewPaimonKeyCodec(cols []Column, keys []string) (*PaimonKeyCodec, error) {
	k, err := NewKeyCodec(cols, keys)
	if err != nil {
		return nil, err
	}
	return &PaimonKeyCodec{cols: k.cols, indexes: k.indexes, rowLen: k.rowLen}, nil
}

// Columns returns the key columns in key order; the caller must not modify
// them.
func (k *PaimonKeyCodec) Columns() []Column { return k.cols }

func (k *PaimonKeyCodec) nullBytes() int { return (len(k.cols) + 63 + 8) / 64 * 8 }

// AppendRow appends the Paimon key of row (a full row) to dst. A null key
// value or a value of the wrong Go type is an *InvalidError naming the
// column; dst is returned at its length then.
func (k *PaimonKeyCodec) AppendRow(dst []byte, row Row) ([]byte, error) {
	if len(row) != k.rowLen {
		return dst, &InvalidError{Field: "row", Reason: fmt.Sprintf("row has %d values, the schema has %d columns", len(row), k.rowLen)}
	}
	start := len(dst)
	fixed := k.nullBytes() + 8*len(k.cols)
	dst = append(dst, make([]byte, fixed)...)
	var p problems
	for i, col := range k.cols {
		slot := start + k.nullBytes() + 8*i
		v := row[k.indexes[i]]
		if v == nil {
			p.add(col.Name, "null is not allowed in a key column (%s)", col.Type)
			continue
		}
		var reason string
		dst, reason = appendPaimonField(dst, start, slot, col.Type, v)
		if reason != "" {
			p.add(col.Name, "%s", reason)
		}
	}
	if err := p.err(); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

func appendPaimonField(dst []byte, start, slot int, t DataType, v any) ([]byte, string) {
	put64 := func(x uint64) { binary.LittleEndian.PutUint64(dst[slot:], x) }
	varPart := func(b []byte, pad int, low uint64) {
		off := len(dst) - start
		dst = append(dst, b...)
		dst = append(dst, make([]byte, pad-len(b))...)
		put64(uint64(off)<<32 | low)
	}
	bytesField := func(b []byte) {
		if len(b) <= 7 {
			var x uint64
			for i, c := range b {
				x |= uint64(c) << (8 * i)
			}
			put64(uint64(len(b)|0x80)<<56 | x)
			return
		}
		varPart(b, (len(b)+7)/8*8, uint64(len(b)))
	}
	wrong := func() string { return wrongCompactedGoType(t, v) }
	switch t.Root {
	case Boolean:
		x, ok := v.(bool)
		if !ok {
			return dst, wrong()
		}
		if x {
			dst[slot] = 1
		}
	case TinyInt:
		x, ok := v.(int8)
		if !ok {
			return dst, wrong()
		}
		dst[slot] = byte(x)
	case SmallInt:
		x, ok := v.(int16)
		if !ok {
			return dst, wrong()
		}
		binary.LittleEndian.PutUint16(dst[slot:], uint16(x))
	case Int:
		x, ok := v.(int32)
		if !ok {
			return dst, wrong()
		}
		binary.LittleEndian.PutUint32(dst[slot:], uint32(x))
	case Date:
		x, ok := v.(DateValue)
		if !ok {
			return dst, wrong()
		}
		binary.LittleEndian.PutUint32(dst[slot:], uint32(int32(x)))
	case Time:
		x, ok := v.(TimeOfDay)
		if !ok {
			return dst, wrong()
		}
		binary.LittleEndian.PutUint32(dst[slot:], uint32(int32(x)))
	case BigInt:
		x, ok := v.(int64)
		if !ok {
			return dst, wrong()
		}
		put64(uint64(x))
	case Float:
		x, ok := v.(float32)
		if !ok {
			return dst, wrong()
		}
		binary.LittleEndian.PutUint32(dst[slot:], math.Float32bits(x))
	case Double:
		x, ok := v.(float64)
		if !ok {
			return dst, wrong()
		}
		put64(math.Float64bits(x))
	case Char, String:
		x, ok := v.(string)
		if !ok {
			return dst, wrong()
		}
		bytesField([]byte(x))
	case Binary, Bytes:
		x, ok := v.([]byte)
		if !ok {
			return dst, wrong()
		}
		bytesField(x)
	case Decimal:
		x, ok := v.(DecimalValue)
		if !ok {
			return dst, wrong()
		}
		if int(x.Precision) != t.Precision || int(x.Scale) != t.Scale {
			return dst, fmt.Sprintf("value %s is a DECIMAL(%d, %d), the column is %s", x, x.Precision, x.Scale, t)
		}
		if x.IsCompact() {
			u, ok := x.UnscaledInt64()
			if !ok {
				return dst, fmt.Sprintf("value %s has more than %d digits", x, t.Precision)
			}
			put64(uint64(u))
			break
		}
		b := twosComplement(x.Unscaled())
		if len(b) > 16 {
			return dst, fmt.Sprintf("value %s has more than %d digits", x, t.Precision)
		}
		varPart(b, 16, uint64(len(b)))
	case Timestamp, TimestampLTZ:
		var millis int64
		var nanos int32
		switch x := v.(type) {
		case TimestampNTZ:
			if t.Root != Timestamp {
				return dst, wrong()
			}
			millis, nanos = x.Millis, x.NanoOfMilli
		case Instant:
			if t.Root != TimestampLTZ {
				return dst, wrong()
			}
			millis, nanos = x.EpochMillis, x.NanoOfMilli
		default:
			return dst, wrong()
		}
		if t.Precision <= 3 {
			put64(uint64(millis))
			break
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(millis))
		varPart(b[:], 8, uint64(uint32(nanos)))
	default:
		return dst, fmt.Sprintf("unsupported column type %s", t)
	}
	return dst, ""
}

// errPaimonKey marks bytes that are not a Paimon key of the key columns.
var errPaimonKey = errors.New("record: not a Paimon key of the key columns")

// CheckKey reports whether key has the shape of a Paimon key of the key
// columns: the header and slots, no null bit, row kind INSERT, and each
// variable-part field inside the key.
func (k *PaimonKeyCodec) CheckKey(key []byte) error {
	nb := k.nullBytes()
	fixed := nb + 8*len(k.cols)
	if len(key) < fixed {
		return fmt.Errorf("%w: %d bytes, fewer than the %d of its fixed part", errPaimonKey, len(key), fixed)
	}
	if key[0] != 0 {
		return fmt.Errorf("%w: row kind %d, not INSERT", errPaimonKey, key[0])
	}
	for i := range k.cols {
		bit := i + 8
		if key[bit/8]&(1<<(bit%8)) != 0 {
			return fmt.Errorf("%w: key column %s is null", errPaimonKey, k.cols[i].Name)
		}
	}
	for i, col := range k.cols {
		x := binary.LittleEndian.Uint64(key[nb+8*i:])
		var off, n uint64
		switch col.Type.Root {
		case Char, String, Binary, Bytes:
			if x>>63 == 1 {
				if (x>>56)&0x7f > 7 {
					return fmt.Errorf("%w: column %s: inline length %d", errPaimonKey, col.Name, (x>>56)&0x7f)
				}
				continue
			}
			off, n = x>>32, x&0xffffffff
		case Decimal:
			if col.Type.Precision <= MaxCompactDecimalPrecision {
				continue
			}
			off, n = x>>32, 16
		case Timestamp, TimestampLTZ:
			if col.Type.Precision <= 3 {
				continue
			}
			off, n = x>>32, 8
		default:
			continue
		}
		if off < uint64(fixed) || off+n > uint64(len(key)) {
			return fmt.Errorf("%w: column %s: variable part at %d, %d bytes, outside the key's %d", errPaimonKey, col.Name, off, n, len(key))
		}
	}
	return nil
}
