package listener

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/logbatch"
	"strom/fluss/protocol"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/tablet/log"
)

// KVNode is what the primary-key keys (PUT_KV, LOOKUP, PREFIX_LOOKUP,
// LIMIT_SCAN) need of the node. The server implements it over the code its
// Connect API's TabletService runs (PutKv, Lookup, PrefixLookup,
// LimitScan), so a primary-key table written through either API reads the
// same through both. Batches, keys and values are Fluss's formats, which
// are Strom's (FORMATS.md §2, §3.2, §5): nothing is converted.
type KVNode interface {
	// TableByID returns the table with the given id; an error wrapping
	// catalog.ErrTableNotExist when there is none.
	TableByID(id int64) (catalog.Table, error)
	// PutKv writes one bucket's KV batch (FORMATS.md §5) as the Connect
	// API's PutKv does: magic, CRC and framing (record.ErrCorruptBatch),
	// schema id, the idempotent writer's sequence, targets (sorted column
	// indexes of a partial update; nil: whole rows), then acks (-1, 0, 1).
	// It calls inTurn after its checks and before the write (its error
	// fails the write, unwritten) and returns once the changelog batch is
	// in the log (or refused); the acknowledgement is the Pending's Wait.
	PutKv(ctx context.Context, t catalog.Table, bucket int32, batch []byte, targets []int, acks int, inTurn func(context.Context) error) (Pending, error)
	// NewRead returns the reader of one LOOKUP or PREFIX_LOOKUP request.
	// The request's buckets are read through it one after another and
	// share what the node checks once per request (its metadata read
	// barrier, as the Connect API's Lookup shares one between a request's
	// buckets); it is not safe for concurrent use.
	NewRead() KVRead
	// LookupMaxBytes bounds one lookup's values (kv.lookup.max-bytes).
	LookupMaxBytes() int
	// PrefixLookupMaxBytes bounds one prefix lookup's values
	// (kv.prefix-lookup.max-bytes).
	PrefixLookupMaxBytes() int
	// LimitScanKv returns the values of the first limit rows of a
	// primary-key bucket in key order; LimitScanLog the stored (V2) batches
	// holding the last limit records of a log bucket below its high
	// watermark. Both check limit as the Connect API's LimitScan does.
	LimitScanKv(ctx context.Context, t catalog.Table, bucket int32, limit int32) ([][]byte, error)
	LimitScanLog(ctx context.Context, t catalog.Table, bucket int32, limit int32) ([]byte, error)
}

// KVRead reads the buckets of one LOOKUP or PREFIX_LOOKUP request
// (KVNode.NewRead).
type KVRead interface {
	// Lookup returns the KV value (schema id int16 LE + compacted row) of
	// each key (a compacted primary key) in a bucket this node leads, nil
	// for an absent key, the values of one request sharing *budget bytes
	// (from LookupMaxBytes; past it: an error wrapping rpc.ErrLimitExceeded).
	Lookup(ctx context.Context, t catalog.Table, bucket int32, keys [][]byte, budget *int) ([][]byte, error)
	// PrefixLookup returns, per prefix (a compacted bucket key, a prefix of
	// the primary key), the values of its rows in key order, the values of
	// one request sharing *budget bytes (from PrefixLookupMaxBytes).
	PrefixLookup(ctx context.Context, t catalog.Table, bucket int32, prefixes [][]byte, budget *int) ([][][]byte, error)
}

// kvHandlers are the primary-key keys' handlers.
var kvHandlers = map[protocol.APIKey]handler{
	protocol.PutKv:        typed(hasKV, (*Server).putKv),
	protocol.Lookup:       typed(hasKV, (*Server).lookup),
	protocol.PrefixLookup: typed(hasKV, (*Server).prefixLookup),
	protocol.LimitScan:    typed(hasKV, (*Server).limitScan),
}

func hasKV(s *Server) bool { return s.cfg.KV != nil }

// kvTable resolves a primary-key key's table id and checks, for version 0
// of PUT_KV, LOOKUP and PREFIX_LOOKUP, what Fluss 0.9.1's
// ReplicaManager.validateClientVersionForPkTable checks: a version-0 client
// encodes the keys of a lake table with kv format version 2 and a bucket
// key other than the primary key the lake's way, which is not what Strom
// stores, so it is refused UNSUPPORTED_VERSION.
func kvTable(n KVNode, id int64, version int16) (catalog.Table, error) {
	t, err := n.TableByID(id)
	if err != nil {
		return t, fmt.Errorf("table id %d: %w", id, err)
	}
	if len(t.Schema.PrimaryKey) == 0 {
		return t, &Error{protocol.NonPrimaryKeyTableException, fmt.Sprintf("%s.%s is a log table, not a primary-key table", t.Database, t.Name)}
	}
	if version == 0 && lakeKeyed(t) {
		return t, &Error{protocol.UnsupportedVersion, fmt.Sprintf("version 0 is not supported for %s.%s: it uses kv format version 2 with a bucket key of its own; use a Fluss client that sends version 1", t.Database, t.Name)}
	}
	return t, nil
}

// lakeKeyed reports whether t is a lake table with kv format version 2
// whose bucket key is not its physical primary key.
func lakeKeyed(t catalog.Table) bool {
	p := t.Registration.Properties
	if p[record.OptDatalakeFormat] == "" {
		return false
	}
	if v, err := strconv.Atoi(p[record.OptKvFormatVersion]); err != nil || v != 2 {
		return false
	}
	var physical []string
	for _, k := range t.Schema.PrimaryKey {
		if !slices.Contains(t.Registration.PartitionKeys, k) {
			physical = append(physical, k)
		}
	}
	return !slices.Equal(t.Registration.BucketKeys, physical)
}

// writeTimeout is a write's timeout_ms as a duration (30 s when not
// positive).
func writeTimeout(ms int32) time.Duration {
	if ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return defaultWriteTimeout
}

// checkAcks checks a write's acks.
func checkAcks(acks int) error {
	if acks != -1 && acks != 0 && acks != 1 {
		return &Error{protocol.InvalidRequiredAcks, fmt.Sprintf("acks must be -1 (all in-sync replicas), 0 or 1, got %d", acks)}
	}
	return nil
}

// targetColumns checks PUT_KV's target_columns (column indexes of a
// partial update; none: whole rows) and returns them sorted. That they
// hold the primary key is the KV tablet's check (INVALID_TARGET_COLUMN).
func targetColumns(t catalog.Table, cols []int32) ([]int, error) {
	if len(cols) == 0 {
		return nil, nil
	}
	out := make([]int, len(cols))
	for i, c := range cols {
		if c < 0 || int(c) >= len(t.Schema.Columns) {
			return nil, &Error{protocol.InvalidTargetColumn, fmt.Sprintf("target_columns[%d] = %d is not a column index of %s.%s (0..%d: %s)",
				i, c, t.Database, t.Name, len(t.Schema.Columns)-1, strings.Join(t.Schema.ColumnNames(), ", "))}
		}
		out[i] = int(c)
	}
	slices.Sort(out)
	for i := 1; i < len(out); i++ {
		if out[i] == out[i-1] {
			return nil, &Error{protocol.InvalidTargetColumn, fmt.Sprintf("target_columns names column %d twice", out[i])}
		}
	}
	return out, nil
}

// Fluss's PUT_KV agg_mode values (MergeMode).
const (
	aggModeAggregate = 0 // through the table's merge engine (the default)
	aggModeOverwrite = 1 // past it: the rows replace the stored ones
)

// checkAggMode checks PUT_KV's agg_mode: AGGREGATE (0, the default), or
// OVERWRITE (1, which Flink's sink sends to undo a failed write) on a
// table without a merge engine, where the two are the same write. Bypassing
// a merge engine, and Fluss's reserved LOCAL_AGGREGATE (2), are refused.
func checkAggMode(t catalog.Table, mode int32) error {
	switch {
	case mode == aggModeAggregate:
		return nil
	case mode == aggModeOverwrite && t.Registration.Properties[record.OptMergeEngine] == "":
		return nil
	case mode == aggModeOverwrite:
		return &record.InvalidError{Field: "agg_mode", Reason: fmt.Sprintf("OVERWRITE (1) past %s.%s's merge engine (%s) is not served; write with AGGREGATE (0)",
			t.Database, t.Name, t.Registration.Properties[record.OptMergeEngine])}
	}
	return &record.InvalidError{Field: "agg_mode", Reason: fmt.Sprintf("want 0 (AGGREGATE) or 1 (OVERWRITE), got %d", mode)}
}

// putKv is PUT_KV: each bucket's KV batch, in Fluss's layout, which is
// Strom's, goes through the node's PutKv (the Connect API's path: batch
// checks, idempotence, merge, changelog append, acks), buckets
// concurrently, each answered with the log end offset after its write or
// its error (CORRUPT_MESSAGE for a bad batch, NOT_LEADER_OR_FOLLOWER,
// SCHEMA_NOT_EXIST, INVALID_TARGET_COLUMN, OUT_OF_ORDER_SEQUENCE_EXCEPTION,
// ...).
func (s *Server) putKv(ctx context.Context, version int16, req *flusspb.PutKvRequest) (proto.Message, error) {
	n := s.cfg.KV
	acks := int(req.GetAcks())
	if err := checkAcks(acks); err != nil {
		return nil, err
	}
	t, err := kvTable(n, req.GetTableId(), version)
	if err != nil {
		return nil, err
	}
	if err := checkAggMode(t, req.GetAggMode()); err != nil {
		return nil, err
	}
	targets, err := targetColumns(t, req.TargetColumns)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout(req.GetTimeoutMs()))
	defer cancel()

	resp := &flusspb.PutKvResponse{BucketsResp: make([]*flusspb.PbPutKvRespForBucket, len(req.BucketsReq))}
	type write struct {
		res *flusspb.PbPutKvRespForBucket
		br  *flusspb.PbPutKvReqForBucket
	}
	var writes []write
	seen := map[int32]bool{}
	for i, br := range req.BucketsReq {
		b := br.GetBucketId()
		res := &flusspb.PbPutKvRespForBucket{BucketId: proto.Int32(b), PartitionId: br.PartitionId}
		resp.BucketsResp[i] = res
		if err := bucketError(t, br.PartitionId, b, seen); err != nil {
			setBucketError(&res.ErrorCode, &res.ErrorMessage, err)
			continue
		}
		writes = append(writes, write{res, br})
	}
	// The writes are appended once the connection's earlier write
	// requests have done theirs (writeTurn.write, as PRODUCE_LOG).
	turnOf(ctx).write(ctx, len(writes), func(i int, inTurn func(context.Context) error) (Pending, error) {
		w := writes[i]
		return n.PutKv(ctx, t, w.br.GetBucketId(), w.br.GetRecords(), targets, acks, inTurn)
	}, func(i int, info log.AppendInfo, err error) {
		w := writes[i]
		if err != nil {
			setBucketError(&w.res.ErrorCode, &w.res.ErrorMessage, err)
			return
		}
		if end := info.LastOffset + 1; end >= 0 {
			w.res.LogEndOffset = proto.Int64(end)
		}
	})
	return resp, nil
}

// lookup is LOOKUP: per bucket, the value of each key in the order asked,
// an absent key answered by a PbValue without `values`, as Fluss's
// makeLookupResponse does; a bucket that fails (NOT_LEADER_OR_FOLLOWER
// makes the client refresh its metadata) answers its error alone. The
// values of one request are bounded by kv.lookup.max-bytes: a bucket past
// it fails with RECORD_TOO_LARGE_EXCEPTION, naming the key.
// insert_if_not_exists is not served.
func (s *Server) lookup(ctx context.Context, version int16, req *flusspb.LookupRequest) (proto.Message, error) {
	n := s.cfg.KV
	if req.GetInsertIfNotExists() {
		return nil, &record.InvalidError{Field: "insert_if_not_exists", Reason: "Strom does not insert missing keys on lookup; write them with PUT_KV"}
	}
	t, err := kvTable(n, req.GetTableId(), version)
	if err != nil {
		return nil, err
	}
	budget := n.LookupMaxBytes()
	rd := n.NewRead() // one read barrier for all the buckets
	resp := &flusspb.LookupResponse{}
	for _, br := range req.BucketsReq {
		res := &flusspb.PbLookupRespForBucket{BucketId: proto.Int32(br.GetBucketId()), PartitionId: br.PartitionId}
		resp.BucketsResp = append(resp.BucketsResp, res)
		if err := bucketError(t, br.PartitionId, br.GetBucketId(), nil); err != nil {
			setBucketError(&res.ErrorCode, &res.ErrorMessage, err)
			continue
		}
		values, err := rd.Lookup(ctx, t, br.GetBucketId(), br.Keys, &budget)
		if err != nil {
			setBucketError(&res.ErrorCode, &res.ErrorMessage, fmt.Errorf("bucket %d: %w", br.GetBucketId(), err))
			continue
		}
		res.Values = make([]*flusspb.PbValue, len(values))
		for i, v := range values {
			res.Values[i] = &flusspb.PbValue{Values: v} // nil: absent, no field
		}
	}
	return resp, nil
}

// prefixLookup is PREFIX_LOOKUP: per bucket, for each prefix (a compacted
// bucket key, which must be a prefix of the primary key) the values of its
// rows; the values of one request are bounded by kv.prefix-lookup.max-bytes
// (a bucket past it fails with RECORD_TOO_LARGE_EXCEPTION, naming the key).
func (s *Server) prefixLookup(ctx context.Context, version int16, req *flusspb.PrefixLookupRequest) (proto.Message, error) {
	n := s.cfg.KV
	t, err := kvTable(n, req.GetTableId(), version)
	if err != nil {
		return nil, err
	}
	if bk, pk := t.Registration.BucketKeys, t.Schema.PrimaryKey; len(bk) > len(pk) || !slices.Equal(bk, pk[:len(bk)]) {
		return nil, &record.InvalidError{Field: "table_id", Reason: fmt.Sprintf("prefix lookup on %s.%s needs the bucket key (%s) to be a prefix of the primary key (%s)",
			t.Database, t.Name, strings.Join(bk, ", "), strings.Join(pk, ", "))}
	}
	budget := n.PrefixLookupMaxBytes()
	rd := n.NewRead()
	resp := &flusspb.PrefixLookupResponse{}
	for _, br := range req.BucketsReq {
		res := &flusspb.PbPrefixLookupRespForBucket{BucketId: proto.Int32(br.GetBucketId()), PartitionId: br.PartitionId}
		resp.BucketsResp = append(resp.BucketsResp, res)
		if err := bucketError(t, br.PartitionId, br.GetBucketId(), nil); err != nil {
			setBucketError(&res.ErrorCode, &res.ErrorMessage, err)
			continue
		}
		lists, err := rd.PrefixLookup(ctx, t, br.GetBucketId(), br.Keys, &budget)
		if err != nil {
			setBucketError(&res.ErrorCode, &res.ErrorMessage, fmt.Errorf("bucket %d: %w", br.GetBucketId(), err))
			continue
		}
		res.ValueLists = make([]*flusspb.PbValueList, len(lists))
		for i, values := range lists {
			res.ValueLists[i] = &flusspb.PbValueList{Values: values}
		}
	}
	return resp, nil
}

// limitScan is LIMIT_SCAN, as Fluss's Replica.limitKvScan and limitLogScan
// answer it: for a primary-key table the first limit rows of the bucket as
// one value batch (appendValueBatch), for a log table the batches holding
// its last limit records in 0.9.1's layout (logbatch.ToFluss; the client
// keeps the last limit rows), with is_log_table. Errors go in the
// response's error_code and error_message, as Fluss puts them.
func (s *Server) limitScan(ctx context.Context, _ int16, req *flusspb.LimitScanRequest) (proto.Message, error) {
	resp := &flusspb.LimitScanResponse{}
	if err := s.limitScanInto(ctx, req, resp); err != nil {
		c, m := errorCode(err)
		return &flusspb.LimitScanResponse{ErrorCode: proto.Int32(int32(c)), ErrorMessage: proto.String("LIMIT_SCAN: " + m)}, nil
	}
	return resp, nil
}

func (s *Server) limitScanInto(ctx context.Context, req *flusspb.LimitScanRequest, resp *flusspb.LimitScanResponse) error {
	n := s.cfg.KV
	if req.PartitionId != nil {
		return errPartitioned
	}
	t, err := n.TableByID(req.GetTableId())
	if err != nil {
		return fmt.Errorf("table id %d: %w", req.GetTableId(), err)
	}
	b := req.GetBucketId()
	if err := bucketError(t, nil, b, nil); err != nil {
		return err
	}
	if len(t.Schema.PrimaryKey) > 0 {
		values, err := n.LimitScanKv(ctx, t, b, req.GetLimit())
		if err != nil {
			return fmt.Errorf("bucket %d: %w", b, err)
		}
		resp.IsLogTable, resp.Records = proto.Bool(false), appendValueBatch(nil, values)
		return nil
	}
	stored, err := n.LimitScanLog(ctx, t, b, req.GetLimit())
	if err != nil {
		return fmt.Errorf("bucket %d: %w", b, err)
	}
	records := []byte{} // present but empty when the bucket is, as Fluss's MemoryLogRecords.EMPTY
	if len(stored) > 0 {
		if records, err = logbatch.ToFluss(nil, stored); err != nil {
			return fmt.Errorf("bucket %d: stored batch: %w", b, err)
		}
	}
	resp.IsLogTable, resp.Records = proto.Bool(true), records
	return nil
}
