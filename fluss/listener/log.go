package listener

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/logbatch"
	"strom/fluss/protocol"
	"strom/raftmeta/catalog"
	"strom/record"
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
	protocol.FetchLog:    typed(hasLog, (*Server).fetchLog),
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
// 0.9.1's V1 layout (logbatch.ToFluss), with the high watermark and log
// start. Until min_bytes are there it waits for any of the buckets to
// advance, at most max_wait_ms (capped at 5 minutes), and then answers with
// what there is.
func (s *Server) fetchLog(ctx context.Context, _ int16, req *flusspb.FetchLogRequest) (proto.Message, error) {
	n := s.cfg.Log
	if id := req.GetFollowerServerId(); id != -1 {
		return nil, followerError(id)
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
	for {
		resp := &flusspb.FetchLogResponse{}
		total := 0
		raw := projectedReadFactor * maxBytes // what projected buckets may still read
		var wake []<-chan struct{}
		for _, ft := range tables {
			tr := &flusspb.PbFetchLogRespForTable{TableId: proto.Int64(ft.req.GetTableId())}
			resp.TablesResp = append(resp.TablesResp, tr)
			for _, br := range ft.req.BucketsReq {
				res, size, read, advanced := fetchBucket(n, ft, br, maxBytes-total, raw)
				tr.BucketsResp = append(tr.BucketsResp, res)
				total += size
				raw -= read
				if advanced != nil {
					wake = append(wake, advanced)
				}
			}
		}
		if total >= minBytes || wait <= 0 || !time.Now().Before(deadline) || len(wake) == 0 {
			return resp, nil
		}
		if !waitAny(ctx, n.Stopping(), wake, time.Until(deadline)) {
			return resp, nil // the wait ran out, the request ended or the node is stopping
		}
	}
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
// bytes read from the log (at least one read of the bucket's limit). It
// returns the result, the bytes of records in it, the bytes it read when
// projected, and a channel that closes when the bucket has more (nil on
// error).
func fetchBucket(n LogNode, ft fetchTable, br *flusspb.PbFetchLogReqForBucket, budget, raw int) (*flusspb.PbFetchLogRespForBucket, int, int, <-chan struct{}) {
	b := br.GetBucketId()
	res := &flusspb.PbFetchLogRespForBucket{BucketId: proto.Int32(b), PartitionId: br.PartitionId}
	fail := func(err error) (*flusspb.PbFetchLogRespForBucket, int, int, <-chan struct{}) {
		setBucketError(&res.ErrorCode, &res.ErrorMessage, err)
		res.Records = nil
		return res, 0, 0, nil
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
	res.Records = []byte{}
	var rr replica.ReadResult
	read := 0
	if ft.cols != nil {
		rr, res.Records, read, err = readProjected(res.Records, r, ft.t.Schema, ft.cols, offset, want,
			max(min(projectedReadFactor*want, raw), want), n.FetchMaxBytes())
	} else if rr, err = r.Read(offset, want); err == nil && len(rr.Batches) > 0 {
		if res.Records, err = logbatch.ToFluss(res.Records, rr.Batches); err != nil {
			err = fmt.Errorf("stored batch: %w", err)
		}
	}
	res.HighWatermark, res.LogStartOffset = proto.Int64(rr.HighWatermark), proto.Int64(rr.LogStartOffset)
	if err != nil {
		return fail(fmt.Errorf("bucket %d: %w", b, err))
	}
	return res, len(res.Records), read, advanced
}

// projectedReadFactor bounds the log bytes a projected fetch reads to fill
// its answer with pruned batches: at most this many times the bytes it may
// answer, per bucket and for the request. Fluss's server fills a projected
// fetch with pruned bytes (FileLogProjection), so a client asking for one
// column of a wide table gets as many rows as fit in max_fetch_bytes; the
// bound keeps one request from reading a whole log of very wide rows (a
// 1-of-100-columns fetch fills about a sixth of its limit).
const projectedReadFactor = 16

// readProjected reads whole batches from offset and appends them to dst
// pruned to cols, in 0.9.1's layout, until they fill want bytes (at least
// one batch), the high watermark is reached, or rawMax bytes have been
// read, each read at most chunkMax bytes and sized by the ratio of bytes
// read to bytes answered so far. It returns the first read's result (its
// offsets), dst and the bytes read. A batch that does not project ends the
// answer before it; when it is the first, its error (a
// *log.CorruptRecordError naming its offsets) is the bucket's. A read that
// fails after the first ends the answer too: the next fetch starts there
// and meets the error.
func readProjected(dst []byte, r *replica.Replica, s record.Schema, cols []int, offset int64, want, rawMax, chunkMax int) (replica.ReadResult, []byte, int, error) {
	first, err := r.Read(offset, want) // as much as an unprojected fetch reads
	if err != nil || len(first.Batches) == 0 {
		return first, dst, 0, err
	}
	p := projection{out: dst, start: len(dst), s: s, cols: cols, want: want}
	read := 0
	for data := first.Batches; ; {
		read += len(data)
		full, err := p.add(data)
		if err != nil {
			return first, dst, read, err
		}
		if full || len(p.out)-p.start >= want || read >= rawMax || p.next >= first.HighWatermark {
			return first, p.out, read, nil
		}
		size := int(int64(want-(len(p.out)-p.start)) * int64(read) / int64(max(len(p.out)-p.start, 1)))
		rr, err := r.Read(p.next, max(min(size, rawMax-read, chunkMax), 1))
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
				var out []byte
				if out, err = logbatch.ToFluss(p.out, p.scratch); err == nil {
					if len(p.out) > p.start && len(out)-p.start > p.want {
						return true, nil // the next fetch starts at it
					}
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
