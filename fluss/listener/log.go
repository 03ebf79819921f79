package listener

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/logbatch"
	"strom/fluss/protocol"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/rpc"
	"strom/tablet/log"
	"strom/tablet/replica"
)

// LogNode is what the log keys (INIT_WRITER, PRODUCE_LOG, FETCH_LOG,
// LIST_OFFSETS) need of the node. The server implements it over the code its
// Connect API's TabletService runs, so both APIs write and read the same
// logs the same way.
type LogNode interface {
	// TableByID returns the table with the given id; an error wrapping
	// catalog.ErrTableNotExist when there is none.
	TableByID(id int64) (catalog.Table, error)
	// Leader returns the bucket's replica when this node leads it; an error
	// wrapping replica.ErrNotLeader or replica.ErrUnknownBucket otherwise.
	Leader(t catalog.Table, bucket int32) (*replica.Replica, error)
	// AppendLog checks V2 batches against t's schema as the Connect API's
	// ProduceLog does, then calls inTurn (its error fails the write,
	// unappended) and appends them to the bucket with acks (-1, 0, 1). It
	// returns once they are in the log (or refused); the write's
	// acknowledgement is the Pending's Wait.
	AppendLog(ctx context.Context, t catalog.Table, bucket int32, batches []byte, acks int, inTurn func(context.Context) error) (Pending, error)
	// Offset answers ListOffsets for one bucket this node leads: the
	// earliest offset, the latest (the high watermark), or the first at or
	// after ts (ms), as the Connect API's ListOffsets does.
	Offset(t catalog.Table, bucket int32, spec OffsetSpec, ts int64) (int64, error)
	// NewWriterID allocates an idempotent writer id, as InitWriter does.
	NewWriterID(ctx context.Context) (int64, error)
	// FetchMaxBytes bounds one fetch response (fetch.max.bytes).
	FetchMaxBytes() int
	// Stopping is closed when the node stops: long polls end then.
	Stopping() <-chan struct{}
}

// logHandlers are the log keys' handlers.
var logHandlers = map[protocol.APIKey]handler{
	protocol.InitWriter:  typed(hasLog, (*Server).initWriter),
	protocol.ProduceLog:  typed(hasLog, (*Server).produceLog),
	protocol.FetchLog:    inParts(hasLog, (*Server).fetchLog),
	protocol.ListOffsets: typed(hasLog, (*Server).listOffsets),
}

func hasLog(s *Server) bool { return s.cfg.Log != nil }

// setBucketError puts err's Fluss code and message (errorCode) into a
// bucket's result.
func setBucketError(code **int32, msg **string, err error) {
	c, m := errorCode(err)
	*code, *msg = proto.Int32(int32(c)), proto.String(m)
}

// Limits of the log keys.
const (
	// fetchEarliest as a fetch offset means the log start
	// (FetchParams.FETCH_FROM_EARLIEST_OFFSET).
	fetchEarliest = -2
	// maxFetchWait caps max_wait_ms, as the Connect API's FetchLog does.
	maxFetchWait = 5 * time.Minute
	// defaultWriteTimeout is the timeout when timeout_ms is not positive.
	defaultWriteTimeout = 30 * time.Second
)

// OffsetSpec is the offset LIST_OFFSETS asks for.
type OffsetSpec int

// The offsets LIST_OFFSETS answers.
const (
	OffsetEarliest OffsetSpec = iota
	OffsetLatest
	OffsetTimestamp
)

// Fluss's ListOffsetsParam offset types.
const (
	listEarliest  = 0
	listLatest    = 1
	listTimestamp = 2
)

// initWriter is INIT_WRITER: a writer id from the same allocator the
// Connect API's InitWriter uses (the coordinator's, proxied there).
func (s *Server) initWriter(ctx context.Context, _ int16, _ *flusspb.InitWriterRequest) (proto.Message, error) {
	id, err := s.cfg.Log.NewWriterID(ctx)
	if err != nil {
		return nil, err
	}
	return &flusspb.InitWriterResponse{WriterId: proto.Int64(id)}, nil
}

// logTable resolves a log key's table id.
func logTable(n LogNode, id int64) (catalog.Table, error) {
	t, err := n.TableByID(id)
	if err != nil {
		return t, fmt.Errorf("table id %d: %w", id, err)
	}
	return t, nil
}

// errPartitioned refuses a partition id: Strom's Fluss listener serves
// tables without partitions.
var errPartitioned = &Error{protocol.PartitionNotExists, "Strom's Fluss listener does not serve partitions yet (partition_id)"}

// bucketError is what one bucket of a request answers before the node is
// asked (nil: ask it): a partition id (errPartitioned); a bucket id outside
// the table's 0..n-1, UNKNOWN_TABLE_OR_BUCKET_EXCEPTION, as Fluss's
// ReplicaManager answers a bucket no server hosts; and, for a write (seen
// not nil: the buckets so far), a bucket the request names twice.
func bucketError(t catalog.Table, partition *int64, b int32, seen map[int32]bool) error {
	switch {
	case partition != nil:
		return errPartitioned
	case b < 0 || b >= t.Registration.BucketCount:
		return &Error{protocol.UnknownTableOrBucketException, fmt.Sprintf("bucket %d does not exist: %s.%s has buckets 0..%d",
			b, t.Database, t.Name, t.Registration.BucketCount-1)}
	case seen == nil:
		return nil
	case seen[b]:
		return &record.InvalidError{Field: "buckets_req", Reason: fmt.Sprintf("bucket %d appears twice", b)}
	}
	seen[b] = true
	return nil
}

// produceLog is PRODUCE_LOG: each bucket's batches, Fluss 0.9.1's V0 or V1,
// become Strom's V2 (logbatch.ToStrom, checking each CRC) and go through the
// node's AppendLog, the Connect API's produce path; buckets are written
// concurrently, each answered with its base offset or its error. The
// appends start once the connection's earlier write requests have done
// theirs (writeTurn.write), so one writer's pipelined requests reach the
// log in the order they were sent; their acks waits overlap.
func (s *Server) produceLog(ctx context.Context, _ int16, req *flusspb.ProduceLogRequest) (proto.Message, error) {
	n := s.cfg.Log
	acks := int(req.GetAcks())
	if acks != -1 && acks != 0 && acks != 1 {
		return nil, &Error{protocol.InvalidRequiredAcks, fmt.Sprintf("acks must be -1 (all in-sync replicas), 0 or 1, got %d", acks)}
	}
	t, err := logTable(n, req.GetTableId())
	if err != nil {
		return nil, err
	}
	if len(t.Schema.PrimaryKey) > 0 {
		return nil, &record.InvalidError{Field: "table_id", Reason: fmt.Sprintf("%s.%s is a primary-key table: write it with PUT_KV", t.Database, t.Name)}
	}
	timeout := defaultWriteTimeout
	if ms := req.GetTimeoutMs(); ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	resp := &flusspb.ProduceLogResponse{BucketsResp: make([]*flusspb.PbProduceLogRespForBucket, len(req.BucketsReq))}
	type write struct {
		res    *flusspb.PbProduceLogRespForBucket
		bucket int32
		v2     []byte
	}
	var writes []write
	seen := map[int32]bool{}
	for i, br := range req.BucketsReq {
		b := br.GetBucketId()
		res := &flusspb.PbProduceLogRespForBucket{BucketId: proto.Int32(b), PartitionId: br.PartitionId}
		resp.BucketsResp[i] = res
		err := bucketError(t, br.PartitionId, b, seen)
		var v2 []byte
		if err == nil {
			v2, err = toStrom(b, br.GetRecords())
		}
		if err != nil {
			setBucketError(&res.ErrorCode, &res.ErrorMessage, err)
			continue
		}
		writes = append(writes, write{res, b, v2})
	}
	turnOf(ctx).write(ctx, len(writes), func(i int, inTurn func(context.Context) error) (Pending, error) {
		return n.AppendLog(ctx, t, writes[i].bucket, writes[i].v2, acks, inTurn)
	}, func(i int, info log.AppendInfo, err error) {
		if w := writes[i]; err != nil {
			setBucketError(&w.res.ErrorCode, &w.res.ErrorMessage, err)
		} else {
			w.res.BaseOffset = proto.Int64(info.FirstOffset)
		}
	})
	return resp, nil
}

// toStrom converts one bucket's batches to Strom's V2.
func toStrom(bucket int32, records []byte) ([]byte, error) {
	if len(records) == 0 {
		return nil, &record.InvalidError{Field: "records", Reason: fmt.Sprintf("bucket %d: no batches", bucket)}
	}
	v2, err := logbatch.ToStrom(nil, records)
	if err != nil {
		// Fluss's server refuses a batch whose CRC does not match so
		// (LogTablet.analyzeAndValidateRecords).
		return nil, &Error{protocol.CorruptRecordException, fmt.Sprintf("bucket %d: %v", bucket, err)}
	}
	return v2, nil
}

// followerError refuses FETCH_LOG and LIST_OFFSETS from a Fluss tablet
// server: Strom's replicas replicate over Strom's own protocol.
func followerError(id int32) error {
	return &Error{protocol.ServerNotExistException, fmt.Sprintf("follower_server_id %d: only clients (-1) fetch over the Fluss protocol; Strom's replicas replicate over Strom's own", id)}
}

// fetchTable is one table of a fetch, resolved once for all its passes.
type fetchTable struct {
	req  *flusspb.PbFetchLogReqForTable
	t    catalog.Table
	cols []int // nil: every column
	err  error // answers each of its buckets
}

// fetchLog is FETCH_LOG: for each bucket, whole batches from its fetch
// offset (-2: the log start) up to its max_fetch_bytes and the request's
// max_bytes (capped by fetch.max.bytes), pruned to projected_fields by
// record.ProjectBatch when projection is pushed down (no decoding), in
// 0.9.1's V1 layout (logbatch), with the high watermark and log start.
// Until min_bytes are there it waits for any of the buckets to advance, at
// most max_wait_ms (capped at 5 minutes), and then answers with what there
// is. The answer goes out in parts (fetchAnswer.encode): the records from
// the pooled buffers they were read or pruned into, given back once
// written.
func (s *Server) fetchLog(ctx context.Context, _ int16, req *flusspb.FetchLogRequest) (parts, error) {
	n := s.cfg.Log
	if id := req.GetFollowerServerId(); id != -1 {
		return parts{}, followerError(id)
	}
	maxBytes := n.FetchMaxBytes()
	if m := int(req.GetMaxBytes()); m > 0 {
		maxBytes = min(maxBytes, m)
	}
	minBytes := max(int(req.GetMinBytes()), 1)
	wait := min(time.Duration(req.GetMaxWaitMs())*time.Millisecond, maxFetchWait)
	deadline := time.Now().Add(wait)

	tables := make([]fetchTable, len(req.TablesReq))
	for i, tr := range req.TablesReq {
		ft := &tables[i]
		ft.req = tr
		if ft.t, ft.err = logTable(n, tr.GetTableId()); ft.err == nil && tr.GetProjectionPushdownEnabled() {
			ft.cols, ft.err = projectedFields(ft.t, tr.ProjectedFields)
		}
	}
	scratch := scratchBufs.Get().(*[]byte) // one pruned batch in Strom's layout, for every bucket
	defer scratchBufs.Put(scratch)
	for {
		a := &fetchAnswer{}
		total := 0
		raw := projectedReadFactor * maxBytes // what projected buckets may still read
		var wake []<-chan struct{}
		for _, ft := range tables {
			at := answerTable{id: ft.req.GetTableId()}
			for _, br := range ft.req.BucketsReq {
				ab, read, advanced := fetchBucket(n, ft, br, maxBytes-total, raw, a, scratch)
				at.buckets = append(at.buckets, ab)
				total += ab.size
				raw -= read
				if advanced != nil {
					wake = append(wake, advanced)
				}
			}
			a.tables = append(a.tables, at)
		}
		if total >= minBytes || wait <= 0 || !time.Now().Before(deadline) || len(wake) == 0 {
			return a.encode()
		}
		if !waitAny(ctx, n.Stopping(), wake, time.Until(deadline)) {
			return a.encode() // the wait ran out, the request ended or the node is stopping
		}
		a.release() // read again: this pass's answer is not sent
	}
}

// scratchBufs hold the projected fetches' pruned batches, one at a time
// (projection.scratch), from fetch to fetch.
var scratchBufs = sync.Pool{New: func() any { return new([]byte) }}

// fetchAnswer is a FETCH_LOG answer being put together: its tables'
// buckets, and the buffers lent (rpc.GetBuffer) that hold their records,
// to give back once the answer is written.
type fetchAnswer struct {
	tables []answerTable
	lent   [][]byte
}

type answerTable struct {
	id      int64
	buckets []answerBucket
}

// answerBucket is one bucket's answer: every field but records in res, the
// records in parts (nil: not set, with an error; empty: set and empty),
// size bytes in all.
type answerBucket struct {
	res     *flusspb.PbFetchLogRespForBucket
	records [][]byte
	size    int
}

// lend returns a buffer of n bytes (contents undefined) the answer gives
// back once written.
func (a *fetchAnswer) lend(n int) []byte {
	b := rpc.GetBuffer(n)
	a.lent = append(a.lent, b)
	return b
}

// release gives back the lent buffers; nothing may use the records after.
func (a *fetchAnswer) release() {
	for _, b := range a.lent {
		rpc.PutBuffer(b)
	}
	a.lent = nil
}

// encode returns the answer as the FetchLogResponse that proto.Marshal
// encodes (fields in number order; records, a bucket's last field, last),
// in parts that leave the records where they are, and release to give
// back the buffers once the parts are written.
func (a *fetchAnswer) encode() (parts, error) {
	// Sizes first: each message's length precedes it.
	heads := make([]int, 0, 8)
	tableLens := make([]int, len(a.tables))
	metaLen := 0
	for i, at := range a.tables {
		n := protowire.SizeTag(1) + protowire.SizeVarint(uint64(at.id))
		for _, ab := range at.buckets {
			h := proto.Size(ab.res)
			heads = append(heads, h)
			n += protowire.SizeTag(2) + protowire.SizeBytes(bucketLen(h, ab))
			metaLen -= ab.size // the records are not in meta
		}
		tableLens[i] = n
		metaLen += protowire.SizeTag(1) + protowire.SizeVarint(uint64(n)) + n
	}
	// Everything but the records in one buffer, cut where records go.
	meta := make([]byte, 0, metaLen)
	var out net.Buffers
	from, k := 0, 0
	for i, at := range a.tables {
		meta = protowire.AppendTag(meta, 1, protowire.BytesType)
		meta = protowire.AppendVarint(meta, uint64(tableLens[i]))
		meta = protowire.AppendTag(meta, 1, protowire.VarintType)
		meta = protowire.AppendVarint(meta, uint64(at.id))
		for _, ab := range at.buckets {
			meta = protowire.AppendTag(meta, 2, protowire.BytesType)
			meta = protowire.AppendVarint(meta, uint64(bucketLen(heads[k], ab)))
			k++
			var err error
			if meta, err = (proto.MarshalOptions{}).MarshalAppend(meta, ab.res); err != nil {
				a.release()
				return parts{}, fmt.Errorf("marshal a FETCH_LOG bucket: %w", err)
			}
			if ab.records != nil {
				meta = protowire.AppendTag(meta, 8, protowire.BytesType)
				meta = protowire.AppendVarint(meta, uint64(ab.size))
				out = append(out, meta[from:])
				out = append(out, ab.records...)
				from = len(meta)
			}
		}
	}
	if len(meta) != metaLen {
		panic(fmt.Sprintf("listener: a FETCH_LOG answer's fields are %d bytes, sized %d", len(meta), metaLen))
	}
	// meta never grew past its capacity: the parts cut from it stay its.
	if from < len(meta) {
		out = append(out, meta[from:])
	}
	return parts{bufs: out, release: a.release}, nil
}

// bucketLen is the length of a bucket's message whose fields but records
// are head bytes.
func bucketLen(head int, ab answerBucket) int {
	if ab.records == nil {
		return head
	}
	return head + protowire.SizeTag(8) + protowire.SizeBytes(ab.size)
}

// projectedFields checks a fetch's projected_fields: column indexes of t,
// strictly increasing (the 0.9.1 client sends them in order and puts its
// own order back). All columns is no projection (nil).
func projectedFields(t catalog.Table, fields []int32) ([]int, error) {
	cols := make([]int, len(fields))
	for i, f := range fields {
		cols[i] = int(f)
	}
	if err := t.Schema.CheckProjection(cols); err != nil {
		return nil, &Error{protocol.InvalidColumnProjection, fmt.Sprintf("projected_fields %v: %v", fields, err)}
	}
	for i := 1; i < len(cols); i++ {
		if cols[i] <= cols[i-1] {
			return nil, &Error{protocol.InvalidColumnProjection, fmt.Sprintf("projected_fields must be strictly increasing column indexes, got %v", fields)}
		}
	}
	if len(cols) == len(t.Schema.Columns) {
		return nil, nil
	}
	return cols, nil
}

// fetchBucket reads one bucket within budget bytes (of what it answers;
// with projection, of the pruned batches) and, when projected, within raw
// bytes read from the log (at least one read of the bucket's limit), into
// buffers a lends. It returns the bucket's answer, the bytes it read when
// projected, and a channel that closes when the bucket has more (nil on
// error). scratch is the projection's, kept from bucket to bucket.
func fetchBucket(n LogNode, ft fetchTable, br *flusspb.PbFetchLogReqForBucket, budget, raw int, a *fetchAnswer, scratch *[]byte) (answerBucket, int, <-chan struct{}) {
	b := br.GetBucketId()
	ab := answerBucket{res: &flusspb.PbFetchLogRespForBucket{BucketId: proto.Int32(b), PartitionId: br.PartitionId}}
	fail := func(err error) (answerBucket, int, <-chan struct{}) {
		setBucketError(&ab.res.ErrorCode, &ab.res.ErrorMessage, err)
		ab.records, ab.size = nil, 0
		return ab, 0, nil
	}
	if ft.err != nil {
		return fail(ft.err)
	}
	if err := bucketError(ft.t, br.PartitionId, b, nil); err != nil {
		return fail(err)
	}
	r, err := n.Leader(ft.t, b)
	if err != nil {
		return fail(err)
	}
	offset := br.GetFetchOffset()
	if offset == fetchEarliest {
		offset = r.LogStartOffset()
	}
	advanced := r.Advanced()
	limit := int(br.GetMaxFetchBytes())
	if limit <= 0 {
		limit = budget
	}
	want := max(min(limit, budget), 1)
	// records is always set on success, empty when there is nothing to
	// read, as Fluss's server sets it: the 0.9.1 client reads it without
	// asking whether it is there (CommonRpcMessageUtils.
	// getFetchLogResultForBucket), and the exception an unset field throws
	// drops the whole answer, every bucket's records with it, unseen.
	ab.records = [][]byte{}
	var rr replica.ReadResult
	read := 0
	if ft.cols != nil {
		var out []byte
		rr, out, read, err = readProjected(a.lend(want)[:0], r, ft.t.Schema, ft.cols, offset, want,
			max(min(projectedReadFactor*want, raw), want), min(max(want, projectedReadChunk), n.FetchMaxBytes()), scratch)
		if len(out) > 0 {
			ab.records, ab.size = append(ab.records, out), len(out)
		}
	} else if rr, err = r.ReadInto(a.lend(want), offset, want); err == nil && len(rr.Batches) > 0 {
		// The read's buffer is the answer's (lent, or fresh from the
		// log): its batches become V1 where they are.
		if ab.records, ab.size, err = logbatch.ToFlussInPlace(rr.Batches, ab.records); err != nil {
			err = fmt.Errorf("stored batch: %w", err)
		}
	}
	ab.res.HighWatermark, ab.res.LogStartOffset = proto.Int64(rr.HighWatermark), proto.Int64(rr.LogStartOffset)
	if err != nil {
		return fail(fmt.Errorf("bucket %d: %w", b, err))
	}
	return ab, read, advanced
}

// projectedReadFactor bounds the log bytes a projected fetch reads to fill
// its answer with pruned batches: at most this many times the bytes it may
// answer, per bucket and for the request. Fluss's server fills a projected
// fetch with pruned bytes (FileLogProjection), so a client asking for one
// column of a wide table gets as many rows as fit in max_fetch_bytes; the
// bound keeps one request from reading a whole log of very wide rows (a
// 1-of-100-columns fetch fills about a sixth of its limit).
const projectedReadFactor = 16

// projectedReadChunk bounds each of a projected fetch's reads after its
// first (of the bucket's limit): the reads go into pooled buffers, and a
// read sized to fill the rest of the answer at once (up to fetch.max.bytes,
// for one column of many) took a buffer of that size from the pool, more
// than the log held, in a size class few reads use, so the pool seldom had
// one and the fetch allocated it afresh.
const projectedReadChunk = 1 << 20

// readProjected reads whole batches from offset and appends them to dst
// pruned to cols, in 0.9.1's layout, until they fill want bytes (at least
// one batch), the high watermark is reached, or rawMax bytes have been
// read, each read at most chunkMax bytes and sized by the ratio of bytes
// read to bytes answered so far, each into a pooled buffer given back once
// pruned out of. It returns the first read's result (its offsets; its
// Batches are gone), dst and the bytes read; scratch is the pruning's,
// kept from call to call. A batch that does not project ends the
// answer before it; when it is the first, its error (a
// *log.CorruptRecordError naming its offsets) is the bucket's. A read that
// fails after the first ends the answer too: the next fetch starts there
// and meets the error.
func readProjected(dst []byte, r *replica.Replica, s record.Schema, cols []int, offset int64, want, rawMax, chunkMax int, scratch *[]byte) (replica.ReadResult, []byte, int, error) {
	// Each read goes into a pooled buffer, given back once pruned out of:
	// a read into a fresh buffer was mostly the zeroing of it.
	var lent []byte
	defer func() { rpc.PutBuffer(lent) }()
	readAt := func(offset int64, n int) (replica.ReadResult, error) {
		rpc.PutBuffer(lent)
		lent = rpc.GetBuffer(n)
		return r.ReadInto(lent, offset, n)
	}
	first, err := readAt(offset, want) // as much as an unprojected fetch reads
	if err != nil || len(first.Batches) == 0 {
		return first, dst, 0, err
	}
	p := projection{out: dst, start: len(dst), s: s, cols: cols, want: want, scratch: *scratch}
	defer func() { *scratch = p.scratch }()
	read := 0
	data := first.Batches
	first.Batches = nil // in lent, given back
	for {
		read += len(data)
		full, err := p.add(data)
		if err != nil {
			return first, dst, read, err
		}
		if full || len(p.out)-p.start >= want || read >= rawMax || p.next >= first.HighWatermark {
			return first, p.out, read, nil
		}
		size := int(int64(want-(len(p.out)-p.start)) * int64(read) / int64(max(len(p.out)-p.start, 1)))
		rr, err := readAt(p.next, max(min(size, rawMax-read, chunkMax), 1))
		if err != nil || len(rr.Batches) == 0 {
			return first, p.out, read, nil
		}
		data = rr.Batches
	}
}

// projection is the answer readProjected builds: out[start:] are the
// pruned batches in 0.9.1's layout, next the offset after the last.
type projection struct {
	out     []byte
	start   int
	s       record.Schema
	cols    []int
	want    int
	next    int64
	scratch []byte // one pruned batch in Strom's layout
}

// add prunes each stored batch to cols (record.ProjectBatch: the columns'
// buffers copied still compressed, after the batch's CRC is checked),
// converts it (logbatch.ToFluss) and appends it while the answer stays
// within want bytes (its first batch always goes in); full reports that a
// batch did not fit. A batch that does not project ends the answer before
// it (full); in an empty answer its error is returned.
func (p *projection) add(stored []byte) (full bool, err error) {
	for data := stored; len(data) > 0; {
		b, rest, err := record.NextBatch(data)
		if err == nil {
			if p.scratch, _, err = record.ProjectBatch(p.scratch[:0], b, p.s, p.cols); err == nil {
				// Measured before it is converted onto the answer: one that
				// does not fit would grow the answer past its buffer, and
				// be cut off again.
				if len(p.out) > p.start && len(p.out)-p.start+logbatch.FlussLen(p.scratch) > p.want {
					return true, nil // the next fetch starts at it
				}
				var out []byte
				if out, err = logbatch.ToFluss(p.out, p.scratch); err == nil {
					p.out, data, p.next = out, rest, b.NextOffset()
					continue
				}
			}
			err = &log.CorruptRecordError{Offset: b.BaseOffset(), NextOffset: b.NextOffset(), Err: err}
		}
		if len(p.out) > p.start {
			return true, nil // serve what precedes it; the next fetch starts at it
		}
		return false, err
	}
	return false, nil
}

// waitAny waits until one of chs closes (true), or ctx ends, stop closes or
// d passes (false).
func waitAny(ctx context.Context, stop <-chan struct{}, chs []<-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	cases := make([]reflect.SelectCase, 0, len(chs)+3)
	for _, c := range []<-chan struct{}{ctx.Done(), stop} {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
	for _, c := range chs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen >= 3
}

// listOffsets is LIST_OFFSETS: per bucket the earliest offset (the log
// start, remote once tiered), the latest (the high watermark), or the first
// offset at or after startTimestamp, as the Connect API's ListOffsets
// answers them (LogNode.Offset).
func (s *Server) listOffsets(_ context.Context, _ int16, req *flusspb.ListOffsetsRequest) (proto.Message, error) {
	n := s.cfg.Log
	if id := req.GetFollowerServerId(); id != -1 {
		return nil, followerError(id)
	}
	var spec OffsetSpec
	switch req.GetOffsetType() {
	case listEarliest:
		spec = OffsetEarliest
	case listLatest:
		spec = OffsetLatest
	case listTimestamp:
		if req.StartTimestamp == nil {
			return nil, &Error{protocol.InvalidTimestampException, "offset_type 2 (timestamp) needs startTimestamp"}
		}
		spec = OffsetTimestamp
	default:
		return nil, &Error{protocol.UnknownServerError, fmt.Sprintf("offset_type must be 0 (earliest), 1 (latest) or 2 (timestamp), got %d", req.GetOffsetType())}
	}
	t, err := logTable(n, req.GetTableId())
	if err != nil {
		return nil, err
	}
	resp := &flusspb.ListOffsetsResponse{}
	for _, b := range req.BucketId {
		res := &flusspb.PbListOffsetsRespForBucket{BucketId: proto.Int32(b)}
		resp.BucketsResp = append(resp.BucketsResp, res)
		if err := bucketError(t, req.PartitionId, b, nil); err != nil {
			setBucketError(&res.ErrorCode, &res.ErrorMessage, err)
			continue
		}
		off, err := n.Offset(t, b, spec, req.GetStartTimestamp())
		if err != nil {
			setBucketError(&res.ErrorCode, &res.ErrorMessage, err)
			continue
		}
		res.Offset = proto.Int64(off)
	}
	return resp, nil
}
