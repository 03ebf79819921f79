package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"strom/raftmeta/catalog"
	"strom/record"
	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/tablet/log"
	"strom/tablet/replica"
)

// tabletHandler serves TabletService: it resolves the table in the local
// catalog, checks input at the edge, and calls the bucket's replica.
type tabletHandler struct {
	s     *Server
	proxy *coordinatorProxy
}

var _ stromv1connect.TabletServiceHandler = (*tabletHandler)(nil)

// Defaults of the data calls.
const (
	defaultProduceTimeout = 30 * time.Second
	defaultBucketMaxBytes = 1 << 20
	defaultFetchMaxBytes  = 16 << 20
	// projectedFetchMinBytes is what a projected fetch serves of a bucket
	// (or its limit, if less) before it stops reading on. It is small
	// enough that a consumer decodes one answer while the next is being
	// read, and large enough that a fetch of 1 of 20 columns is not a
	// round trip per MiB stored (docs/benchmarks.md, column pruning).
	projectedFetchMinBytes = 128 << 10
	maxFetchWait           = 5 * time.Minute
)

// table resolves db.name in the local catalog. Data calls do this on every
// request, so the decoded table is cached until the metadata changes.
func (h *tabletHandler) table(db, name string) (catalog.Table, error) {
	if err := validatePath(db, name); err != nil {
		return catalog.Table{}, err
	}
	return h.s.tables.get(db, name)
}

// replica returns the bucket's replica when this node leads the bucket; a
// *rpc.LeaderHint wrapping replica.ErrNotLeader when the metadata names
// another leader, replica.ErrUnknownBucket when this node hosts no replica
// of it (yet).
func (h *tabletHandler) replica(t catalog.Table, bucket int32) (*replica.Replica, error) {
	if bucket < 0 || bucket >= t.Registration.BucketCount {
		return nil, &record.InvalidError{Field: "bucket", Reason: fmt.Sprintf("bucket %d does not exist: %s.%s has buckets 0..%d",
			bucket, t.Database, t.Name, t.Registration.BucketCount-1)}
	}
	tb := replica.TableBucket{TableID: t.Registration.TableID, Bucket: bucket}
	// Another node leads the bucket (this one may host a follower, or no
	// replica at all): name it, so the client sends there at once.
	if lisr, ok := t.LeaderISR[bucket]; ok && lisr.Leader != h.s.cfg.NodeID {
		return nil, h.s.notLeader(tb, lisr.Leader)
	}
	return h.s.replicas.Replica(tb)
}

func (h *tabletHandler) ProduceLog(ctx context.Context, req *connect.Request[stromv1.ProduceLogRequest]) (*connect.Response[stromv1.ProduceLogResponse], error) {
	// The log copies the batches; their buffers go back to the codec's pool.
	defer rpc.ReleaseRecords(req.Msg)
	resp, err := h.produce(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(resp), nil
}

// produce is ProduceLog, for the Connect handler and the fast path
// (producefast.go) alike.
func (h *tabletHandler) produce(ctx context.Context, m *stromv1.ProduceLogRequest) (*stromv1.ProduceLogResponse, error) {
	t, err := h.table(m.Database, m.Table)
	if err != nil {
		return nil, err
	}
	if len(t.Schema.PrimaryKey) > 0 {
		return nil, &record.InvalidError{Field: "table", Reason: fmt.Sprintf("%s.%s is a primary-key table: write it with PutKv", t.Database, t.Name)}
	}
	acks, err := parseAcks(m.Acks)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout(m.TimeoutMs))
	defer cancel()

	buckets := m.Buckets
	if len(m.Rows) > 0 {
		if len(buckets) > 0 {
			return nil, &record.InvalidError{Field: "rows", Reason: "give either rows or buckets of batches, not both"}
		}
		if buckets, err = h.encodeRows(t, m.Rows); err != nil {
			return nil, err
		}
	}
	ids := make([]int32, len(buckets))
	for i, pb := range buckets {
		ids[i] = pb.Bucket
	}
	results := writeBuckets(ids, func(i int) (log.AppendInfo, error) {
		return h.produceBucket(ctx, t, buckets[i], acks)
	})
	return &stromv1.ProduceLogResponse{Buckets: results}, nil
}

// writeBuckets runs write for each bucket of a write request, concurrently
// when there are several (each may wait, for its acks or for a writer's
// earlier batch, without holding up the others), and returns the results in
// request order. A bucket named twice is refused.
func writeBuckets(buckets []int32, write func(i int) (log.AppendInfo, error)) []*stromv1.ProduceBucketResult {
	results := make([]*stromv1.ProduceBucketResult, len(buckets))
	seen := map[int32]bool{}
	var wg sync.WaitGroup
	for i, b := range buckets {
		res := &stromv1.ProduceBucketResult{Bucket: b}
		results[i] = res
		if seen[b] {
			res.Error = rpc.Detail(&record.InvalidError{Field: "buckets", Reason: fmt.Sprintf("bucket %d appears twice", b)})
			continue
		}
		seen[b] = true
		run := func() {
			info, err := write(i)
			if err != nil {
				res.Error = rpc.Detail(err)
				return
			}
			res.BaseOffset, res.NextOffset = info.FirstOffset, info.LastOffset+1
		}
		if len(buckets) == 1 {
			run()
		} else {
			wg.Go(run)
		}
	}
	wg.Wait()
	return results
}

// stickyBucket picks a bucket at random for rows without a bucket key:
// one this node leads when it leads any (another would refuse the rows
// with NOT_LEADER_OR_FOLLOWER), any otherwise.
func (h *tabletHandler) stickyBucket(t catalog.Table) int32 {
	var led []int32
	for b, lisr := range t.LeaderISR {
		if lisr.Leader == h.s.cfg.NodeID {
			led = append(led, b)
		}
	}
	if len(led) == 0 {
		return int32(rand.IntN(int(t.Registration.BucketCount)))
	}
	return led[rand.IntN(len(led))]
}

// parseAcks reads a write's acks: -1 (the default), 0 or 1.
func parseAcks(acks *int32) (int, error) {
	if acks == nil {
		return -1, nil
	}
	if a := *acks; a != -1 && a != 0 && a != 1 {
		return 0, &record.InvalidError{Field: "acks", Reason: fmt.Sprintf("must be 0, 1 or -1, got %d", a)}
	}
	return int(*acks), nil
}

// writeTimeout is a write's timeout_ms, or the default.
func writeTimeout(ms int32) time.Duration {
	if ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return defaultProduceTimeout
}

// produceBucket validates every batch of one bucket against the table
// schema, with the readers' checks (record.CheckArrowBatch: from the
// metadata, or decompressing and decoding with log.validation.full), and
// appends them.
func (h *tabletHandler) produceBucket(ctx context.Context, t catalog.Table, pb *stromv1.ProduceBucket, acks int) (log.AppendInfo, error) {
	r, v, err := h.checkProduce(t, pb)
	if err != nil {
		return log.AppendInfo{}, err
	}
	p, err := r.AppendThen(ctx, v, acks)
	if err != nil {
		return p.Info(), err
	}
	return h.waitProduce(ctx, r, p, len(pb.Records))
}

// checkProduce is produceBucket's validation: the bucket's replica as this
// node leads it, and its batches checked for the append (Replica.Validate).
func (h *tabletHandler) checkProduce(t catalog.Table, pb *stromv1.ProduceBucket) (*replica.Replica, log.ValidBatches, error) {
	r, err := h.replica(t, pb.Bucket)
	if err != nil {
		return nil, log.ValidBatches{}, err
	}
	if len(pb.Records) == 0 {
		return nil, log.ValidBatches{}, &record.InvalidError{Field: "records", Reason: fmt.Sprintf("bucket %d: no batches", pb.Bucket)}
	}
	for rest, i := pb.Records, 0; len(rest) > 0; i++ {
		var b record.Batch
		b, rest, err = record.NextBatch(rest)
		if err != nil {
			return nil, log.ValidBatches{}, fmt.Errorf("bucket %d batch %d: %w", pb.Bucket, i, err)
		}
		if b.Magic() != record.CurrentMagic {
			return nil, log.ValidBatches{}, fmt.Errorf("bucket %d batch %d: %w: magic %d; Strom takes V2 batches (magic 2)", pb.Bucket, i, record.ErrCorruptBatch, b.Magic())
		}
		if int32(b.SchemaID()) != t.SchemaID {
			return nil, log.ValidBatches{}, fmt.Errorf("bucket %d batch %d: %w: schema id %d, the table's schema is %d", pb.Bucket, i, catalog.ErrSchemaNotExist, b.SchemaID(), t.SchemaID)
		}
		// The log checks the CRC (Validate).
		if err := record.CheckArrowBatch(b, t.Schema, h.s.cfg.LogValidationFull); err != nil {
			return nil, log.ValidBatches{}, fmt.Errorf("bucket %d batch %d: %w", pb.Bucket, i, err)
		}
	}
	v, err := r.Validate(pb.Records)
	return r, v, err
}

// waitProduce waits for an appended produce's acks and counts its rows and
// bytes (n) once acknowledged.
func (h *tabletHandler) waitProduce(ctx context.Context, r *replica.Replica, p replica.Pending, n int) (log.AppendInfo, error) {
	info, err := p.Wait(ctx)
	if err == nil && !info.Duplicate {
		h.s.countIn(r, int(info.LastOffset-info.FirstOffset+1), n)
	}
	return info, err
}

// encodeRows turns JSON rows into one Arrow batch per bucket. Rows of a
// table with a bucket key go to the key's bucket; otherwise all the rows of
// the request go to one bucket chosen at random (Fluss's sticky bucket)
// among those this node leads, so that any node takes them.
func (h *tabletHandler) encodeRows(t catalog.Table, rows []*structpb.Struct) ([]*stromv1.ProduceBucket, error) {
	var problems []error
	builders := map[int32]*record.ArrowBuilder{}
	order := []int32{}
	sticky := h.stickyBucket(t)
	var bucketKey record.RowKeyEncoder
	if len(t.Registration.BucketKeys) > 0 {
		var err error
		if bucketKey, err = record.BucketKeyEncoder(t.Descriptor()); err != nil {
			return nil, err
		}
	}
	for i, st := range rows {
		js, err := protojson.Marshal(st)
		if err != nil {
			return nil, fmt.Errorf("rows[%d]: %w", i, err)
		}
		row, err := record.RowFromJSON(t.Schema, js)
		if err != nil {
			problems = append(problems, prefixFields(fmt.Sprintf("rows[%d].", i), err))
			continue
		}
		bucket := sticky
		if bucketKey != nil {
			key, err := bucketKey.AppendRow(nil, row)
			if err != nil {
				problems = append(problems, prefixFields(fmt.Sprintf("rows[%d].", i), err))
				continue
			}
			bucket = int32(record.BucketOfKey(t.Descriptor(), key, int(t.Registration.BucketCount)))
		}
		bld, ok := builders[bucket]
		if !ok {
			if bld, err = record.NewArrowBuilder(t.Schema, memory.DefaultAllocator); err != nil {
				return nil, err
			}
			builders[bucket] = bld
			order = append(order, bucket)
		}
		if err := bld.Append(row, record.AppendOnly); err != nil {
			problems = append(problems, prefixFields(fmt.Sprintf("rows[%d].", i), err))
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	comp, err := record.CompressionOf(t.Descriptor())
	if err != nil {
		return nil, err
	}
	out := make([]*stromv1.ProduceBucket, 0, len(order))
	for _, b := range order {
		buf, _, err := builders[b].Build(nil, record.BatchHeader{
			SchemaID: int16(t.SchemaID), AppendOnly: true, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence,
		}, comp)
		if err != nil {
			return nil, err
		}
		out = append(out, &stromv1.ProduceBucket{Bucket: b, Records: buf})
	}
	return out, nil
}

// prefixFields puts prefix before the field of every validation problem in err.
func prefixFields(prefix string, err error) error {
	var out []error
	for _, inv := range record.InvalidErrors(err) {
		out = append(out, &record.InvalidError{Field: prefix + inv.Field, Reason: inv.Reason})
	}
	if len(out) == 0 {
		return fmt.Errorf("%s %w", strings.TrimSuffix(prefix, "."), err)
	}
	return errors.Join(out...)
}

// wantsJSON reports whether rows should come back as JSON: asked for, or
// the request itself was JSON.
func wantsJSON(header interface{ Get(string) string }, asked bool) bool {
	return asked || strings.Contains(header.Get("Content-Type"), "json")
}

func (h *tabletHandler) FetchLog(ctx context.Context, req *connect.Request[stromv1.FetchLogRequest]) (*connect.Response[stromv1.FetchLogResponse], error) {
	m := req.Msg
	t, err := h.table(m.Database, m.Table)
	if err != nil {
		return nil, err
	}
	cols, err := projection(t.Schema, m.Columns)
	if err != nil {
		return nil, err
	}
	if len(m.Buckets) == 0 {
		return nil, &record.InvalidError{Field: "buckets", Reason: "name at least one bucket to fetch"}
	}
	schema := t.Schema
	if cols != nil {
		schema = t.Schema.Project(cols)
	}
	asJSON := wantsJSON(req.Header(), m.JsonRows)
	maxBytes := int(m.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = defaultFetchMaxBytes
	}
	// fetch.max.bytes bounds the response and so each bucket's share.
	maxBytes = min(maxBytes, int(h.s.cfg.FetchMaxBytes))
	minBytes := max(int(m.MinBytes), 1)
	wait := min(time.Duration(m.MaxWaitMs)*time.Millisecond, maxFetchWait)
	deadline := time.Now().Add(wait)

	var servedBuf [8]served // on the stack for fetches of up to 8 buckets
	for {
		resp := &stromv1.FetchLogResponse{SchemaId: t.SchemaID, Columns: schema.ColumnNames()}
		total, rows := 0, 0
		var wake []<-chan struct{}
		pass := servedBuf[:0]
		scan := int(h.s.cfg.FetchMaxBytes) // the stored bytes a pass reads on for projections
		for _, fb := range m.Buckets {
			res, sv, advanced := h.fetchBucket(t, fb, cols, schema, asJSON, maxBytes-total, h.s.cfg.FetchJSONMaxRows-rows, &scan)
			resp.Buckets = append(resp.Buckets, res)
			pass = append(pass, sv)
			total += sv.bytes
			rows += len(res.Rows)
			if advanced != nil {
				wake = append(wake, advanced)
			}
		}
		if total >= minBytes || wait <= 0 || time.Now().After(deadline) || len(wake) == 0 {
			h.s.countServed(pass)
			return connect.NewResponse(resp), nil
		}
		h.s.longPolls.Add(1)
		err := waitAny(ctx, h.s.stopping, wake, time.Until(deadline))
		h.s.longPolls.Add(-1)
		if err != nil {
			h.s.countServed(pass)
			return connect.NewResponse(resp), nil // the wait ran out or the node is stopping: answer with what there is
		}
	}
}

// fetchEarliestOffset, as a FetchBucket's offset, fetches from the first
// offset still stored (Fluss's EARLIEST_OFFSET).
const fetchEarliestOffset = -2

// served is what fetchBucket read of a bucket for a response: the rows and
// bytes of its batches, counted for /metrics once the response is sent (a
// long poll woken by new data reads again and sends only the later read).
type served struct {
	r           *replica.Replica
	rows, bytes int
}

// fetchBucket reads one bucket, within budget bytes and, as JSON, rowBudget
// rows. A projection reads on past its first read while *scan, the stored
// bytes the response may still read, lasts; every read is taken from *scan.
// It returns the result, what it holds, and a channel that closes when the
// bucket has more (nil on error).
//
// A stored batch that cannot be served (its CRC does not match, or it does
// not project or decode) ends the result before it; when it is the first,
// the result is a *log.CorruptRecordError naming its offsets, with
// NextOffset past it, so that a consumer may skip it (see client.SkipCorrupt).
func (h *tabletHandler) fetchBucket(t catalog.Table, fb *stromv1.FetchBucket, cols []int, schema record.Schema, asJSON bool, budget, rowBudget int, scan *int) (*stromv1.FetchBucketResult, served, <-chan struct{}) {
	res := &stromv1.FetchBucketResult{Bucket: fb.Bucket, NextOffset: fb.Offset}
	r, err := h.replica(t, fb.Bucket)
	if err != nil {
		res.Error = rpc.Detail(err)
		return res, served{}, nil
	}
	offset := fb.Offset
	if offset == fetchEarliestOffset {
		offset = r.LogStartOffset()
		res.NextOffset = offset
	}
	start := offset
	advanced := r.Advanced()
	limit := int(fb.MaxBytes)
	if limit <= 0 {
		limit = defaultBucketMaxBytes
	}
	limit = max(min(limit, budget), 1)
	// Whole batches are served as read (the read's buffer is the reply's);
	// a projection or JSON copies what it serves out of the read, whose
	// buffer then goes back to the pool.
	asRead := cols == nil && !asJSON
	var rbuf *[]byte
	if !asRead {
		rbuf = fetchReadBufs.Get().(*[]byte)
		defer fetchReadBufs.Put(rbuf)
	}
	var out []byte
	n, count := 0, 0 // bytes and rows served
	for {
		var rr replica.ReadResult
		if rbuf != nil {
			step := limit
			if offset > start {
				step = min(limit, *scan) // a later read, within the response's
			}
			rr, err = r.ReadInto(*rbuf, offset, step)
			if cap(rr.Batches) > cap(*rbuf) {
				*rbuf = rr.Batches[:0] // the pool keeps the larger one
			}
		} else {
			rr, err = r.Read(offset, limit)
		}
		if err != nil {
			if offset > start {
				break // a later read of a projection: serve what was read
			}
			res.HighWatermark, res.LogStartOffset = rr.HighWatermark, rr.LogStartOffset
			h.fail(res, fb.Bucket, err)
			return res, served{}, nil
		}
		// The last read's: the high watermark only moves up, so it is at
		// or past every batch served.
		res.HighWatermark, res.LogStartOffset = rr.HighWatermark, rr.LogStartOffset
		*scan -= len(rr.Batches)
		full := false // the next batch does not fit: the next fetch starts at it
		for data := rr.Batches; len(data) > 0; {
			var b record.Batch
			if b, data, err = record.NextBatch(data); err != nil {
				// The log returns whole batches: this is not a batch to skip.
				res.Error = rpc.Detail(fmt.Errorf("bucket %d: stored batch at offset %d: %w", fb.Bucket, res.NextOffset, err))
				return res, served{r, count, n}, nil
			}
			if count := int(b.RecordCount()); asJSON && len(res.Rows)+count > rowBudget {
				if res.NextOffset == start && count > h.s.cfg.FetchJSONMaxRows {
					res.Error = rpc.Detail(fmt.Errorf("%w: bucket %d: the batch at offset %d holds %d rows, over fetch.json.max-rows (%d) for one JSON response; fetch it as Arrow batches or raise the key",
						rpc.ErrLimitExceeded, fb.Bucket, b.BaseOffset(), count, h.s.cfg.FetchJSONMaxRows))
					return res, served{}, nil
				}
				full = true
				break
			}
			if asRead {
				// b is the next batch of rr.Batches, served in place.
				out = rr.Batches[:len(out)+b.Size()]
				res.NextOffset = b.NextOffset()
				count += int(b.RecordCount())
				n += b.Size()
				continue
			}
			before := len(out)
			var rows []*structpb.Struct
			out, rows, err = serveBatch(out, b, t.Schema, cols, schema, asJSON, fb.Bucket)
			if err != nil {
				if res.NextOffset > start {
					full = true // serve what precedes it; the next fetch starts at it
					break
				}
				h.fail(res, fb.Bucket, &log.CorruptRecordError{Offset: b.BaseOffset(), NextOffset: b.NextOffset(), Err: err})
				return res, served{}, nil
			}
			if !asJSON && n > 0 && n+len(out)-before > limit {
				out = out[:before] // a later read's batch past the bucket's bytes
				full = true
				break
			}
			if before == 0 && len(out) > 0 {
				// The first batch projected: make room for the rest of the
				// bucket's bytes at its ratio, so that out does not grow by
				// doubling (zeroing each new buffer) batch after batch. A
				// guess: append grows it if the rest is short of room.
				rest := min(len(out)*len(data)/b.Size(), limit)
				out = slices.Grow(out, rest+rest/8)
			}
			res.Rows = append(res.Rows, rows...)
			res.NextOffset = b.NextOffset()
			count += int(b.RecordCount())
			if asJSON {
				n += b.Size()
			} else {
				n += len(out) - before
			}
		}
		// A projection serves a fraction of what it reads (1 of 20 columns:
		// a few KB of a MiB read): it reads on, limit bytes at a time, until
		// it has served projectedFetchMinBytes (or limit) or the pass has
		// read fetch.max.bytes of stored batches. Whole batches and JSON
		// rows are served from one read.
		if asRead || asJSON || full || len(rr.Batches) == 0 || n >= min(limit, projectedFetchMinBytes) || *scan <= 0 {
			break
		}
		offset = res.NextOffset
	}
	if !asJSON {
		res.Records = out
	}
	return res, served{r, count, n}, advanced
}

// fetchReadBufs holds the buffers fetchBucket reads the log into when it
// copies out what it serves (a projection, JSON rows): a read into a fresh
// buffer was mostly the zeroing of it. Each is at most fetch.max.bytes (the
// bound of one bucket's read), and there is one per fetch being served.
var fetchReadBufs = sync.Pool{New: func() any { return new([]byte) }}

// fail sets res's error; for offsets that cannot be served, NextOffset is
// where a consumer skipping them goes on.
func (h *tabletHandler) fail(res *stromv1.FetchBucketResult, bucket int32, err error) {
	var ce *log.CorruptRecordError
	if errors.As(err, &ce) {
		res.NextOffset = ce.NextOffset
		h.s.lg.Warn("fetch of a corrupt batch", "bucket", bucket, "offset", ce.Offset, "next_offset", ce.NextOffset, "err", ce.Err)
	}
	res.Error = rpc.Detail(fmt.Errorf("bucket %d: %w", bucket, err))
}

// serveBatch appends b (a stored batch of a table of schema ts) to out as
// the fetch asks: projected to cols (nil: all columns), and, with asJSON,
// as rows of schema (the projected one). It checks b's CRC whenever it
// reads b's contents (to project or decode them). On error (the batch's)
// out is returned unchanged.
func serveBatch(out []byte, b record.Batch, ts record.Schema, cols []int, schema record.Schema, asJSON bool, bucket int32) ([]byte, []*structpb.Struct, error) {
	start := len(out)
	var err error
	if cols != nil {
		out, b, err = record.ProjectBatch(out, b, ts, cols)
	} else if asJSON {
		err = b.Validate()
	}
	if err != nil {
		return out, nil, err
	}
	if !asJSON {
		if cols == nil {
			out = append(out, b...)
		}
		return out, nil, nil
	}
	rows, err := jsonRows(b, schema, bucket)
	return out[:start], rows, err // JSON rows are sent, not the batch
}

// jsonRows decodes b and returns its rows, with their metadata, as JSON
// objects.
func jsonRows(b record.Batch, schema record.Schema, bucket int32) ([]*structpb.Struct, error) {
	dec, err := record.DecodeArrowBatch(b, schema, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer dec.Release()
	rows := make([]*structpb.Struct, 0, dec.Len())
	var js []byte
	for i := 0; i < dec.Len(); i++ {
		js = record.AppendRowJSON(js[:0], schema, dec.Row(i))
		st, err := jsonToStruct(js)
		if err != nil {
			return nil, err
		}
		st.Fields["_offset"] = int64Value(b.BaseOffset() + int64(i))
		st.Fields["_timestamp"] = structpb.NewStringValue(time.UnixMilli(b.CommitTimestamp()).UTC().Format("2006-01-02T15:04:05.000Z"))
		st.Fields["_change_type"] = structpb.NewStringValue(dec.ChangeType(i).String())
		st.Fields["_bucket"] = structpb.NewNumberValue(float64(bucket))
		rows = append(rows, st)
	}
	return rows, nil
}

// jsonToStruct converts a JSON object to a Struct, keeping integers that a
// double cannot hold exactly as strings (as DESIGN.md's rows-as-JSON allows
// for BIGINT).
func jsonToStruct(js []byte) (*structpb.Struct, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	st := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(obj))}
	for k, v := range obj {
		st.Fields[k] = toValue(v)
	}
	return st, nil
}

func toValue(v any) *structpb.Value {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return int64Value(i)
		}
		f, _ := x.Float64()
		return structpb.NewNumberValue(f)
	case nil:
		return structpb.NewNullValue()
	case bool:
		return structpb.NewBoolValue(x)
	case string:
		return structpb.NewStringValue(x)
	}
	val, err := structpb.NewValue(v)
	if err != nil {
		return structpb.NewStringValue(fmt.Sprint(v))
	}
	return val
}

func int64Value(i int64) *structpb.Value {
	if i > 1<<53 || i < -(1<<53) {
		return structpb.NewStringValue(fmt.Sprint(i))
	}
	return structpb.NewNumberValue(float64(i))
}

// projection maps column names to indexes in table order; nil means all.
func projection(s record.Schema, names []string) ([]int, error) {
	if len(names) == 0 {
		return nil, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		if _, _, ok := s.Column(n); !ok {
			return nil, &record.InvalidError{Field: "columns", Reason: fmt.Sprintf("%q is not a column; columns are %s", n, strings.Join(s.ColumnNames(), ", "))}
		}
		want[n] = true
	}
	var cols []int
	for i, c := range s.Columns {
		if want[c.Name] {
			cols = append(cols, i)
		}
	}
	if len(cols) == len(s.Columns) {
		return nil, nil
	}
	return cols, nil
}

// waitAny waits until one of chs closes, ctx ends, stop closes (the node
// is stopping) or d passes; it returns nil only in the first case.
func waitAny(ctx context.Context, stop <-chan struct{}, chs []<-chan struct{}, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	done := make(chan struct{})
	defer close(done)
	woke := make(chan struct{}, 1)
	for _, ch := range chs {
		go func(ch <-chan struct{}) {
			select {
			case <-ch:
				select {
				case woke <- struct{}{}:
				default:
				}
			case <-done:
			}
		}(ch)
	}
	select {
	case <-woke:
		return nil
	case <-timer.C:
		return context.DeadlineExceeded
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errStopping
	}
}

// errStopping ends a wait because the node is stopping.
var errStopping = errors.New("server: node is stopping")

func (h *tabletHandler) ListOffsets(_ context.Context, req *connect.Request[stromv1.ListOffsetsRequest]) (*connect.Response[stromv1.ListOffsetsResponse], error) {
	m := req.Msg
	t, err := h.table(m.Database, m.Table)
	if err != nil {
		return nil, err
	}
	resp := &stromv1.ListOffsetsResponse{}
	for _, b := range bucketsOrAll(t, m.Buckets) {
		res := &stromv1.BucketOffset{Bucket: b}
		resp.Buckets = append(resp.Buckets, res)
		r, err := h.replica(t, b)
		if err == nil {
			res.Offset, err = bucketOffset(r, m.Spec, m.TimestampMs)
		}
		if err != nil {
			res.Error = rpc.Detail(err)
		}
	}
	return connect.NewResponse(resp), nil
}

// bucketOffset is ListOffsets's answer for one bucket: the first offset
// stored (the remote start once tiered), the high watermark, or the first
// offset of a batch committed at or after ts (ms), the high watermark when
// none is (where the next record will go). The Fluss listener's LIST_OFFSETS
// answers the same (flusslog.go).
func bucketOffset(r *replica.Replica, spec stromv1.OffsetSpec, ts int64) (int64, error) {
	switch spec {
	case stromv1.OffsetSpec_OFFSET_SPEC_EARLIEST:
		return r.LogStartOffset(), nil
	case stromv1.OffsetSpec_OFFSET_SPEC_LATEST, stromv1.OffsetSpec_OFFSET_SPEC_UNSPECIFIED:
		return r.Log().HighWatermark(), nil
	case stromv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP:
		off, found, err := r.Log().OffsetForTimestamp(ts)
		switch {
		case err != nil:
			return 0, err
		case !found:
			return r.Log().HighWatermark(), nil
		}
		return min(off, r.Log().HighWatermark()), nil
	}
	return 0, &record.InvalidError{Field: "spec", Reason: fmt.Sprintf("unknown offset spec %d", spec)}
}

func (h *tabletHandler) LimitScan(ctx context.Context, req *connect.Request[stromv1.LimitScanRequest]) (*connect.Response[stromv1.LimitScanResponse], error) {
	m := req.Msg
	t, err := h.table(m.Database, m.Table)
	if err != nil {
		return nil, err
	}
	if err := checkLimit(m.Limit); err != nil {
		return nil, err
	}
	if len(t.Schema.PrimaryKey) > 0 {
		return h.limitScanKv(ctx, req, t)
	}
	tail, from, err := h.logTail(t, m.Bucket, int(m.Limit))
	if err != nil {
		return nil, err
	}
	resp := &stromv1.LimitScanResponse{SchemaId: t.SchemaID}
	asJSON := wantsJSON(req.Header(), m.JsonRows)
	if !asJSON {
		resp.Records = tail
	}
	var jsonRowsSoFar []*structpb.Struct
	for data := tail; asJSON && len(data) > 0; {
		var b record.Batch
		if b, data, err = record.NextBatch(data); err != nil {
			return nil, err
		}
		rows, err := jsonRows(b, t.Schema, m.Bucket)
		if err != nil {
			return nil, err
		}
		jsonRowsSoFar = append(jsonRowsSoFar, rows...)
	}
	if asJSON {
		// Keep the last rows only: the first batch may start before from.
		rows := jsonRowsSoFar
		for len(rows) > 0 && int64(rows[0].Fields["_offset"].GetNumberValue()) < from {
			rows = rows[1:]
		}
		resp.Rows = rows
	}
	return connect.NewResponse(resp), nil
}

// maxLimit bounds a limit scan's limit, so one request cannot make the
// node read and hold a whole bucket.
const maxLimit = 100_000

// checkLimit checks a limit scan's limit.
func checkLimit(limit int32) error {
	if limit <= 0 || limit > maxLimit {
		return &record.InvalidError{Field: "limit", Reason: fmt.Sprintf("must be 1..%d, got %d", maxLimit, limit)}
	}
	return nil
}

// logTail returns the stored batches holding the last limit records below
// the high watermark of a log bucket this node leads (Fluss's
// Replica.limitLogScan), whole batches, so the first may start before
// from, the offset of the first record asked for. The Connect API's
// LimitScan and the Fluss listener's LIMIT_SCAN both read through it.
func (h *tabletHandler) logTail(t catalog.Table, bucket int32, limit int) ([]byte, int64, error) {
	r, err := h.replica(t, bucket)
	if err != nil {
		return nil, 0, err
	}
	hw := r.Log().HighWatermark()
	from := max(r.Log().LogStartOffset(), hw-int64(limit))
	var out []byte
	for off := from; off < hw; {
		rr, err := r.Read(off, defaultBucketMaxBytes)
		if err != nil {
			return nil, 0, err
		}
		if len(rr.Batches) == 0 {
			break
		}
		for data := rr.Batches; len(data) > 0; {
			var b record.Batch
			if b, data, err = record.NextBatch(data); err != nil {
				return nil, 0, err
			}
			off = b.NextOffset()
			if b.NextOffset() <= from {
				continue
			}
			out = append(out, b...)
		}
	}
	return out, from, nil
}

// InitWriter allocates through the coordinator: on another node, it is
// proxied there.
func (h *tabletHandler) InitWriter(ctx context.Context, req *connect.Request[stromv1.InitWriterRequest]) (*connect.Response[stromv1.InitWriterResponse], error) {
	return proxy(ctx, h.proxy, req, h.initWriter, tabletOf, stromv1connect.TabletServiceClient.InitWriter)
}

func (h *tabletHandler) initWriter(ctx context.Context, _ *connect.Request[stromv1.InitWriterRequest]) (*connect.Response[stromv1.InitWriterResponse], error) {
	id, err := h.s.coord.NewWriterID(ctx)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.InitWriterResponse{WriterId: id}), nil
}
