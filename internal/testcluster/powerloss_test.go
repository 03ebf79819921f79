package testcluster

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"strom/client"
	"strom/internal/robustness/check"
	"strom/internal/robustness/history"
	"strom/raftmeta/catalog"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/server"
)

// plWorkload writes to a log table (rows appended by an idempotent
// acks=-1 writer) and a primary-key table (acks=-1 upserts of a few hot
// keys) until stopped, recording every operation for the checkers of
// internal/robustness/check.
type plWorkload struct {
	clock history.Clock
	log   *client.Table
	kv    *client.Table

	mu      sync.Mutex
	h       history.History
	acked   [2]int // OK log appends, OK upserts
	stop    chan struct{}
	stopped sync.WaitGroup
}

func (w *plWorkload) record(op history.Op) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.h.Ops = append(w.h.Ops, op)
	if op.Outcome == history.OK {
		switch op.Kind {
		case history.LogAppend:
			w.acked[0]++
		case history.KVPut:
			w.acked[1]++
		}
	}
}

func (w *plWorkload) ackedCounts() [2]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked
}

// outcome is what an error says of a write: none is OK; any other may or
// may not have applied (a retried delivery timed out, the writer closed).
func outcome(err error) (history.Outcome, string) {
	if err == nil {
		return history.OK, ""
	}
	return history.Unknown, err.Error()
}

// start runs the two writers.
func (w *plWorkload) start(ctx context.Context, t *testing.T) {
	w.stop = make(chan struct{})
	aw, err := w.log.NewAppendWriter(ctx, client.Acks(-1), client.BatchTimeout(time.Millisecond), client.DeliveryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	uw, err := w.kv.NewUpsertWriter(ctx, client.Acks(-1), client.BatchTimeout(time.Millisecond), client.DeliveryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	w.stopped.Add(2)
	go func() { // the log: ten rows at a time
		defer w.stopped.Done()
		defer aw.Close(context.Background())
		for id := int64(0); ; id += 10 {
			select {
			case <-w.stop:
				return
			default:
			}
			var fs []*client.Future
			inv := w.clock.Now()
			for k := id; k < id+10; k++ {
				fs = append(fs, aw.Append(ctx, record.Row{k, fmt.Sprintf("v%d", k)}))
			}
			for k, f := range fs {
				b, off, err := f.Wait(ctx)
				o, e := outcome(err)
				w.record(history.Op{Client: 0, Kind: history.LogAppend, Table: "fluss.pl_log", Bucket: b, Offset: off,
					Value: fmt.Sprintf("v%d", id+int64(k)), Invoke: inv, Return: w.clock.Now(), Outcome: o, Error: e})
			}
		}
	}()
	go func() { // the KV: one upsert at a time, over five keys
		defer w.stopped.Done()
		defer uw.Close(context.Background())
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			key, v := int64(i%5), fmt.Sprintf("p%d", i)
			inv := w.clock.Now()
			_, _, err := uw.Upsert(ctx, record.Row{key, v}).Wait(ctx)
			o, e := outcome(err)
			w.record(history.Op{Client: 1, Kind: history.KVPut, Table: "fluss.pl_kv", Key: fmt.Sprint(key), Value: v,
				Invoke: inv, Return: w.clock.Now(), Outcome: o, Error: e})
		}
	}()
}

// waitAcked waits until n more log appends and n more upserts are
// acknowledged than when it was called.
func (w *plWorkload) waitAcked(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	from := w.ackedCounts()
	waitUntil(ctx, t, fmt.Sprintf("%d more acknowledged appends and upserts", n), func() bool {
		now := w.ackedCounts()
		return now[0] >= from[0]+n && now[1] >= from[1]+n
	})
}

// finish stops the writers, reads both tables back (the whole log through
// a consumer, every key through lookups) and runs the queue and the KV
// linearizability checkers over the history.
func (w *plWorkload) finish(ctx context.Context, t *testing.T, c *Cluster, logTbl, kvTbl catalog.Table) {
	t.Helper()
	close(w.stop)
	w.stopped.Wait()
	for _, tbl := range []catalog.Table{logTbl, kvTbl} {
		tb := bucket0(tbl)
		var leader int32
		waitUntil(ctx, t, fmt.Sprintf("%s has a leader", tbl.Name), func() bool {
			leader = leaderISR(t, c.Node(1), tbl).Leader
			return leader > 0
		})
		waitInSync(ctx, t, c, tb, leader)
	}

	end, err := w.log.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := w.log.NewLogScanner(client.MaxWait(100 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Subscribe(ctx, 0, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	read := history.Op{Client: 2, Kind: history.LogRead, Table: "fluss.pl_log", Final: true, HighWatermark: end[0], Invoke: w.clock.Now()}
	for sc.Position()[0] < end[0] {
		f, err := sc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Errors(); err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Records() {
			read.Records = append(read.Records, history.Record{Offset: r.Offset, Value: r.Row[1].(string)})
		}
		f.Release()
	}
	read.Return, read.Outcome = w.clock.Now(), history.OK
	w.record(read)

	lk, err := w.kv.NewLookuper()
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	for key := range int64(5) {
		inv := w.clock.Now()
		row, err := lk.Get(ctx, record.Row{key})
		if err != nil {
			t.Fatalf("lookup of key %d: %v", key, err)
		}
		get := history.Op{Client: 3, Kind: history.KVGet, Table: "fluss.pl_kv", Key: fmt.Sprint(key), Found: row != nil,
			Invoke: inv, Return: w.clock.Now(), Outcome: history.OK}
		if row != nil {
			get.Value = row[1].(string)
		}
		w.record(get)
	}

	acked := w.ackedCounts()
	t.Logf("%d log appends and %d upserts acknowledged, %d records read back", acked[0], acked[1], len(read.Records))
	for _, r := range []check.Result{check.CheckQueue(&w.h, check.Options{}), check.CheckKV(&w.h, check.Options{})} {
		if !r.OK {
			t.Errorf("%s checker: %s %+v", r.Checker, r.Error, r.Anomalies)
		}
	}
	checkFolds(ctx, t, c, bucket0(kvTbl))
}

// newPowerLossCluster starts three nodes whose tablets can lose power,
// with a log table and a primary-key table of one bucket each, replication
// factor 3, and the workload over them (not started). acks=-1 writes need
// two in-sync replicas (log.replica.min-in-sync-replicas-number=2): with
// the default of 1, a leader whose ISR shrank to itself (a slow follower)
// acknowledges writes no other replica has, and without a flush policy
// its power cut loses them, as Kafka's would.
func newPowerLossCluster(ctx context.Context, t *testing.T, flushEach bool) (*Cluster, catalog.Table, catalog.Table, *plWorkload) {
	t.Helper()
	configure := func(_ int, cfg *server.Config) {
		cfg.MinInSyncReplicas = 2
		if flushEach {
			cfg.FlushIntervalMessages = 1
		}
	}
	c := New(t, Options{Nodes: 3, PowerLoss: true, Configure: configure, Verbose: os.Getenv("VERBOSE") != ""})
	l, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logTbl, err := createTable(ctx, l, "fluss", "pl_log", 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	kvTbl := createKVTable(ctx, t, c, "pl_kv")
	cl := c.Client()
	w := &plWorkload{clock: history.NewClock()}
	if w.log, err = cl.Table(ctx, "fluss", "pl_log"); err != nil {
		t.Fatal(err)
	}
	if w.kv, err = cl.Table(ctx, "fluss", "pl_kv"); err != nil {
		t.Fatal(err)
	}
	return c, logTbl, kvTbl, w
}

// follower is a node in tbl's ISR that does not lead it.
func follower(t *testing.T, c *Cluster, tbl catalog.Table) int {
	t.Helper()
	li := leaderISR(t, c.Node(1), tbl)
	for _, id := range li.ISR {
		if id != li.Leader {
			return int(id)
		}
	}
	t.Fatalf("%s: no follower in the ISR %v", tbl.Name, li.ISR)
	return 0
}

// TestPowerOffOneNode: RF 3 with the default flush policy (no fsync but
// at segment rolls: replication protects the data), acks=-1 writes to a
// log table and a primary-key table while one node loses power (the log
// table's leader, then one of its followers): it comes back without what
// it had not fsynced, rejoins, catches up, and no acknowledged write is
// lost (queue checker, KV linearizability, every replica's KV its folded
// changelog).
func TestPowerOffOneNode(t *testing.T) {
	ctx := ctxFor(t, 240*time.Second)
	c, logTbl, kvTbl, w := newPowerLossCluster(ctx, t, false)
	w.start(ctx, t)
	w.waitAcked(ctx, t, 30)

	leader := int(leaderISR(t, c.Node(1), logTbl).Leader)
	t.Logf("power off node %d, the log table's leader", leader)
	c.PowerOff(leader)
	w.waitAcked(ctx, t, 30)

	f := follower(t, c, logTbl)
	t.Logf("power off node %d, a follower", f)
	c.PowerOff(f)
	w.waitAcked(ctx, t, 30)
	w.finish(ctx, t, c, logTbl, kvTbl)
}

// TestPowerOffTornWrites: as TestPowerOffOneNode, the log table's leader
// losing power, but keeping a random half of what it had not fsynced
// (torn segments, a torn Pebble WAL, stray directory entries): it recovers
// to whole batches, rejoins, and nothing acknowledged is lost.
func TestPowerOffTornWrites(t *testing.T) {
	ctx := ctxFor(t, 240*time.Second)
	c, logTbl, kvTbl, w := newPowerLossCluster(ctx, t, false)
	w.start(ctx, t)
	w.waitAcked(ctx, t, 30)
	for seed := range uint64(2) {
		leader := int(leaderISR(t, c.Node(1), logTbl).Leader)
		t.Logf("power off node %d, the log table's leader, with torn writes (seed %d)", leader, seed)
		c.PowerOffTorn(seed, leader)
		w.waitAcked(ctx, t, 30)
	}
	w.finish(ctx, t, c, logTbl, kvTbl)
}

// TestPowerOffEveryNode: with log.flush.interval-messages=1 (what is
// committed is on disk), all three nodes lose power at once while acks=-1
// writes run; no acknowledged write is lost.
func TestPowerOffEveryNode(t *testing.T) {
	ctx := ctxFor(t, 240*time.Second)
	c, logTbl, kvTbl, w := newPowerLossCluster(ctx, t, true)
	w.start(ctx, t)
	w.waitAcked(ctx, t, 30)
	t.Log("power off every node")
	c.PowerOff(1, 2, 3)
	w.waitAcked(ctx, t, 30)
	w.finish(ctx, t, c, logTbl, kvTbl)
}
