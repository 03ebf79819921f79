package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/internal/metatest"
	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/tablet/log"
)

// createTable registers a log table whose buckets all live on node 1.
func createTable(t testing.TB, meta *raftmeta.Node, name string, buckets int32, isr []int32) int64 {
	t.Helper()
	cat := catalog.New(meta)
	ctx := context.Background()
	if ops := cat.BootstrapOps("c"); len(ops) > 0 {
		if _, err := meta.Multi(ctx, 0, ops...); err != nil {
			t.Fatal(err)
		}
	}
	if ops, err := cat.CreateDatabaseOps("db", catalog.DatabaseRegistration{}); err == nil {
		if _, err := meta.Multi(ctx, 0, ops...); err != nil {
			t.Fatal(err)
		}
	}
	id, claim, err := cat.NextTableID()
	if err != nil {
		t.Fatal(err)
	}
	a := catalog.TableAssignment{Buckets: map[int32][]int32{}}
	lisr := map[int32]catalog.LeaderAndISR{}
	for b := int32(0); b < buckets; b++ {
		a.Buckets[b] = isr
		lisr[b] = catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 3, ISR: isr}
	}
	ops, err := cat.CreateTableOps(catalog.NewTable{
		Database: "db", Name: name,
		Schema:       record.Schema{Columns: []record.Column{{Name: "a", Type: record.DataType{Root: record.Int, Nullable: true}}}},
		Registration: catalog.TableRegistration{TableID: id, BucketCount: buckets},
		Assignment:   &a, LeaderISR: lisr,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Multi(ctx, 0, append([]raftmeta.Op{claim}, ops...)...); err != nil {
		t.Fatal(err)
	}
	return id
}

// startManager runs a manager in dir; opts adjust its configuration. It
// stops at cleanup.
func startManager(t testing.TB, meta *raftmeta.Node, dir string, opts ...func(*Config)) *Manager {
	t.Helper()
	m, _ := runManager(t, meta, dir, opts...)
	return m
}

// runManager is startManager with a stop of its own (idempotent; also run
// at cleanup).
func runManager(t testing.TB, meta *raftmeta.Node, dir string, opts ...func(*Config)) (*Manager, func()) {
	t.Helper()
	lc := log.DefaultConfig()
	lc.NoSync = true
	cfg := Config{NodeID: 1, Dir: dir, Log: lc, RetentionInterval: time.Hour, CheckpointInterval: time.Hour, WriterExpirationInterval: time.Hour, ReadBarrier: meta.ReadIndex, Logger: metatest.Logger(t)}
	for _, o := range opts {
		o(&cfg)
	}
	m := NewManager(cfg, meta)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return m, stop
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leadingReplica waits until the manager hosts tb and leads it.
func leadingReplica(t testing.TB, m *Manager, tb TableBucket) *Replica {
	t.Helper()
	waitFor(t, "replica leading", func() bool {
		r, err := m.Replica(tb)
		return err == nil && r.IsLeader()
	})
	r, _ := m.Replica(tb)
	return r
}

func batch(n int) []byte {
	buf, _ := record.AppendBatch(nil, record.BatchHeader{SchemaID: 1, AppendOnly: true, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence}, n, []byte("records"))
	return buf
}

func TestManagerFollowsAssignments(t *testing.T) {
	meta := metatest.NewNode(t)
	dir := t.TempDir()
	m := startManager(t, meta, dir)
	id := createTable(t, meta, "t", 2, []int32{1})
	tb := TableBucket{id, 1}
	waitFor(t, "replica hosted and leading", func() bool {
		r, err := m.Replica(tb)
		return err == nil && r.IsLeader()
	})
	r, _ := m.Replica(tb)
	if r.Log().LatestEpoch() != 3 {
		t.Fatalf("leader epoch %d, want 3 from leader_isr", r.Log().LatestEpoch())
	}
	// Sole in-sync replica: an append commits at once, acks=-1 returns.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := r.Append(ctx, batch(3), -1)
	if err != nil || info.FirstOffset != 0 || info.LastOffset != 2 {
		t.Fatalf("append: %+v %v", info, err)
	}
	res, err := r.Read(0, 1<<20)
	if err != nil || res.HighWatermark != 3 || len(res.Batches) == 0 {
		t.Fatalf("read: %+v %v", res, err)
	}
	if _, err := m.Replica(TableBucket{id, 7}); !errors.Is(err, ErrUnknownBucket) {
		t.Fatalf("unknown bucket: %v", err)
	}

	// Dropping the table closes the replicas and deletes their data.
	ops, err := catalog.New(meta).DropTableOps("db", "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Multi(context.Background(), 0, ops...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replica removed", func() bool {
		_, err := m.Replica(tb)
		return errors.Is(err, ErrUnknownBucket)
	})
	waitFor(t, "the dropped table's data deleted", func() bool {
		_, err := os.Stat(filepath.Join(dir, "0"))
		return os.IsNotExist(err)
	})
	if _, err := r.Append(ctx, batch(1), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("append to a closed replica: %v", err)
	}
}

func TestAcksAllWaitsForTheISR(t *testing.T) {
	meta := metatest.NewNode(t)
	m := startManager(t, meta, t.TempDir())
	// Node 2 is in the ISR but nothing replicates to it yet: the high
	// watermark cannot pass the append, so acks=-1 times out while acks=1
	// returns at once.
	id := createTable(t, meta, "t", 1, []int32{1, 2})
	tb := TableBucket{id, 0}
	r := leadingReplica(t, m, tb)
	if _, err := r.Append(context.Background(), batch(1), 1); err != nil {
		t.Fatalf("acks=1: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := r.Append(ctx, batch(1), -1); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=-1 without followers: %v, want ErrNotEnoughReplicas", err)
	}
	if res, _ := r.Read(0, 1<<20); res.HighWatermark != 0 || len(res.Batches) != 0 {
		t.Fatalf("uncommitted data visible: hw %d, %d bytes", res.HighWatermark, len(res.Batches))
	}
}

// With log.flush.interval-messages = 1, an acks=-1 append is acknowledged
// only once its data is fsynced, and no reader sees it before.
func TestAcksAllWaitsForTheFsync(t *testing.T) {
	meta := metatest.NewNode(t)
	started, proceed := make(chan struct{}, 100), make(chan struct{})
	var armed atomic.Bool
	m := startManager(t, meta, t.TempDir(), func(c *Config) {
		c.Log.FlushMessages = 1
		c.Log.NoSync = false
		c.Log.SyncFile = func(name string, f vfs.File) error { // holds the fsyncs of segments, once armed
			if armed.Load() && strings.HasSuffix(name, ".log") {
				started <- struct{}{}
				<-proceed
			}
			return nil
		}
	})
	var once sync.Once
	release := func() { once.Do(func() { close(proceed) }) }
	t.Cleanup(release) // before the manager stops
	id := createTable(t, meta, "t", 1, []int32{1})
	tb := TableBucket{id, 0}
	r := leadingReplica(t, m, tb)
	armed.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := r.Append(context.Background(), batch(3), -1)
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("acks=-1 returned (%v) before any fsync", err)
	}
	if res, _ := r.Read(0, 1<<20); res.HighWatermark != 0 || len(res.Batches) != 0 {
		t.Fatalf("during the fsync: high watermark %d, %d bytes readable; want 0, 0", res.HighWatermark, len(res.Batches))
	}
	select {
	case err := <-done:
		t.Fatalf("acks=-1 returned (%v) during the fsync", err)
	default:
	}
	release()
	waitFor(t, "acks=-1 to return after the fsync", func() bool {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("acks=-1 after the fsync: %v", err)
			}
			return true
		default:
			return false
		}
	})
	if res, _ := r.Read(0, 1<<20); res.HighWatermark != 3 || len(res.Batches) == 0 {
		t.Fatalf("after the fsync: high watermark %d, %d bytes readable; want 3", res.HighWatermark, len(res.Batches))
	}
}

func TestStrayReplicasAreRemovedAtStart(t *testing.T) {
	meta := metatest.NewNode(t)
	dir := t.TempDir()
	stray := filepath.Join(dir, "42", "0")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	startManager(t, meta, dir)
	waitFor(t, "stray replica deleted", func() bool {
		_, err := os.Stat(stray)
		return os.IsNotExist(err)
	})
}

func writerBatch(writer int64, seq int32) []byte {
	buf, _ := record.AppendBatch(nil, record.BatchHeader{SchemaID: 1, AppendOnly: true, WriterID: writer, BatchSequence: seq}, 1, []byte{byte(seq)})
	return buf
}

// waitingBatches is how many batches wait for their writer's earlier ones.
func (r *Replica) waitingBatches() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.waiting
}

// A writer's batches sent at once, up to five in flight, arriving in any
// order, are appended in sequence order: each that arrives early waits for
// its predecessors (and is not refused); a batch whose predecessor never
// comes waits until its request ends or the wait runs out, and is refused;
// one too far ahead, or behind, is refused without waiting.
func TestWriterBatchesAreAppendedInSequenceOrder(t *testing.T) {
	meta := metatest.NewNode(t)
	m := startManager(t, meta, t.TempDir())
	id := createTable(t, meta, "t", 1, []int32{1})
	tb := TableBucket{id, 0}
	r := leadingReplica(t, m, tb)
	r.gapWait = time.Hour // a wait ends by its predecessor's append (or its request's end)
	ctx := context.Background()
	const writer, n = 42, 40
	for window := int32(0); window < n; window += 5 {
		errs := make(chan error, 5)
		// The window's batches arrive in reverse order: the first is the
		// last in sequence, and each but the last to arrive must wait.
		for seq := window + 4; seq >= window; seq-- {
			go func() {
				_, err := r.Append(ctx, writerBatch(writer, seq), -1)
				errs <- err
			}()
			if early := int(window + 5 - seq); seq > window {
				waitFor(t, fmt.Sprintf("%d batches waiting", early), func() bool { return r.waitingBatches() == early })
			}
		}
		for range 5 {
			if err := <-errs; err != nil {
				t.Fatalf("window at %d: %v", window, err)
			}
		}
	}
	res, err := r.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := int32(0)
	for rest := res.Batches; len(rest) > 0; want++ {
		var b record.Batch
		if b, rest, err = record.NextBatch(rest); err != nil {
			t.Fatal(err)
		}
		if b.BatchSequence() != want || b.BaseOffset() != int64(want) {
			t.Fatalf("batch at offset %d has sequence %d, want %d", b.BaseOffset(), b.BatchSequence(), want)
		}
	}
	if want != n {
		t.Fatalf("%d batches appended, want %d", want, n)
	}

	// Sequence n+1 without n: it waits, and is refused when its request
	// ends; or when the wait runs out.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := r.Append(cctx, writerBatch(writer, n+1), -1)
		done <- err
	}()
	waitFor(t, "the early batch waiting", func() bool { return r.waitingBatches() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, log.ErrOutOfOrderSequence) {
		t.Fatalf("a batch whose predecessor never came, request cancelled: %v", err)
	}
	r.gapWait = time.Millisecond
	if _, err := r.Append(ctx, writerBatch(writer, n+1), -1); !errors.Is(err, log.ErrOutOfOrderSequence) {
		t.Fatalf("a batch whose predecessor never came, wait run out: %v", err)
	}
	// Too far ahead, or behind: refused without waiting (a wait would
	// last the hour).
	r.gapWait = time.Hour
	for _, seq := range []int32{n + 5, 3} {
		go func() {
			_, err := r.Append(ctx, writerBatch(writer, seq), -1)
			done <- err
		}()
		waitFor(t, fmt.Sprintf("sequence %d refused", seq), func() bool {
			if r.waitingBatches() > 0 {
				t.Fatalf("sequence %d waits", seq)
			}
			select {
			case err := <-done:
				if !errors.Is(err, log.ErrOutOfOrderSequence) {
					t.Fatalf("sequence %d: %v", seq, err)
				}
				return true
			default:
				return false
			}
		})
	}
	if r.Log().LogEndOffset() != n {
		t.Fatalf("log end %d after refused batches, want %d", r.Log().LogEndOffset(), n)
	}
}

// The manager's periodic check forgets a writer once it has been idle for
// server.writer-id.expiration-time, not before.
func TestIdleWritersExpire(t *testing.T) {
	meta := metatest.NewNode(t)
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	m := startManager(t, meta, t.TempDir(), func(c *Config) {
		c.Log.WriterExpiration = time.Hour
		c.Log.Now = func() time.Time { return time.UnixMilli(now.Load()) }
		c.WriterExpirationInterval = time.Millisecond
	})
	id := createTable(t, meta, "t", 1, []int32{1})
	tb := TableBucket{id, 0}
	r := leadingReplica(t, m, tb)
	if _, err := r.Append(context.Background(), writerBatch(1, 0), -1); err != nil {
		t.Fatal(err)
	}
	// The batch's commit timestamp is the wall clock. Half an hour on by
	// the log's clock the writer is kept, however often the check runs.
	now.Add((30 * time.Minute).Milliseconds())
	m.removeExpiredWriters()
	if err := r.Log().CheckSequence(1, 1); err != nil {
		t.Fatalf("writer idle for 30 minutes: %v, want it remembered", err)
	}
	// Two hours on it is forgotten: its next sequence is refused.
	now.Add((90 * time.Minute).Milliseconds())
	waitFor(t, "writer forgotten", func() bool {
		return errors.Is(r.Log().CheckSequence(1, 1), log.ErrOutOfOrderSequence)
	})
}

// setLeaderISR writes a bucket's leader_isr as the coordinator would.
func setLeaderISR(t *testing.T, meta *raftmeta.Node, tb TableBucket, lisr catalog.LeaderAndISR) {
	t.Helper()
	if _, err := meta.Do(context.Background(), 0, catalog.SetLeaderISROp(tb.TableID, tb.Bucket, lisr)); err != nil {
		t.Fatal(err)
	}
}

// The manager applies leader_isr changes: leader to follower wakes every
// waiter, which fails with ErrNotLeader; follower to leader starts the new
// epoch; a new epoch of the same leader (the changes between unseen) starts
// too; offline refuses with no leader named.
func TestRoleChangesApply(t *testing.T) {
	meta := metatest.NewNode(t)
	m := startManager(t, meta, t.TempDir())
	id := createTable(t, meta, "t", 1, []int32{1, 2}) // leader 1 at epoch 3
	tb := TableBucket{id, 0}
	r := leadingReplica(t, m, tb)
	r.gapWait = time.Hour // an early batch waits until something wakes it
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Waiting: an acks=-1 append (node 2 never fetches) and a writer's
	// batch that came before its predecessor.
	errs := make(chan error, 2)
	go func() { _, err := r.Append(ctx, batch(1), -1); errs <- err }()
	go func() { _, err := r.Append(ctx, writerBatch(7, 1), 1); errs <- err }()
	waitFor(t, "the early batch waiting", func() bool { return r.waitingBatches() == 1 })
	waitFor(t, "the acks=-1 append in the log", func() bool { return r.Log().LogEndOffset() == 1 })

	setLeaderISR(t, meta, tb, catalog.LeaderAndISR{Leader: 2, LeaderEpoch: 4, ISR: []int32{1, 2}})
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrNotLeader) {
			t.Fatalf("waiter after losing leadership: %v, want ErrNotLeader", err)
		}
	}
	if _, err := r.Append(ctx, batch(1), 1); !errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), "node 2") {
		t.Fatalf("append as follower: %v, want ErrNotLeader naming node 2", err)
	}

	setLeaderISR(t, meta, tb, catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 6, ISR: []int32{1}})
	waitFor(t, "leading at epoch 6", func() bool { return r.IsLeader() && r.Log().LatestEpoch() == 6 })
	if _, err := r.Append(ctx, batch(1), -1); err != nil {
		t.Fatalf("acks=-1 as sole ISR member: %v", err)
	}

	// Epoch 6 → 9 straight (7 and 8 unseen): epoch 9 starts in the log.
	setLeaderISR(t, meta, tb, catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 9, ISR: []int32{1}})
	waitFor(t, "epoch 9 in the log's epoch cache", func() bool { return r.Log().LatestEpoch() == 9 })

	setLeaderISR(t, meta, tb, catalog.LeaderAndISR{Leader: -1, LeaderEpoch: 10, ISR: []int32{1}})
	waitFor(t, "offline", func() bool { return !r.IsLeader() })
	if _, err := r.Append(ctx, batch(1), 1); !errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), "no leader") {
		t.Fatalf("append to an offline bucket: %v, want ErrNotLeader saying it has no leader", err)
	}
}

// TestRunEndsWhenTheMetadataCloses: a manager whose metadata replica closes
// under it stops (it used to spin, reconciling on a closed watch channel).
func TestRunEndsWhenTheMetadataCloses(t *testing.T) {
	meta := metatest.NewNode(t)
	lc := log.DefaultConfig()
	lc.NoSync = true
	m := NewManager(Config{NodeID: 1, Dir: t.TempDir(), Log: lc, RetentionInterval: time.Hour, CheckpointInterval: time.Hour,
		WriterExpirationInterval: time.Hour, Logger: metatest.Logger(t)}, meta)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	// A table created after Run started is hosted: Run is in its loop.
	id := createTable(t, meta, "t", 1, []int32{1})
	leadingReplica(t, m, TableBucket{TableID: id, Bucket: 0})
	if err := meta.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned no error when the metadata closed")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still runs 30 s after its metadata replica closed")
	}
}

// A batch that overtook its predecessor by more than a second (a loaded
// machine, a client's resend after a failover) still waits for it with the
// default wait and is appended after it, not refused as out of order.
func TestAheadBatchWaitsForALatePredecessor(t *testing.T) {
	meta := metatest.NewNode(t)
	m := startManager(t, meta, t.TempDir())
	id := createTable(t, meta, "t", 1, []int32{1})
	r := leadingReplica(t, m, TableBucket{id, 0})
	ctx := context.Background()
	const writer = 7
	done := make(chan error, 1)
	go func() {
		_, err := r.Append(ctx, writerBatch(writer, 1), -1)
		done <- err
	}()
	waitFor(t, "the early batch waiting", func() bool { return r.waitingBatches() == 1 })
	time.Sleep(1500 * time.Millisecond) // its predecessor comes late
	if _, err := r.Append(ctx, writerBatch(writer, 0), -1); err != nil {
		t.Fatalf("sequence 0: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("sequence 1, which arrived 1.5 s before sequence 0: %v", err)
	}
}

// A replica is never visible without its table: the snapshot, tiering and
// repair rounds skip a replica whose table they do not find, so a round
// that ran while Reconcile opened a new table's buckets used to miss them
// (CI: a KV snapshot round right after the first PutKv took none).
func TestHostedReplicasHaveTheirTable(t *testing.T) {
	meta := metatest.NewNode(t)
	m := startManager(t, meta, t.TempDir())
	const buckets = 64
	stop := make(chan struct{})
	seen := make(chan int, 1)
	var orphan atomic.Value
	go func() {
		most := 0
		defer func() { seen <- most }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			m.mu.RLock()
			for tb := range m.mu.replicas {
				if _, ok := m.mu.tables[tb.TableID]; !ok {
					orphan.CompareAndSwap(nil, tb.String())
				}
			}
			most = max(most, len(m.mu.replicas))
			m.mu.RUnlock()
		}
	}()
	id := createTable(t, meta, "t", buckets, []int32{1})
	waitFor(t, "every bucket hosted", func() bool {
		for b := range int32(buckets) {
			if _, err := m.Replica(TableBucket{id, b}); err != nil {
				return false
			}
		}
		return true
	})
	close(stop)
	if most := <-seen; most == 0 {
		t.Fatal("the checker never saw a replica")
	}
	if tb := orphan.Load(); tb != nil {
		t.Fatalf("replica %s was hosted before its table", tb)
	}
}
