package logbatch

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"testing"

	"strom/record"
)

// vectors is testdata/log_batch_vectors.json: the log_batch section of
// /work/shared/testdata/fluss-vectors.json, batches Fluss's own builders
// wrote (FORMATS.md §4.4, §6).
type vector struct {
	Magic      int8   `json:"magic"`
	BaseOffset int64  `json:"base_offset"`
	Layout     string `json:"layout"`
	Records    []any  `json:"records"`
	Hex        string `json:"hex"`
}

func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	data, err := os.ReadFile("testdata/log_batch_vectors.json")
	if err != nil {
		tb.Fatal(err)
	}
	var v struct {
		LogBatch []vector `json:"log_batch"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		tb.Fatal(err)
	}
	if len(v.LogBatch) != 8 {
		tb.Fatalf("%d log_batch vectors, want 8", len(v.LogBatch))
	}
	return v.LogBatch
}

func unhex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// The vectors hold the same records in several layouts: V0 (0), main's V2
// (2) and 0.9.1's V1 (6); main's V2 (4) and 0.9.1's V1 (7). Converting one
// must give Fluss's own bytes of the other, byte for byte, CRC included.
func TestVectors(t *testing.T) {
	v := loadVectors(t)
	for _, tc := range []struct {
		name     string
		from, to int
		conv     func(dst, src []byte) ([]byte, error)
	}{
		{"V0 to V2", 0, 2, ToStrom},
		{"0.9.1 V1 to V2", 6, 2, ToStrom},
		{"0.9.1 V1 with change types to V2", 7, 4, ToStrom},
		{"V2 to 0.9.1 V1", 2, 6, ToFluss},
		{"V2 with change types to 0.9.1 V1", 4, 7, ToFluss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(v[tc.from].Layout, map[bool]string{true: "0.9.1", false: "main"}[v[tc.from].Magic == MagicV1]) &&
				v[tc.from].Magic != MagicV0 {
				t.Fatalf("vector %d is %q", tc.from, v[tc.from].Layout)
			}
			got, err := tc.conv(nil, unhex(t, v[tc.from].Hex))
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(got) != v[tc.to].Hex {
				t.Fatalf("\n got %x\nwant %s", got, v[tc.to].Hex)
			}
		})
	}
}

// Every batch ToStrom writes is one Strom's record package accepts as a
// valid V2 batch with the same fields: the empty V0 batch and the
// append-only one too.
func TestToStromValidates(t *testing.T) {
	for i, v := range loadVectors(t) {
		if v.Magic == MagicV2 || strings.HasPrefix(v.Layout, "main") {
			continue
		}
		in := unhex(t, v.Hex)
		out, err := ToStrom(nil, in)
		if err != nil {
			t.Fatalf("vector %d: %v", i, err)
		}
		b, rest, err := record.NextBatch(out)
		if err != nil || len(rest) != 0 {
			t.Fatalf("vector %d: NextBatch: %v (%d left)", i, err, len(rest))
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("vector %d: %v", i, err)
		}
		if b.Magic() != record.MagicV2 || b.BaseOffset() != v.BaseOffset || int(b.RecordCount()) != len(v.Records) ||
			len(b.Statistics()) != 0 || !bytes.Equal(b.Records(), in[headerSize(v.Magic):]) {
			t.Fatalf("vector %d: magic %d base %d count %d records changed", i, b.Magic(), b.BaseOffset(), b.RecordCount())
		}
		if v.Magic == MagicV0 && b.LeaderEpoch() != -1 {
			t.Fatalf("vector %d: epoch %d", i, b.LeaderEpoch())
		}
	}
}

// Main's V1 (statistics, no epoch) is not a layout 0.9.1 writes; read as
// 0.9.1's V1 its fields do not line up (here: the record count), and ToStrom
// refuses it.
func TestToStromRefusesMainV1(t *testing.T) {
	v := loadVectors(t)[1]
	if !strings.HasPrefix(v.Layout, "main") || v.Magic != MagicV1 {
		t.Fatalf("vector 1 is %q", v.Layout)
	}
	dst := []byte("keep")
	out, err := ToStrom(dst, unhex(t, v.Hex))
	var be *BatchError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &be) || be.Index != 0 || !strings.Contains(err.Error(), "record count") {
		t.Fatalf("got %v", err)
	}
	if string(out) != "keep" {
		t.Fatalf("dst changed: %q", out)
	}
}

// A buffer of several batches (a produce request's, a fetch answer's)
// converts batch by batch, and the conversions invert each other.
func TestMultiBatch(t *testing.T) {
	v := loadVectors(t)
	var fluss, want []byte
	for _, i := range []int{0, 3, 5, 6, 7} {
		b := unhex(t, v[i].Hex)
		fluss = append(fluss, b...)
		one, err := ToStrom(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, one...)
	}
	strom, err := ToStrom([]byte("prefix"), fluss)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(strom, append([]byte("prefix"), want...)) {
		t.Fatalf("multi-batch ToStrom differs from one by one")
	}
	back, err := ToFluss(nil, strom[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	// V0 batches come back as 0.9.1 V1 (epoch -1); V1 batches as they were.
	again, err := ToStrom(nil, back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want) {
		t.Fatalf("ToStrom(ToFluss(x)) != x")
	}
	n := 0
	for pos := 0; pos < len(back); n++ {
		if back[pos+magicOffset] != byte(MagicV1) {
			t.Fatalf("batch %d has magic %d", n, back[pos+magicOffset])
		}
		pos += int(le.Uint32(back[pos+lengthOffset:])) + lengthEnd
	}
	if n != 5 {
		t.Fatalf("%d batches back, want 5", n)
	}
}

// flussValid is the check the 0.9.1 client runs (DefaultLogRecordBatch.isValid,
// called from CompletedFetch.maybeEnsureValid): CRC-32C at 25 over SchemaId
// (29) to the end.
func flussValid(b []byte) bool {
	return le.Uint32(b[25:]) == crc32.Checksum(b[29:], castagnoli)
}

// A V2 batch with statistics (main's writers put them there; Strom could
// later) reads in 0.9.1's V1 without them, with a valid CRC.
func TestToFlussDropsStatistics(t *testing.T) {
	records := []byte("change types and an Arrow message")
	stats := []byte{1, 0, 0, 9, 9}
	b := make([]byte, HeaderSizeV2, HeaderSizeV2+len(stats)+len(records))
	b = append(append(b, stats...), records...)
	le.PutUint32(b[8:], uint32(len(b)-12))
	b[12] = byte(MagicV2)
	le.PutUint32(b[21:], 7) // epoch
	le.PutUint16(b[29:], 3) // schema id
	le.PutUint32(b[32:], 2) // last offset delta
	le.PutUint32(b[48:], 3) // record count
	le.PutUint32(b[52:], uint32(len(stats)))
	le.PutUint32(b[25:], crc32.Checksum(b[29:], castagnoli))
	if err := record.Batch(b).Validate(); err != nil {
		t.Fatal(err)
	}
	out, err := ToFluss(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != HeaderSizeV1+len(records) || !bytes.Equal(out[HeaderSizeV1:], records) || !flussValid(out) ||
		le.Uint32(out[21:]) != 7 || int(le.Uint32(out[8:]))+12 != len(out) || le.Uint32(out[48:]) != 3 {
		t.Fatalf("got %x", out)
	}
}

// ToFlussInPlace gives what ToFluss gives, batch by batch, without the
// copy: batches with and without statistics, several back to back, each
// part a slice of the input (its records where they were read); a buffer
// whose last batch is cut short is refused with the input unchanged.
func TestToFlussInPlace(t *testing.T) {
	withStats := func(stats []byte) []byte {
		b := []byte(arrowBatch(t, arrowSchema(t), 5, record.DefaultArrowCompression))
		out := append(append(append([]byte(nil), b[:HeaderSizeV2]...), stats...), b[HeaderSizeV2:]...)
		le.PutUint32(out[8:], uint32(len(out)-12))
		le.PutUint32(out[52:], uint32(len(stats)))
		le.PutUint32(out[25:], crc32.Checksum(out[29:], castagnoli))
		return out
	}
	var src []byte
	for _, stats := range [][]byte{nil, {1, 2, 3}, nil, []byte("statistics of the batch")} {
		src = append(src, withStats(stats)...)
	}
	want, err := ToFluss(nil, src)
	if err != nil {
		t.Fatal(err)
	}
	in := append([]byte(nil), src...)
	parts, n, err := ToFlussInPlace(in, [][]byte{[]byte("before")})
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 5 || string(parts[0]) != "before" {
		t.Fatalf("%d parts, the first %q; want the one given and 4 batches", len(parts), parts[0])
	}
	for pos, i := 0, 0; pos < len(src); i++ {
		size := int(le.Uint32(src[pos+8:])) + 12
		if got := FlussLen(src[pos : pos+size]); got != len(parts[1+i]) {
			t.Fatalf("FlussLen of batch %d: %d, converted %d", i, got, len(parts[1+i]))
		}
		pos += size
	}
	if got := bytes.Join(parts[1:], nil); !bytes.Equal(got, want) || n != len(want) {
		t.Fatalf("in place: %d bytes (n %d), ToFluss %d, equal %v", len(got), n, len(want), bytes.Equal(got, want))
	}
	end := 0
	for _, p := range parts[1:] {
		if !flussValid(p) {
			t.Fatal("a converted batch does not read as valid")
		}
		// Each part ends where its stored batch ended, in the input.
		end += int(le.Uint32(src[end+8:])) + 12
		if &p[len(p)-1] != &in[end-1] {
			t.Fatal("a part is not a slice of the input ending where its batch did")
		}
	}

	cut := append([]byte(nil), src[:len(src)-1]...)
	kept := append([]byte(nil), cut...)
	if parts, n, err := ToFlussInPlace(cut, nil); !errors.Is(err, ErrCorrupt) || parts != nil || n != 0 || !bytes.Equal(cut, kept) {
		t.Fatalf("a cut buffer: %v, %d parts, input changed %v", err, len(parts), !bytes.Equal(cut, kept))
	}
}

// A batch damaged where it is stored reads as damaged: ToFluss carries the
// CRC mismatch over instead of computing a fresh CRC that would hide it.
func TestToFlussCarriesCorruption(t *testing.T) {
	b := unhex(t, loadVectors(t)[4].Hex)
	b[len(b)-1] ^= 0x10
	out, err := ToFluss(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if flussValid(out) {
		t.Fatal("a corrupted stored batch reads as valid after conversion")
	}
	b[len(b)-1] ^= 0x10
	if out, _ = ToFluss(nil, b); !flussValid(out) {
		t.Fatal("the intact batch does not read as valid")
	}
}

// Every single-bit flip in the bytes a V0 batch's CRC covers, or in the CRC,
// is refused with an error naming the batch; one in a later batch of a
// buffer names that batch.
func TestToStromCorruption(t *testing.T) {
	v := loadVectors(t)
	first, b := unhex(t, v[5].Hex), unhex(t, v[0].Hex)
	for i := 21; i < len(b); i++ {
		for bit := 0; bit < 8; bit++ {
			bad := append(append([]byte(nil), first...), b...)
			bad[len(first)+i] ^= 1 << bit
			out, err := ToStrom(nil, bad)
			if err == nil {
				// A flip in LastOffsetDelta/RecordCount can still frame, but
				// the CRC covers them; nothing may pass.
				t.Fatalf("byte %d bit %d: accepted (%d bytes)", i, bit, len(out))
			}
			var be *BatchError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &be) || be.Index != 1 || be.Pos != len(first) || be.BaseOffset != 100 {
				t.Fatalf("byte %d bit %d: %v", i, bit, err)
			}
		}
	}
}

// Cutting a buffer anywhere inside a batch is an error, never a panic or a
// partial conversion.
func TestTruncation(t *testing.T) {
	v := loadVectors(t)
	for _, tc := range []struct {
		conv func(dst, src []byte) ([]byte, error)
		in   []byte
	}{
		{ToStrom, append(unhex(t, v[0].Hex), unhex(t, v[6].Hex)...)},
		{ToFluss, append(unhex(t, v[2].Hex), unhex(t, v[4].Hex)...)},
	} {
		first := int(le.Uint32(tc.in[8:])) + 12
		for n := 1; n < len(tc.in); n++ {
			if n == first {
				continue
			}
			out, err := tc.conv(nil, tc.in[:n])
			if !errors.Is(err, ErrCorrupt) || len(out) != 0 {
				t.Fatalf("cut at %d: %v, %d bytes", n, err, len(out))
			}
		}
	}
}

// The wrong direction is refused with the magic named.
func TestWrongLayout(t *testing.T) {
	v := loadVectors(t)
	if _, err := ToStrom(nil, unhex(t, v[2].Hex)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "magic 2") {
		t.Fatalf("V2 into ToStrom: %v", err)
	}
	if _, err := ToFluss(nil, unhex(t, v[0].Hex)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "magic 0") {
		t.Fatalf("V0 into ToFluss: %v", err)
	}
	if out, err := ToStrom(nil, nil); err != nil || len(out) != 0 {
		t.Fatalf("empty: %v", err)
	}
}

// arrowBatch builds a Strom ARROW batch with change types.
func arrowBatch(tb testing.TB, s record.Schema, rows int, c record.ArrowCompression) record.Batch {
	tb.Helper()
	ab, err := record.NewArrowBuilder(s, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer ab.Release()
	cts := []record.ChangeType{record.Insert, record.UpdateBefore, record.UpdateAfter, record.Delete}
	for i := range rows {
		r := record.Row{int32(i), fmt.Sprintf("name-%d", i), int64(i) * 1000}
		if i%5 == 0 {
			r[1] = nil
		}
		if err := ab.Append(r, cts[i%len(cts)]); err != nil {
			tb.Fatal(err)
		}
	}
	_, b, err := ab.Build(nil, record.BatchHeader{SchemaID: 1, WriterID: 5, BatchSequence: 9}, c)
	if err != nil {
		tb.Fatal(err)
	}
	b.SetBaseOffset(1000)
	b.SetCommitTimestamp(1764633600000)
	b.SetLeaderEpoch(3)
	return b
}

func arrowSchema(tb testing.TB) record.Schema {
	cols, err := record.ParseColumns("id INT NOT NULL, name STRING, ts BIGINT")
	if err != nil {
		tb.Fatal(err)
	}
	return record.Schema{Columns: cols}
}

// ARROW batches, full and pruned, convert header-only: the records section
// (change-type vector and Arrow message) is the same bytes in both layouts,
// the 0.9.1 client's CRC check passes, and converting back gives the stored
// batch again.
func TestArrow(t *testing.T) {
	s := arrowSchema(t)
	for _, c := range []record.ArrowCompression{{Type: record.CompressionNone}, {Type: record.CompressionLZ4Frame}, record.DefaultArrowCompression} {
		full := arrowBatch(t, s, 100, c)
		_, pruned, err := record.ProjectBatch(nil, full, s, []int{0, 2})
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string]record.Batch{"full": full, "pruned": pruned} {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				out, err := ToFluss(nil, b)
				if err != nil {
					t.Fatal(err)
				}
				if out[12] != byte(MagicV1) || !flussValid(out) || !bytes.Equal(out[HeaderSizeV1:], b.Records()) ||
					!bytes.Equal(out[:8], b[:8]) || !bytes.Equal(out[13:21], b[13:21]) || le.Uint32(out[21:]) != 3 || !bytes.Equal(out[29:52], b[29:52]) {
					t.Fatalf("header or records wrong: %x", out[:HeaderSizeV1])
				}
				back, err := ToStrom(nil, out)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(back, b) {
					t.Fatal("ToStrom(ToFluss(b)) != b")
				}
			})
		}
	}
}
