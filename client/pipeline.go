package client

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	maxInflight     int           // client.writer.max-inflight-requests-per-bucket
	retryBackoff    time.Duration // Kafka's retry.backoff.ms
	maxRetryBackoff time.Duration // Kafka's retry.backoff.max.ms
	targetColumns   []string      // UpsertWriter: partial update
	buildInAppend   bool          // build batches under the writer's lock, as before (benchmarks)
}

// WriterOption configures an AppendWriter or an UpsertWriter.
type WriterOption func(*writerConfig)

// BatchSize sets the size at which a bucket's batch is sent: for a log
// table the batch's size after compression, estimated (as Fluss does) from
// the ratio the table's earlier batches compressed by (default 1 MiB); for
// a primary-key table its encoded size (default 2 MiB).
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

// MaxInflight sets how many batches of a bucket may be in flight at once
// with idempotence on (default 5, the most: a server remembers a writer's
// last five batches). Without idempotence one is, to keep the order.
func MaxInflight(n int) WriterOption { return func(c *writerConfig) { c.maxInflight = n } }

const maxInflightLimit = 5

// movedPause is the most a retry waits once a bucket's leader has moved.
const movedPause = 50 * time.Millisecond

// RetryBackoff sets how long a batch waits before it is sent again after a
// retriable failure: initial at first, doubling up to most (defaults 50ms
// and 2s). A wait ends early when the table's metadata names a new leader
// for a bucket, as Kafka's producer retries at once to a new leader
// (KIP-951).
func RetryBackoff(initial, most time.Duration) WriterOption {
	return func(c *writerConfig) { c.retryBackoff, c.maxRetryBackoff = initial, most }
}

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
	// send delivers one bucket's batch to node n, the bucket's leader, and
	// returns the bucket's result.
	send func(ctx context.Context, n *node, bucket int32, batch []byte, acks int32, timeout time.Duration) (*stromv1.ProduceBucketResult, error)
}

// pipeline is the machinery of AppendWriter and UpsertWriter: rows are
// grouped per bucket into batches and sent in the background, in order per
// bucket, up to MaxInflight requests in flight per bucket (one without
// idempotence); retriable errors are retried with backoff, and with
// idempotence on a retried batch is written exactly once. Its methods are
// safe for concurrent use.
type pipeline struct {
	t         *Table
	cfg       writerConfig
	kind      batchKind
	bucketKey *record.KeyCodec // nil: no bucket key (sticky bucket)

	mem chan struct{} // a token per KiB of buffer memory: backpressure
	// wg counts the writer's goroutines: senders and their sends. A
	// writer with nothing to send has none.
	wg sync.WaitGroup

	mu struct {
		sync.Mutex
		open    map[int32]*pendingBatch // filling, per bucket
		senders map[int32]*bucketSender
		sticky  int32       // bucket for tables without a bucket key
		linger  *time.Timer // armed while a batch is open
		closed  bool
	}
	// failed holds the failures since the last Flush, the first
	// maxFlushErrors of them; its own lock, because batches complete while
	// mu is held.
	failed struct {
		sync.Mutex
		errs []error
		more int // failures beyond errs
	}
	// writer is the idempotent writer id every bucket sender uses (Fluss's
	// IdempotenceManager: one per writer client, sequences per bucket).
	// It is taken for the first batch and retired when a batch under it
	// fails for good; the next batch of each bucket then takes a new one,
	// after the bucket's batches under the old one have settled.
	writer struct {
		sync.Mutex
		id int64 // record.NoWriterID: none yet, or retired
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

// sealedBatch is a batch waiting to be sent. It is built (encoded and
// compressed) by its bucket's sender, not under the writer's lock, so
// that appending and compressing overlap.
type sealedBatch struct {
	bucket  int32
	enc     encoder // until built
	data    []byte  // once built
	futures []*Future
	memKB   int
	settled bool // acknowledged or failed; guarded by its sender's mu
}

// maxFlushErrors bounds the failures Flush reports one by one; it counts
// the rest.
const maxFlushErrors = 100

// ErrPending is what Future.Err returns while the row's outcome is not
// known yet.
var ErrPending = errors.New("client: the write is not acknowledged yet")

// Future is the outcome of one Append (or Upsert, or Delete). Wait blocks
// for it; Done and Err check it without blocking; OnDone has a function
// called with it. Its methods are safe for concurrent use.
type Future struct {
	done   chan struct{}
	bucket int32
	offset int64
	err    error
	mu     sync.Mutex
	then   []func(bucket int32, offset int64, err error) // until done
}

// resolve sets the outcome, closes done and calls the OnDone functions.
func (f *Future) resolve(offset int64, err error) {
	f.mu.Lock()
	f.offset, f.err = offset, err
	close(f.done)
	then := f.then
	f.then = nil
	f.mu.Unlock()
	for _, fn := range then {
		fn(f.bucket, f.offset, f.err)
	}
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

// Err returns the outcome without blocking: ErrPending while it is not
// known, then nil once the row is acknowledged or the error it failed
// with.
func (f *Future) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return ErrPending
	}
}

// OnDone has fn called once with the outcome (Wait's results): at once, in
// the caller's goroutine, if it is known, else in the writer's goroutine
// that completes the row's batch, after the row's Done is closed. fn must
// not block: the bucket's later batches wait for it. Functions added to one
// Future are called in the order they were added.
func (f *Future) OnDone(fn func(bucket int32, offset int64, err error)) {
	f.mu.Lock()
	select {
	case <-f.done:
		f.mu.Unlock()
		fn(f.bucket, f.offset, f.err)
	default:
		f.then = append(f.then, fn)
		f.mu.Unlock()
	}
}

func defaultWriterConfig() writerConfig {
	return writerConfig{
		batchSize: 2 << 20, batchTimeout: 100 * time.Millisecond, bufferMemory: 64 << 20,
		acks: -1, idempotent: true, deliveryTimeout: 2 * time.Minute, requestTimeout: 30 * time.Second,
		retryBackoff: 50 * time.Millisecond, maxRetryBackoff: 2 * time.Second,
		maxInflight: 5,
	}
}

func newPipeline(t *Table, kind batchKind, opts []WriterOption) (*pipeline, error) {
	cfg := defaultWriterConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.retryBackoff <= 0 || cfg.maxRetryBackoff < cfg.retryBackoff {
		return nil, fmt.Errorf("client: writer options: retry backoff %s up to %s: want a positive initial backoff no longer than the most", cfg.retryBackoff, cfg.maxRetryBackoff)
	}
	if cfg.batchSize <= 0 || cfg.bufferMemory < int64(cfg.batchSize) || cfg.batchTimeout <= 0 {
		return nil, fmt.Errorf("client: writer options: batch size %d, buffer memory %d, batch timeout %s: want positive values with buffer ≥ batch size",
			cfg.batchSize, cfg.bufferMemory, cfg.batchTimeout)
	}
	if cfg.maxInflight < 1 || cfg.maxInflight > maxInflightLimit {
		return nil, fmt.Errorf("client: max in-flight requests per bucket must be 1 to %d (the batches a server remembers per writer), got %d",
			maxInflightLimit, cfg.maxInflight)
	}
	if cfg.acks != -1 && cfg.acks != 0 && cfg.acks != 1 {
		return nil, fmt.Errorf("client: acks must be -1, 0 or 1, got %d", cfg.acks)
	}
	w := &pipeline{t: t, cfg: cfg, kind: kind, mem: make(chan struct{}, int(cfg.bufferMemory>>10))}
	if len(t.desc.BucketKeys) > 0 {
		var err error
		if w.bucketKey, err = record.NewKeyCodec(t.schema.Columns, t.desc.BucketKeys); err != nil {
			return nil, fmt.Errorf("client: bucket key: %w", err)
		}
	}
	w.mu.open = map[int32]*pendingBatch{}
	w.mu.senders = map[int32]*bucketSender{}
	w.writer.id = record.NoWriterID
	w.mu.sticky = int32(rand.IntN(int(max(t.Buckets(), 1))))
	return w, nil
}

// append adds a write of row (checked by the caller). It returns at once
// with a Future unless the buffer is full, in which case it blocks until
// there is room or ctx ends.
func (w *pipeline) append(ctx context.Context, row record.Row, del bool) *Future {
	f := &Future{done: make(chan struct{})}
	fail := func(err error) *Future { f.resolve(0, err); return f }
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
		if w.mu.linger == nil {
			w.mu.linger = time.AfterFunc(w.cfg.batchTimeout, w.linger)
		}
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
	sb := &sealedBatch{bucket: pb.bucket, enc: pb.enc, futures: pb.futures, memKB: pb.memKB}
	if w.cfg.buildInAppend {
		if err := sb.build(); err != nil {
			w.complete(sb, 0, err)
			return
		}
	}
	s := w.mu.senders[pb.bucket]
	if s == nil {
		s = newBucketSender(w, pb.bucket)
		w.mu.senders[pb.bucket] = s
	}
	s.inflight.Add(1)
	// Never blocks: the queue is bounded by buffer memory alone, so a slow
	// bucket holds up only appends that need memory it holds, not the
	// writer's lock.
	if s.queue.push(sb) {
		w.wg.Add(1)
		go s.run()
	}
}

// build encodes the batch (for a log table: Arrow IPC, compressed), once.
func (sb *sealedBatch) build() error {
	if sb.enc == nil {
		return nil
	}
	b, err := sb.enc.build()
	sb.enc = nil
	if err != nil {
		return fmt.Errorf("client: encode a batch of %d rows for bucket %d: %w", len(sb.futures), sb.bucket, err)
	}
	sb.data = b
	return nil
}

// complete resolves a batch's futures: offsets from base on success. A
// failure (which names the batch's bucket) is kept for Flush.
func (w *pipeline) complete(sb *sealedBatch, base int64, err error) {
	if err != nil {
		w.failed.Lock()
		if len(w.failed.errs) < maxFlushErrors {
			w.failed.errs = append(w.failed.errs, err)
		} else {
			w.failed.more++
		}
		w.failed.Unlock()
	}
	for i, f := range sb.futures {
		f.resolve(base+int64(i), err)
	}
	w.releaseMem(sb.memKB)
}

// linger runs batchTimeout after the first batch opened since it last ran
// (a timer, so an idle writer has no goroutine): it sends the batches that
// waited batchTimeout without filling, and comes back for the others.
func (w *pipeline) linger() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.linger = nil
	now := time.Now()
	next := time.Duration(-1)
	for _, pb := range w.mu.open {
		if left := w.cfg.batchTimeout - now.Sub(pb.created); left <= 0 {
			w.sealLocked(pb)
		} else if next < 0 || left < next {
			next = left
		}
	}
	if next >= 0 && !w.mu.closed {
		w.mu.linger = time.AfterFunc(next, w.linger)
	}
}

// flush sends every open batch and waits until all written rows are
// acknowledged or failed; it returns every failure since the previous
// flush, joined (each row's own outcome is in its Future).
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
	errs := w.failed.errs
	if w.failed.more > 0 {
		errs = append(errs, fmt.Errorf("client: and %d more batches failed", w.failed.more))
	}
	w.failed.errs, w.failed.more = nil, 0
	return errors.Join(errs...)
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
	if w.mu.linger != nil {
		w.mu.linger.Stop() // flush seals the open batches
		w.mu.linger = nil
	}
	w.mu.Unlock()
	err := w.flush(ctx)
	w.wg.Wait() // nothing is queued from here on: the senders end with their batches
	return err
}

// bucketSender sends one bucket's batches in order. With idempotence its
// batches carry the writer's id and the bucket's own sequence (the server
// keeps writer state per bucket), and up to maxInflight batches are in
// flight at once: the server appends a writer's batches in sequence order
// whatever order they arrive in. Without idempotence there is no sequence
// to order by, and one batch is in flight.
type bucketSender struct {
	w        *pipeline
	bucket   int32
	queue    batchQueue
	slots    chan struct{} // a token per batch being sent
	inflight inflightCounter
	sending  sync.WaitGroup // the batches being sent

	mu struct {
		sync.Mutex
		writerID int64 // the id of the bucket's batches; record.NoWriterID until the first
		sequence int32 // next batch sequence under writerID
		// broken: a batch under writerID failed after it may have been
		// sent. Its sequence must never be used for another batch (the
		// server would take that batch for a retry of this one and drop
		// it), and the writer's later batches can never be appended to
		// this bucket (they would follow a gap): the writer id is
		// retired, and the bucket's next batch starts under a new one.
		broken bool
		// window holds the batches that took a slot, in the order they
		// did, until they and every batch before them have settled.
		window []*sealedBatch
	}
}

func newBucketSender(w *pipeline, bucket int32) *bucketSender {
	inflight := 1
	if w.cfg.idempotent {
		inflight = w.cfg.maxInflight
	}
	s := &bucketSender{w: w, bucket: bucket, slots: make(chan struct{}, inflight)}
	s.mu.writerID = record.NoWriterID
	return s
}

// run sends the queued batches and returns once the queue is empty (its
// sends go on in their own goroutines); the next push starts it again.
func (s *bucketSender) run() {
	defer s.w.wg.Done()
	for {
		sb, ok := s.queue.pop()
		if !ok {
			return
		}
		// Built here, off the writer's lock, while earlier batches are in
		// flight; the bucket's order is the queue's.
		if err := sb.build(); err != nil {
			s.done(sb, 0, err)
			continue
		}
		s.slots <- struct{}{}
		s.mu.Lock()
		s.mu.window = append(s.mu.window, sb)
		s.mu.Unlock()
		writerID, seq := record.NoWriterID, record.NoBatchSequence
		if s.w.cfg.idempotent {
			// A new writer id for the bucket: its first batch, after its
			// own failure, or after the writer's id was retired for a
			// failure in another bucket.
			cur := s.w.currentWriter()
			s.mu.Lock()
			renew := s.mu.writerID == record.NoWriterID || s.mu.broken || s.mu.writerID != cur
			s.mu.Unlock()
			if renew {
				// The old writer's batches settle first, so the bucket
				// keeps the order of batches across writers too.
				s.sending.Wait()
				id, err := s.w.writerID(time.Now().Add(s.w.cfg.deliveryTimeout))
				if err != nil {
					s.done(sb, 0, fmt.Errorf("client: a batch of %d rows for bucket %d: %w", len(sb.futures), sb.bucket, err))
					continue
				}
				s.mu.Lock()
				s.mu.writerID, s.mu.sequence, s.mu.broken = id, 0, false
				s.mu.Unlock()
			}
			s.mu.Lock()
			writerID, seq = s.mu.writerID, s.mu.sequence
			s.mu.sequence = nextSequence(seq)
			s.mu.Unlock()
			s.w.kind.stamp(sb.data, writerID, seq) // the same on every attempt
		}
		s.sending.Add(1)
		s.w.wg.Add(1)
		go func() {
			defer s.w.wg.Done()
			defer s.sending.Done()
			base, err := s.send(sb, writerID)
			if err != nil && writerID != record.NoWriterID {
				s.mu.Lock()
				if s.mu.writerID == writerID {
					s.mu.broken = true
				}
				s.mu.Unlock()
				s.w.retireWriter(writerID)
			}
			s.done(sb, base, err)
		}()
	}
}

// batchQueue is a bucket's sealed batches waiting for its sender, in
// order: unbounded (buffer memory bounds it), so that sealing a batch,
// done under the writer's lock, never waits for a slow bucket. The sender's
// goroutine runs only while the queue has batches.
type batchQueue struct {
	mu      sync.Mutex
	items   []*sealedBatch
	running bool // a sender's goroutine is popping
}

// push queues sb, and reports whether the caller must start the sender's
// goroutine (none is running).
func (q *batchQueue) push(sb *sealedBatch) (start bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, sb)
	start = !q.running
	q.running = true
	return start
}

// pop returns the oldest batch; false when there is none, after which the
// next push starts a goroutine.
func (q *batchQueue) pop() (*sealedBatch, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		q.running = false
		q.items = nil
		return nil, false
	}
	sb := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	return sb, true
}

// done completes a batch, then frees the slots of the batches settled
// from the oldest on. A slot is not reused while an older batch is
// unsettled: the batches in flight stay within maxInflight sequences of the
// oldest, so when that one is retried the server, which remembers a
// writer's last five batches, still knows it if it was appended.
func (s *bucketSender) done(sb *sealedBatch, base int64, err error) {
	s.w.complete(sb, base, err)
	s.mu.Lock()
	sb.settled = true
	n := 0
	for len(s.mu.window) > 0 && s.mu.window[0].settled {
		s.mu.window[0] = nil
		s.mu.window = s.mu.window[1:]
		n++
	}
	s.mu.Unlock()
	for range n {
		<-s.slots
	}
	s.inflight.Add(-1)
}

// nextSequence follows seq, wrapping from MaxInt32 to 0 as the server does.
func nextSequence(seq int32) int32 {
	if seq == math.MaxInt32 {
		return 0
	}
	return seq + 1
}

// currentWriter returns the writer id in use: record.NoWriterID before the
// first batch and after a batch failed under the last one.
func (w *pipeline) currentWriter() int64 {
	w.writer.Lock()
	defer w.writer.Unlock()
	return w.writer.id
}

// writerID returns the writer id in use, first getting a new one from the
// cluster (retrying until deadline) if there is none. Senders that need
// one at the same time wait for the same call.
func (w *pipeline) writerID(deadline time.Time) (int64, error) {
	w.writer.Lock()
	defer w.writer.Unlock()
	if w.writer.id != record.NoWriterID {
		return w.writer.id, nil
	}
	resp, err := retry(context.Background(), deadline, w.t.c.onRetry, func(ctx context.Context) (*stromv1.InitWriterResponse, error) {
		ctx, cancel := context.WithTimeout(ctx, w.cfg.requestTimeout)
		defer cancel()
		n := w.t.c.seed()
		resp, err := callOnce(ctx, n, n.tablet.InitWriter, &stromv1.InitWriterRequest{})
		if errors.Is(err, ErrUnreachable) {
			w.t.c.unreachable(n)
		}
		return resp, err
	})
	if err != nil {
		return record.NoWriterID, fmt.Errorf("client: init writer: %w", err)
	}
	w.writer.id = resp.WriterId
	return w.writer.id, nil
}

// retireWriter stops the use of writer id once a batch under it failed for
// good, unless it was retired already: each bucket's next batch goes
// under a new id.
func (w *pipeline) retireWriter(id int64) {
	w.writer.Lock()
	defer w.writer.Unlock()
	if w.writer.id == id {
		w.writer.id = record.NoWriterID
	}
}

// send delivers one batch, retrying retriable errors with backoff until the
// delivery timeout. The batch keeps its writer id and sequence across
// retries, so the server writes it once. OUT_OF_ORDER_SEQUENCE means an
// earlier batch of the writer has not arrived: it is retried while that
// batch may still be written, and fails once the writer is broken or no
// earlier batch is unsettled.
func (s *bucketSender) send(sb *sealedBatch, writerID int64) (int64, error) {
	w := s.w
	deadline := time.Now().Add(w.cfg.deliveryTimeout)
	backoff := w.cfg.retryBackoff
	for attempt := 0; ; attempt++ {
		// oldest: every earlier batch of the bucket has settled, so the
		// server has all of them that succeeded.
		s.mu.Lock()
		oldest := s.mu.window[0] == sb
		s.mu.Unlock()
		moved := w.t.leaderMoved()
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.requestTimeout)
		r, n := w.t.leader(sb.bucket)
		res, err := w.kind.send(ctx, n, sb.bucket, sb.data, w.cfg.acks, w.cfg.requestTimeout)
		if err == nil && res.Error == nil {
			cancel()
			return res.BaseOffset, nil
		}
		if err == nil {
			err = detailError(res.Error)
		}
		// To the new leader with the same writer id and sequence: it has
		// the writer's state, replicated with the log.
		w.t.reroute(ctx, r, sb.bucket, err)
		cancel()
		again := retriable(err)
		if outOfOrder(err) && writerID != record.NoWriterID {
			// Retried while a batch before it may still arrive: one was
			// unsettled when this attempt was sent, and none failed. With
			// none, the server has forgotten the writer (idle past
			// server.writer-id.expiration-time): the batch fails now.
			s.mu.Lock()
			again = !(s.mu.writerID == writerID && s.mu.broken) && !oldest
			s.mu.Unlock()
		}
		if !again || time.Now().Add(backoff).After(deadline) {
			return 0, fmt.Errorf("client: write of %d rows to %s.%s bucket %d (after %d attempts): %w", len(sb.futures), w.t.info.Database, w.t.info.Table, sb.bucket, attempt+1, err)
		}
		// Close waits for this too: a closed writer still delivers what it
		// accepted, within the delivery timeout.
		wait := time.NewTimer(backoff)
		select {
		case <-wait.C:
			backoff = min(backoff*2, w.cfg.maxRetryBackoff)
		case <-moved:
			// A leader moved since this try was routed (this try's failure
			// or another's taught it): to the new one soon, the backoff
			// started over. Not at once, so that two nodes naming each
			// other while the metadata spreads cannot make a busy loop.
			wait.Stop()
			time.Sleep(min(w.cfg.retryBackoff, movedPause))
			backoff = w.cfg.retryBackoff
		}
	}
}

// outOfOrder reports whether the server refused a batch for its sequence.
func outOfOrder(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Name == "OUT_OF_ORDER_SEQUENCE_EXCEPTION"
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
