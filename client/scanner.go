package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
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

// Earliest starts at the first offset still stored. The first fetch
// resolves it (as Fluss's does), so Subscribe asks the node nothing, and
// Position reports EarliestOffset for the bucket until a fetch has answered.
func Earliest() StartOffset { return StartOffset{offset: EarliestOffset} }

// EarliestOffset is the position of a bucket subscribed from Earliest that
// no fetch has answered yet (Fluss's EARLIEST_OFFSET; FetchBucket.offset
// on the wire).
const EarliestOffset = -2

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
	skipCorrupt    bool
	decoders       int    // batches decoded at once; 0 until NewLogScanner: GOMAXPROCS
	noPrefetch     bool   // the fetch before prefetching, for benchmarks (export_test.go)
	beforeDecode   func() // called before each answer is decoded, for tests (export_test.go)
	afterDecode    bool   // a bucket fetched again only once its answer is polled, for benchmarks (export_test.go)
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

// DecodeConcurrency bounds how many of a fetch's Arrow batches are decoded
// at once (ZSTD and the columns' validation, most of a scan's CPU), in
// the scanner's decoder goroutine and n-1 more that it waits for before
// the fetch is buffered. n ≤ 1 (the default) decodes them one after
// another in the decoder: on a machine whose cores the server and other work
// keep busy, decoding at once was slower (docs/benchmarks.md); raise it
// where the client has cores to spare. What a Poll returns does not
// depend on it.
func DecodeConcurrency(n int) ScanOption { return func(c *scanConfig) { c.decoders = n } }

// SkipCorrupt makes the scanner go past a batch it cannot read (a
// *CorruptBatchError) instead of stopping the bucket at it: DATA LOSS. The
// batch's records are not returned, and never will be by this scanner; each
// skip is reported in BucketFetch.Skipped with the offsets lost, so that the
// caller can log it. Without it, such a batch stops its bucket (see
// CorruptBatchError).
func SkipCorrupt() ScanOption { return func(c *scanConfig) { c.skipCorrupt = true } }

// CorruptBatchError says that a bucket holds a batch that cannot be read:
// damaged where it is stored (the node answers CORRUPT_RECORD_EXCEPTION),
// or not decodable here. Retrying gets the same answer, so the scanner stops
// fetching the bucket: each Poll reports this error for it again, without
// asking the node, until Subscribe moves the bucket elsewhere (at NextOffset
// to go past the batch, losing the records in [Offset, NextOffset)). With
// SkipCorrupt the scanner moves past it itself.
type CorruptBatchError struct {
	Bucket int32
	// Offset is the first offset that cannot be read, NextOffset the one
	// after the batch, where reading may go on.
	Offset, NextOffset int64
	// Err is the node's error (an *Error) or the local decoding's.
	Err error
}

func (e *CorruptBatchError) Error() string {
	return fmt.Sprintf("client: bucket %d: offsets %d to %d cannot be read (skipping them loses %d records): %v",
		e.Bucket, e.Offset, e.NextOffset-1, e.NextOffset-e.Offset, e.Err)
}

func (e *CorruptBatchError) Unwrap() error { return e.Err }

// LogScanner reads a log table (or a primary-key table's changelog) from
// the buckets it is subscribed to. Like Fluss's LogFetcher it keeps one
// fetch in flight per leader node, for that node's buckets, and buffers
// what they answer until Poll returns it. A bucket is fetched again as soon
// as its answer has come, from where that answer's batches end, while one
// goroutine decodes the answers in the order they came: the node reads the
// next while this side decodes the last. A bucket holds at most two answers
// that Poll has not returned (decoding or decoded; Poll returns them as one
// BucketFetch) besides the one in flight. Poll returns what is decoded,
// and sends the next fetches before it returns. It is not safe for
// concurrent Polls; Close stops the fetches in flight.
type LogScanner struct {
	t      *Table
	cfg    scanConfig
	schema record.Schema // of the columns read
	// dec decodes batches of schema (nil if it cannot: each batch's
	// decode then reports why), into bodies taken from and given back to
	// bodies (record.NewArrowBodyPool) by the batches' Release.
	dec    *record.ArrowDecoder
	bodies memory.Allocator

	ctx    context.Context // of the fetches; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the fetches in flight and the decoder
	ready  chan struct{}  // an answer was decoded (buffer 1)
	wake   chan struct{}  // an answer was queued for the decoder (buffer 1)

	mu struct {
		sync.Mutex
		offsets  map[int32]int64              // next offset per subscribed bucket
		stopped  map[int32]*CorruptBatchError // buckets stopped at a batch they cannot read
		epoch    map[int32]uint64             // per bucket, changed by Subscribe: a fetch sent before is stale
		inflight map[int32]bool               // buckets with a fetch in flight, or an answer that must be decoded before the next
		busy     map[*node]bool               // nodes with a fetch in flight
		buffered map[int32]fetched            // decoded answers not returned yet, a bucket's two merged
		// held counts a bucket's answers accepted and not returned
		// (decoding or buffered); ahead is where its next fetch starts
		// while it holds some (the end of the last one's batches), absent
		// when it may not be fetched until Poll returns them (an answer
		// with an error, or one whose decode ended elsewhere).
		held  map[int32]int
		ahead map[int32]int64
		queue []answer // answers for the decoder, in the order they came
	}
}

// answer is one node's answer to a fetch, for the decoder: the buckets'
// results as fetched from pos (nil: not wanted any more), the fetch's
// subscription epochs, the results' batches framed, which results hold
// their bucket until decoded, and the reply buffers to give back once they
// are decoded (err: no node answered).
type answer struct {
	results []*stromv1.FetchBucketResult
	pos     map[int32]int64
	epochs  map[int32]uint64
	frames  []framed
	holds   []bool
	release func()
	err     error
}

// fetched is one bucket's completed fetch, decoded, with the offset it
// moves the bucket to; count answers merged into it.
type fetched struct {
	f     BucketFetch
	next  int64
	count int
	epoch uint64
	// failed is the error of a fetch of which no node answered (f.Err
	// says the same): a Poll returning only such fetches returns it.
	failed error
}

// ErrScannerClosed is returned by Poll after Close.
var ErrScannerClosed = errors.New("client: log scanner is closed")

// NewLogScanner returns a scanner with no subscriptions.
func (t *Table) NewLogScanner(opts ...ScanOption) (*LogScanner, error) {
	cfg := scanConfig{maxBytes: 16 << 20, bucketMaxBytes: 1 << 20, maxWait: 500 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.decoders = max(cfg.decoders, 1)
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
	s.dec, _ = record.NewArrowDecoder(s.schema)
	s.bodies = record.NewArrowBodyPool()
	s.mu.offsets = map[int32]int64{}
	s.mu.stopped = map[int32]*CorruptBatchError{}
	s.mu.epoch = map[int32]uint64{}
	s.mu.inflight = map[int32]bool{}
	s.mu.busy = map[*node]bool{}
	s.mu.buffered = map[int32]fetched{}
	s.mu.held = map[int32]int{}
	s.mu.ahead = map[int32]int64{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ready = make(chan struct{}, 1)
	s.wake = make(chan struct{}, 1)
	s.wg.Add(1)
	go s.decodeLoop()
	return s, nil
}

// Schema is the schema of the rows the scanner returns (the projected
// columns, in table order).
func (s *LogScanner) Schema() record.Schema { return s.schema }

// Subscribe starts reading bucket from start, resolving Latest and
// timestamps to an offset now (one ListOffsets call); Earliest is resolved
// by the bucket's first fetch. A bucket stopped at a batch it cannot
// read (CorruptBatchError) reads again from start. What was fetched for the
// bucket before and not returned yet is dropped.
func (s *LogScanner) Subscribe(ctx context.Context, bucket int32, start StartOffset) error {
	if bucket < 0 || bucket >= s.t.Buckets() {
		return fmt.Errorf("client: bucket %d does not exist: %s.%s has buckets 0..%d", bucket, s.t.info.Database, s.t.info.Table, s.t.Buckets()-1)
	}
	off := start.offset
	if start.spec != stromv1.OffsetSpec_OFFSET_SPEC_UNSPECIFIED {
		resp, err := callLeader(ctx, s.t, bucket, viaTablet(tabletAPI.ListOffsets), &stromv1.ListOffsetsRequest{
			Database: s.t.info.Database, Table: s.t.info.Table, Buckets: []int32{bucket}, Spec: start.spec, TimestampMs: start.at.UnixMilli(),
		}, func(r *stromv1.ListOffsetsResponse) *stromv1.ErrorDetail { return onlyBucketError(r.Buckets) })
		if err != nil {
			return err
		}
		if len(resp.Buckets) != 1 {
			return fmt.Errorf("client: list offsets answered %d buckets for 1", len(resp.Buckets))
		}
		off = resp.Buckets[0].Offset
	}
	s.mu.Lock()
	s.mu.offsets[bucket] = off
	delete(s.mu.stopped, bucket)
	s.mu.epoch[bucket]++
	if b, ok := s.mu.buffered[bucket]; ok {
		Fetches{b.f}.Release()
		delete(s.mu.buffered, bucket)
	}
	delete(s.mu.held, bucket) // answers still coming are of the old epoch
	delete(s.mu.ahead, bucket)
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
	// Err is this bucket's error; the scanner keeps its position. A
	// *CorruptBatchError stops the bucket (see there).
	Err error
	// Skipped lists the batches that could not be read and were skipped
	// (SkipCorrupt): their records are lost.
	Skipped []*CorruptBatchError
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

// Release frees the Arrow memory of every batch: their bodies go back to
// the scanner, which decodes later batches into them, so what aliases them
// (a RowView's strings and bytes, a batch's Record not retained) is not
// valid afterwards. Records' rows are copies and stay valid.
func (fs Fetches) Release() {
	for _, f := range fs {
		for _, b := range f.Batches {
			b.Release()
		}
	}
}

// Poll returns what the scanner has fetched from its subscribed buckets
// and not returned yet, waiting (up to MaxWait on the server, more while
// no node answers) while it has nothing, and advances the scanner past what
// it returns. Before returning it sends the next fetches (one per leader
// node with none in flight, for the buckets holding fewer than two
// answers; a bucket is also fetched again as soon as its answer comes), so
// that they proceed while the caller reads. A bucket's fetch is returned
// as soon as it is decoded: a leader with no new data does not hold up the
// others'. An error is returned only when no bucket could be asked (every
// bucket is stopped at a batch it cannot read, or no node answered within
// the retry timeout); per-bucket errors are in the fetches.
func (s *LogScanner) Poll(ctx context.Context) (Fetches, error) {
	for {
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			return nil, ErrScannerClosed
		}
		if len(s.mu.offsets) == 0 {
			s.mu.Unlock()
			return nil, errors.New("client: Poll before Subscribe")
		}
		if len(s.mu.stopped) == len(s.mu.offsets) {
			out := s.stoppedLocked()
			s.mu.Unlock()
			return out, fmt.Errorf("client: every subscribed bucket is stopped at a batch it cannot read: %w", out.Errors())
		}
		// Without prefetch, a poll waits for every fetch it sent.
		if len(s.mu.buffered) > 0 && (!s.cfg.noPrefetch || len(s.mu.inflight) == 0) {
			out, err := s.takeLocked()
			if !s.cfg.noPrefetch {
				s.sendLocked()
			}
			s.mu.Unlock()
			return out, err
		}
		s.sendLocked()
		s.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// stoppedLocked returns an error fetch for each stopped bucket.
func (s *LogScanner) stoppedLocked() Fetches {
	var out Fetches
	for b, e := range s.mu.stopped {
		out = append(out, BucketFetch{Bucket: b, From: s.mu.offsets[b], Err: e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bucket < out[j].Bucket })
	return out
}

// takeLocked returns the buffered fetches (and the stopped buckets'
// errors), in bucket order, and advances their buckets; and, when no node
// answered any of those fetches, the errors of their calls.
func (s *LogScanner) takeLocked() (Fetches, error) {
	out := s.stoppedLocked()
	answered := false
	var failed []error
	for b, r := range s.mu.buffered {
		if r.failed == nil {
			answered = true
		} else if !slices.Contains(failed, r.failed) {
			failed = append(failed, r.failed)
		}
		delete(s.mu.buffered, b)
		s.mu.offsets[b] = r.next
		if s.mu.held[b] -= r.count; s.mu.held[b] <= 0 {
			delete(s.mu.held, b)
			delete(s.mu.ahead, b)
		}
		var ce *CorruptBatchError
		if errors.As(r.f.Err, &ce) {
			s.mu.stopped[b] = ce
		}
		out = append(out, r.f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bucket < out[j].Bucket })
	if answered {
		return out, nil
	}
	return out, errors.Join(failed...)
}

// sendLocked sends a fetch to each leader node with none in flight, for
// its buckets that are subscribed, not stopped, not being fetched and
// holding fewer than two answers, each from where its answers end (its
// next offset when it holds none).
func (s *LogScanner) sendLocked() {
	if s.ctx.Err() != nil {
		return // closed
	}
	var buckets []int32
	for b := range s.mu.offsets {
		if s.mu.stopped[b] == nil && !s.mu.inflight[b] {
			if _, ok := s.startLocked(b); ok && s.mu.held[b] < 2 {
				buckets = append(buckets, b)
			}
		}
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i] < buckets[j] })
	_, groups := s.t.byLeader(buckets)
	for n, bs := range groups {
		if s.mu.busy[n] {
			continue
		}
		s.mu.busy[n] = true
		pos := make(map[int32]int64, len(bs))
		epochs := make(map[int32]uint64, len(bs))
		for _, b := range bs {
			s.mu.inflight[b] = true
			pos[b], _ = s.startLocked(b)
			epochs[b] = s.mu.epoch[b]
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			results, release, err := s.fetch(s.ctx, bs, pos)
			if err != nil {
				// No node answered within the retry timeout: each bucket
				// has the error, and keeps its position.
				d := errorDetail(err)
				for _, b := range bs {
					results = append(results, &stromv1.FetchBucketResult{Bucket: b, Error: d})
				}
			}
			s.land(n, bs, answer{results: results, pos: pos, epochs: epochs, release: release, err: err})
		}()
	}
}

// startLocked is where bucket b's next fetch starts: its next offset when
// it holds no answer, else where its answers end; false when it holds
// answers that must be returned before it is fetched again.
func (s *LogScanner) startLocked(b int32) (int64, bool) {
	if s.mu.held[b] == 0 {
		return s.mu.offsets[b], true
	}
	p, ok := s.mu.ahead[b]
	return p, ok
}

// land takes node n's answer for buckets bs: it frames each result's
// batches (their lengths only), accepts the results of the buckets whose
// subscription and position are still those the fetch was sent for, frees
// those buckets to be fetched again from where their batches end (a result
// with an error, or whose batches cannot all be framed, holds its bucket
// until it is decoded), sends the next fetches, and queues the answer for
// the decoder.
func (s *LogScanner) land(n *node, bs []int32, a answer) {
	a.frames = make([]framed, len(a.results))
	a.holds = make([]bool, len(a.results))
	for i, r := range a.results {
		if r.Error == nil {
			a.frames[i] = frame(r.Records)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.busy, n)
	answered := map[int32]bool{}
	for i, r := range a.results {
		b := r.Bucket
		answered[b] = true
		delete(s.mu.inflight, b)
		if !s.currentLocked(b, a.epochs[b], a.pos[b]) {
			a.results[i] = nil // stale: the decoder skips it
			continue
		}
		s.mu.held[b]++
		if end, ok := framedEnd(r, a.pos[b], &a.frames[i]); ok && !s.cfg.noPrefetch && !s.cfg.afterDecode {
			s.mu.ahead[b] = end
		} else {
			delete(s.mu.ahead, b)
			s.mu.inflight[b] = true // until the decoder has it
			a.holds[i] = true
		}
	}
	for _, b := range bs {
		if !answered[b] {
			delete(s.mu.inflight, b)
		}
	}
	s.mu.queue = append(s.mu.queue, a)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if !s.cfg.noPrefetch {
		s.sendLocked()
	}
}

// currentLocked reports whether an answer for bucket b fetched at pos under
// subscription epoch is still wanted: b is subscribed with that epoch, and
// pos is where its next fetch starts.
func (s *LogScanner) currentLocked(b int32, epoch uint64, pos int64) bool {
	if _, ok := s.mu.offsets[b]; !ok || epoch != s.mu.epoch[b] || s.ctx.Err() != nil {
		return false
	}
	start, ok := s.startLocked(b)
	return ok && start == pos
}

// framedEnd is where the answer r, fetched at from, ends if each of its
// batches decodes (decode's next offset then): false when r has an error
// or bytes that do not frame as batches.
func framedEnd(r *stromv1.FetchBucketResult, from int64, fr *framed) (int64, bool) {
	if r.Error != nil || fr.tail != nil {
		return 0, false
	}
	if from == EarliestOffset {
		from = r.LogStartOffset
	}
	if len(fr.batches) == 0 {
		return from, true
	}
	return fr.batches[len(fr.batches)-1].NextOffset(), true
}

// decodeLoop decodes the answers in the order they came and buffers them,
// until Close.
func (s *LogScanner) decodeLoop() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if len(s.mu.queue) == 0 {
			if s.ctx.Err() != nil {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			select {
			case <-s.wake:
			case <-s.ctx.Done():
			}
			continue
		}
		a := s.mu.queue[0]
		s.mu.queue[0] = answer{} // its results alias reply buffers given back once decoded
		s.mu.queue = s.mu.queue[1:]
		s.mu.Unlock()
		s.decodeAnswer(a)
	}
}

// decodeAnswer decodes answer a's accepted results and buffers each after
// what its bucket holds, if it starts where that ends; results that no
// longer fit are dropped.
func (s *LogScanner) decodeAnswer(a answer) {
	var results []*stromv1.FetchBucketResult
	var frames []framed
	var holds []bool
	for i, r := range a.results {
		if r != nil {
			results = append(results, r)
			frames = append(frames, a.frames[i])
			holds = append(holds, a.holds[i])
		}
	}
	if s.cfg.beforeDecode != nil {
		s.cfg.beforeDecode()
	}
	done := s.decodeAll(results, a.pos, frames)
	framedOK := make([]bool, len(done)) // decoded where the framing said
	for i, d := range done {
		end, ok := framedEnd(results[i], a.pos[d.f.Bucket], &frames[i])
		framedOK[i] = ok && end == d.next
	}
	if a.release != nil {
		a.release() // the batches are decoded: the replies' buffers go back
	}
	s.mu.Lock()
	for i, d := range done {
		b := d.f.Bucket
		d.epoch, d.failed, d.count = a.epochs[b], a.err, 1
		if holds[i] {
			delete(s.mu.inflight, b) // it held its bucket: no fetch of it left since
		}
		if !framedOK[i] && d.epoch == s.mu.epoch[b] {
			// An error, or decoded elsewhere than the framing said (a
			// batch that cannot be read): the bucket waits until Poll
			// returns it, and a fetch sent from the framed end is not
			// wanted.
			delete(s.mu.ahead, b)
		}
		s.bufferLocked(d, a.pos[b])
	}
	if !s.cfg.noPrefetch {
		s.sendLocked()
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// bufferLocked buffers d, the decoded answer of a fetch sent at pos: after
// what its bucket has buffered when it starts where that ends, alone when
// the bucket has nothing buffered; otherwise (an answer of a subscription
// since replaced, or one that follows an answer that ended elsewhere than
// its framing said, or an error after buffered records, which the next
// fetch asks again) it is released.
func (s *LogScanner) bufferLocked(d fetched, pos int64) {
	b := d.f.Bucket
	if _, ok := s.mu.offsets[b]; !ok || d.epoch != s.mu.epoch[b] || s.ctx.Err() != nil {
		Fetches{d.f}.Release() // subscribed elsewhere since: stale
		return
	}
	prev, ok := s.mu.buffered[b]
	var ce *CorruptBatchError
	fits := !ok && pos == s.mu.offsets[b] ||
		ok && prev.f.Err == nil && pos == prev.next && (d.f.Err == nil || errors.As(d.f.Err, &ce))
	if !fits {
		Fetches{d.f}.Release()
		if s.mu.held[b]--; s.mu.held[b] <= 0 {
			delete(s.mu.held, b)
			delete(s.mu.ahead, b)
		}
		return
	}
	if !ok {
		s.mu.buffered[b] = d
		return
	}
	prev.f.Batches = append(prev.f.Batches, d.f.Batches...)
	prev.f.Offsets = append(prev.f.Offsets, d.f.Offsets...)
	prev.f.Timestamps = append(prev.f.Timestamps, d.f.Timestamps...)
	prev.f.Skipped = append(prev.f.Skipped, d.f.Skipped...)
	prev.f.HighWatermark, prev.f.Err = d.f.HighWatermark, d.f.Err
	prev.f.Bytes += d.f.Bytes
	prev.next, prev.count, prev.failed = d.next, prev.count+d.count, nil
	s.mu.buffered[b] = prev
}

// Close stops the fetches in flight, waits for them, and releases what was
// fetched and not returned. The scanner must not be used afterwards.
func (s *LogScanner) Close() {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for b, r := range s.mu.buffered {
		Fetches{r.f}.Release()
		delete(s.mu.buffered, b)
	}
	for _, a := range s.mu.queue { // landed after the decoder stopped
		if a.release != nil {
			a.release()
		}
	}
	s.mu.queue = nil
}

// fetch sends one FetchLog per leader, for its buckets, all at once, and
// returns the buckets' results. A leader's call that fails gives its
// buckets that error as their result; when every call fails, the fetch is
// tried again (after a metadata refresh where the error says so) while the
// error is retriable, as callSeed does, and the last error is returned.
func (s *LogScanner) fetch(ctx context.Context, buckets []int32, pos map[int32]int64) (_ []*stromv1.FetchBucketResult, release func(), _ error) {
	var releases []func() // of the replies answered, whose records alias them
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	out, err := retry(ctx, time.Now().Add(s.t.c.retryTimeout), s.t.c.onRetry, func(ctx context.Context) ([]*stromv1.FetchBucketResult, error) {
		r, groups := s.t.byLeader(buckets)
		var mu sync.Mutex
		var out []*stromv1.FetchBucketResult
		var errs []error
		eachNode(groups, func(n *node, bs []int32) {
			req := &stromv1.FetchLogRequest{
				Database: s.t.info.Database, Table: s.t.info.Table, Columns: s.cfg.columns,
				MaxBytes: s.cfg.maxBytes, MinBytes: 1, MaxWaitMs: int32(s.cfg.maxWait / time.Millisecond),
			}
			for _, b := range bs {
				req.Buckets = append(req.Buckets, &stromv1.FetchBucket{Bucket: b, Offset: pos[b], MaxBytes: s.cfg.bucketMaxBytes})
			}
			resp, rel, err := s.t.c.fetchLog(ctx, n, req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.t.reroute(ctx, r, bs[0], err)
				errs = append(errs, err)
				d := errorDetail(err)
				for _, b := range bs {
					out = append(out, &stromv1.FetchBucketResult{Bucket: b, Error: d})
				}
				return
			}
			releases = append(releases, rel)
			for _, res := range resp.Buckets {
				if res.Error != nil {
					s.t.reroute(ctx, r, res.Bucket, detailError(res.Error))
				}
			}
			out = append(out, resp.Buckets...)
		})
		if len(errs) == len(groups) {
			return nil, errors.Join(errs...)
		}
		return out, nil
	})
	return out, release, err
}

// errorDetail is err as a bucket's ErrorDetail.
func errorDetail(err error) *stromv1.ErrorDetail {
	var e *Error
	if errors.As(err, &e) {
		return &stromv1.ErrorDetail{Code: e.Code, Name: e.Name, Retriable: e.Retriable, Field: e.Field, Message: e.Message,
			LeaderId: e.LeaderID, LeaderAddress: e.LeaderAddress}
	}
	return &stromv1.ErrorDetail{Code: -1, Name: "UNKNOWN", Retriable: retriable(err), Message: err.Error()}
}

// decodeAll decodes each of results, fetched from pos[bucket], into its
// BucketFetch and the bucket's next offset (the f and next of the fetched
// at the same index), with the batches of all of them decoded up to
// cfg.decoders at once (parallel).
func (s *LogScanner) decodeAll(results []*stromv1.FetchBucketResult, pos map[int32]int64, frames []framed) []fetched {
	var jobs [][2]int // result, batch
	for i, r := range results {
		if r.Error != nil {
			continue
		}
		for j := range frames[i].batches {
			jobs = append(jobs, [2]int{i, j})
		}
	}
	parallel(s.cfg.decoders, len(jobs), func(k int) {
		fr := &frames[jobs[k][0]]
		j := jobs[k][1]
		fr.decoded[j], fr.errs[j] = s.decodeBatch(fr.batches[j])
	})
	done := make([]fetched, len(results))
	for i, r := range results {
		done[i].f, done[i].next = s.decode(r, pos[r.Bucket], &frames[i])
	}
	return done
}

// parallel calls fn(0) to fn(jobs-1), up to n at once, and returns when all
// have returned; with n ≤ 1 (or one job) in the caller's goroutine.
func parallel(n, jobs int, fn func(int)) {
	n = min(n, jobs)
	if n <= 1 {
		for k := range jobs {
			fn(k)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	work := func() {
		for k := int(next.Add(1) - 1); k < jobs; k = int(next.Add(1) - 1) {
			fn(k)
		}
	}
	for range n - 1 {
		wg.Go(work)
	}
	work() // the caller is the nth
	wg.Wait()
}

// framed is one bucket's records cut into batches (not checked yet), each
// decoded by decodeBatch into decoded[i] or errs[i]; tail is the error of
// the bytes after the last batch that could be cut (nil: none are left).
type framed struct {
	batches []record.Batch
	decoded []*record.ArrowBatch
	errs    []error
	tail    error
}

// frame cuts data into its batches; they alias data.
func frame(data []byte) framed {
	var f framed
	for len(data) > 0 {
		b, rest, err := record.NextBatch(data)
		if err != nil {
			f.tail = err
			break
		}
		f.batches = append(f.batches, b)
		data = rest
	}
	f.decoded = make([]*record.ArrowBatch, len(f.batches))
	f.errs = make([]error, len(f.batches))
	return f
}

// decodeBatch checks b's CRC and decodes it. It is safe for concurrent use.
func (s *LogScanner) decodeBatch(b record.Batch) (*record.ArrowBatch, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if s.dec != nil {
		return s.dec.DecodeWith(b, memory.DefaultAllocator, s.bodies)
	}
	return record.DecodeArrowBatch(b, s.schema, memory.DefaultAllocator)
}

// decode turns one bucket's result, fetched from offset from, and its
// batches as decodeAll framed and decoded them, into its BucketFetch and the
// bucket's next offset. A batch that cannot be read is skipped
// (SkipCorrupt) or ends the fetch with a *CorruptBatchError; the batches
// decoded after it are released.
func (s *LogScanner) decode(r *stromv1.FetchBucketResult, from int64, fr *framed) (BucketFetch, int64) {
	if from == EarliestOffset && (r.Error == nil || r.Error.Name == "CORRUPT_RECORD_EXCEPTION") {
		from = r.LogStartOffset // where the node started reading
	}
	f := BucketFetch{Bucket: r.Bucket, From: from, HighWatermark: r.HighWatermark, Bytes: len(r.Records)}
	// bad handles a batch that cannot be read; it reports whether to go on.
	bad := func(e *CorruptBatchError) bool {
		if !s.cfg.skipCorrupt {
			f.Err = e
			return false
		}
		f.Skipped = append(f.Skipped, e)
		return true
	}
	if e := r.Error; e != nil {
		err := detailError(e)
		if e.Name != "CORRUPT_RECORD_EXCEPTION" || r.NextOffset <= from {
			f.Err = err
			return f, from
		}
		if bad(&CorruptBatchError{Bucket: r.Bucket, Offset: from, NextOffset: r.NextOffset, Err: err}) {
			return f, r.NextOffset
		}
		return f, from
	}
	next := from
	for i, b := range fr.batches {
		if err := fr.errs[i]; err != nil {
			e := &CorruptBatchError{Bucket: r.Bucket, Offset: max(next, b.BaseOffset()), NextOffset: b.NextOffset(), Err: err}
			if !bad(e) {
				releaseBatches(fr.decoded[i+1:])
				return f, next
			}
			next = b.NextOffset()
			continue
		}
		f.Batches = append(f.Batches, fr.decoded[i])
		f.Offsets = append(f.Offsets, b.BaseOffset())
		f.Timestamps = append(f.Timestamps, time.UnixMilli(b.CommitTimestamp()))
		next = b.NextOffset()
	}
	if err := fr.tail; err != nil {
		// No frame: the rest of the answer cannot be told apart.
		if r.NextOffset <= next {
			f.Err = fmt.Errorf("client: batch at offset %d: %w", next, err)
			return f, next
		}
		if bad(&CorruptBatchError{Bucket: r.Bucket, Offset: next, NextOffset: r.NextOffset, Err: err}) {
			return f, r.NextOffset
		}
	}
	return f, next
}

// releaseBatches releases each batch of bs that is not nil.
func releaseBatches(bs []*record.ArrowBatch) {
	for _, b := range bs {
		if b != nil {
			b.Release()
		}
	}
}
