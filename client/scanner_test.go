package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// storeWithDamage writes three batches of three rows (offsets 0-2, 3-5, 6-8)
// to bucket 0 of a new table, then flips a byte inside the second one in its
// segment file, as a failing disk would.
func storeWithDamage(t *testing.T) *client.Table {
	t.Helper()
	dir := t.TempDir()
	c := startNodeIn(t, dir)
	ctx := context.Background()
	tbl := createTable(t, c, "demo", "events", 1, nil,
		&stromv1.Column{Name: "id", Type: "BIGINT NOT NULL"}, &stromv1.Column{Name: "name", Type: "STRING"})
	var sizes []int
	for first := int64(0); first < 9; first += 3 {
		b, err := record.NewArrowBuilder(tbl.Schema(), memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		for i := first; i < first+3; i++ {
			if err := b.Append(record.Row{i, fmt.Sprint("row ", i)}, record.AppendOnly); err != nil {
				t.Fatal(err)
			}
		}
		buf, _, err := b.Build(nil, record.BatchHeader{SchemaID: int16(tbl.Info().SchemaId), WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence},
			record.ArrowCompression{Type: record.CompressionNone})
		if err != nil {
			t.Fatal(err)
		}
		if err := tbl.ProduceBatches(ctx, 0, buf, -1); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(buf))
	}
	seg := filepath.Join(dir, "tablets", fmt.Sprint(tbl.Info().TableId), "0", "log", "00000000000000000000.log")
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := int64(sizes[0] + sizes[1] - 8) // inside the second batch's Arrow body
	one := []byte{0}
	if _, err := f.ReadAt(one, at); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x40
	if _, err := f.WriteAt(one, at); err != nil {
		t.Fatal(err)
	}
	return tbl
}

// pollAll polls until the scanner is at offset 9 or Poll fails, and returns
// the ids read, the batches skipped and Poll's error.
func pollAll(t *testing.T, sc *client.LogScanner) (ids []int64, skipped []*client.CorruptBatchError, bucketErrs []error, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for sc.Position()[0] < 9 {
		fs, err := sc.Poll(ctx)
		if err != nil {
			return ids, skipped, bucketErrs, err
		}
		for _, r := range fs.Records() {
			ids = append(ids, r.Row[0].(int64))
		}
		for _, f := range fs {
			skipped = append(skipped, f.Skipped...)
			if f.Err != nil {
				bucketErrs = append(bucketErrs, f.Err)
			}
		}
		fs.Release()
	}
	return ids, skipped, bucketErrs, nil
}

// A batch that cannot be read stops its bucket with a *CorruptBatchError
// naming its offsets (the scanner does not ask again and again), Subscribe
// moves past it, and SkipCorrupt skips it and says so. Both ways a damaged
// batch is seen: the node refuses it (a projected fetch checks the CRC) or
// the client does (a full fetch is passed on as stored), with the batches
// decoded one after another and at once (the third decoded before the
// second's failure is seen, and released).
func TestScannerStopsAtABatchItCannotRead(t *testing.T) {
	tbl := storeWithDamage(t)
	for _, tc := range []struct {
		columns  []string
		decoders int
		perFetch bool // a batch an answer: the next fetch leaves, past the damaged batch, while it is decoded
	}{{[]string{"id"}, 1, false}, {nil, 1, false}, {nil, 3, false}, {nil, 1, true}, {[]string{"id"}, 1, true}} {
		columns := tc.columns
		t.Run(fmt.Sprintf("columns=%v/decoders=%d/batch-a-fetch=%v", columns, tc.decoders, tc.perFetch), func(t *testing.T) {
			ctx := context.Background()
			opts := []client.ScanOption{client.Columns(columns...), client.MaxWait(10 * time.Millisecond), client.DecodeConcurrency(tc.decoders)}
			if tc.perFetch {
				opts = append(opts, client.FetchMaxBytes(16<<20, 1)) // a node answers at least one batch
			}
			sc, err := tbl.NewLogScanner(opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := sc.Subscribe(ctx, 0, client.Earliest()); err != nil {
				t.Fatal(err)
			}
			ids, _, bucketErrs, err := pollAll(t, sc)
			var ce *client.CorruptBatchError
			if err == nil || !errors.As(err, &ce) || ce.Bucket != 0 || ce.Offset != 3 || ce.NextOffset != 6 {
				t.Fatalf("Poll: %v; want every bucket stopped at a CorruptBatchError for offsets 3 to 5", err)
			}
			if len(bucketErrs) != 1 || !errors.As(bucketErrs[0], &ce) {
				t.Errorf("bucket errors before the stop: %v, want the one CorruptBatchError", bucketErrs)
			}
			if fmt.Sprint(ids) != "[0 1 2]" || sc.Position()[0] != 3 {
				t.Errorf("read %v, at %d; want [0 1 2] and to stay at 3", ids, sc.Position()[0])
			}
			if err := sc.Subscribe(ctx, 0, client.AtOffset(ce.NextOffset)); err != nil {
				t.Fatal(err)
			}
			if ids, _, _, err := pollAll(t, sc); err != nil || fmt.Sprint(ids) != "[6 7 8]" {
				t.Errorf("after Subscribe past it: %v, %v", ids, err)
			}

			skipping, err := tbl.NewLogScanner(append(opts, client.SkipCorrupt())...)
			if err != nil {
				t.Fatal(err)
			}
			if err := skipping.Subscribe(ctx, 0, client.Earliest()); err != nil {
				t.Fatal(err)
			}
			ids, skipped, bucketErrs, err := pollAll(t, skipping)
			if err != nil || len(bucketErrs) > 0 || fmt.Sprint(ids) != "[0 1 2 6 7 8]" {
				t.Fatalf("SkipCorrupt: read %v, errors %v %v; want [0 1 2 6 7 8]", ids, bucketErrs, err)
			}
			if len(skipped) != 1 || skipped[0].Offset != 3 || skipped[0].NextOffset != 6 {
				t.Errorf("skipped %v, want offsets 3 to 5", skipped)
			}
		})
	}
}
