package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// TargetColumns makes an UpsertWriter write a partial update: only the
// named columns (the primary key among them) are set; the others keep their
// values. Fluss's partial update.
func TargetColumns(names ...string) WriterOption {
	return func(c *writerConfig) { c.targetColumns = names }
}

// UpsertWriter writes to a primary-key table: upserts (whole rows, or the
// target columns of a partial update) and deletes, batched per bucket and
// sent like AppendWriter's. Its methods are safe for concurrent use.
type UpsertWriter struct {
	p      *pipeline
	pk     *record.KeyCodec
	target []int // column indexes of a partial update; nil: all
}

// NewUpsertWriter returns a writer for a primary-key table.
func (t *Table) NewUpsertWriter(_ context.Context, opts ...WriterOption) (*UpsertWriter, error) {
	if len(t.schema.PrimaryKey) == 0 {
		return nil, fmt.Errorf("client: %s.%s is a log table: use an AppendWriter", t.info.Database, t.info.Table)
	}
	cfg := defaultWriterConfig()
	for _, o := range opts {
		o(&cfg)
	}
	pk, err := record.NewKeyCodec(t.schema.Columns, t.schema.PrimaryKey)
	if err != nil {
		return nil, err
	}
	w := &UpsertWriter{pk: pk}
	if len(cfg.targetColumns) > 0 {
		for _, n := range cfg.targetColumns {
			_, i, ok := t.schema.Column(n)
			if !ok {
				return nil, fmt.Errorf("client: target column %q is not a column of %s.%s; columns are %v", n, t.info.Database, t.info.Table, t.schema.ColumnNames())
			}
			w.target = append(w.target, i)
		}
		slices.Sort(w.target)
		for _, k := range t.schema.PrimaryKey {
			if !slices.Contains(cfg.targetColumns, k) {
				return nil, fmt.Errorf("client: a partial update must include the primary key: add %q to the target columns", k)
			}
		}
	}
	rows, err := record.NewCompactedRowCodec(t.schema.Columns)
	if err != nil {
		return nil, err
	}
	header := record.KvBatchHeader{SchemaID: int16(t.info.SchemaId), WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence}
	targets := cfg.targetColumns
	w.p, err = newPipeline(t, batchKind{
		newEncoder: func() (encoder, error) {
			return &kvEncoder{b: record.NewKvBatchBuilder(header), pk: pk, rows: rows}, nil
		},
		stamp: func(b []byte, id int64, seq int32) { record.KvBatch(b).SetWriter(id, seq) },
		send: func(ctx context.Context, n *node, bucket int32, batch []byte, acks int32, timeout time.Duration) (*stromv1.ProduceBucketResult, error) {
			resp, err := callOnce(ctx, n, n.tablet.PutKv, &stromv1.PutKvRequest{
				Database: t.info.Database, Table: t.info.Table, Acks: &acks, TimeoutMs: int32(timeout / time.Millisecond),
				TargetColumns: targets, Buckets: []*stromv1.PutKvBucket{{Bucket: bucket, Records: batch}},
			})
			return oneBucket(resp.GetBuckets(), err)
		},
	}, opts)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Upsert inserts row or replaces the row with its key (with TargetColumns,
// only those columns; the others may be NULL in row). Like
// AppendWriter.Append it returns a Future at once unless the buffer is full.
func (w *UpsertWriter) Upsert(ctx context.Context, row record.Row) *Future {
	if err := w.check(row, w.target); err != nil {
		return failed(err)
	}
	return w.p.append(ctx, row, false)
}

// Delete deletes the row with row's key (only the key columns of row are
// read; with TargetColumns, a partial delete sets the target columns to NULL).
func (w *UpsertWriter) Delete(ctx context.Context, row record.Row) *Future {
	if err := w.check(row, []int{}); err != nil {
		return failed(err)
	}
	return w.p.append(ctx, row, true)
}

// check checks the row's shape, its key, and the columns written (all when
// cols is nil).
func (w *UpsertWriter) check(row record.Row, cols []int) error {
	s := w.p.t.schema
	if len(row) != len(s.Columns) {
		return fmt.Errorf("client: row has %d values, %s.%s has %d columns", len(row), w.p.t.info.Database, w.p.t.info.Table, len(s.Columns))
	}
	if cols == nil {
		return s.CheckRow(row)
	}
	for _, i := range s.PrimaryKeyIndexes() {
		if !slices.Contains(cols, i) {
			cols = append(cols, i)
		}
	}
	for _, i := range cols {
		if err := record.CheckValue(s.Columns[i].Type, row[i]); err != nil {
			return fmt.Errorf("client: column %q: %w", s.Columns[i].Name, err)
		}
	}
	return nil
}

// Flush sends every open batch and waits until all written rows are
// acknowledged or failed, as AppendWriter.Flush does.
func (w *UpsertWriter) Flush(ctx context.Context) error { return w.p.flush(ctx) }

// Close stops taking writes, flushes, and stops the writer.
func (w *UpsertWriter) Close(ctx context.Context) error { return w.p.close(ctx) }

// kvEncoder builds the KV batches of a primary-key table.
type kvEncoder struct {
	b    *record.KvBatchBuilder
	pk   *record.KeyCodec
	rows *record.CompactedRowCodec
}

func (e *kvEncoder) add(row record.Row, del bool) error {
	key, err := e.pk.AppendRow(nil, row)
	if err != nil {
		return err
	}
	var value []byte
	if !del {
		if value, err = e.rows.Append(nil, row); err != nil {
			return err
		}
	}
	return e.b.Append(key, value)
}

func (e *kvEncoder) size() int              { return e.b.Size() }
func (e *kvEncoder) build() ([]byte, error) { return e.b.Build(), nil }

// Lookuper looks rows of a primary-key table up by key or key prefix.
// Lookup sends the keys it is given in one request per leader; Get batches
// the keys of concurrent callers under the hood, with up to
// LookupMaxInflight requests in flight per leader node. It is safe for
// concurrent use; Close stops Get's batcher.
type Lookuper struct {
	t         *Table
	pk        *record.KeyCodec
	bucketKey *record.KeyCodec
	rows      *record.CompactedRowCodec
	cfg       lookupConfig

	// When the bucket key is a prefix of the primary key (the default:
	// the primary key itself), a key's bucket key is a byte prefix of its
	// compacted key (record's prefix property), so encode writes the key
	// once, as the bucket key's fields then the rest's (restKey, nil when
	// there is no rest), without a full row; pkTypes are the primary-key
	// columns' types, not null.
	bucketIsPrefix bool
	restKey        *record.KeyCodec
	pkTypes        []record.DataType

	startOnce sync.Once
	queue     chan lookupCall
	stop      chan struct{}
	stopped   chan struct{} // closed once the batcher and every request it sent are done
}

type lookupConfig struct {
	maxBatch     int           // client.lookup.batch-size
	batchTimeout time.Duration // client.lookup.batch-timeout
	maxInflight  int           // client.lookup.max-inflight-requests
}

// LookupOption configures a Lookuper.
type LookupOption func(*lookupConfig)

// LookupBatchSize is the most keys Get puts in one batch (default 128,
// Fluss's client.lookup.batch-size); a batch is sent as one request per
// leader node of its keys.
func LookupBatchSize(n int) LookupOption { return func(c *lookupConfig) { c.maxBatch = n } }

// LookupBatchTimeout is how long Get waits for more keys to join a
// batch (default 1ms; Fluss's client.lookup.batch-timeout is 100ms, which
// would add that much latency to a lone Get).
func LookupBatchTimeout(d time.Duration) LookupOption {
	return func(c *lookupConfig) { c.batchTimeout = d }
}

// LookupMaxInflight is how many of Get's Lookup requests may be in flight
// to one leader node at once (default 128, Fluss's
// client.lookup.max-inflight-requests). When a node has that many, the
// batcher waits for one to finish before it sends more to any node, and
// Get blocks once the batcher's queue (LookupBatchSize calls) is full:
// back-pressure. With more than one in flight, Gets of the same key sent
// at about the same time may be answered in any order, as in Fluss.
func LookupMaxInflight(n int) LookupOption { return func(c *lookupConfig) { c.maxInflight = n } }

// ErrLookuperClosed is returned by Get after Close.
var ErrLookuperClosed = errors.New("client: lookuper is closed")

type lookupCall struct {
	key  lookupKey
	done chan lookupAnswer // buffered: the answer never waits for the caller
}

// answerChans holds lookupCall.done channels for reuse: Get returns one
// once it has taken its answer (a channel left with its caller gone is
// dropped), which saves an allocation per key.
var answerChans = sync.Pool{New: func() any { return make(chan lookupAnswer, 1) }}

type lookupAnswer struct {
	row record.Row
	err error
}

// lookupKey is a primary key encoded, with its bucket.
type lookupKey struct {
	bucket int32
	key    []byte
}

// NewLookuper returns a Lookuper for a primary-key table.
func (t *Table) NewLookuper(opts ...LookupOption) (*Lookuper, error) {
	if len(t.schema.PrimaryKey) == 0 {
		return nil, fmt.Errorf("client: %s.%s is a log table: it has no keys to look up", t.info.Database, t.info.Table)
	}
	l := &Lookuper{t: t, cfg: lookupConfig{maxBatch: 128, batchTimeout: time.Millisecond, maxInflight: 128}}
	for _, o := range opts {
		o(&l.cfg)
	}
	if l.cfg.maxBatch < 1 || l.cfg.batchTimeout < 0 || l.cfg.maxInflight < 1 {
		return nil, fmt.Errorf("client: lookup batch size %d, batch timeout %s and max in-flight requests %d: want ≥ 1, ≥ 0 and ≥ 1",
			l.cfg.maxBatch, l.cfg.batchTimeout, l.cfg.maxInflight)
	}
	var err error
	if l.pk, err = record.NewKeyCodec(t.schema.Columns, t.schema.PrimaryKey); err != nil {
		return nil, err
	}
	if l.bucketKey, err = record.NewKeyCodec(t.schema.Columns, t.desc.BucketKeys); err != nil {
		return nil, err
	}
	if l.rows, err = record.NewCompactedRowCodec(t.schema.Columns); err != nil {
		return nil, err
	}
	if bk, pk := t.desc.BucketKeys, t.schema.PrimaryKey; len(bk) <= len(pk) && slices.Equal(bk, pk[:len(bk)]) {
		l.bucketIsPrefix = true
		if len(bk) < len(pk) {
			if l.restKey, err = record.NewKeyCodec(t.schema.Columns, pk[len(bk):]); err != nil {
				return nil, err
			}
		}
		for _, n := range pk {
			c, _, _ := t.schema.Column(n)
			l.pkTypes = append(l.pkTypes, c.Type.WithNullable(false))
		}
	}
	return l, nil
}

// fullRow places key values (in the order of names) into an empty row.
func (l *Lookuper) fullRow(names []string, values record.Row) (record.Row, error) {
	if len(values) != len(names) {
		return nil, fmt.Errorf("client: want %d key values (%v), got %d", len(names), names, len(values))
	}
	row := make(record.Row, len(l.t.schema.Columns))
	for i, n := range names {
		c, j, _ := l.t.schema.Column(n)
		if err := record.CheckValue(c.Type.WithNullable(false), values[i]); err != nil {
			return nil, fmt.Errorf("client: key column %q: %w", n, err)
		}
		row[j] = values[i]
	}
	return row, nil
}

func (l *Lookuper) bucketOf(row record.Row) (int32, error) {
	k, err := l.bucketKey.AppendRow(nil, row)
	if err != nil {
		return 0, err
	}
	return int32(record.BucketOf(k, int(l.t.Buckets()))), nil
}

// encode checks and encodes a primary key (the values of the primary-key
// columns, in primary-key order).
func (l *Lookuper) encode(k record.Row) (lookupKey, error) {
	if l.bucketIsPrefix {
		return l.encodeByPrefix(k)
	}
	return l.encodeFull(k)
}

// encodeFull is encode through a full row and both key codecs.
func (l *Lookuper) encodeFull(k record.Row) (lookupKey, error) {
	row, err := l.fullRow(l.t.schema.PrimaryKey, k)
	if err != nil {
		return lookupKey{}, err
	}
	b, err := l.bucketOf(row)
	if err != nil {
		return lookupKey{}, err
	}
	key, err := l.pk.AppendRow(nil, row)
	if err != nil {
		return lookupKey{}, err
	}
	return lookupKey{bucket: b, key: key}, nil
}

// encodeByPrefix is encode where the bucket key is a prefix of the
// primary key: the same checks and bytes, one encoding.
func (l *Lookuper) encodeByPrefix(k record.Row) (lookupKey, error) {
	names := l.t.schema.PrimaryKey
	if len(k) != len(names) {
		return lookupKey{}, fmt.Errorf("client: want %d key values (%v), got %d", len(names), names, len(k))
	}
	for i, t := range l.pkTypes {
		if err := record.CheckValue(t, k[i]); err != nil {
			return lookupKey{}, fmt.Errorf("client: key column %q: %w", names[i], err)
		}
	}
	nb := len(l.t.desc.BucketKeys)
	key, err := l.bucketKey.Append(make([]byte, 0, 16), k[:nb])
	if err != nil {
		return lookupKey{}, err
	}
	b := int32(record.BucketOf(key, int(l.t.Buckets())))
	if l.restKey != nil {
		if key, err = l.restKey.Append(key, k[nb:]); err != nil {
			return lookupKey{}, err
		}
	}
	return lookupKey{bucket: b, key: key}, nil
}

// Lookup returns the rows of the given primary keys (each the values of
// the primary-key columns, in primary-key order), nil where a key has no
// row. Keys are grouped per bucket, and the buckets per leader, into one
// request per leader node.
func (l *Lookuper) Lookup(ctx context.Context, keys ...record.Row) ([]record.Row, error) {
	enc := make([]lookupKey, len(keys))
	for i, k := range keys {
		var err error
		if enc[i], err = l.encode(k); err != nil {
			return nil, err
		}
	}
	values, err := l.lookup(ctx, enc)
	if err != nil {
		return nil, err
	}
	out := make([]record.Row, len(keys))
	for i, v := range values {
		if v != nil {
			if out[i], err = l.decode(v); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// lookup sends keys to their buckets' leaders, retrying the buckets not
// answered yet (after a metadata refresh where the error says so), and
// returns each key's value, nil where it has none.
func (l *Lookuper) lookup(ctx context.Context, keys []lookupKey) ([][]byte, error) {
	type place struct{ bucket, index int }
	byBucket := map[int32]*stromv1.LookupBucket{}
	var order []int32
	places := make([]place, len(keys))
	for i, k := range keys {
		lb := byBucket[k.bucket]
		if lb == nil {
			lb = &stromv1.LookupBucket{Bucket: k.bucket}
			byBucket[k.bucket] = lb
			order = append(order, k.bucket)
		}
		places[i] = place{int(k.bucket), len(lb.Keys)}
		lb.Keys = append(lb.Keys, k.key)
	}
	// Each leader's buckets in one request; a try asks for the buckets
	// without an answer yet.
	results := map[int32]*stromv1.LookupBucketResult{}
	_, err := retry(ctx, time.Now().Add(l.t.c.retryTimeout), l.t.c.onRetry, func(ctx context.Context) (struct{}, error) {
		var pending []int32
		for _, b := range order {
			if results[b] == nil {
				pending = append(pending, b)
			}
		}
		r, groups := l.t.byLeader(pending)
		var mu sync.Mutex
		var errs []error
		eachNode(groups, func(n *node, bs []int32) {
			req := &stromv1.LookupRequest{Database: l.t.info.Database, Table: l.t.info.Table}
			for _, b := range bs {
				req.Buckets = append(req.Buckets, byBucket[b])
			}
			resp, err := callOnce(ctx, n, n.tablet.Lookup, req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				l.t.reroute(ctx, r, bs[0], err)
				errs = append(errs, err)
				return
			}
			for _, res := range resp.Buckets {
				if res.Error != nil {
					err := detailError(res.Error)
					l.t.reroute(ctx, r, res.Bucket, err)
					errs = append(errs, fmt.Errorf("client: lookup in bucket %d: %w", res.Bucket, err))
					continue
				}
				results[res.Bucket] = res
			}
		})
		return struct{}{}, errors.Join(errs...)
	})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	for i, p := range places {
		r := results[int32(p.bucket)]
		if r == nil || p.index >= len(r.Values) {
			return nil, fmt.Errorf("client: lookup answered no value for key %d", i)
		}
		if v := r.Values[p.index]; v.Found {
			out[i] = v.Value
		}
	}
	return out, nil
}

// Get looks one primary key up (nil when it has no row). Keys of
// concurrent Get calls are sent together, up to LookupBatchSize keys or
// after LookupBatchTimeout, with up to LookupMaxInflight requests in flight
// per leader node; Get blocks while the batcher cannot take its key
// (back-pressure). After Close it returns ErrLookuperClosed.
func (l *Lookuper) Get(ctx context.Context, key record.Row) (record.Row, error) {
	l.startOnce.Do(func() {
		l.queue = make(chan lookupCall, l.cfg.maxBatch)
		l.stop, l.stopped = make(chan struct{}), make(chan struct{})
		go l.batcher()
	})
	if l.stop == nil {
		return nil, ErrLookuperClosed
	}
	k, err := l.encode(key)
	if err != nil {
		return nil, err
	}
	c := lookupCall{key: k, done: answerChans.Get().(chan lookupAnswer)}
	select {
	case l.queue <- c: // the common case, without the select below
	default:
		select {
		case l.queue <- c:
		case <-l.stop:
			return nil, ErrLookuperClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case a := <-c.done:
		// The batcher answers a call once: the channel is empty and no
		// one else holds it.
		answerChans.Put(c.done)
		return a.row, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.stopped:
		// Every call the batcher took has its answer by now; one queued
		// after it stopped has none.
		select {
		case a := <-c.done:
			return a.row, a.err
		default:
			return nil, ErrLookuperClosed
		}
	}
}

// batcher collects Get calls into batches and sends each batch as one
// Lookup request per leader node, each in its own goroutine, holding one of
// the node's LookupMaxInflight slots.
func (l *Lookuper) batcher() {
	slots := map[*node]chan struct{}{}
	var inflight sync.WaitGroup
	defer func() {
		for {
			select {
			case c := <-l.queue:
				c.done <- lookupAnswer{err: ErrLookuperClosed}
			default:
				inflight.Wait()
				close(l.stopped)
				return
			}
		}
	}()
	timer := time.NewTimer(time.Hour) // Reset per batch (since Go 1.23 Stop leaves no stale tick)
	timer.Stop()
	for {
		var calls []lookupCall
		select {
		case <-l.stop:
			return
		case c := <-l.queue:
			calls = append(make([]lookupCall, 0, l.cfg.maxBatch), c)
		}
		timer.Reset(l.cfg.batchTimeout)
	collect:
		for len(calls) < l.cfg.maxBatch {
			select {
			case c := <-l.queue:
				calls = append(calls, c)
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
		groups := l.byNode(calls)
		for n, calls := range groups {
			slot := slots[n]
			if slot == nil {
				slot = make(chan struct{}, l.cfg.maxInflight)
				slots[n] = slot
			}
			select {
			case slot <- struct{}{}:
			case <-l.stop:
				for _, unsent := range groups {
					for _, c := range unsent {
						c.done <- lookupAnswer{err: ErrLookuperClosed}
					}
				}
				return
			}
			delete(groups, n)
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				defer func() { <-slot }()
				l.send(calls)
			}()
		}
	}
}

// byNode groups calls by their buckets' leaders; calls all for one node
// (one node, or one bucket) stay in the slice given.
func (l *Lookuper) byNode(calls []lookupCall) map[*node][]lookupCall {
	nodes := make([]*node, len(calls))
	for i, c := range calls {
		_, nodes[i] = l.t.leader(c.key.bucket)
	}
	groups := make(map[*node][]lookupCall, 1)
	if !slices.ContainsFunc(nodes, func(n *node) bool { return n != nodes[0] }) {
		groups[nodes[0]] = calls
		return groups
	}
	for i, c := range calls {
		groups[nodes[i]] = append(groups[nodes[i]], c)
	}
	return groups
}

// send looks the calls' keys up and answers each call.
func (l *Lookuper) send(calls []lookupCall) {
	keys := make([]lookupKey, len(calls))
	for i, c := range calls {
		keys[i] = c.key
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.t.c.retryTimeout)
	values, err := l.lookup(ctx, keys)
	cancel()
	for i, c := range calls {
		a := lookupAnswer{err: err}
		if err == nil && values[i] != nil {
			a.row, a.err = l.decode(values[i])
		}
		c.done <- a
	}
}

// Close stops Get's batcher and waits for the requests in flight (their
// Gets get their answers); Gets not sent yet, and later ones, return
// ErrLookuperClosed. Calls of Lookup and PrefixLookup still work.
func (l *Lookuper) Close() {
	l.startOnce.Do(func() {}) // a batcher never started will not start now
	if l.stop != nil {
		close(l.stop)
		<-l.stopped
	}
}

// PrefixLookup returns the rows whose bucket-key columns equal prefix (the
// values of the bucket-key columns, in bucket-key order), in key order.
func (l *Lookuper) PrefixLookup(ctx context.Context, prefix record.Row) ([]record.Row, error) {
	row, err := l.fullRow(l.t.desc.BucketKeys, prefix)
	if err != nil {
		return nil, err
	}
	b, err := l.bucketOf(row)
	if err != nil {
		return nil, err
	}
	key, err := l.bucketKey.AppendRow(nil, row)
	if err != nil {
		return nil, err
	}
	resp, err := callLeader(ctx, l.t, b, viaTablet(tabletAPI.PrefixLookup), &stromv1.PrefixLookupRequest{
		Database: l.t.info.Database, Table: l.t.info.Table, Buckets: []*stromv1.LookupBucket{{Bucket: b, Keys: [][]byte{key}}},
	}, func(r *stromv1.PrefixLookupResponse) *stromv1.ErrorDetail { return onlyBucketError(r.Buckets) })
	if err != nil {
		return nil, err
	}
	if len(resp.Buckets) != 1 || len(resp.Buckets[0].Values) != 1 {
		return nil, fmt.Errorf("client: prefix lookup answered %d buckets for 1", len(resp.Buckets))
	}
	var out []record.Row
	for _, v := range resp.Buckets[0].Values[0].Values {
		r, err := l.decode(v)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// decode turns a KV value into a row.
func (l *Lookuper) decode(v []byte) (record.Row, error) {
	schemaID, row, err := record.ParseKvValue(v)
	if err != nil {
		return nil, err
	}
	if int32(schemaID) != l.t.info.SchemaId {
		return nil, fmt.Errorf("client: value of schema %d, this handle knows schema %d: open the table again", schemaID, l.t.info.SchemaId)
	}
	return l.rows.Decode(row)
}

// Scan reads a consistent snapshot of one bucket of a primary-key table,
// page by page, and returns its rows in key order (at most limit, if > 0).
func (t *Table) Scan(ctx context.Context, bucket int32, limit int) ([]record.Row, error) {
	l, err := t.NewLookuper()
	if err != nil {
		return nil, err
	}
	var out []record.Row
	var id []byte
	var n *node // the leader the scanner is open on
	for {
		var resp *stromv1.ScanKvResponse
		req := &stromv1.ScanKvRequest{Database: t.info.Database, Table: t.info.Table, Bucket: bucket, ScannerId: id}
		if id == nil {
			resp, err = callLeader(ctx, t, bucket, func(m *node) rpcFunc[stromv1.ScanKvRequest, stromv1.ScanKvResponse] {
				n = m
				return m.tablet.ScanKv
			}, req, nil)
		} else {
			// Only the first page is retried: a later one whose answer was
			// lost is gone from the scanner, and asking again would skip it.
			resp, err = callOnce(ctx, n, n.tablet.ScanKv, req)
		}
		if err != nil {
			return nil, err
		}
		id = resp.ScannerId
		for _, v := range resp.Values {
			r, err := l.decode(v)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
			if limit > 0 && len(out) == limit {
				if resp.HasMore {
					_, _ = callOnce(ctx, n, n.tablet.ScanKv, &stromv1.ScanKvRequest{
						Database: t.info.Database, Table: t.info.Table, Bucket: bucket, ScannerId: id, Close: true,
					})
				}
				return out, nil
			}
		}
		if !resp.HasMore {
			return out, nil
		}
	}
}
