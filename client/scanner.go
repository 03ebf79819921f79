package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// StartOffset says where a subscription starts.
type StartOffset struct {
	spec   stromv1.OffsetSpec // UNSPECIFIED = an explicit offset
	offset int64
	at     time.Time
}

// Earliest starts at the first offset still stored.
func Earliest() StartOffset { return StartOffset{spec: stromv1.OffsetSpec_OFFSET_SPEC_EARLIEST} }

// Latest starts at the high watermark: only rows written from now on.
func Latest() StartOffset { return StartOffset{spec: stromv1.OffsetSpec_OFFSET_SPEC_LATEST} }

// AtOffset starts at offset.
func AtOffset(offset int64) StartOffset { return StartOffset{offset: offset} }

// AtTimestamp starts at the first row committed at or after t.
func AtTimestamp(t time.Time) StartOffset {
	return StartOffset{spec: stromv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP, at: t}
}

type scanConfig struct {
	columns        []string
	maxBytes       int32
	bucketMaxBytes int32
	maxWait        time.Duration
}

// ScanOption configures a LogScanner.
type ScanOption func(*scanConfig)

// Columns limits the scan to the named columns: only they are read and sent
// (the server prunes the Arrow data without decoding it).
func Columns(names ...string) ScanOption { return func(c *scanConfig) { c.columns = names } }

// FetchMaxBytes bounds the bytes of one fetch (default 16 MiB) and of one
// bucket in it (default 1 MiB).
func FetchMaxBytes(total, perBucket int32) ScanOption {
	return func(c *scanConfig) { c.maxBytes, c.bucketMaxBytes = total, perBucket }
}

// MaxWait sets how long Poll waits on the server for new data (default 500ms).
func MaxWait(d time.Duration) ScanOption { return func(c *scanConfig) { c.maxWait = d } }

// LogScanner reads a log table (or a primary-key table's changelog) from
// the buckets it is subscribed to. It is not safe for concurrent Polls.
type LogScanner struct {
	t      *Table
	cfg    scanConfig
	schema record.Schema // of the columns read

	mu struct {
		sync.Mutex
		offsets map[int32]int64 // next offset per subscribed bucket
	}
}

// NewLogScanner returns a scanner with no subscriptions.
func (t *Table) NewLogScanner(opts ...ScanOption) (*LogScanner, error) {
	cfg := scanConfig{maxBytes: 16 << 20, bucketMaxBytes: 1 << 20, maxWait: 500 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	s := &LogScanner{t: t, cfg: cfg, schema: t.schema}
	if len(cfg.columns) > 0 {
		var cols []int
		want := map[string]bool{}
		for _, n := range cfg.columns {
			if _, _, ok := t.schema.Column(n); !ok {
				return nil, fmt.Errorf("client: %q is not a column of %s.%s; columns are %v", n, t.info.Database, t.info.Table, t.schema.ColumnNames())
			}
			want[n] = true
		}
		for i, c := range t.schema.Columns {
			if want[c.Name] {
				cols = append(cols, i)
			}
		}
		s.schema = t.schema.Project(cols)
	}
	s.mu.offsets = map[int32]int64{}
	return s, nil
}

// Schema is the schema of the rows the scanner returns (the projected
// columns, in table order).
func (s *LogScanner) Schema() record.Schema { return s.schema }

// Subscribe starts reading bucket from start, resolving Earliest, Latest
// and timestamps to an offset now.
func (s *LogScanner) Subscribe(ctx context.Context, bucket int32, start StartOffset) error {
	if bucket < 0 || bucket >= s.t.Buckets() {
		return fmt.Errorf("client: bucket %d does not exist: %s.%s has buckets 0..%d", bucket, s.t.info.Database, s.t.info.Table, s.t.Buckets()-1)
	}
	off := start.offset
	if start.spec != stromv1.OffsetSpec_OFFSET_SPEC_UNSPECIFIED {
		resp, err := call(ctx, s.t.c, s.t.c.tablet.ListOffsets, &stromv1.ListOffsetsRequest{
			Database: s.t.info.Database, Table: s.t.info.Table, Buckets: []int32{bucket}, Spec: start.spec, TimestampMs: start.at.UnixMilli(),
		})
		if err != nil {
			return err
		}
		if len(resp.Buckets) != 1 {
			return fmt.Errorf("client: list offsets answered %d buckets for 1", len(resp.Buckets))
		}
		if e := resp.Buckets[0].Error; e != nil {
			return detailError(e)
		}
		off = resp.Buckets[0].Offset
	}
	s.mu.Lock()
	s.mu.offsets[bucket] = off
	s.mu.Unlock()
	return nil
}

// Position returns the next offset of each subscribed bucket.
func (s *LogScanner) Position() map[int32]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int32]int64, len(s.mu.offsets))
	for b, o := range s.mu.offsets {
		out[b] = o
	}
	return out
}

// ScanRecord is one row read from a log.
type ScanRecord struct {
	Bucket     int32
	Offset     int64
	Timestamp  time.Time
	ChangeType record.ChangeType
	Row        record.Row
}

// BucketFetch is what one Poll got from one bucket.
type BucketFetch struct {
	Bucket int32
	// Batches are the decoded Arrow batches, for zero-copy consumers
	// (Batch.Record() is an arrow.Record). Release them when done, or call
	// Fetches.Release.
	Batches []*record.ArrowBatch
	// Offsets[i] and Timestamps[i] are the base offset and commit time of Batches[i].
	Offsets    []int64
	Timestamps []time.Time
	// From is the offset asked for: the first batch may begin before it
	// (Records skips those rows).
	From int64
	// HighWatermark is the bucket's committed end as of the fetch.
	HighWatermark int64
	// Bytes is the size of the batches as received.
	Bytes int
	// Err is this bucket's error; the scanner keeps its position.
	Err error
}

// Fetches is the result of one Poll.
type Fetches []BucketFetch

// Records returns every row of the fetches in bucket and offset order.
func (fs Fetches) Records() []ScanRecord {
	var out []ScanRecord
	for _, f := range fs {
		for i, b := range f.Batches {
			for r := 0; r < b.Len(); r++ {
				if f.Offsets[i]+int64(r) < f.From {
					continue
				}
				out = append(out, ScanRecord{
					Bucket: f.Bucket, Offset: f.Offsets[i] + int64(r), Timestamp: f.Timestamps[i],
					ChangeType: b.ChangeType(r), Row: b.Row(r),
				})
			}
		}
	}
	return out
}

// Errors returns the buckets' errors joined.
func (fs Fetches) Errors() error {
	var errs []error
	for _, f := range fs {
		if f.Err != nil {
			errs = append(errs, fmt.Errorf("bucket %d: %w", f.Bucket, f.Err))
		}
	}
	return errors.Join(errs...)
}

// Release frees the Arrow memory of every batch.
func (fs Fetches) Release() {
	for _, f := range fs {
		for _, b := range f.Batches {
			b.Release()
		}
	}
}

// Poll fetches from every subscribed bucket, waiting up to MaxWait for new
// data, and advances the scanner past what it returns. An error is returned
// only when no bucket could be asked; per-bucket errors are in the fetches.
func (s *LogScanner) Poll(ctx context.Context) (Fetches, error) {
	pos := s.Position()
	if len(pos) == 0 {
		return nil, errors.New("client: Poll before Subscribe")
	}
	req := &stromv1.FetchLogRequest{
		Database: s.t.info.Database, Table: s.t.info.Table, Columns: s.cfg.columns,
		MaxBytes: s.cfg.maxBytes, MinBytes: 1, MaxWaitMs: int32(s.cfg.maxWait / time.Millisecond),
	}
	buckets := make([]int32, 0, len(pos))
	for b := range pos {
		buckets = append(buckets, b)
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i] < buckets[j] })
	for _, b := range buckets {
		req.Buckets = append(req.Buckets, &stromv1.FetchBucket{Bucket: b, Offset: pos[b], MaxBytes: s.cfg.bucketMaxBytes})
	}
	resp, err := call(ctx, s.t.c, s.t.c.tablet.FetchLog, req)
	if err != nil {
		return nil, err
	}
	var out Fetches
	for _, r := range resp.Buckets {
		f := BucketFetch{Bucket: r.Bucket, From: pos[r.Bucket], HighWatermark: r.HighWatermark, Bytes: len(r.Records)}
		if r.Error != nil {
			f.Err = detailError(r.Error)
			out = append(out, f)
			continue
		}
		next := pos[r.Bucket]
		for data := r.Records; len(data) > 0; {
			var b record.Batch
			b, data, err = record.NextBatch(data)
			if err == nil {
				err = b.Validate()
			}
			var dec *record.ArrowBatch
			if err == nil {
				dec, err = record.DecodeArrowBatch(b, s.schema, memory.DefaultAllocator)
			}
			if err != nil {
				f.Err = fmt.Errorf("client: batch at offset %d: %w", next, err)
				break
			}
			f.Batches = append(f.Batches, dec)
			f.Offsets = append(f.Offsets, b.BaseOffset())
			f.Timestamps = append(f.Timestamps, time.UnixMilli(b.CommitTimestamp()))
			next = b.NextOffset()
		}
		s.mu.Lock()
		s.mu.offsets[r.Bucket] = next
		s.mu.Unlock()
		out = append(out, f)
	}
	return out, nil
}
