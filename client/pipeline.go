package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// writerConfig holds a writer's settings; the names in comments are
// Fluss's client options.
type writerConfig struct {
	batchSize       int           // client.writer.batch-size
	batchTimeout    time.Duration // client.writer.batch-timeout
	bufferMemory    int64         // client.writer.buffer.memory-size
	acks            int32         // client.writer.acks
	idempotent      bool          // client.writer.enable-idempotence
	deliveryTimeout time.Duration // how long a batch may be retried before it fails
	requestTimeout  time.Duration
	targetColumns   []string // UpsertWriter: partial update
}

// WriterOption configures an AppendWriter or an UpsertWriter.
type WriterOption func(*writerConfig)

// BatchSize sets the size (bytes, estimated before compression) at which a
// bucket's batch is sent (default 2 MiB).
func BatchSize(n int) WriterOption { return func(c *writerConfig) { c.batchSize = n } }

// BatchTimeout sets how long a batch waits to fill before it is sent
// anyway (default 100ms).
func BatchTimeout(d time.Duration) WriterOption { return func(c *writerConfig) { c.batchTimeout = d } }

// BufferMemory bounds the bytes of rows appended but not yet acknowledged;
// Append blocks when it is reached (default 64 MiB).
func BufferMemory(n int64) WriterOption { return func(c *writerConfig) { c.bufferMemory = n } }

// Acks sets the acknowledgement a batch waits for: -1 (default) all in-sync
// replicas, 1 the leader, 0 none.
func Acks(acks int) WriterOption { return func(c *writerConfig) { c.acks = int32(acks) } }

// Idempotent turns idempotent writes on or off (default on): retried
// batches are written once.
func Idempotent(on bool) WriterOption { return func(c *writerConfig) { c.idempotent = on } }

// DeliveryTimeout bounds how long a batch is retried (default 2 minutes).
func DeliveryTimeout(d time.Duration) WriterOption {
	return func(c *writerConfig) { c.deliveryTimeout = d }
}

// encoder accumulates the rows of one bucket into one batch.
type encoder interface {
	// add appends a write of row (a delete when del is set); nothing is
	// added on error.
	add(row record.Row, del bool) error
	// size estimates the encoded batch's size in bytes.
	size() int
	// build returns the batch, its writer fields not yet set.
	build() ([]byte, error)
}

// batchKind is what differs between the writers of log and primary-key
// tables: how rows are encoded, stamped and sent.
type batchKind struct {
	newEncoder func() (encoder, error)
	// stamp sets a built batch's writer id and sequence (and its CRC).
	stamp func(batch []byte, writerID int64, sequence int32)
	// send delivers one bucket's batch and returns the bucket's result.
	send func(ctx context.Context, bucket int32, batch []byte, acks int32, timeout time.Duration) (*stromv1.ProduceBucketResult, error)
}

// pipeline is the machinery of AppendWriter and UpsertWriter: rows are
// grouped per bucket into batches and sent in the background, in order per
// bucket, one request in flight per bucket; retriable errors are retried
// with backoff, and with idempotence on a retried batch is written exactly
// once. Its methods are safe for concurrent use.
type pipeline struct {
	t         *Table
	cfg       writerConfig
	kind      batchKind
	bucketKey *record.KeyCodec // nil: no bucket key (sticky bucket)

	mem        chan struct{} // a token per KiB of buffer memory: backpressure
	stop       chan struct{} // closed by close: the linger loop exits
	lingerDone chan struct{}
	wg         sync.WaitGroup // the senders

	mu struct {
		sync.Mutex
		open    map[int32]*pendingBatch // filling, per bucket
		senders map[int32]*bucketSender
		sticky  int32 // bucket for tables without a bucket key
		closed  bool
	}
	// failed holds the first failure since the last Flush; its own lock,
	// because batches complete while mu is held.
	failed struct {
		sync.Mutex
		err error
	}
}

// pendingBatch is a batch being filled.
type pendingBatch struct {
	bucket  int32
	enc     encoder
	futures []*Future
	memKB   int
	created time.Time
}

// sealedBatch is a batch waiting to be sent.
type sealedBatch struct {
	bucket  int32
	data    []byte
	futures []*Future
	memKB   int
}

// Future is the outcome of one Append.
type Future struct {
	done   chan struct{}
	bucket int32
	offset int64
	err    error
}

// Wait blocks until the row is acknowledged (or failed) or ctx ends, and
// returns the bucket and offset the row was written at.
func (f *Future) Wait(ctx context.Context) (bucket int32, offset int64, err error) {
	select {
	case <-f.done:
		return f.bucket, f.offset, f.err
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
}

// Done is closed when the outcome is known.
func (f *Future) Done() <-chan struct{} { return f.done }

// Err returns the outcome's error; call after Done is closed.
func (f *Future) Err() error { return f.err }

func defaultWriterConfig() writerConfig {
	return writerConfig{
		batchSize: 2 << 20, batchTimeout: 100 * time.Millisecond, bufferMemory: 64 << 20,
		acks: -1, idempotent: true, deliveryTimeout: 2 * time.Minute, requestTimeout: 30 * time.Second,
	}
}

func newPipeline(t *Table, kind batchKind, opts []WriterOption) (*pipeline, error) {
	cfg := defaultWriterConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.batchSize <= 0 || cfg.bufferMemory < int64(cfg.batchSize) || cfg.batchTimeout <= 0 {
		return nil, fmt.Errorf("client: writer options: batch size %d, buffer memory %d, batch timeout %s: want positive values with buffer ≥ batch size",
			cfg.batchSize, cfg.bufferMemory, cfg.batchTimeout)
	}
	if cfg.acks != -1 && cfg.acks != 0 && cfg.acks != 1 {
		return nil, fmt.Errorf("client: acks must be -1, 0 or 1, got %d", cfg.acks)
	}
	w := &pipeline{
		t: t, cfg: cfg, kind: kind,
		mem:        make(chan struct{}, int(cfg.bufferMemory>>10)),
		stop:       make(chan struct{}),
		lingerDone: make(chan struct{}),
	}
	if len(t.desc.BucketKeys) > 0 {
		var err error
		if w.bucketKey, err = record.NewKeyCodec(t.schema.Columns, t.desc.BucketKeys); err != nil {
			return nil, fmt.Errorf("client: bucket key: %w", err)
		}
	}
	w.mu.open = map[int32]*pendingBatch{}
	w.mu.senders = map[int32]*bucketSender{}
	w.mu.sticky = int32(rand.IntN(int(max(t.Buckets(), 1))))
	go w.lingerLoop()
	return w, nil
}

// append adds a write of row (checked by the caller). It returns at once
// with a Future unless the buffer is full, in which case it blocks until
// there is room or ctx ends.
func (w *pipeline) append(ctx context.Context, row record.Row, del bool) *Future {
	f := &Future{done: make(chan struct{})}
	fail := func(err error) *Future { f.err = err; close(f.done); return f }
	bucket, err := w.bucketOf(row)
	if err != nil {
		return fail(err)
	}
	kb := rowSizeKB(row)
	for i := 0; i < kb; i++ { // backpressure: wait for buffer memory
		select {
		case w.mem <- struct{}{}:
		case <-ctx.Done():
			w.releaseMem(i)
			return fail(ctx.Err())
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		w.releaseMem(kb)
		return fail(errors.New("client: writer is closed"))
	}
	if bucket < 0 {
		bucket = w.mu.sticky
	}
	pb := w.mu.open[bucket]
	if pb == nil {
		enc, err := w.kind.newEncoder()
		if err != nil {
			w.releaseMem(kb)
			return fail(err)
		}
		pb = &pendingBatch{bucket: bucket, enc: enc, created: time.Now()}
		w.mu.open[bucket] = pb
	}
	if err := pb.enc.add(row, del); err != nil {
		w.releaseMem(kb)
		return fail(err)
	}
	f.bucket = bucket
	pb.futures = append(pb.futures, f)
	pb.memKB += kb
	if pb.enc.size() >= w.cfg.batchSize {
		w.sealLocked(pb)
	}
	return f
}

// bucketOf returns the row's bucket, or -1 for "the sticky bucket".
func (w *pipeline) bucketOf(row record.Row) (int32, error) {
	if w.bucketKey == nil {
		return -1, nil
	}
	key, err := w.bucketKey.AppendRow(nil, row)
	if err != nil {
		return 0, err
	}
	return int32(record.BucketOf(key, int(w.t.Buckets()))), nil
}

// rowSizeKB estimates a row's encoded size in KiB, at least 1.
func rowSizeKB(row record.Row) int {
	n := 0
	for _, v := range row {
		switch x := v.(type) {
		case string:
			n += len(x) + 4
		case []byte:
			n += len(x) + 4
		default:
			n += 8
		}
	}
	return max(1, (n+1023)>>10)
}

func (w *pipeline) releaseMem(kb int) {
	for i := 0; i < kb; i++ {
		<-w.mem
	}
}

// sealLocked closes the bucket's open batch and queues it to its sender.
func (w *pipeline) sealLocked(pb *pendingBatch) {
	delete(w.mu.open, pb.bucket)
	if w.bucketKey == nil && pb.bucket == w.mu.sticky && w.t.Buckets() > 1 {
		// Fluss's sticky bucket: move on once a batch is full.
		w.mu.sticky = (w.mu.sticky + 1 + int32(rand.IntN(int(w.t.Buckets()-1)))) % w.t.Buckets()
	}
	b, err := pb.enc.build()
	sb := &sealedBatch{bucket: pb.bucket, data: b, futures: pb.futures, memKB: pb.memKB}
	if err != nil {
		w.complete(sb, 0, fmt.Errorf("client: encode batch: %w", err))
		return
	}
	s := w.mu.senders[pb.bucket]
	if s == nil {
		s = &bucketSender{w: w, bucket: pb.bucket, queue: make(chan *sealedBatch, 64), writerID: record.NoWriterID}
		w.mu.senders[pb.bucket] = s
		w.wg.Add(1)
		go s.run()
	}
	s.inflight.Add(1)
	// The queue is bounded by buffer memory; never block while holding mu
	// for long: a full queue waits here briefly while the sender drains.
	s.queue <- sb
}

// complete resolves a batch's futures: offsets from base on success.
func (w *pipeline) complete(sb *sealedBatch, base int64, err error) {
	if err != nil {
		w.failed.Lock()
		if w.failed.err == nil {
			w.failed.err = err
		}
		w.failed.Unlock()
	}
	for i, f := range sb.futures {
		if err != nil {
			f.err = err
		} else {
			f.offset = base + int64(i)
		}
		close(f.done)
	}
	w.releaseMem(sb.memKB)
}

// lingerLoop sends batches that waited batchTimeout without filling.
func (w *pipeline) lingerLoop() {
	defer close(w.lingerDone)
	t := time.NewTicker(max(w.cfg.batchTimeout/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case now := <-t.C:
			w.mu.Lock()
			for _, pb := range w.mu.open {
				if now.Sub(pb.created) >= w.cfg.batchTimeout {
					w.sealLocked(pb)
				}
			}
			w.mu.Unlock()
		}
	}
}

// flush sends every open batch and waits until all written rows are
// acknowledged or failed; it returns the first failure since the previous
// flush (each row's own outcome is in its Future).
func (w *pipeline) flush(ctx context.Context) error {
	w.mu.Lock()
	for _, pb := range w.mu.open {
		w.sealLocked(pb)
	}
	senders := make([]*bucketSender, 0, len(w.mu.senders))
	for _, s := range w.mu.senders {
		senders = append(senders, s)
	}
	w.mu.Unlock()
	for _, s := range senders {
		if err := s.waitIdle(ctx); err != nil {
			return err
		}
	}
	w.failed.Lock()
	defer w.failed.Unlock()
	err := w.failed.err
	w.failed.err = nil
	return err
}

// close stops taking rows, flushes, and stops the writer once every queued
// batch is acknowledged or has failed (a batch may be retried for up to the
// delivery timeout).
func (w *pipeline) close(ctx context.Context) error {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return nil
	}
	w.mu.closed = true // no row is accepted from here on
	w.mu.Unlock()
	close(w.stop)
	<-w.lingerDone // nothing seals behind flush's back now
	err := w.flush(ctx)
	w.mu.Lock()
	for _, s := range w.mu.senders {
		close(s.queue) // senders drain what is queued, then exit
	}
	w.mu.Unlock()
	w.wg.Wait()
	return err
}

// bucketSender sends one bucket's batches in order. With idempotence each
// sender has a writer id of its own (the server keeps writer state per
// bucket), so it can start a new one without disturbing other buckets.
type bucketSender struct {
	w        *pipeline
	bucket   int32
	queue    chan *sealedBatch
	writerID int64 // record.NoWriterID until the first idempotent send
	sequence int32 // next batch sequence
	inflight inflightCounter
}

func (s *bucketSender) run() {
	defer s.w.wg.Done()
	for sb := range s.queue {
		base, err := s.send(sb)
		switch {
		case err == nil && s.w.cfg.idempotent:
			s.sequence++
		case err != nil:
			// The batch may have been appended by an attempt whose answer
			// was lost. Its sequence number must never be used for another
			// batch (the server would take that batch for a retry of this
			// one and drop it): start afresh under a new writer id.
			s.writerID = record.NoWriterID
		}
		s.w.complete(sb, base, err)
		s.inflight.Add(-1)
	}
}

// initWriter gets a new writer id from the cluster and restarts the
// sequence.
func (s *bucketSender) initWriter() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.w.cfg.requestTimeout)
	defer cancel()
	resp, err := call(ctx, s.w.t.c, s.w.t.c.tablet.InitWriter, &stromv1.InitWriterRequest{})
	if err != nil {
		return err
	}
	s.writerID, s.sequence = resp.WriterId, 0
	return nil
}

// send delivers one batch, retrying retriable errors with backoff until the
// delivery timeout. The batch keeps its writer id and sequence across
// retries, so the server writes it once.
func (s *bucketSender) send(sb *sealedBatch) (int64, error) {
	w := s.w
	deadline := time.Now().Add(w.cfg.deliveryTimeout)
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		if w.cfg.idempotent && s.writerID == record.NoWriterID {
			if err := s.initWriter(); err != nil {
				if !retriable(err) || time.Now().Add(backoff).After(deadline) {
					return 0, fmt.Errorf("client: init writer: %w", err)
				}
				time.Sleep(backoff)
				backoff = min(backoff*2, 2*time.Second)
				continue
			}
		}
		if w.cfg.idempotent {
			w.kind.stamp(sb.data, s.writerID, s.sequence) // the same on every attempt
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.requestTimeout)
		res, err := w.kind.send(ctx, sb.bucket, sb.data, w.cfg.acks, w.cfg.requestTimeout)
		cancel()
		if err == nil {
			if res.Error == nil {
				return res.BaseOffset, nil
			}
			err = detailError(res.Error)
		}
		if !retriable(err) || time.Now().Add(backoff).After(deadline) {
			return 0, fmt.Errorf("client: write to %s.%s bucket %d (after %d attempts): %w", w.t.info.Database, w.t.info.Table, sb.bucket, attempt+1, err)
		}
		// Close waits for this too: a closed writer still delivers what it
		// accepted, within the delivery timeout.
		time.Sleep(backoff)
		backoff = min(backoff*2, 2*time.Second)
	}
}

// retriable reports whether a failed request may succeed if sent again:
// the server said so, or the server could not be reached or answered late.
func retriable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Retriable
	}
	return errors.Is(err, ErrUnreachable) || errors.Is(err, context.DeadlineExceeded)
}

func (s *bucketSender) waitIdle(ctx context.Context) error { return s.inflight.waitZero(ctx) }

// inflightCounter counts queued and sending batches and lets callers wait
// for zero.
type inflightCounter struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

func (c *inflightCounter) Add(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += d
	if c.n == 0 && c.zero != nil {
		close(c.zero)
		c.zero = nil
	}
}

func (c *inflightCounter) waitZero(ctx context.Context) error {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return nil
	}
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	ch := c.zero
	c.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
