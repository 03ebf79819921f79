package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"strom/raftmeta/catalog"
	"strom/record"
	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/tablet/kv"
	"strom/tablet/log"
	"strom/tablet/replica"
)

// The primary-key calls of TabletService: PutKv, Lookup, PrefixLookup,
// ScanKv. Batches travel in Fluss's KV layout; JSON clients send rows and
// keys as objects and get rows back as objects.

// kvTable resolves a primary-key table and its key codecs.
type kvTable struct {
	catalog.Table
	// pk and bucketKey encode keys as the Fluss 0.9.1 client does
	// (record.PrimaryKeyEncoder, BucketKeyEncoder: Paimon keys for a table
	// with table.datalake.format paimon), so both APIs find the same rows.
	pk, bucketKey record.RowKeyEncoder
	rows          *record.CompactedRowCodec
}

func (h *tabletHandler) kvTable(db, name string) (kvTable, error) {
	t, err := h.table(db, name)
	if err != nil {
		return kvTable{}, err
	}
	return kvTableOf(t)
}

// kvTableOf checks that t is a primary-key table and makes its key codecs.
func kvTableOf(t catalog.Table) (kvTable, error) {
	var err error
	if len(t.Schema.PrimaryKey) == 0 {
		return kvTable{}, &record.InvalidError{Field: "table", Reason: fmt.Sprintf("%s.%s is a log table: write it with ProduceLog, read it with FetchLog", t.Database, t.Name)}
	}
	kt := kvTable{Table: t}
	if kt.pk, err = record.PrimaryKeyEncoder(t.Descriptor()); err != nil {
		return kt, err
	}
	if kt.bucketKey, err = record.BucketKeyEncoder(t.Descriptor()); err != nil {
		return kt, err
	}
	kt.rows, err = record.NewCompactedRowCodec(t.Schema.Columns)
	return kt, err
}

func (kt kvTable) bucketOf(row record.Row) (int32, error) {
	k, err := kt.bucketKey.AppendRow(nil, row)
	if err != nil {
		return 0, err
	}
	return int32(record.BucketOfKey(kt.Descriptor(), k, int(kt.Registration.BucketCount))), nil
}

func (h *tabletHandler) PutKv(ctx context.Context, req *connect.Request[stromv1.PutKvRequest]) (*connect.Response[stromv1.PutKvResponse], error) {
	m := req.Msg
	kt, err := h.kvTable(m.Database, m.Table)
	if err != nil {
		return nil, err
	}
	acks, err := parseAcks(m.Acks)
	if err != nil {
		return nil, err
	}
	var targets []int
	for _, n := range m.TargetColumns {
		_, i, ok := kt.Schema.Column(n)
		if !ok {
			return nil, &record.InvalidError{Field: "target_columns", Reason: fmt.Sprintf("%q is not a column; columns are %s", n, strings.Join(kt.Schema.ColumnNames(), ", "))}
		}
		targets = append(targets, i)
	}
	slices.Sort(targets)
	ctx, cancel := context.WithTimeout(ctx, writeTimeout(m.TimeoutMs))
	defer cancel()
	buckets := m.Buckets
	if len(m.Rows) > 0 || len(m.Deletes) > 0 {
		if len(buckets) > 0 {
			return nil, &record.InvalidError{Field: "rows", Reason: "give either rows and deletes, or buckets of batches, not both"}
		}
		if buckets, err = h.encodeKvRows(kt, m.Rows, m.Deletes); err != nil {
			return nil, err
		}
	}
	ids := make([]int32, len(buckets))
	for i, pb := range buckets {
		ids[i] = pb.Bucket
	}
	resp := &stromv1.PutKvResponse{Buckets: writeBuckets(ids, func(i int) (log.AppendInfo, error) {
		return h.putKvBucket(ctx, kt.Table, buckets[i].Bucket, buckets[i].Records, targets, acks)
	})}
	return connect.NewResponse(resp), nil
}

// putKvBucket writes one bucket's KV batch (Fluss's layout: magic, CRC and
// framing checked here, schema id, writer id and sequence by the replica)
// with the sorted target column indexes (nil: whole rows) as this node
// leads the bucket, waiting for acks. The Connect API's PutKv and the Fluss
// listener's PUT_KV both write through it (the listener in its steps:
// checkPutKv, Replica.PutKvThen, waitPutKv).
func (h *tabletHandler) putKvBucket(ctx context.Context, t catalog.Table, bucket int32, records []byte, targets []int, acks int) (log.AppendInfo, error) {
	r, b, err := h.checkPutKv(t, bucket, records)
	if err != nil {
		return log.AppendInfo{}, err
	}
	p, err := r.PutKvThen(ctx, b, targets, acks)
	if err != nil {
		return log.AppendInfo{}, fmt.Errorf("bucket %d: %w", bucket, err)
	}
	return h.waitPutKv(ctx, r, p, bucket, b)
}

// checkPutKv is putKvBucket's validation: the bucket's replica as this node
// leads it, and the batch's framing.
func (h *tabletHandler) checkPutKv(t catalog.Table, bucket int32, records []byte) (*replica.Replica, record.KvBatch, error) {
	r, err := h.replica(t, bucket)
	if err != nil {
		return nil, nil, err
	}
	b := record.KvBatch(records)
	if err := b.Validate(); err != nil {
		return nil, nil, fmt.Errorf("bucket %d: %w", bucket, err)
	}
	return r, b, nil
}

// waitPutKv waits for an appended KV batch's acks and counts its rows and
// bytes once acknowledged.
func (h *tabletHandler) waitPutKv(ctx context.Context, r *replica.Replica, p replica.Pending, bucket int32, b record.KvBatch) (log.AppendInfo, error) {
	info, err := p.Wait(ctx)
	if err != nil {
		return log.AppendInfo{}, fmt.Errorf("bucket %d: %w", bucket, err)
	}
	if !info.Duplicate {
		h.s.countIn(r, int(b.RecordCount()), len(b))
	}
	return info, nil
}

// encodeKvRows turns JSON rows (upserts) and keys (deletes) into one KV
// batch per bucket, in the order given.
func (h *tabletHandler) encodeKvRows(kt kvTable, rows, deletes []*structpb.Struct) ([]*stromv1.PutKvBucket, error) {
	var problems []error
	builders := map[int32]*record.KvBatchBuilder{}
	var order []int32
	add := func(field string, st *structpb.Struct, del bool) {
		js, err := protojson.Marshal(st)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", field, err))
			return
		}
		schema := kt.Schema
		if del {
			schema = keyOnly(kt.Schema, kt.Schema.PrimaryKey)
		}
		row, err := record.RowFromJSON(schema, js)
		if err == nil && !del {
			err = kt.Schema.CheckRow(row)
		}
		if err != nil {
			problems = append(problems, prefixFields(field+".", err))
			return
		}
		bucket, err := kt.bucketOf(row)
		if err != nil {
			problems = append(problems, prefixFields(field+".", err))
			return
		}
		key, err := kt.pk.AppendRow(nil, row)
		if err != nil {
			problems = append(problems, prefixFields(field+".", err))
			return
		}
		var value []byte
		if !del {
			if value, err = kt.rows.Append(nil, row); err != nil {
				problems = append(problems, prefixFields(field+".", err))
				return
			}
		}
		b := builders[bucket]
		if b == nil {
			b = record.NewKvBatchBuilder(record.KvBatchHeader{SchemaID: int16(kt.SchemaID), WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence})
			builders[bucket] = b
			order = append(order, bucket)
		}
		if err := b.Append(key, value); err != nil {
			problems = append(problems, prefixFields(field+".", err))
		}
	}
	for i, st := range rows {
		add(fmt.Sprintf("rows[%d]", i), st, false)
	}
	for i, st := range deletes {
		add(fmt.Sprintf("deletes[%d]", i), st, true)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	out := make([]*stromv1.PutKvBucket, 0, len(order))
	for _, b := range order {
		out = append(out, &stromv1.PutKvBucket{Bucket: b, Records: builders[b].Build()})
	}
	return out, nil
}

// keyOnly is s with every column but keys nullable, for rows that only
// need those (deletes and lookups: the primary key; prefix lookups: the
// bucket key).
func keyOnly(s record.Schema, keys []string) record.Schema {
	out := s
	out.Columns = slices.Clone(s.Columns)
	for i, c := range out.Columns {
		if !slices.Contains(keys, c.Name) {
			out.Columns[i].Type = c.Type.WithNullable(true)
		}
	}
	return out
}

// jsonKeys encodes JSON key objects (holding the columns named) into
// compacted keys grouped per bucket. It returns the request's buckets and,
// for each key, its bucket and index within the bucket.
func jsonKeys(kt kvTable, codec record.RowKeyEncoder, field string, objs []*structpb.Struct) ([]*stromv1.LookupBucket, [][2]int, error) {
	byBucket := map[int32]*stromv1.LookupBucket{}
	var order []int32
	places := make([][2]int, len(objs))
	var problems []error
	names := map[string]bool{}
	var keys []string
	for _, c := range codec.Columns() {
		names[c.Name] = true
		keys = append(keys, c.Name)
	}
	schema := keyOnly(kt.Schema, keys)
	for i, st := range objs {
		f := fmt.Sprintf("%s[%d]", field, i)
		for k := range st.Fields {
			if !names[k] {
				problems = append(problems, &record.InvalidError{Field: f + "." + k, Reason: fmt.Sprintf("not a key column here; give exactly %s", keyNames(codec))})
			}
		}
		js, err := protojson.Marshal(st)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", f, err))
			continue
		}
		row, err := record.RowFromJSON(schema, js)
		if err != nil {
			problems = append(problems, prefixFields(f+".", err))
			continue
		}
		bucket, err := kt.bucketOf(row)
		if err != nil {
			problems = append(problems, prefixFields(f+".", err))
			continue
		}
		key, err := codec.AppendRow(nil, row)
		if err != nil {
			problems = append(problems, prefixFields(f+".", err))
			continue
		}
		lb := byBucket[bucket]
		if lb == nil {
			lb = &stromv1.LookupBucket{Bucket: bucket}
			byBucket[bucket] = lb
			order = append(order, bucket)
		}
		places[i] = [2]int{int(bucket), len(lb.Keys)}
		lb.Keys = append(lb.Keys, key)
	}
	if len(problems) > 0 {
		return nil, nil, errors.Join(problems...)
	}
	out := make([]*stromv1.LookupBucket, 0, len(order))
	for _, b := range order {
		out = append(out, byBucket[b])
	}
	return out, places, nil
}

func keyNames(c record.RowKeyEncoder) string {
	var names []string
	for _, col := range c.Columns() {
		names = append(names, col.Name)
	}
	return strings.Join(names, ", ")
}

// readBarrierTimeout bounds how long a read (Lookup, PrefixLookup,
// LimitScan, ScanKv) waits for its metadata read barrier before it answers
// NOT_LEADER_OR_FOLLOWER: a node cut off from the metadata quorum cannot
// complete one, and the client then asks the metadata again and retries,
// on the new leader once one is known.
const readBarrierTimeout = 2 * time.Second

// readBarrier is one request's metadata read barrier
// (raftmeta.Node.ReadIndex): run once, before the first bucket is read,
// and shared by the request's buckets (and, on the node, by concurrent
// requests: ReadIndex coalesces). Not safe for concurrent use.
type readBarrier struct {
	done bool
	err  error
}

// readBarrierHook, when a test sets it, runs at every read barrier a
// request runs (confirmLeader), to count them.
var readBarrierHook func()

// kvOf returns the leader's KV tablet of a bucket for a linearizable read:
// this node's replica leads the bucket at some epoch, and, after rb (which
// began after the request arrived), the metadata still names this node its
// leader at that epoch. A leader cut off from the others keeps believing
// it leads while the majority elects another that acknowledges newer
// writes; it cannot complete the barrier, or, reachable again, learns from
// it that it was deposed. Either way it answers NOT_LEADER_OR_FOLLOWER
// (retriable), never its stale rows (tablet/replica/DESIGN.md, "Reads on a
// deposed leader").
func (h *tabletHandler) kvOf(ctx context.Context, rb *readBarrier, t catalog.Table, bucket int32) (*kv.Tablet, error) {
	r, err := h.replica(t, bucket)
	if err != nil {
		return nil, err
	}
	tab, epoch, err := r.KVEpoch(ctx)
	if err != nil {
		return nil, err
	}
	if err := h.confirmLeader(ctx, rb, t, r.TableBucket(), epoch); err != nil {
		return nil, err
	}
	return tab, nil
}

// leaderISRNow is tb's leader_isr as the local metadata holds it now: from
// the table cache, which is keyed by the metadata's zxid (so never older
// than what the FSM has applied when it is read), else from its znode.
func (h *tabletHandler) leaderISRNow(t catalog.Table, tb replica.TableBucket) (catalog.LeaderAndISR, error) {
	if now, err := h.s.tables.get(t.Database, t.Name); err == nil && now.Registration.TableID == tb.TableID {
		if lisr, ok := now.LeaderISR[tb.Bucket]; ok {
			return lisr, nil
		}
	}
	return catalog.New(h.s.meta).LeaderISR(tb.TableID, tb.Bucket)
}

// confirmLeader runs rb if not yet run, then checks that the metadata names
// this node the leader of tb at epoch.
func (h *tabletHandler) confirmLeader(ctx context.Context, rb *readBarrier, t catalog.Table, tb replica.TableBucket, epoch int32) error {
	if !rb.done {
		if readBarrierHook != nil {
			readBarrierHook()
		}
		bctx, cancel := context.WithTimeout(ctx, readBarrierTimeout)
		rb.err = h.s.meta.ReadIndex(bctx)
		cancel()
		rb.done = true
	}
	if rb.err != nil {
		// The cause as text: it may wrap raftmeta.ErrNotLeader, which
		// would map to NOT_COORDINATOR.
		return fmt.Errorf("bucket %s: %w (this node could not confirm with the metadata quorum that it still leads the bucket, and another node may lead it now: %v)",
			tb, replica.ErrNotLeader, rb.err)
	}
	lisr, err := h.leaderISRNow(t, tb)
	if err != nil {
		return err
	}
	switch {
	case lisr.Leader == h.s.cfg.NodeID && lisr.LeaderEpoch == epoch:
		return nil
	case lisr.Leader >= 0 && lisr.Leader != h.s.cfg.NodeID:
		return h.s.notLeader(tb, lisr.Leader)
	}
	return fmt.Errorf("bucket %s: %w (the metadata names leader %d at epoch %d, this replica leads at epoch %d)",
		tb, replica.ErrNotLeader, lisr.Leader, lisr.LeaderEpoch, epoch)
}

func (h *tabletHandler) Lookup(ctx context.Context, req *connect.Request[stromv1.LookupRequest]) (*connect.Response[stromv1.LookupResponse], error) {
	m := req.Msg
	kt, err := h.kvTable(m.Database, m.Table)
	if err != nil {
		return nil, err
	}
	buckets, places := m.Buckets, [][2]int(nil)
	if len(m.Keys) > 0 {
		if len(buckets) > 0 {
			return nil, &record.InvalidError{Field: "keys", Reason: "give either keys or buckets of keys, not both"}
		}
		if buckets, places, err = jsonKeys(kt, kt.pk, "keys", m.Keys); err != nil {
			return nil, err
		}
	}
	resp := &stromv1.LookupResponse{}
	var rb readBarrier
	results := map[int32]*stromv1.LookupBucketResult{}
	failed := map[int32]error{} // for JSON keys, which answer with the error itself
	maxBytes := int(h.s.cfg.LookupMaxBytes)
	budget := maxBytes // of the whole response
	for _, lb := range buckets {
		res := &stromv1.LookupBucketResult{Bucket: lb.Bucket}
		resp.Buckets = append(resp.Buckets, res)
		results[lb.Bucket] = res
		values, err := h.lookupBucket(ctx, &rb, kt.Table, lb.Bucket, lb.Keys, &budget, maxBytes)
		if err == nil {
			// One allocation for the bucket's answers, not one per key.
			lvs := make([]stromv1.LookupValue, len(values))
			res.Values = make([]*stromv1.LookupValue, len(values))
			for i, v := range values {
				lvs[i].Value, lvs[i].Found = v, v != nil
				res.Values[i] = &lvs[i]
			}
		}
		if err != nil {
			res.Error = rpc.Detail(err)
			failed[lb.Bucket] = err
		}
	}
	if places != nil {
		for _, p := range places {
			if err := failed[int32(p[0])]; err != nil {
				return nil, err
			}
			if v := results[int32(p[0])].Values[p[1]]; v.Found {
				st, err := kvValueJSON(kt, v.Value)
				if err != nil {
					return nil, err
				}
				resp.Rows = append(resp.Rows, st)
			}
		}
		resp.Buckets = nil
	}
	return connect.NewResponse(resp), nil
}

// kvValueJSON decodes a KV value into a JSON object.
func kvValueJSON(kt kvTable, v []byte) (*structpb.Struct, error) {
	row, err := decodeKvValue(kt, v)
	if err != nil {
		return nil, err
	}
	return jsonToStruct(record.AppendRowJSON(nil, kt.Schema, row))
}

func decodeKvValue(kt kvTable, v []byte) (record.Row, error) {
	id, row, err := record.ParseKvValue(v)
	if err != nil {
		return nil, err
	}
	if int32(id) != kt.SchemaID {
		return nil, fmt.Errorf("%w: stored value of schema %d, the table's is %d", catalog.ErrSchemaNotExist, id, kt.SchemaID)
	}
	return kt.rows.Decode(row)
}

func (h *tabletHandler) PrefixLookup(ctx context.Context, req *connect.Request[stromv1.PrefixLookupRequest]) (*connect.Response[stromv1.PrefixLookupResponse], error) {
	m := req.Msg
	kt, err := h.kvTable(m.Database, m.Table)
	if err != nil {
		return nil, err
	}
	if !isPrefix(kt.Registration.BucketKeys, kt.Schema.PrimaryKey) {
		return nil, &record.InvalidError{Field: "table", Reason: fmt.Sprintf("prefix lookup needs the bucket key (%s) to be a prefix of the primary key (%s)",
			strings.Join(kt.Registration.BucketKeys, ", "), strings.Join(kt.Schema.PrimaryKey, ", "))}
	}
	buckets, places := m.Buckets, [][2]int(nil)
	if len(m.Prefixes) > 0 {
		if len(buckets) > 0 {
			return nil, &record.InvalidError{Field: "prefixes", Reason: "give either prefixes or buckets of keys, not both"}
		}
		// A prefix is the bucket key encoded as the primary key is (its
		// byte prefix), placed by the bucket key's own encoding. A Paimon
		// primary key has no such prefix in general (its fixed part grows
		// with the key columns, and a string over 7 bytes lies past it), so
		// a match would be luck.
		if _, compacted := kt.pk.(*record.KeyCodec); !compacted {
			return nil, &record.InvalidError{Field: "table", Reason: fmt.Sprintf("prefix lookup of %s.%s: its primary keys are Paimon keys (%s paimon), of which a bucket key is not in general a byte prefix; a table with %s 2 and its own bucket key has compacted primary keys",
				kt.Database, kt.Name, record.OptDatalakeFormat, record.OptKvFormatVersion)}
		}
		prefix, err := record.NewKeyCodec(kt.Schema.Columns, kt.Registration.BucketKeys)
		if err != nil {
			return nil, err
		}
		if buckets, places, err = jsonKeys(kt, prefix, "prefixes", m.Prefixes); err != nil {
			return nil, err
		}
	}
	resp := &stromv1.PrefixLookupResponse{}
	var rb readBarrier
	results := map[int32]*stromv1.PrefixLookupBucketResult{}
	failed := map[int32]error{} // for JSON prefixes, which answer with the error itself
	maxBytes := int(h.s.cfg.PrefixLookupMaxBytes)
	budget := maxBytes // of the whole response
	for _, lb := range buckets {
		res := &stromv1.PrefixLookupBucketResult{Bucket: lb.Bucket}
		resp.Buckets = append(resp.Buckets, res)
		results[lb.Bucket] = res
		lists, err := h.prefixLookupBucket(ctx, &rb, kt.Table, lb.Bucket, lb.Keys, &budget, maxBytes)
		if err != nil {
			res.Error = rpc.Detail(err)
			failed[lb.Bucket] = err
		}
		for _, values := range lists {
			res.Values = append(res.Values, &stromv1.PrefixValues{Values: values})
		}
	}
	if places != nil {
		for _, p := range places {
			if err := failed[int32(p[0])]; err != nil {
				return nil, err
			}
			for _, v := range results[int32(p[0])].Values[p[1]].Values {
				st, err := kvValueJSON(kt, v)
				if err != nil {
					return nil, err
				}
				resp.Rows = append(resp.Rows, st)
			}
		}
		resp.Buckets = nil
	}
	return connect.NewResponse(resp), nil
}

// lookupBucket looks up keys (encoded primary keys) in a bucket this node
// leads: the value of each, nil for an absent key. The values of one
// response share *budget bytes, from maxBytes (kv.lookup.max-bytes); values
// past it fail the bucket with rpc.ErrLimitExceeded rather than make the
// node hold an unbounded answer. On an error nothing of the bucket is
// returned. The Connect API's Lookup and the Fluss listener's LOOKUP both
// read through it.
func (h *tabletHandler) lookupBucket(ctx context.Context, rb *readBarrier, t catalog.Table, bucket int32, keys [][]byte, budget *int, maxBytes int) ([][]byte, error) {
	tab, err := h.kvOf(ctx, rb, t, bucket)
	if err != nil {
		return nil, err
	}
	values, more, err := tab.LookupMax(keys, max(*budget, 1))
	switch {
	case err != nil:
		return nil, err
	case more:
		return nil, fmt.Errorf("%w: bucket %d: the rows of its %d keys pass kv.lookup.max-bytes (%d bytes in one response); look up fewer keys at once, or raise the key",
			rpc.ErrLimitExceeded, bucket, len(keys), maxBytes)
	}
	for _, v := range values {
		*budget -= len(v)
	}
	return values, nil
}

// prefixLookupBucket looks up each prefix (an encoded bucket key) in a
// bucket this node leads: per prefix, the values of its rows in key order.
// The values of one response share *budget bytes, from maxBytes
// (kv.prefix-lookup.max-bytes); rows past it fail the bucket with
// rpc.ErrLimitExceeded rather than make the node hold an unbounded answer.
// On an error nothing of the bucket is returned. The Connect API's
// PrefixLookup and the Fluss listener's PREFIX_LOOKUP both read through it.
func (h *tabletHandler) prefixLookupBucket(ctx context.Context, rb *readBarrier, t catalog.Table, bucket int32, prefixes [][]byte, budget *int, maxBytes int) ([][][]byte, error) {
	tab, err := h.kvOf(ctx, rb, t, bucket)
	if err != nil {
		return nil, err
	}
	out := make([][][]byte, 0, len(prefixes))
	for i, p := range prefixes {
		values, more, err := tab.PrefixLookup(p, max(*budget, 1))
		switch {
		case err != nil:
			return nil, err
		case more:
			return nil, fmt.Errorf("%w: bucket %d prefix %d: the rows found pass kv.prefix-lookup.max-bytes (%d bytes in one response); look up fewer prefixes at once, read the bucket with ScanKv, or raise the key",
				rpc.ErrLimitExceeded, bucket, i, maxBytes)
		}
		out = append(out, values)
		for _, v := range values {
			*budget -= len(v)
		}
	}
	return out, nil
}

// isPrefix reports whether a is a prefix of b.
func isPrefix(a, b []string) bool {
	return len(a) <= len(b) && slices.Equal(a, b[:len(a)])
}

// scanners holds open ScanKv snapshots; each expires after ttl without a
// call (kv.scanner.ttl). At most maxPerBucket are open on one bucket and
// maxPerServer on the node (kv.scanner.max-per-bucket,
// kv.scanner.max-per-server), counting those in a call.
type scanners struct {
	ttl                        time.Duration
	maxPerBucket, maxPerServer int
	mu                         sync.Mutex
	open                       map[string]*scanner // between calls
	perBucket                  map[scanBucket]int  // open, in a call or not
	total                      int
}

type scanBucket struct {
	table  int64
	bucket int32
}

type scanner struct {
	snap    *kv.Snapshot
	table   int64
	bucket  int32
	touched time.Time
}

// reserve takes a place for a new scanner on a bucket, or returns
// ErrTooManyScanners naming the limit. release gives it back.
func (s *scanners) reserve(b scanBucket) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(time.Now())
	switch {
	case s.total >= s.maxPerServer:
		return fmt.Errorf("%w: %d open on this node, the most kv.scanner.max-per-server allows; finish or close scans (an unused one closes after kv.scanner.ttl, %s), or raise the key",
			rpc.ErrTooManyScanners, s.total, s.ttl)
	case s.perBucket[b] >= s.maxPerBucket:
		return fmt.Errorf("%w: %d open on bucket %d, the most kv.scanner.max-per-bucket allows; finish or close scans (an unused one closes after kv.scanner.ttl, %s), or raise the key",
			rpc.ErrTooManyScanners, s.perBucket[b], b.bucket, s.ttl)
	}
	if s.perBucket == nil {
		s.perBucket = map[scanBucket]int{}
	}
	s.perBucket[b]++
	s.total++
	return nil
}

func (s *scanners) release(b scanBucket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(b)
}

func (s *scanners) releaseLocked(b scanBucket) {
	s.total--
	if s.perBucket[b]--; s.perBucket[b] <= 0 {
		delete(s.perBucket, b)
	}
}

// done closes a scanner taken out (or never put) and frees its place.
func (s *scanners) done(sc *scanner) {
	sc.snap.Close()
	s.release(scanBucket{sc.table, sc.bucket})
}

func (s *scanners) take(id string) *scanner {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(time.Now())
	sc := s.open[id]
	delete(s.open, id)
	return sc
}

func (s *scanners) put(id string, sc *scanner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = map[string]*scanner{}
	}
	sc.touched = time.Now()
	s.open[id] = sc
}

func (s *scanners) expireLocked(now time.Time) {
	for id, sc := range s.open {
		if now.Sub(sc.touched) > s.ttl {
			sc.snap.Close()
			delete(s.open, id)
			s.releaseLocked(scanBucket{sc.table, sc.bucket})
		}
	}
}

// expire closes the scanners unused for longer than the TTL.
func (s *scanners) expire(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
}

// run expires abandoned scanners until ctx ends, so a client that stops
// calling does not pin a Pebble snapshot forever.
func (s *scanners) run(ctx context.Context) {
	t := time.NewTicker(max(s.ttl/2, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.expire(now)
		}
	}
}

// closeAll closes every open scanner (the node is stopping).
func (s *scanners) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sc := range s.open {
		sc.snap.Close()
		delete(s.open, id)
		s.releaseLocked(scanBucket{sc.table, sc.bucket})
	}
}

func (h *tabletHandler) ScanKv(ctx context.Context, req *connect.Request[stromv1.ScanKvRequest]) (*connect.Response[stromv1.ScanKvResponse], error) {
	m := req.Msg
	kt, err := h.kvTable(m.Database, m.Table)
	if err != nil {
		return nil, err
	}
	var sc *scanner
	id := hex.EncodeToString(m.ScannerId)
	if len(m.ScannerId) > 0 {
		if sc = h.s.scanners.take(id); sc == nil || sc.table != kt.Registration.TableID || sc.bucket != m.Bucket {
			if sc != nil {
				h.s.scanners.done(sc)
			}
			return nil, &record.InvalidError{Field: "scanner_id", Reason: fmt.Sprintf("unknown or expired scanner (scanners expire after %s unused, kv.scanner.ttl): start a new scan", h.s.scanners.ttl)}
		}
	} else {
		b := scanBucket{kt.Registration.TableID, m.Bucket}
		if err := h.s.scanners.reserve(b); err != nil {
			return nil, err
		}
		snap, err := h.snapshot(ctx, kt.Table, m.Bucket)
		if err != nil {
			h.s.scanners.release(b)
			return nil, err
		}
		sc = &scanner{snap: snap, table: b.table, bucket: b.bucket}
		var raw [16]byte
		_, _ = rand.Read(raw[:])
		id = hex.EncodeToString(raw[:])
	}
	resp := &stromv1.ScanKvResponse{LogOffset: sc.snap.Offset()}
	if m.Close {
		h.s.scanners.done(sc)
		return connect.NewResponse(resp), nil
	}
	maxBytes := int(m.BatchSizeBytes)
	if maxBytes <= 0 {
		maxBytes = defaultBucketMaxBytes
	}
	maxBytes = min(maxBytes, int(h.s.cfg.ScannerMaxBatchBytes))
	page, err := sc.snap.Next(1<<20, maxBytes)
	if err != nil {
		h.s.scanners.done(sc)
		return nil, err
	}
	asJSON := wantsJSON(req.Header(), m.JsonRows)
	for _, kvp := range page {
		if asJSON {
			st, err := kvValueJSON(kt, kvp.Value)
			if err != nil {
				h.s.scanners.done(sc)
				return nil, err
			}
			resp.Rows = append(resp.Rows, st)
		} else {
			resp.Values = append(resp.Values, kvp.Value)
		}
	}
	if len(page) == 0 {
		h.s.scanners.done(sc)
		return connect.NewResponse(resp), nil
	}
	raw, _ := hex.DecodeString(id)
	resp.ScannerId, resp.HasMore = raw, true
	h.s.scanners.put(id, sc)
	return connect.NewResponse(resp), nil
}

// snapshot opens a snapshot of a bucket's KV tablet.
func (h *tabletHandler) snapshot(ctx context.Context, t catalog.Table, bucket int32) (*kv.Snapshot, error) {
	tab, err := h.kvOf(ctx, &readBarrier{}, t, bucket)
	if err != nil {
		return nil, err
	}
	return tab.Snapshot()
}

// limitScanKv answers LimitScan on a primary-key table: the first rows of
// the bucket in key order, as KV values (binary) or JSON objects.
func (h *tabletHandler) limitScanKv(ctx context.Context, req *connect.Request[stromv1.LimitScanRequest], t catalog.Table) (*connect.Response[stromv1.LimitScanResponse], error) {
	m := req.Msg
	kt, err := h.kvTable(m.Database, m.Table)
	if err != nil {
		return nil, err
	}
	tab, err := h.kvOf(ctx, &readBarrier{}, t, m.Bucket)
	if err != nil {
		return nil, err
	}
	values, err := tab.LimitScan(int(m.Limit))
	if err != nil {
		return nil, err
	}
	resp := &stromv1.LimitScanResponse{SchemaId: t.SchemaID}
	asJSON := wantsJSON(req.Header(), m.JsonRows)
	for _, v := range values {
		if !asJSON {
			resp.Values = append(resp.Values, v)
			continue
		}
		st, err := kvValueJSON(kt, v)
		if err != nil {
			return nil, err
		}
		resp.Rows = append(resp.Rows, st)
	}
	return connect.NewResponse(resp), nil
}
