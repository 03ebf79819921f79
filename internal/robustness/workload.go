package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"strom/client"
	"strom/internal/robustness/history"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// The workloads' tables.
const (
	database  = "robustness"
	logTable  = "events" // the log workload's table
	kvTable   = "kv"     // the primary-key workload's table
	metaDB    = "robustness_meta"
	logBucket = 2 // buckets of the log table
)

// The workloads' shape.
const (
	producers     = 3 // idempotent acks=-1 writers on the log table
	producerSlots = 3 // appends each producer keeps in flight, one logical client each
	consumers     = 2 // LogScanners reading the log table during the run
	kvClients     = 4 // clients of puts, deletes and lookups on hot keys
	hotKeys       = 4 // keys of the primary-key workload
	metaClients   = 3 // clients of creates and drops
	metaTables    = 3 // table names the metadata clients contend on
	// rotateEvery is how long the primary-key and metadata clients keep
	// to one set of hot keys and table names before moving to new ones,
	// so that each key's and table's history, which porcupine checks on
	// its own, stays short however long the run.
	rotateEvery   = time.Minute
	opTimeout     = 15 * time.Second
	opPause       = 20 * time.Millisecond // between one client's operations
	finalDeadline = 2 * time.Minute       // for the final reads
	serveDeadline = time.Minute           // for every workload to succeed again after the faults healed
)

// recorder writes the operations of a run to its history.
type recorder struct {
	w       *history.Writer
	clock   history.Clock
	clients atomic.Int64
	// errs counts operations written with an error, by outcome.
	unknown, failed atomic.Int64
	mu              sync.Mutex
	werr            error                  // the first write error
	lastOK          map[history.Kind]int64 // per kind, the invoke time of the latest OK operation
}

// served are the kinds of operation that must succeed again after the
// faults have healed: each workload's writes and reads.
var served = []history.Kind{history.LogAppend, history.LogRead, history.KVPut, history.KVGet, history.CreateTable, history.TableExists}

// waitServed waits until an operation of every served kind invoked at
// since or later has succeeded: after every fault has healed, the cluster
// serves every workload again. An error names the kinds still failing
// when ctx ends.
func (r *recorder) waitServed(ctx context.Context, since int64) error {
	for {
		var missing []history.Kind
		r.mu.Lock()
		for _, k := range served {
			if r.lastOK[k] < since {
				missing = append(missing, k)
			}
		}
		r.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("robustness: after every fault healed, no %v operation succeeded: %w", missing, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// client returns a new logical client id.
func (r *recorder) client() int { return int(r.clients.Add(1)) }

// record writes op, returned now, with outcome and error from err: nil is
// OK, else errOutcome.
func (r *recorder) record(op history.Op, err error, errOutcome history.Outcome) {
	op.Return = r.clock.Now()
	op.Outcome = history.OK
	if err == nil {
		r.mu.Lock()
		if r.lastOK == nil {
			r.lastOK = map[history.Kind]int64{}
		}
		r.lastOK[op.Kind] = max(r.lastOK[op.Kind], op.Invoke)
		r.mu.Unlock()
	}
	if err != nil {
		op.Outcome, op.Error = errOutcome, err.Error()
		if errOutcome == history.Unknown {
			r.unknown.Add(1)
		} else {
			r.failed.Add(1)
		}
	}
	r.keep(r.w.Op(op))
}

// keep remembers the first error of writing the history.
func (r *recorder) keep(err error) {
	if err != nil {
		r.mu.Lock()
		if r.werr == nil {
			r.werr = err
		}
		r.mu.Unlock()
	}
}

// err returns the first error of writing the history.
func (r *recorder) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.werr
}

// setup creates the workloads' databases and tables (replication factor 3).
func setup(ctx context.Context, cl *client.Client) error {
	for _, db := range []string{database, metaDB} {
		if _, err := cl.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: db, IgnoreIfExists: true}); err != nil {
			return fmt.Errorf("robustness: create database %s: %w", db, err)
		}
	}
	rf := map[string]string{"table.replication.factor": "3"}
	for _, req := range []*stromv1.CreateTableRequest{
		{Database: database, Table: logTable, IgnoreIfExists: true, Descriptor_: &stromv1.TableDescriptor{
			Schema:      &stromv1.Schema{Columns: []*stromv1.Column{{Name: "value", Type: "STRING NOT NULL"}}},
			BucketCount: logBucket, Properties: rf}},
		{Database: database, Table: kvTable, IgnoreIfExists: true, Descriptor_: &stromv1.TableDescriptor{
			Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "k", Type: "STRING NOT NULL"}, {Name: "v", Type: "STRING"}},
				PrimaryKey: []string{"k"}},
			BucketCount: 1, Properties: rf}},
	} {
		if _, err := cl.Admin().CreateTable(ctx, req); err != nil {
			return fmt.Errorf("robustness: create table %s.%s: %w", req.Database, req.Table, err)
		}
	}
	return nil
}

// workloads runs every workload's clients until stop is closed, each
// client finishing the operation it is in.
type workloads struct {
	rec     *recorder
	cl      *client.Client
	servers string // every node's API address, for clients of their own
	seed    int64
	wg      sync.WaitGroup
	stop    chan struct{}
	// closeErrs collects errors of closing writers and scanners (logged,
	// not anomalies: the history has each operation's outcome).
	mu        sync.Mutex
	closeErrs []error
}

func (w *workloads) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// pause waits between two operations of one client; false once stopped.
func (w *workloads) pause() bool {
	select {
	case <-w.stop:
		return false
	case <-time.After(opPause):
		return true
	}
}

func (w *workloads) closed(err error) {
	if err != nil {
		w.mu.Lock()
		w.closeErrs = append(w.closeErrs, err)
		w.mu.Unlock()
	}
}

// table opens a table through a client of its own, so that each
// workload client has its own view of the buckets' leaders: one that only
// reads keeps asking a deposed leader until that leader refuses it.
func (w *workloads) table(ctx context.Context, name string) (*client.Table, error) {
	cl, err := client.New(w.servers)
	if err != nil {
		return nil, err
	}
	return cl.Table(ctx, database, name)
}

// start starts every workload's clients.
func (w *workloads) start(ctx context.Context) error {
	for range producers {
		if err := w.producer(ctx); err != nil {
			return err
		}
	}
	for range consumers {
		for b := range int32(logBucket) {
			if err := w.consumer(ctx, b); err != nil {
				return err
			}
		}
	}
	for i := range kvClients {
		if err := w.kvClient(ctx, w.seed+int64(i), i == 0); err != nil {
			return err
		}
	}
	for i := range metaClients {
		w.metaClient(ctx, w.seed+100+int64(i))
	}
	return nil
}

// producer appends unique values to the log table through one idempotent
// acks=-1 writer, producerSlots appends in flight, each slot a logical
// client waiting for its append's acknowledgement before the next.
func (w *workloads) producer(ctx context.Context) error {
	t, err := w.table(ctx, logTable)
	if err != nil {
		return err
	}
	aw, err := t.NewAppendWriter(ctx, client.Acks(-1), client.Idempotent(true), client.BatchTimeout(2*time.Millisecond),
		client.DeliveryTimeout(opTimeout))
	if err != nil {
		return err
	}
	var slots sync.WaitGroup
	for range producerSlots {
		id := w.rec.client()
		slots.Add(1)
		go func() {
			defer slots.Done()
			for seq := 0; !w.stopped(); seq++ {
				value := fmt.Sprintf("c%d.%d", id, seq)
				op := history.Op{Client: id, Kind: history.LogAppend, Table: database + "." + logTable, Value: value, Invoke: w.rec.clock.Now()}
				octx, cancel := context.WithTimeout(ctx, opTimeout)
				bucket, offset, err := aw.Append(octx, record.Row{value}).Wait(octx)
				cancel()
				if err == nil {
					op.Bucket, op.Offset = bucket, offset
				}
				w.rec.record(op, err, history.Unknown)
				if !w.pause() {
					return
				}
			}
		}()
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		slots.Wait()
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		w.closed(aw.Close(cctx))
	}()
	return nil
}

// consumer reads bucket of the log table from its start with a LogScanner,
// each Poll one LogRead of one logical client.
func (w *workloads) consumer(ctx context.Context, bucket int32) error {
	t, err := w.table(ctx, logTable)
	if err != nil {
		return err
	}
	sc, err := bucketScanner(ctx, t, bucket, 200*time.Millisecond)
	if err != nil {
		return err
	}
	id := w.rec.client()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for !w.stopped() {
			if _, ok := w.poll(ctx, id, sc, bucket, false); !ok && !w.pause() {
				return
			}
		}
	}()
	return nil
}

// bucketScanner returns a scanner of bucket alone, from offset 0.
func bucketScanner(ctx context.Context, t *client.Table, bucket int32, maxWait time.Duration) (*client.LogScanner, error) {
	sc, err := t.NewLogScanner(client.MaxWait(maxWait))
	if err != nil {
		return nil, err
	}
	return sc, sc.Subscribe(ctx, bucket, client.AtOffset(0))
}

// poll records one Poll of sc, subscribed to bucket alone, as a LogRead;
// it returns the scanner's next offset and whether the fetch succeeded.
func (w *workloads) poll(ctx context.Context, id int, sc *client.LogScanner, bucket int32, final bool) (next int64, ok bool) {
	from := sc.Position()[bucket]
	op := history.Op{Client: id, Kind: history.LogRead, Table: database + "." + logTable, Bucket: bucket, Offset: from,
		Final: final, Invoke: w.rec.clock.Now()}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	fs, err := sc.Poll(octx)
	cancel()
	if err == nil {
		err = fs.Errors()
	}
	if err == nil && len(fs) == 1 {
		op.HighWatermark = fs[0].HighWatermark
		for _, r := range fs.Records() {
			op.Records = append(op.Records, history.Record{Offset: r.Offset, Value: r.Row[0].(string)})
		}
	}
	if err == nil && len(fs) != 1 {
		err = fmt.Errorf("robustness: a poll of one bucket answered %d", len(fs))
	}
	fs.Release()
	w.rec.record(op, err, history.Fail)
	return sc.Position()[bucket], err == nil
}

// kvClient puts, deletes and looks up the hot keys of the primary-key
// table, one operation at a time; a reader only looks them up.
func (w *workloads) kvClient(ctx context.Context, seed int64, reader bool) error {
	t, err := w.table(ctx, kvTable)
	if err != nil {
		return err
	}
	uw, err := t.NewUpsertWriter(ctx, client.Acks(-1), client.BatchTimeout(time.Millisecond), client.DeliveryTimeout(opTimeout))
	if err != nil {
		return err
	}
	lk, err := t.NewLookuper()
	if err != nil {
		return err
	}
	id := w.rec.client()
	rng := rand.New(rand.NewPCG(uint64(seed), 0x4b56))
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer lk.Close()
		for seq := 0; !w.stopped(); seq++ {
			key := hotKey(w.epoch(), rng.IntN(hotKeys))
			op := history.Op{Client: id, Table: database + "." + kvTable, Key: key, Invoke: w.rec.clock.Now()}
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			var err error
			outcome := history.Unknown
			p := rng.IntN(10)
			if reader {
				p = 9
			}
			switch {
			case p < 4:
				op.Kind, op.Value = history.KVPut, fmt.Sprintf("c%d.%d", id, seq)
				_, _, err = uw.Upsert(octx, record.Row{key, op.Value}).Wait(octx)
			case p < 5:
				op.Kind = history.KVDelete
				_, _, err = uw.Delete(octx, record.Row{key, nil}).Wait(octx)
			default:
				op.Kind, outcome = history.KVGet, history.Fail
				var row record.Row
				if row, err = lk.Get(octx, record.Row{key}); err == nil && row != nil {
					op.Found, op.Value = true, valueOf(row)
				}
			}
			cancel()
			w.rec.record(op, err, outcome)
			if !w.pause() {
				break
			}
		}
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		w.closed(uw.Close(cctx))
	}()
	return nil
}

// metaClient creates, drops, and asks after a few tables of metaDB, one
// operation at a time, each tried once: a request the client retried
// itself could answer "already exists" for its own earlier attempt. It
// does not list tables: a list reads every table, which would make the
// whole run one history for porcupine.
func (w *workloads) metaClient(ctx context.Context, seed int64) {
	id := w.rec.client()
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6d657461))
	cl, err := client.New(w.servers, client.WithRetryTimeout(0))
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for !w.stopped() {
			name := fmt.Sprintf("t%d_%d", w.epoch(), rng.IntN(metaTables))
			op := history.Op{Client: id, Table: metaDB + "." + name, Invoke: w.rec.clock.Now()}
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			outcome := history.Unknown
			switch p := rng.IntN(10); {
			case err != nil:
			case p < 3:
				op.Kind = history.CreateTable
				_, err = cl.Admin().CreateTable(octx, &stromv1.CreateTableRequest{Database: metaDB, Table: name,
					Descriptor_: &stromv1.TableDescriptor{Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "id", Type: "BIGINT"}}},
						BucketCount: 1, Properties: map[string]string{"table.replication.factor": "1"}}})
				if isCode(err, "TABLE_ALREADY_EXIST") {
					op.Found, err = true, nil
				}
			case p < 6:
				op.Kind = history.DropTable
				err = cl.Admin().DropTable(octx, &stromv1.DropTableRequest{Database: metaDB, Table: name})
				op.Found = err == nil
				if isCode(err, "TABLE_NOT_EXIST") {
					err = nil
				}
			default:
				op.Kind, outcome = history.TableExists, history.Fail
				_, err = cl.Admin().GetTable(octx, metaDB, name)
				op.Found = err == nil
				if isCode(err, "TABLE_NOT_EXIST") {
					err = nil
				}
			}
			cancel()
			w.rec.record(op, err, outcome)
			err = nil
			if !w.pause() {
				return
			}
		}
	}()
}

// hotKey is the primary-key workload's key i of an epoch.
func hotKey(epoch int64, i int) string { return fmt.Sprintf("k%d.%d", epoch, i) }

// valueOf is the value column of a row of the primary-key table.
func valueOf(row record.Row) string {
	v, _ := row[1].(string)
	return v
}

// epoch numbers the current set of hot keys and table names.
func (w *workloads) epoch() int64 { return w.rec.clock.Now() / int64(rotateEvery) }

// isCode reports whether err is a Strom error of the named code.
func isCode(err error, name string) bool {
	var se *client.Error
	return errors.As(err, &se) && se.Name == name
}

// finalReads drains every bucket of the log table from offset 0 to its
// end with a fresh scanner, as Final LogReads; the end is the bucket's
// latest offset asked after the workloads stopped, so every acknowledged
// append is below it.
func (w *workloads) finalReads(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, finalDeadline)
	defer cancel()
	t, err := w.cl.Table(ctx, database, logTable)
	if err != nil {
		return err
	}
	end, err := t.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
	if err != nil {
		return fmt.Errorf("robustness: the log table's end offsets: %w", err)
	}
	for b := range int32(logBucket) {
		sc, err := bucketScanner(ctx, t, b, 100*time.Millisecond)
		if err != nil {
			return err
		}
		id := w.rec.client()
		for next := int64(0); next < end[b]; {
			if next, _ = w.poll(ctx, id, sc, b, true); ctx.Err() != nil {
				return fmt.Errorf("robustness: final reads of bucket %d stopped at %d of %d: %w", b, next, end[b], ctx.Err())
			}
		}
	}
	return nil
}

// fault writes f to the history.
func (r *recorder) fault(f history.Fault) { r.keep(r.w.Fault(f)) }
