package listener

import "encoding/binary"

// A value batch is how Fluss answers a LIMIT_SCAN of a primary-key table
// (Fluss 0.9.1's DefaultValueRecordBatch, which the client's
// LimitBatchScanner reads):
//
//	Length i32 | Magic i8 (0) | RecordCount i32 | records
//
// little-endian, Length counting the bytes after it; each record is
//
//	Length i32 | value
//
// where the value is a KV value, schema id int16 LE + compacted row
// (FORMATS.md §3.2), as Strom's KV tablets store it.
const (
	valueBatchMagic      = 0
	valueBatchHeaderSize = 9
)

// appendValueBatch appends the value batch of values to dst.
func appendValueBatch(dst []byte, values [][]byte) []byte {
	size := valueBatchHeaderSize
	for _, v := range values {
		size += 4 + len(v)
	}
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, uint32(size-4))
	dst = append(dst, valueBatchMagic)
	dst = le.AppendUint32(dst, uint32(len(values)))
	for _, v := range values {
		dst = le.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	return dst
}
