package record

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestKvBatchVectors(t *testing.T) {
	for i, v := range loadCodecVectors(t).KvBatch {
		t.Run(fmt.Sprintf("%d/schema%d/writer%d/%s", i, v.SchemaID, v.WriterID, v.Note), func(t *testing.T) {
			if v.Magic != KvMagic || v.HeaderSize != KvBatchHeaderSize {
				t.Fatalf("vector magic %d header %d", v.Magic, v.HeaderSize)
			}
			cols := codecVectorColumns(t, v.Types, nil)
			rows, err := NewCompactedRowCodec(cols)
			if err != nil {
				t.Fatal(err)
			}
			keys, err := NewKeyCodec(cols, v.PrimaryKey)
			if err != nil {
				t.Fatal(err)
			}

			// Build from the values, through the key and row codecs.
			bld := NewKvBatchBuilder(KvBatchHeader{SchemaID: v.SchemaID, WriterID: v.WriterID, BatchSequence: v.BatchSequence})
			for _, r := range v.Records {
				key := codecHex(t, r.KeyHex)
				var row []byte
				if r.Values != nil {
					values := codecVectorRow(t, cols, r.Values)
					if k, err := keys.AppendRow(nil, values); err != nil || !bytes.Equal(k, key) {
						t.Fatalf("key of %v = %x, %v; want %s", values, k, err, r.KeyHex)
					}
					if row, err = rows.Append(nil, values); err != nil || hex.EncodeToString(row) != *r.RowHex {
						t.Fatalf("row of %v = %x, %v; want %s", values, row, err, *r.RowHex)
					}
				}
				if err := bld.Append(key, row); err != nil {
					t.Fatal(err)
				}
			}
			if bld.Len() != len(v.Records) || bld.Size() != len(v.Hex)/2 {
				t.Fatalf("builder Len %d Size %d", bld.Len(), bld.Size())
			}
			built := bld.Build()
			if hex.EncodeToString(built) != v.Hex {
				t.Fatalf("Build:\n got %x\nwant %s", []byte(built), v.Hex)
			}
			if hex.EncodeToString(built[:KvBatchHeaderSize]) != v.HeaderHex {
				t.Fatalf("header %x, want %s", []byte(built[:KvBatchHeaderSize]), v.HeaderHex)
			}

			// Read Fluss's bytes back.
			b := KvBatch(codecHex(t, v.Hex))
			if err := b.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if b.Magic() != KvMagic || b.SchemaID() != v.SchemaID || b.WriterID() != v.WriterID ||
				b.BatchSequence() != v.BatchSequence || b.RecordCount() != int32(len(v.Records)) ||
				b.Attributes() != 0 || int(b.Length()) != len(b)-4 || b.CRC() != b.ComputeCRC() {
				t.Fatalf("header fields: schema %d writer %d seq %d count %d", b.SchemaID(), b.WriterID(), b.BatchSequence(), b.RecordCount())
			}
			recs, err := b.Records()
			if err != nil || len(recs) != len(v.Records) {
				t.Fatalf("Records = %d records, %v", len(recs), err)
			}
			for j, r := range v.Records {
				got := recs[j]
				if hex.EncodeToString(got.Key) != r.KeyHex {
					t.Fatalf("record %d key %x, want %s", j, got.Key, r.KeyHex)
				}
				if r.RowHex == nil {
					if !got.IsDelete() || got.Row != nil {
						t.Fatalf("record %d: row %x, want a delete", j, got.Row)
					}
					continue
				}
				if got.IsDelete() || hex.EncodeToString(got.Row) != *r.RowHex {
					t.Fatalf("record %d row %x, want %s", j, got.Row, *r.RowHex)
				}
				values, err := rows.Decode(got.Row)
				if err != nil || !values.Equal(codecVectorRow(t, cols, r.Values)) {
					t.Fatalf("record %d decodes to %v, %v", j, values, err)
				}
			}
		})
	}
}

func TestKvBatchBuilder(t *testing.T) {
	h := KvBatchHeader{SchemaID: 7, WriterID: NoWriterID, BatchSequence: NoBatchSequence}
	bld := NewKvBatchBuilder(h)
	empty := bld.Build()
	if err := empty.Validate(); err != nil || len(empty) != KvBatchHeaderSize || empty.RecordCount() != 0 {
		t.Fatalf("empty batch %x: %v", []byte(empty), err)
	}
	key, row := []byte{1}, []byte{0, 5}
	if err := bld.Append(key, row); err != nil {
		t.Fatal(err)
	}
	key[0], row[0] = 9, 9 // the builder copied them
	if err := bld.Append([]byte{2}, []byte{}); err != nil {
		t.Fatal(err)
	}
	long := bytes.Repeat([]byte{7}, 200) // a two-byte key length
	if err := bld.Append(long, []byte{0}); err != nil {
		t.Fatal(err)
	}
	b := bld.Build()
	if bld.Len() != 0 || bld.Size() != KvBatchHeaderSize {
		t.Fatalf("builder not reset: Len %d Size %d", bld.Len(), bld.Size())
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	recs, err := b.Records()
	if err != nil || len(recs) != 3 || !bytes.Equal(recs[0].Key, []byte{1}) || !bytes.Equal(recs[0].Row, []byte{0, 5}) ||
		!recs[1].IsDelete() || !bytes.Equal(recs[2].Key, long) || b.SchemaID() != 7 || b.WriterID() != NoWriterID || b.BatchSequence() != NoBatchSequence {
		t.Fatalf("records %v, %v", recs, err)
	}
	// The next batch from the same builder does not share bytes with b.
	if err := bld.Append([]byte{3}, nil); err != nil {
		t.Fatal(err)
	}
	next := bld.Build()
	if err := b.Validate(); err != nil || next.RecordCount() != 1 {
		t.Fatalf("second Build disturbed the first: %v", err)
	}
	if err := bld.Append(nil, []byte{0}); len(InvalidErrors(err)) != 1 || bld.Len() != 0 {
		t.Fatalf("empty key: %v", err)
	}
}

func TestKvBatchCorruption(t *testing.T) {
	bld := NewKvBatchBuilder(KvBatchHeader{SchemaID: 1, WriterID: 9, BatchSequence: 3})
	if err := bld.Append([]byte{1}, []byte{0, 1, 1, 'a'}); err != nil {
		t.Fatal(err)
	}
	if err := bld.Append([]byte{2}, nil); err != nil {
		t.Fatal(err)
	}
	good := bld.Build()
	// withCRC recomputes the CRC, so the structural checks are reached.
	withCRC := func(b KvBatch) KvBatch {
		le.PutUint32(b[kvCRCOffset:], b.ComputeCRC())
		return b
	}
	edit := func(f func(b KvBatch) KvBatch) KvBatch { return f(append(KvBatch(nil), good...)) }
	tests := []struct {
		name string
		b    KvBatch
		want string
	}{
		{"short", good[:KvBatchHeaderSize-1], "shorter than its header"},
		{"torn", good[:len(good)-1], "length field says"},
		{"extra byte", append(append(KvBatch(nil), good...), 0), "length field says"},
		{"magic", edit(func(b KvBatch) KvBatch { b[kvMagicOffset] = 1; return withCRC(b) }), "unknown KV batch magic 1"},
		{"flipped byte", edit(func(b KvBatch) KvBatch { b[len(b)-1] ^= 0xff; return b }), "CRC"},
		{"flipped writer id", edit(func(b KvBatch) KvBatch { b[kvWriterIDOffset] ^= 1; return b }), "CRC"},
		{"negative count", edit(func(b KvBatch) KvBatch { le.PutUint32(b[kvRecordCountOffset:], 0xffffffff); return withCRC(b) }), "record count -1"},
		{"count too high", edit(func(b KvBatch) KvBatch { le.PutUint32(b[kvRecordCountOffset:], 3); return withCRC(b) }), "KV record 2"},
		{"count too low", edit(func(b KvBatch) KvBatch { le.PutUint32(b[kvRecordCountOffset:], 1); return withCRC(b) }), "bytes after the 1 records"},
		{"record length past end", edit(func(b KvBatch) KvBatch { le.PutUint32(b[KvBatchHeaderSize:], 100); return withCRC(b) }), "record length 100"},
		{"negative record length", edit(func(b KvBatch) KvBatch { le.PutUint32(b[KvBatchHeaderSize:], 0xfffffff0); return withCRC(b) }), "record length -16"},
		{"empty key", edit(func(b KvBatch) KvBatch { b[KvBatchHeaderSize+4] = 0; return withCRC(b) }), "empty key"},
		{"key past record", edit(func(b KvBatch) KvBatch { b[KvBatchHeaderSize+4] = 9; return withCRC(b) }), "key length 9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.Validate()
			if !errors.Is(err, ErrCorruptBatch) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrCorruptBatch containing %q", err, tc.want)
			}
		})
	}
	if _, err := KvBatch(good[:10]).Records(); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("Records of a short batch: %v", err)
	}
}

// FuzzKvBatch reads arbitrary bytes as a KV batch. Reading never panics; a
// batch that validates is rebuilt byte for byte from its header and records.
func FuzzKvBatch(f *testing.F) {
	for _, v := range loadCodecVectors(f).KvBatch {
		f.Add(codecHex(f, v.Hex))
	}
	f.Add(make([]byte, KvBatchHeaderSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := KvBatch(data)
		recs, recErr := b.Records()
		if err := b.Validate(); err != nil {
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("Validate error %v does not wrap ErrCorruptBatch", err)
			}
			return
		}
		if recErr != nil {
			t.Fatalf("valid batch, but Records: %v", recErr)
		}
		bld := NewKvBatchBuilder(KvBatchHeader{SchemaID: b.SchemaID(), WriterID: b.WriterID(), BatchSequence: b.BatchSequence()})
		for _, r := range recs {
			if err := bld.Append(r.Key, r.Row); err != nil {
				t.Fatal(err)
			}
		}
		rebuilt := bld.Build()
		if b.Attributes() == 0 && !bytes.Equal(rebuilt, data) {
			t.Fatalf("rebuilt %x from %x", []byte(rebuilt), data)
		}
	})
}
