package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// storeWithDamage writes three batches of three rows (offsets 0-2, 3-5, 6-8)
// to each bucket of a new table of buckets buckets (ids 100×bucket plus the
// offset), then flips a byte inside bucket 0's second one in its segment
// file, as a failing disk would.
func storeWithDamage(t *testing.T, buckets int32) *client.Table {
	t.Helper()
	dir := t.TempDir()
	c := startNodeIn(t, dir)
	ctx := context.Background()
	tbl := createTable(t, c, "demo", "events", buckets, nil,
		&stromv1.Column{Name: "id", Type: "BIGINT NOT NULL"}, &stromv1.Column{Name: "name", Type: "STRING"})
	var sizes []int
	for bucket := buckets - 1; bucket >= 0; bucket-- { // bucket 0's sizes last
		sizes = writeThreeBatches(t, ctx, tbl, bucket)
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

// writeThreeBatches produces three batches of three rows to bucket and
// returns their sizes.
func writeThreeBatches(t *testing.T, ctx context.Context, tbl *client.Table, bucket int32) (sizes []int) {
	t.Helper()
	for first := int64(0); first < 9; first += 3 {
		b, err := record.NewArrowBuilder(tbl.Schema(), memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		for i := first; i < first+3; i++ {
			if err := b.Append(record.Row{100*int64(bucket) + i, fmt.Sprint("row ", i)}, record.AppendOnly); err != nil {
				t.Fatal(err)
			}
		}
		buf, _, err := b.Build(nil, record.BatchHeader{SchemaID: int16(tbl.Info().SchemaId), WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence},
			record.ArrowCompression{Type: record.CompressionNone})
		if err != nil {
			t.Fatal(err)
		}
		if err := tbl.ProduceBatches(ctx, bucket, buf, -1); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(buf))
	}
	return sizes
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
	tbl := storeWithDamage(t, 1)
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

// The same beside a second bucket that reads on: bucket 1's fetches go to
// the node with bucket 0's (one request per leader), and bucket 0 stopped
// at its damaged batch neither holds bucket 1 up nor returns anything past
// the batch; bucket 1 reads every row once, in order, and after Subscribe
// past the batch (or with SkipCorrupt) bucket 0 reads the rest once.
func TestScannerStopsAtABatchItCannotReadBesideAnotherBucket(t *testing.T) {
	tbl := storeWithDamage(t, 2)
	for _, tc := range []struct {
		columns  []string
		decoders int
		perFetch bool
	}{{[]string{"id"}, 1, false}, {nil, 1, false}, {nil, 3, false}, {nil, 1, true}, {[]string{"id"}, 1, true}, {nil, 3, true}} {
		t.Run(fmt.Sprintf("columns=%v/decoders=%d/batch-a-fetch=%v", tc.columns, tc.decoders, tc.perFetch), func(t *testing.T) {
			ctx := context.Background()
			opts := []client.ScanOption{client.Columns(tc.columns...), client.MaxWait(10 * time.Millisecond), client.DecodeConcurrency(tc.decoders)}
			if tc.perFetch {
				opts = append(opts, client.FetchMaxBytes(16<<20, 1))
			}
			for _, skip := range []bool{false, true} {
				o := opts
				if skip {
					o = append(o, client.SkipCorrupt())
				}
				sc, err := tbl.NewLogScanner(o...)
				if err != nil {
					t.Fatal(err)
				}
				for b := int32(0); b < 2; b++ {
					if err := sc.Subscribe(ctx, b, client.Earliest()); err != nil {
						t.Fatal(err)
					}
				}
				var ids [2][]int64
				var stopped *client.CorruptBatchError
				var skipped []*client.CorruptBatchError
				poll := func(done func() bool) {
					t.Helper()
					pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					defer cancel()
					for !done() {
						fs, err := sc.Poll(pctx)
						if err != nil {
							t.Fatalf("skip=%v: Poll: %v (read %v)", skip, err, ids)
						}
						for _, r := range fs.Records() {
							id := r.Row[0].(int64)
							ids[id/100] = append(ids[id/100], id)
						}
						for _, f := range fs {
							skipped = append(skipped, f.Skipped...)
							var ce *client.CorruptBatchError
							if f.Err != nil && (f.Bucket != 0 || !errors.As(f.Err, &ce)) {
								t.Fatalf("skip=%v: bucket %d: %v", skip, f.Bucket, f.Err)
							}
							if ce != nil {
								stopped = ce
							}
						}
						fs.Release()
					}
				}
				at := func(b int32) int64 { return sc.Position()[b] }
				if !skip {
					poll(func() bool { return at(1) >= 9 && stopped != nil })
					if stopped.Offset != 3 || stopped.NextOffset != 6 || at(0) != 3 {
						t.Fatalf("stopped at %+v, position %d; want offsets 3 to 5 and to stay at 3", stopped, at(0))
					}
					if err := sc.Subscribe(ctx, 0, client.AtOffset(stopped.NextOffset)); err != nil {
						t.Fatal(err)
					}
				}
				poll(func() bool { return at(0) >= 9 && at(1) >= 9 })
				want0 := "[0 1 2 6 7 8]"
				if got := fmt.Sprint(ids[0]); got != want0 {
					t.Errorf("skip=%v: bucket 0 read %v, want %v", skip, got, want0)
				}
				if got := fmt.Sprint(ids[1]); got != "[100 101 102 103 104 105 106 107 108]" {
					t.Errorf("skip=%v: bucket 1 read %v, want 100 to 108 once each", skip, got)
				}
				if skip && (len(skipped) != 1 || skipped[0].Offset != 3 || skipped[0].NextOffset != 6) {
					t.Errorf("skipped %v, want offsets 3 to 5", skipped)
				}
				sc.Close()
			}
		})
	}
}

// An answer that lands while the one before it is decoded, and was fetched
// from where that one's framing ends, is dropped when that one does not
// decode as framed (a batch damaged where it is stored, seen by the
// client): the bucket stops at the damaged batch and returns nothing past
// it. Here bucket 0 answers a batch a fetch; the decoder is held on the
// second answer (offsets 3-5, damaged) until the third (6-8), fetched as
// soon as the first was returned, has come. Without the check, the third
// was buffered after the second and its rows returned (the scanner moved
// past the damaged batch without a word).
func TestScannerDropsAnAnswerAfterOneThatDidNotDecode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tbl := storeWithDamage(t, 1)
	var decodes atomic.Int32
	var sc *client.LogScanner
	var err error
	sc, err = tbl.NewLogScanner(client.MaxWait(10*time.Millisecond), client.FetchMaxBytes(16<<20, 1), client.BeforeDecode(func() {
		if decodes.Add(1) != 2 {
			return
		}
		for client.QueuedAnswers(sc) == 0 && ctx.Err() == nil { // the third, behind the second
			time.Sleep(time.Millisecond)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := sc.Subscribe(ctx, 0, client.AtOffset(0)); err != nil {
		t.Fatal(err)
	}
	fs, err := sc.Poll(ctx) // the first answer, while the decoder waits on the second
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range fs.Records() {
		ids = append(ids, r.Row[0].(int64))
	}
	fs.Release()
	// The second and third answers are buffered (or dropped) one after the
	// other once the third is decoding: the next Poll comes after both.
	for decodes.Load() < 3 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	var stopped *client.CorruptBatchError
	for stopped == nil {
		fs, err := sc.Poll(ctx)
		if err != nil && !errors.As(err, &stopped) {
			t.Fatalf("Poll: %v (read %v)", err, ids)
		}
		for _, r := range fs.Records() {
			ids = append(ids, r.Row[0].(int64))
		}
		for _, f := range fs {
			if f.Err != nil && !errors.As(f.Err, &stopped) {
				t.Fatalf("bucket %d: %v", f.Bucket, f.Err)
			}
		}
		fs.Release()
		if len(ids) > 3 {
			t.Fatalf("read %v: rows past the damaged batch (offsets 3 to 5), which stops the bucket", ids)
		}
	}
	if fmt.Sprint(ids) != "[0 1 2]" || stopped.Offset != 3 || stopped.NextOffset != 6 || sc.Position()[0] != 3 {
		t.Fatalf("read %v, stopped at %+v, at %d; want [0 1 2], offsets 3 to 5, and to stay at 3", ids, stopped, sc.Position()[0])
	}
}
