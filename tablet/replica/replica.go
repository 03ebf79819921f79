// Package replica manages the bucket replicas a node hosts: it follows the
// assignments and leader_isr znodes in its local copy of the metadata,
// opens the log tablet of each replica, appends on the leader, keeps the
// high watermark, and lets reads wait for new data.
//
// Followers fetch from their leader (fetcher.go, follower.go); the leader
// records each follower's log end and keeps the high watermark at the
// least log end over the in-sync replicas (leader.go).
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"strom/metrics"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/tablet/kv"
	"strom/tablet/log"
)

// Errors returned by replicas.
var (
	// ErrNotLeader: this node hosts the bucket but is not its leader.
	// Retriable after a metadata refresh.
	ErrNotLeader = errors.New("replica: not the leader of the bucket")
	// ErrUnknownBucket: this node does not host the bucket (the table may be
	// new, dropped, or placed elsewhere). Retriable.
	ErrUnknownBucket = errors.New("replica: unknown table or bucket on this node")
	// ErrRestoring: this node hosts the bucket but is restoring its KV
	// from the latest snapshot and serves nothing of it until that ends.
	// It is ErrUnknownBucket (retriable) to callers that check for that.
	ErrRestoring = fmt.Errorf("%w: its KV is being restored from the latest snapshot; retry", ErrUnknownBucket)
	// ErrNotEnoughReplicas: fewer in-sync replicas than acks=-1 needs before
	// the timeout.
	ErrNotEnoughReplicas = errors.New("replica: not enough in-sync replicas")
	// ErrClosed: the replica was closed (its table dropped or the node stopping).
	ErrClosed = errors.New("replica: closed")
	// ErrNotKV: a primary-key call on a log table's bucket.
	ErrNotKV = errors.New("replica: not a primary-key table")
)

// TableBucket names a bucket of a table.
type TableBucket struct {
	TableID int64
	Bucket  int32
}

func (tb TableBucket) String() string { return fmt.Sprintf("%d/%d", tb.TableID, tb.Bucket) }

// FollowerState is what a bucket's leader knows of one follower's replica,
// from the follower's fetches (Kafka's and Fluss's replica state).
type FollowerState struct {
	// LogEnd is the follower's log end offset: the offset its last fetch
	// asked for (it holds everything below).
	LogEnd int64
	// CaughtUpAt is the last time the follower's log end reached the
	// leader's log end as of the fetch (Kafka's lastCaughtUpTimeMs); a
	// follower whose CaughtUpAt is older than log.replica.max-lag-time
	// leaves the ISR.
	CaughtUpAt time.Time
	// Incarnation is the run of the follower node its fetches came from
	// (FetchRequest.Incarnation): the state of an earlier run counts for
	// nothing once the metadata shows a newer one (currentLocked).
	Incarnation int64

	// fetchedAt and leaderEndAtFetch are the time of the last fetch and
	// the leader's log end then.
	fetchedAt        time.Time
	leaderEndAtFetch int64
}

// Replica is one bucket replica on this node. Its methods are safe for
// concurrent use.
type Replica struct {
	tb     TableBucket
	nodeID int32
	log    *log.Tablet
	kv     *kv.Tablet // nil for a log table
	lg     *slog.Logger

	mu struct {
		sync.Mutex
		leader      int32
		leaderEpoch int32
		isr         []int32
		// epochStart is, on the leader, the log end when its leader epoch
		// started: every write an earlier leader acknowledged is below it,
		// and a follower outside the ISR rejoins only with a log end at
		// least this (isr.go).
		epochStart int64
		// startHW is, on the leader, the high watermark when its leader
		// epoch started: everything below it was committed by an earlier
		// leadership (confirmCommitted checks no follower for it).
		startHW int64
		// leaderSince is when this node's leadership started: a follower
		// in the ISR that has not fetched since counts as caught up then.
		leaderSince time.Time
		// bucketEpoch is the leader_isr's: an ISR change names it.
		bucketEpoch int32
		// isrAsked is the bucket epoch at which the coordinator took an
		// ISR change this leader asked for (-1: none): none is asked
		// again until the metadata shows it.
		isrAsked int32
		// isrMaximal is, on the leader, the followers outside the ISR it
		// asked the coordinator to take in at bucket epoch
		// isrMaximal.epoch. Until the metadata shows a newer bucket epoch
		// they count for the high watermark as if in the ISR (Kafka's
		// maximal ISR, KIP-497): the coordinator may have written them in
		// already, and a replica in the ISR holds everything committed.
		// A refusal (ErrISRChangeRefused) empties it.
		isrMaximal struct {
			epoch int32
			ids   []int32
		}
		// isrRefused is the bucket epoch at which the coordinator refused
		// (or could not be asked for) this leader's last ISR change, and
		// until when none is asked again at that epoch (isrRetryBackoff):
		// else every fetch of a follower that may rejoin would ask again.
		isrRefused struct {
			epoch int32
			until time.Time
		}
		// followers is, on the leader, what it knows of each follower
		// (reset when this node's leadership starts).
		followers map[int32]FollowerState
		// follow is, on a follower, its progress in the current leader
		// epoch (reset by every role change).
		follow followState
		// restoring: a background restore of this follower's KV from the
		// latest snapshot runs (restoreFollowerInBackground); the fetcher
		// leaves the bucket out until it ends. Kept across role changes:
		// one restore at a time writes the bucket's kv-restore directory.
		restoring bool
		closed    bool
		// tiered is, on a leader, the remote log manifest it committed
		// last (tier.go); nil before its first commit.
		tiered *catalog.RemoteLogManifest
		// snapshots is, on a leader, the KV snapshots it committed last
		// (snapshot.go); nil before its first commit.
		snapshots *catalog.KvSnapshots
		// advanced is closed (and replaced) whenever the high watermark
		// moves or the replica changes role, waking waiting readers.
		advanced chan struct{}
		// appended is closed (and replaced) after every append as the
		// leader, waking batches that wait for their writer's earlier
		// ones (appendInOrder).
		appended chan struct{}
		// waiting counts the batches waiting for their writer's earlier
		// ones.
		waiting int
		// corruptRefetched counts the damaged ranges this replica, as a
		// follower, cut and fetched again from its leader (refetchCorrupt).
		corruptRefetched int64
		// repairAfter is, on a leader, when it tries again to repair its
		// damaged ranges after a failed try (repairAsLeader).
		repairAfter time.Time
		// kvRepairAfter is when it tries again to rebuild its damaged KV
		// after a failed try (repairKV); kvRebuilt counts the rebuilds.
		kvRepairAfter time.Time
		kvRebuilt     int64
	}
	// gapWait is how long such a batch waits (gapWait; tests change it).
	gapWait time.Duration
	// minISR is the fewest in-sync replicas an acks=-1 write needs
	// (log.replica.min-in-sync-replicas-number).
	minISR int
	// incarnations is Config.Incarnations (nil: every fetch counts).
	incarnations func(node int32) int64
	// isrWake is the manager's: a send has its ISR check run now.
	isrWake chan<- struct{}
	// remote is the manager when log tiering is on (nil: off): reads
	// below the local log start go to remote segments.
	remote *Manager
	// snapshots is the manager when KV snapshots are on (nil: off): a
	// follower behind its leader's log start restores one (restore.go).
	snapshots *Manager
	// confirm is the manager's (Config.ReadBarrier set): the bucket's
	// leader_isr as the metadata quorum holds it, read after a barrier
	// begun after the call (confirmCommitted). nil: no check.
	confirm func(ctx context.Context, tb TableBucket) (catalog.LeaderAndISR, error)
	// changed is the manager's: notified whenever the replica appends, its
	// high watermark moves or its role changes, for long-polling fetches.
	changed *broadcast
	// traffic counts the client rows and bytes the API writes to and reads
	// from the replica, for /metrics.
	traffic metrics.Traffic
}

// gapWait bounds how long a batch that arrived ahead of its writer's
// earlier batches waits for them before it is refused with
// log.ErrOutOfOrderSequence (the writer then sends it again). Requests are
// served concurrently (Connect's connections and streams, the Fluss
// listener's goroutine per request), so a writer's in-flight batches can
// overtake each other by however long the machine takes to schedule a
// request: at a load average of 45 on 2 cores, over a second, and with the
// old 1 s the Fluss Java client's idempotent writer failed with
// OutOfOrderSequenceException (it does not retry it). The same wait covers
// a failover, where the batch lost with the old leader is sent again to the
// new one after those that followed it. A request that ends (its context)
// stops waiting sooner.
const gapWait = 5 * time.Second

func newReplica(tb TableBucket, nodeID int32, lt *log.Tablet, kt *kv.Tablet, lg *slog.Logger, changed *broadcast) *Replica {
	r := &Replica{tb: tb, nodeID: nodeID, log: lt, kv: kt, lg: lg, gapWait: gapWait, changed: changed}
	r.mu.leader = -1
	r.mu.isrAsked = -1
	r.mu.isrMaximal.epoch = -1
	r.mu.advanced = make(chan struct{})
	r.mu.appended = make(chan struct{})
	return r
}

// TableBucket returns the bucket the replica holds.
func (r *Replica) TableBucket() TableBucket { return r.tb }

// Traffic returns the replica's client traffic counters, which the API
// updates (it knows what it appended and served) and /metrics reads. They
// go with the replica when the bucket is dropped or moves.
func (r *Replica) Traffic() *metrics.Traffic { return &r.traffic }

// Log returns the replica's log tablet.
func (r *Replica) Log() *log.Tablet { return r.log }

// setLeaderAndISR applies a leader_isr znode: the replica becomes leader or
// follower at the given epoch, or neither (leader -1: the bucket is
// offline). A new leader epoch of this node starts in the log's epoch cache
// even when the node led before: the manager may not have seen the changes
// in between (a reconcile reads the latest leader_isr only). Everyone
// waiting on the replica wakes up to see the change: acks=-1 appends
// (which fail with ErrNotLeader once the node no longer leads) and batches
// waiting for their writer's earlier ones. An ISR that shrank may move
// the high watermark.
func (r *Replica) setLeaderAndISR(leader, epoch int32, isr []int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.leader == leader && r.mu.leaderEpoch == epoch && slices.Equal(r.mu.isr, isr) {
		return nil
	}
	wasLeader, oldLeader, oldEpoch := r.mu.leader == r.nodeID, r.mu.leader, r.mu.leaderEpoch
	r.mu.leader, r.mu.leaderEpoch, r.mu.isr = leader, epoch, slices.Clone(isr)
	if leader != oldLeader || epoch != oldEpoch {
		r.mu.follow = followState{}
	}
	switch {
	case leader == r.nodeID && (!wasLeader || epoch != oldEpoch):
		r.mu.epochStart, r.mu.startHW, r.mu.leaderSince = r.log.LogEndOffset(), r.log.HighWatermark(), time.Now()
		r.mu.followers = map[int32]FollowerState{}
		if err := r.log.AssignEpoch(epoch, r.log.LogEndOffset()); err != nil {
			return fmt.Errorf("bucket %s: start leader epoch %d: %w", r.tb, epoch, err)
		}
		if r.kv != nil {
			if err := r.kv.BecomeLeader(epoch); err != nil {
				return fmt.Errorf("bucket %s: KV of leader epoch %d: %w", r.tb, epoch, err)
			}
		}
		r.lg.Info("became leader", "epoch", epoch)
	case wasLeader && leader != r.nodeID:
		r.lg.Info("no longer leader", "leader", leader, "epoch", epoch)
	}
	err := r.maybeAdvanceLocked()
	r.wakeLocked()
	r.appendedLocked()
	return err
}

// setBucketEpoch records the bucket epoch of the leader_isr just applied
// (after setLeaderAndISR, so that an ISR change asked for in between names
// the older epoch and is refused as stale, never a newer epoch with an
// older ISR).
func (r *Replica) setBucketEpoch(e int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.bucketEpoch = e
}

// notLeaderLocked is the error of a call that needs the leader, naming the
// leader if there is one.
func (r *Replica) notLeaderLocked() error {
	if r.mu.leader < 0 {
		return fmt.Errorf("bucket %s: %w (the bucket has no leader: no in-sync replica is alive)", r.tb, ErrNotLeader)
	}
	return fmt.Errorf("bucket %s: %w (leader is node %d)", r.tb, ErrNotLeader, r.mu.leader)
}

// maybeAdvanceLocked moves the leader's high watermark up to the least
// log end over the in-sync replicas, itself included, and the followers
// it asked into the ISR at this bucket epoch (isrMaximal) (with a log flush
// policy, only as far as the log is fsynced: log.Tablet.SetHighWatermark
// stops there); a follower in the ISR that has not fetched since this
// leadership started holds it where it is. An ISR smaller than minISR
// holds it too (KIP-966): the replicas that left it are the bucket's
// eligible leader replicas, which the coordinator may elect, and they hold
// only what was committed before they left. It never moves it down. It
// flushes the KV's committed rows into Pebble before anyone is told (so an
// acknowledged write is visible to lookups).
func (r *Replica) maybeAdvanceLocked() error {
	if r.mu.closed || r.mu.leader != r.nodeID || len(r.mu.isr) < r.minISR {
		return nil
	}
	target := r.log.LogEndOffset()
	counted := r.mu.isr
	if r.mu.isrMaximal.epoch == r.mu.bucketEpoch {
		counted = append(slices.Clone(counted), r.mu.isrMaximal.ids...)
	}
	for _, id := range counted {
		if id == r.nodeID {
			continue
		}
		f, ok := r.mu.followers[id]
		if !ok || !r.currentLocked(id, f) {
			return nil
		}
		target = min(target, f.LogEnd)
	}
	old := r.log.HighWatermark()
	if target <= old {
		return nil
	}
	if hw := r.log.SetHighWatermark(target); hw > old {
		if r.kv != nil {
			if err := r.kv.FlushTo(hw); err != nil {
				return fmt.Errorf("bucket %s: flush KV to %d: %w", r.tb, hw, err)
			}
		}
		r.wakeLocked()
	}
	return nil
}

// logFlushed is the log's Config.OnFlush: more of the log is on disk, so
// the high watermark may move.
func (r *Replica) logFlushed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.maybeAdvanceLocked(); err != nil {
		r.lg.Error("advance the high watermark after a log flush", "err", err)
	}
}

func (r *Replica) wakeLocked() {
	close(r.mu.advanced)
	r.mu.advanced = make(chan struct{})
	r.changed.notify()
}

// appendedLocked wakes the batches waiting for their writer's earlier ones
// and the followers' long-polling fetches.
func (r *Replica) appendedLocked() {
	close(r.mu.appended)
	r.mu.appended = make(chan struct{})
	r.changed.notify()
}

// IsLeader reports whether this node leads the bucket now.
func (r *Replica) IsLeader() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.leader == r.nodeID && !r.mu.closed
}

// Append appends client batches as the leader. With acks -1 it waits until
// the high watermark passes them (ctx bounds the wait): with a log flush
// policy that is once they are fsynced. With 0 or 1 it returns after the
// local append. It is Validate, AppendThen and Pending.Wait.
func (r *Replica) Append(ctx context.Context, batches []byte, acks int) (log.AppendInfo, error) {
	v, err := r.Validate(batches)
	if err != nil {
		return log.AppendInfo{}, err
	}
	p, err := r.AppendThen(ctx, v, acks)
	if err != nil {
		return p.Info(), err
	}
	return p.Wait(ctx)
}

// Validate checks client batches for AppendThen (framing, CRC; the log's
// log.Tablet.Validate), once however often the append is tried. It takes
// no lock: a caller ordering its appends validates first, concurrently.
func (r *Replica) Validate(batches []byte) (log.ValidBatches, error) {
	return r.log.Validate(batches)
}

// AppendThen appends validated batches as the leader (appendInOrder, under
// the replica lock) and returns once they are in the log, or refused:
// ErrClosed, ErrNotLeader, ErrNotEnoughReplicas for an acks=-1 write with
// fewer in-sync replicas than minISR (unappended), a sequence or fencing
// error of the log. The acknowledgement is then p.Wait's: a caller that
// must append a connection's writes strictly in order (the Fluss listener)
// appends the next once this returns and waits for the acks of both
// concurrently.
func (r *Replica) AppendThen(ctx context.Context, v log.ValidBatches, acks int) (Pending, error) {
	return r.writeThen(ctx, acks, func(epoch int32) (log.AppendInfo, error) {
		return r.log.AppendValidated(v, epoch, time.Now())
	})
}

// PutKv writes a KV batch to a primary-key bucket as the leader (the KV
// tablet appends its changelog to the log), then waits for acks as Append.
// It is PutKvThen and Pending.Wait.
func (r *Replica) PutKv(ctx context.Context, batch record.KvBatch, targetColumns []int, acks int) (log.AppendInfo, error) {
	p, err := r.PutKvThen(ctx, batch, targetColumns, acks)
	if err != nil {
		return p.Info(), err
	}
	return p.Wait(ctx)
}

// PutKvThen is PutKv's write, returning once the changelog batch is in the
// log (or refused, as AppendThen); the acknowledgement is p.Wait's.
func (r *Replica) PutKvThen(ctx context.Context, batch record.KvBatch, targetColumns []int, acks int) (Pending, error) {
	if r.kv == nil {
		return Pending{}, fmt.Errorf("bucket %s: %w", r.tb, ErrNotKV)
	}
	return r.writeThen(ctx, acks, func(int32) (log.AppendInfo, error) {
		// A batch early for its writer waits for its turn before the
		// merge (reads of every key), not after each try of it.
		if err := r.log.CheckSequence(batch.WriterID(), batch.BatchSequence()); err != nil {
			return log.AppendInfo{}, err
		}
		return r.kv.PutKv(ctx, batch, targetColumns)
	})
}

// writeThen runs an append as the leader (appendInOrder) and returns the
// write waiting for its acks. An acks=-1 write with fewer in-sync replicas
// than minISR fails at once, unappended, with ErrNotEnoughReplicas.
func (r *Replica) writeThen(ctx context.Context, acks int, appendFn func(epoch int32) (log.AppendInfo, error)) (Pending, error) {
	var epoch int32
	info, err := r.appendInOrder(ctx, func(e int32) (log.AppendInfo, error) {
		epoch = e
		if acks == -1 {
			if err := r.checkMinISRLocked(); err != nil {
				return log.AppendInfo{}, err
			}
		}
		return appendFn(epoch)
	})
	p := Pending{r: r, info: info, epoch: epoch, acks: acks}
	if err != nil {
		// info is the log's, as the error left it (appendInOrder: an
		// append whose high watermark step failed is in the log).
		return Pending{info: info}, err
	}
	return p, nil
}

// Pending is a write the leader has appended (AppendThen, PutKvThen),
// whose acknowledgement is to come. Its Wait may be called from any
// goroutine, more than once.
type Pending struct {
	r     *Replica
	info  log.AppendInfo
	epoch int32 // the leader epoch the write was appended at
	acks  int
}

// Info is what the append wrote (or, for a duplicate, found written).
func (p Pending) Info() log.AppendInfo { return p.info }

// Wait waits for the write's acknowledgement and returns its AppendInfo.
// With acks 0 or 1 it returns at once. With acks -1 it waits until the high
// watermark passes the write (ctx bounds the wait: then
// ErrNotEnoughReplicas), then confirms it with the metadata
// (confirmCommitted); it fails with ErrNotEnoughReplicas when the ISR
// shrank below minISR as it committed (after the append), ErrNotLeader when
// this node stopped leading first, ErrClosed when the replica closed. The
// error comes with the AppendInfo: the write is in the log, unacknowledged.
func (p Pending) Wait(ctx context.Context) (log.AppendInfo, error) {
	r, info := p.r, p.info
	if p.acks != -1 {
		return info, nil
	}
	for {
		r.mu.Lock()
		hw, wait, closed := r.log.HighWatermark(), r.mu.advanced, r.mu.closed
		var notLeader error
		if r.mu.leader != r.nodeID {
			notLeader = r.notLeaderLocked()
		}
		belowMin := r.checkMinISRLocked()
		r.mu.Unlock()
		switch {
		case belowMin != nil && notLeader == nil:
			// The ISR shrank below min-in-sync after the append: the
			// high watermark stops (maybeAdvanceLocked), and if it
			// passed the batch before, fewer replicas than promised may
			// hold it and the coordinator may elect one that does not
			// (an eligible leader replica, which left the ISR before
			// it). Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND: the writer
			// sends it again.
			return info, fmt.Errorf("%w (after the append)", belowMin)
		case hw > info.LastOffset:
			return info, r.confirmCommitted(ctx, p.epoch, info.LastOffset)
		case closed:
			return info, ErrClosed
		case notLeader != nil:
			// As Kafka's delayed produce: the new leader may or may
			// not have the batch; the writer sends it again.
			return info, notLeader
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return info, fmt.Errorf("bucket %s: %w: the high watermark did not reach offset %d: %w", r.tb, ErrNotEnoughReplicas, info.LastOffset, ctx.Err())
		}
	}
}

// confirmTimeout bounds confirmCommitted's metadata read barrier: a node
// cut off from the metadata quorum cannot complete one, and the write is
// then answered ErrNotLeader (retriable; the writer sends it again, which
// the idempotent writer state makes a duplicate if it was kept).
const confirmTimeout = 2 * time.Second

// confirmCommitted is the last step of an acks=-1 write whose batch the high
// watermark passed at leader epoch epoch, ending at offset last: after a
// metadata read barrier begun now (r.confirm), the metadata must still name
// this node leader at epoch, and every member of the bucket's ISR as the
// metadata holds it must have fetched past last in this leadership. Only
// then is the write acknowledged. The high watermark counts the ISR as
// this replica knows it; a leader whose metadata lags (cut off from the
// metadata quorum, or its Raft follower backed off after a partition) may
// have been deposed, and the ISR the coordinator elects from may name a
// replica the high watermark did not count. Either way the write is
// answered ErrNotLeader or ErrNotEnoughReplicas (both retriable), not OK:
// robustness seed 2615 lost acknowledged writes of a leader whose metadata
// stayed 5 s behind after a partition (tablet/replica/DESIGN.md, "Acks on
// a deposed leader"). nil r.confirm (tests of this package): no check.
func (r *Replica) confirmCommitted(ctx context.Context, epoch int32, last int64) error {
	if r.confirm == nil {
		return nil
	}
	bctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	lisr, err := r.confirm(bctx, r.tb)
	cancel()
	if err != nil {
		return fmt.Errorf("bucket %s: %w (the write is not acknowledged: this node could not confirm with the metadata quorum that it still leads the bucket: %v)",
			r.tb, ErrNotLeader, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if lisr.Leader != r.nodeID || lisr.LeaderEpoch != epoch {
		return fmt.Errorf("bucket %s: %w (the write is not acknowledged: the metadata names leader %d at epoch %d, this node appended it at epoch %d)",
			r.tb, ErrNotLeader, lisr.Leader, lisr.LeaderEpoch, epoch)
	}
	if last < r.mu.startHW {
		// A writer's retry of a batch an earlier leadership committed
		// (a duplicate): the followers need not fetch again in this one.
		return nil
	}
	for _, id := range lisr.ISR {
		if id == r.nodeID {
			continue
		}
		f, ok := r.mu.followers[id]
		if ok && r.currentLocked(id, f) && f.LogEnd > last {
			continue
		}
		held := "has not fetched in this leadership (or run)"
		if ok && r.currentLocked(id, f) {
			held = fmt.Sprintf("holds the log only below %d", f.LogEnd)
		}
		r.lg.Warn("an acks=-1 write passed by the high watermark is not held by every replica of the metadata's ISR; not acknowledged",
			"offset", last, "metadata_isr", lisr.ISR, "bucket_epoch", lisr.BucketEpoch,
			"isr", r.mu.isr, "local_bucket_epoch", r.mu.bucketEpoch, "node", id, "which", held)
		return fmt.Errorf("bucket %s: %w: the write is not acknowledged: node %d, in the ISR %v, %s, not offset %d",
			r.tb, ErrNotEnoughReplicas, id, lisr.ISR, held, last)
	}
	return nil
}

// appendInOrder runs an append as the leader, under the replica lock so
// that the leader epoch it stamps cannot change under it. An idempotent
// writer may have several requests in flight, and they may arrive in any
// order (each has its own connection or stream): a batch that comes ahead
// of its writer's earlier ones (log.SequenceError.Ahead) waits for the next
// appends, up to gapWait or ctx, and is tried again, so the writer's
// batches are appended in sequence order.
func (r *Replica) appendInOrder(ctx context.Context, appendFn func(epoch int32) (log.AppendInfo, error)) (log.AppendInfo, error) {
	var timeout <-chan time.Time
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if r.mu.closed {
			return log.AppendInfo{}, ErrClosed
		}
		if r.mu.leader != r.nodeID {
			return log.AppendInfo{}, r.notLeaderLocked()
		}
		info, err := appendFn(r.mu.leaderEpoch)
		if err == nil {
			r.appendedLocked()
			return info, r.maybeAdvanceLocked()
		}
		var se *log.SequenceError
		if !errors.As(err, &se) || !se.Ahead() {
			return info, err
		}
		if timeout == nil {
			t := time.NewTimer(r.gapWait)
			defer t.Stop()
			timeout = t.C
		}
		appended := r.mu.appended
		r.mu.waiting++
		r.mu.Unlock()
		var expired bool
		select {
		case <-appended:
		case <-timeout:
			expired = true
		case <-ctx.Done():
			expired = true
		}
		r.mu.Lock()
		r.mu.waiting--
		if expired {
			return info, err
		}
	}
}

// KV returns the bucket's KV tablet for reads (lookups, scans) on the
// leader: ErrNotKV for a log table, ErrNotLeader on a follower. A new
// leader's reads wait until its high watermark reaches the start of its
// leader epoch (Kafka KIP-207 holds ListOffsets the same way): Pebble holds
// the rows below the high watermark only, and a promoted follower's high
// watermark may lag the old leader's until the other in-sync replicas
// fetch from it, while every write an earlier leader acknowledged is below
// the epoch's start. ctx bounds the wait (then ErrNotEnoughReplicas,
// retriable); a ctx already done does not wait at all.
//
// KV trusts this replica's view of its leadership, which a leader cut off
// from the metadata keeps after it was deposed: a linearizable read also
// confirms, after a metadata read barrier, that the metadata still names
// this node leader at the epoch KVEpoch returns (server's kvOf; DESIGN.md,
// "Reads on a deposed leader").
func (r *Replica) KV(ctx context.Context) (*kv.Tablet, error) {
	t, _, err := r.KVEpoch(ctx)
	return t, err
}

// KVEpoch is KV, and the leader epoch at which this node serves it.
func (r *Replica) KVEpoch(ctx context.Context) (*kv.Tablet, int32, error) {
	for {
		r.mu.Lock()
		var err error
		switch {
		case r.mu.closed:
			err = ErrClosed
		case r.kv == nil:
			err = fmt.Errorf("bucket %s: %w", r.tb, ErrNotKV)
		case r.mu.leader != r.nodeID:
			err = r.notLeaderLocked()
		}
		hw, start, wait, epoch := r.log.HighWatermark(), r.mu.epochStart, r.mu.advanced, r.mu.leaderEpoch
		r.mu.Unlock()
		if err != nil {
			return nil, 0, err
		}
		if hw >= start {
			return r.kv, epoch, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("bucket %s: %w: the new leader's high watermark %d has not reached the start of its leader epoch %d (the in-sync replicas have not fetched from it yet): %w",
				r.tb, ErrNotEnoughReplicas, hw, start, ctx.Err())
		}
	}
}

// ReadResult is what Read returns.
type ReadResult struct {
	// Batches holds whole batches below the high watermark.
	Batches []byte
	// HighWatermark, LogStartOffset and LogEndOffset as of the read.
	HighWatermark, LogStartOffset, LogEndOffset int64
}

// Read returns whole batches from offset, at most maxBytes (but at least
// one batch if any is committed), never above the high watermark. Below
// the local log start they come from remote storage when tiering put
// them there; LogStartOffset is then the remote start.
func (r *Replica) Read(offset int64, maxBytes int) (ReadResult, error) {
	return r.ReadInto(nil, offset, maxBytes)
}

// ReadInto is Read into buf's memory when it has the capacity (see
// log.Tablet.ReadInto); batches from remote storage are in a fresh buffer.
func (r *Replica) ReadInto(buf []byte, offset int64, maxBytes int) (ReadResult, error) {
	r.mu.Lock()
	closed := r.mu.closed
	r.mu.Unlock()
	if closed {
		return ReadResult{}, ErrClosed
	}
	hw := r.log.HighWatermark()
	res := ReadResult{HighWatermark: hw, LogStartOffset: r.LogStartOffset(), LogEndOffset: r.log.LogEndOffset()}
	if offset == hw {
		return res, nil // caught up; offsets above hw are checked by the log
	}
	var err error
	if offset < r.log.LogStartOffset() {
		res.Batches, err = r.readRemoteOr(offset, maxBytes, hw)
		return res, err
	}
	info, err := r.log.ReadInto(buf, offset, maxBytes, hw)
	if err != nil {
		return res, err
	}
	res.Batches = info.Batches
	return res, nil
}

// Advanced returns a channel closed when the high watermark next moves (or
// the replica changes role or closes).
func (r *Replica) Advanced() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.advanced
}

// close closes the log tablet; later calls fail with ErrClosed.
func (r *Replica) close() error {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil
	}
	r.mu.closed = true
	r.wakeLocked()
	r.mu.Unlock()
	var errs []error
	if r.kv != nil {
		errs = append(errs, r.kv.Close())
	}
	errs = append(errs, r.log.Close())
	return errors.Join(errs...)
}
