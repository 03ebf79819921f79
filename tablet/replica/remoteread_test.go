package replica

import (
	"bytes"
	"testing"

	"strom/raftmeta/catalog"
	"strom/record"
)

// readBatches returns at least one whole batch however small maxBytes is,
// even smaller than a batch header (a fetch's max_bytes of 1); before, a
// maxBytes below the header size read the batch's length past the bytes
// read and panicked.
func TestReadBatchesReturnsOneWholeBatchBelowTheHeaderSize(t *testing.T) {
	var seg []byte
	for i := range int32(3) {
		b := writerBatch(-1, i)
		record.Batch(b).SetBaseOffset(int64(i))
		seg = append(seg, b...)
	}
	size := len(writerBatch(-1, 0))
	meta := catalog.RemoteLogSegment{ID: "s", BaseOffset: 0, EndOffset: 3, SizeBytes: int64(len(seg))}
	for _, maxBytes := range []int{0, 1, record.BatchHeaderSize - 1, size, size + 1, 2 * size} {
		got, err := readBatches(bytes.NewReader(seg), meta, 1, maxBytes)
		if err != nil {
			t.Fatalf("maxBytes %d: %v", maxBytes, err)
		}
		want := seg[size : size+max(1, maxBytes/size)*size]
		if !bytes.Equal(got, want) {
			t.Fatalf("maxBytes %d: %d bytes, want the %d of %d whole batches from offset 1", maxBytes, len(got), len(want), len(want)/size)
		}
	}
}
