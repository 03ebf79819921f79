package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"strom/record"
	"strom/record/arrowmsg"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/tablet/replica"
)

// undecodable returns a copy of batch whose Arrow message no reader can
// parse (its continuation marker is damaged) but whose CRC is valid: what
// a produce validation that let it through would have stored.
func undecodable(batch []byte) []byte {
	out := append([]byte(nil), batch...)
	b := record.Batch(out)
	msgAt := len(out) - len(b.Records())
	out[msgAt] ^= 0xff
	b.UpdateCRC()
	return out
}

// A stored batch that cannot be served gets a non-retriable
// CORRUPT_RECORD_EXCEPTION naming the bucket and its offsets, with
// next_offset past it; the batches before it are served, and so are those
// after it. Before the fix, a projected fetch of it panicked (the error
// message read the nil batch ProjectBatch returned).
func TestFetchOfABatchThatCannotBeServed(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "demo", "events", ddl, 1)
	schema := schemaOf(t, ddl)
	waitReplicas(t, s, info)
	r, err := s.replicas.Replica(replicaTB(info.TableId, 0))
	if err != nil {
		t.Fatal(err)
	}
	good := buildBatch(t, schema, info.SchemaId, record.Row{int64(1), "a"})
	bad := undecodable(buildBatch(t, schema, info.SchemaId, record.Row{int64(2), "b"}, record.Row{int64(3), "c"}))
	for _, b := range [][]byte{good, bad, good} { // offsets 0, [1, 3), 3
		if _, err := r.Append(ctx, b, -1); err != nil {
			t.Fatal(err)
		}
	}
	c := tabletClient(s)
	fetch := func(offset int64, columns []string, asJSON bool) *stromv1.FetchBucketResult {
		t.Helper()
		resp, err := c.FetchLog(ctx, connect.NewRequest(&stromv1.FetchLogRequest{Database: "demo", Table: "events",
			Columns: columns, JsonRows: asJSON, Buckets: []*stromv1.FetchBucket{{Bucket: 0, Offset: offset}}}))
		if err != nil {
			t.Fatalf("fetch at %d, columns %v, JSON %v: %v", offset, columns, asJSON, err)
		}
		return resp.Msg.Buckets[0]
	}
	for _, tc := range []struct {
		name    string
		columns []string
		asJSON  bool
	}{
		{"projected", []string{"name"}, false},
		{"JSON", nil, true},
		{"projected JSON", []string{"id"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// From 0: the good batch, stopping before the bad one.
			res := fetch(0, tc.columns, tc.asJSON)
			if res.Error != nil || res.NextOffset != 1 || len(res.Records)+len(res.Rows) == 0 {
				t.Fatalf("fetch from 0: error %v, next %d, %d bytes %d rows; want the first batch and next offset 1",
					res.Error, res.NextOffset, len(res.Records), len(res.Rows))
			}
			res = fetch(1, tc.columns, tc.asJSON)
			e := res.Error
			if e == nil || e.Name != "CORRUPT_RECORD_EXCEPTION" || e.Retriable ||
				!strings.Contains(e.Message, "bucket 0") || !strings.Contains(e.Message, "[1, 3)") {
				t.Fatalf("fetch of the bad batch: %v; want a non-retriable CORRUPT_RECORD_EXCEPTION naming bucket 0 and offsets [1, 3)", e)
			}
			if res.NextOffset != 3 || len(res.Records)+len(res.Rows) != 0 {
				t.Errorf("fetch of the bad batch: next offset %d (want 3, past it), %d bytes %d rows (want none)", res.NextOffset, len(res.Records), len(res.Rows))
			}
			if res := fetch(3, tc.columns, tc.asJSON); res.Error != nil || res.NextOffset != 4 {
				t.Errorf("fetch past the bad batch: %v, next %d", res.Error, res.NextOffset)
			}
		})
	}
}

// damagedCompression returns a copy of batch (ZSTD, append-only) with the
// data of its first compressed buffer damaged past the frame magic, and its
// CRC fixed: only decompressing tells.
func damagedCompression(t *testing.T, batch []byte) []byte {
	t.Helper()
	out := append([]byte(nil), batch...)
	b := record.Batch(out)
	m, err := arrowmsg.Parse(b.Records())
	if err != nil {
		t.Fatal(err)
	}
	bodyAt := len(out) - len(m.Body())
	for _, buf := range m.Buffers() {
		if buf.Length > 64 && int64(binary.LittleEndian.Uint64(m.Body()[buf.Offset:])) > 0 {
			// Past the length prefix, the frame magic and the frame header.
			for i := bodyAt + int(buf.Offset) + 30; i < bodyAt+int(buf.Offset+buf.Length); i++ {
				out[i] ^= 0x5a
			}
			b.UpdateCRC()
			return out
		}
	}
	t.Fatal("no compressed buffer")
	return nil
}

// By default produce refuses what the readers' checks refuse without
// decompressing, and takes a batch whose compressed data is damaged (its
// readers then get CORRUPT_RECORD_EXCEPTION); log.validation.full refuses
// that one too.
func TestProduceValidationFull(t *testing.T) {
	const ddl = "id BIGINT NOT NULL, name STRING"
	var rows []record.Row
	for i := range 200 {
		rows = append(rows, record.Row{int64(i), "a fairly repetitive value, to compress"})
	}
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full=%v", full), func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.LogValidationFull = full
			s := startServer(t, cfg)
			ctx := context.Background()
			info := createTable(t, s, "demo", "events", ddl, 1)
			bad := damagedCompression(t, buildBatch(t, schemaOf(t, ddl), info.SchemaId, rows...))
			c := tabletClient(s)
			resp, err := c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
				Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: bad}}}))
			if err != nil {
				t.Fatal(err)
			}
			e := resp.Msg.Buckets[0].Error
			if !full {
				if e != nil {
					t.Fatalf("produce without full validation: %v", e)
				}
				f, err := c.FetchLog(ctx, connect.NewRequest(&stromv1.FetchLogRequest{Database: "demo", Table: "events", JsonRows: true,
					Buckets: []*stromv1.FetchBucket{{Bucket: 0, Offset: 0}}}))
				if err != nil {
					t.Fatal(err)
				}
				if e := f.Msg.Buckets[0].Error; e == nil || e.Name != "CORRUPT_RECORD_EXCEPTION" || f.Msg.Buckets[0].NextOffset != 200 {
					t.Errorf("JSON fetch of it: %v, next %d", e, f.Msg.Buckets[0].NextOffset)
				}
				return
			}
			if e == nil || e.Name != "CORRUPT_MESSAGE" || e.Retriable || !strings.Contains(e.Message, "ZSTD") {
				t.Errorf("produce with full validation: %v; want a non-retriable CORRUPT_MESSAGE about ZSTD", e)
			}
		})
	}
}

// damagedSealedSegment starts a node with 1 KiB segments (every batch seals
// the one before) and verifyRate, writes six batches to a table's bucket
// 0, and flips a bit inside the Arrow data of the batch in the second
// segment, at its end: its last batch of one row. It returns a client, the
// bucket's replica and that batch's offsets.
func damagedSealedSegment(t *testing.T, verifyRate int64) (stromv1connect.TabletServiceClient, *replica.Replica, damaged) {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.SegmentBytes = 1 << 10
	cfg.SegmentVerifyRate = verifyRate
	s := startServer(t, cfg)
	ctx := context.Background()
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "demo", "events", ddl, 1)
	c := tabletClient(s)
	for i := range 6 {
		batch := buildBatch(t, schemaOf(t, ddl), info.SchemaId, record.Row{int64(i), strings.Repeat("x", 700)})
		resp, err := c.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "events",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: batch}}}))
		if err != nil || resp.Msg.Buckets[0].Error != nil {
			t.Fatalf("produce: %v %v", err, resp.Msg.Buckets[0].Error)
		}
	}
	r, err := s.replicas.Replica(replicaTB(info.TableId, 0))
	if err != nil {
		t.Fatal(err)
	}
	segs := r.Log().Segments()
	if len(segs) < 3 || !segs[1].Sealed {
		t.Fatalf("segments %+v, want a second one sealed", segs)
	}
	f, err := os.OpenFile(segs[1].Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	one := []byte{0}
	at := segs[1].Size - 16 // in the Arrow data of its last batch
	if _, err := f.ReadAt(one, at); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{one[0] ^ 0x08}, at); err != nil {
		t.Fatal(err)
	}
	return c, r, damaged{segs[1].NextOffset - 1, segs[1].NextOffset}
}

// damaged is the offsets [from, to) of the damaged batch.
type damaged struct{ from, to int64 }

// fetchAt fetches bucket 0 of demo.events from offset, binary, with the
// columns given (nil: all).
func fetchAt(t *testing.T, c stromv1connect.TabletServiceClient, offset int64, columns ...string) *stromv1.FetchBucketResult {
	t.Helper()
	resp, err := c.FetchLog(context.Background(), connect.NewRequest(&stromv1.FetchLogRequest{Database: "demo", Table: "events",
		Columns: columns, Buckets: []*stromv1.FetchBucket{{Bucket: 0, Offset: offset, MaxBytes: 1 << 20}}}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg.Buckets[0]
}

// wantCorruptRecord checks that res is CORRUPT_RECORD_EXCEPTION for the
// offsets of seg, with nothing served.
func wantCorruptRecord(t *testing.T, what string, res *stromv1.FetchBucketResult, seg damaged, reason string) {
	t.Helper()
	rng := fmt.Sprintf("[%d, %d)", seg.from, seg.to)
	if e := res.Error; e == nil || e.Name != "CORRUPT_RECORD_EXCEPTION" || e.Retriable || !strings.Contains(e.Message, rng) ||
		!strings.Contains(e.Message, reason) || len(res.Records) > 0 || res.NextOffset != seg.to {
		t.Errorf("%s: %v, %d bytes, next %d; want CORRUPT_RECORD_EXCEPTION for %s (%s), nothing served, next %d",
			what, e, len(res.Records), res.NextOffset, rng, reason, seg.to)
	}
}

// Damage on disk in a sealed segment. A projected fetch checks the stored
// CRC and refuses the batch, rather than serving it with a fresh CRC (as it
// did). The background check finds the damage and counts it, and from then
// on every fetch of those offsets is refused, the others served.
func TestDamagedSealedSegment(t *testing.T) {
	t.Run("projection checks the CRC", func(t *testing.T) {
		c, _, seg := damagedSealedSegment(t, 0)
		wantCorruptRecord(t, "projected fetch", fetchAt(t, c, seg.from, "id"), seg, "CRC")
		if res := fetchAt(t, c, seg.to, "id"); res.Error != nil || len(res.Records) == 0 {
			t.Errorf("projected fetch after it: %v", res.Error)
		}
	})
	t.Run("the background check", func(t *testing.T) {
		c, r, seg := damagedSealedSegment(t, 64<<20)
		for deadline := time.Now().Add(30 * time.Second); r.Log().CorruptBatches() == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the background check found nothing in 30s (checked %d bytes)", r.Log().VerifiedBytes())
			}
		}
		if n := r.Log().CorruptBatches(); n != 1 {
			t.Errorf("CorruptBatches = %d, want 1", n)
		}
		wantCorruptRecord(t, "full fetch", fetchAt(t, c, seg.from), seg, "CRC")
		wantCorruptRecord(t, "projected fetch", fetchAt(t, c, seg.from, "name"), seg, "CRC")
		before := fetchAt(t, c, seg.from-1)
		if before.Error != nil || len(before.Records) == 0 || before.NextOffset != seg.from {
			t.Errorf("fetch before it: %v, next %d", before.Error, before.NextOffset)
		}
		if res := fetchAt(t, c, seg.to); res.Error != nil || len(res.Records) == 0 {
			t.Errorf("fetch after it: %v", res.Error)
		}
	})
}
