package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// AppendWriter appends rows to a log table. Rows are grouped per bucket
// (Fluss's bucketing over the bucket key, or a sticky bucket) into Arrow
// batches and sent in the background, in order per bucket; retriable errors
// are retried with backoff, and with idempotence on a retried batch is
// written exactly once. Its methods are safe for concurrent use.
type AppendWriter struct {
	p *pipeline
}

// NewAppendWriter returns a writer for a log table.
func (t *Table) NewAppendWriter(_ context.Context, opts ...WriterOption) (*AppendWriter, error) {
	if len(t.schema.PrimaryKey) > 0 {
		return nil, fmt.Errorf("client: %s.%s is a primary-key table: use an UpsertWriter", t.info.Database, t.info.Table)
	}
	comp, err := record.CompressionOf(t.desc)
	if err != nil {
		return nil, fmt.Errorf("client: table options: %w", err)
	}
	header := record.BatchHeader{SchemaID: int16(t.info.SchemaId), AppendOnly: true, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence}
	ratio, shape := &record.CompressionRatio{}, &batchShape{}
	p, err := newPipeline(t, batchKind{
		newEncoder: func() (encoder, error) {
			b, err := record.NewArrowBuilder(t.schema, memory.DefaultAllocator)
			if err != nil {
				return nil, err
			}
			b.Reserve(shape.get())
			return &arrowEncoder{b: b, header: header, comp: comp, ratio: ratio, shape: shape}, nil
		},
		stamp: func(b []byte, id int64, seq int32) { record.Batch(b).SetWriter(id, seq) },
		send: func(ctx context.Context, n *node, bucket int32, batch []byte, acks int32, timeout time.Duration) (*stromv1.ProduceBucketResult, error) {
			resp, err := t.c.produce(ctx, n, &stromv1.ProduceLogRequest{
				Database: t.info.Database, Table: t.info.Table, Acks: &acks, TimeoutMs: int32(timeout / time.Millisecond),
				Buckets: []*stromv1.ProduceBucket{{Bucket: bucket, Records: batch}},
			})
			return oneBucket(resp.GetBuckets(), err)
		},
	}, append([]WriterOption{BatchSize(defaultLogBatchSize)}, opts...))
	if err != nil {
		return nil, err
	}
	return &AppendWriter{p: p}, nil
}

// defaultLogBatchSize is a log writer's default BatchSize, as sent: half
// Fluss's 2 MiB. A batch is the unit the produce path streams through the
// network, the server's buffers and the page cache; on the 2-core machine
// of docs/benchmarks.md, 1 MiB batches (about the size of a core's cache)
// produced ~5% faster than 2 MiB ones, with half the memory per batch in
// flight.
const defaultLogBatchSize = 1 << 20

// oneBucket returns the single bucket result of a one-bucket request.
func oneBucket(results []*stromv1.ProduceBucketResult, err error) (*stromv1.ProduceBucketResult, error) {
	if err != nil {
		return nil, err
	}
	if len(results) != 1 {
		return nil, fmt.Errorf("client: the server answered %d buckets for 1", len(results))
	}
	return results[0], nil
}

// Append adds a row. It returns at once with a Future unless the buffer is
// full, in which case it blocks until there is room or ctx ends. A row that
// does not fit the schema fails at once (the Future carries the error).
func (w *AppendWriter) Append(ctx context.Context, row record.Row) *Future {
	if err := w.p.t.schema.CheckRow(row); err != nil {
		return failed(err)
	}
	return w.p.append(ctx, row, false)
}

// Flush sends every open batch and waits until all appended rows are
// acknowledged or failed. It returns every batch's failure since the
// previous Flush, joined (errors.Join; each names its bucket and rows; past
// 100 the rest are counted), or ctx's error if it ends first; each row's
// own outcome is in its Future. Once every row is settled the writer's
// goroutines end: an idle writer has none.
func (w *AppendWriter) Flush(ctx context.Context) error { return w.p.flush(ctx) }

// Close stops taking rows, flushes, and stops the writer once every queued
// batch is acknowledged or has failed (a batch may be retried for up to the
// delivery timeout).
func (w *AppendWriter) Close(ctx context.Context) error { return w.p.close(ctx) }

// failed is a Future that has failed with err.
func failed(err error) *Future {
	f := &Future{done: make(chan struct{})}
	f.resolve(0, err)
	return f
}

// arrowEncoder builds the Arrow batches of a log table. Its size is the
// batch's estimated size after compression, by the table's ratio (shared by
// the writer's encoders), so that batches are about BatchSize as sent.
type arrowEncoder struct {
	b      *record.ArrowBuilder
	header record.BatchHeader
	comp   record.ArrowCompression
	ratio  *record.CompressionRatio
	shape  *batchShape
}

// batchShape is the rows and variable-length bytes per column of a
// writer's last batch: a new batch's builder reserves as much, instead of
// growing (and copying) its buffers by doubling. Safe for concurrent use.
type batchShape struct {
	mu       sync.Mutex
	rows     int
	varBytes []int
}

// get returns the last batch's shape and a quarter more: batches grow as
// the compression ratio estimate improves, and a buffer that outgrows its
// reservation doubles.
func (s *batchShape) get() (int, []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	more := make([]int, len(s.varBytes))
	for i, n := range s.varBytes {
		more[i] = n + n/4
	}
	return s.rows + s.rows/4, more
}

func (s *batchShape) set(rows int, varBytes []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows, s.varBytes = rows, varBytes
}

// add appends a row Append has checked.
func (e *arrowEncoder) add(row record.Row, _ bool) error {
	return e.b.AppendChecked(row, record.AppendOnly)
}
func (e *arrowEncoder) size() int {
	return int(float64(e.b.EstimatedSize()) * e.ratio.Estimate())
}
func (e *arrowEncoder) build() ([]byte, error) {
	estimated := e.b.EstimatedSize()
	e.shape.set(e.b.Len(), e.b.VarBytes())
	_, b, err := e.b.Build(nil, e.header, e.comp)
	if err == nil && estimated > 0 {
		e.ratio.Observe(float64(len(b)) / float64(estimated))
	}
	return b, err
}
