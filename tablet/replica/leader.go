package replica

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"strom/tablet/log"
)

// BucketFetch is one bucket of a follower's fetch.
type BucketFetch struct {
	TB TableBucket
	// LeaderEpoch is the leader epoch the follower believes current.
	LeaderEpoch int32
	// FetchOffset is the follower's log end: it holds everything below
	// (with a log flush policy, on disk: see flushFetched).
	FetchOffset int64
	// HighWatermark is the leader's high watermark as the follower last
	// learnt it; the leader answers at once when its own differs.
	HighWatermark int64
	// MaxBytes bounds the bucket's batches (at least one batch is returned
	// if any is due and the response's budget is not spent).
	MaxBytes int
}

// BucketFetchResult is the leader's answer for one bucket of a fetch.
type BucketFetchResult struct {
	TB TableBucket
	// Err is the bucket's error: ErrNotLeader, log.ErrFencedLeaderEpoch
	// (the follower's epoch is older), log.ErrOffsetOutOfRange (the fetch
	// offset is outside the leader's log; the offsets below say where it
	// is), ErrUnknownBucket, ErrClosed.
	Err error
	// HighWatermark, LogStartOffset and LogEndOffset are the leader's.
	HighWatermark, LogStartOffset, LogEndOffset int64
	// Batches are whole stored batches from FetchOffset, below the leader's
	// log end (not only below its high watermark).
	Batches []byte
	// Lent is, on the leader with FetchRequest.Buffer set, the buffer it
	// lent for the read (Batches are in it when it had the room,
	// log.Tablet.ReadInto), for the caller to give back once Batches are
	// sent; nil when none was lent.
	Lent []byte
}

// FetchRequest is a follower's fetch of every bucket it follows from one
// leader.
type FetchRequest struct {
	// Follower is the fetching node, in its run Incarnation
	// (Config.Incarnation; 0: none).
	Follower    int32
	Incarnation int64
	// MaxWait bounds the long poll.
	MaxWait time.Duration
	// MaxBytes bounds the batches of the whole response.
	MaxBytes int
	Buckets  []BucketFetch
	// Buffer, if set, lends the leader the buffers it reads batches into
	// (a pool's get; nil: fresh ones).
	Buffer func(n int) []byte
}

// broadcast wakes every waiter at once: wait returns a channel that the
// next notify closes.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// FetchAsLeader serves a follower's fetch (Kafka's and Fluss's replica
// fetch on the leader): for each bucket it records the fetch offset as the
// follower's log end (FollowerState), which may advance the high watermark
// and wake acks=-1 writers and consumers, and returns the batches from the
// fetch offset. It long-polls: it answers once a bucket has batches beyond
// its fetch offset, a high watermark other than the one the follower
// knows, or an error, or when req.MaxWait or ctx ends. At most
// req.MaxBytes of batches are returned in all.
func (m *Manager) FetchAsLeader(ctx context.Context, req FetchRequest) []BucketFetchResult {
	timer := time.NewTimer(req.MaxWait)
	defer timer.Stop()
	for {
		changed := m.changed.wait() // before the round, so no change is missed
		out := make([]BucketFetchResult, len(req.Buckets))
		budget, ready := req.MaxBytes, false
		for i, f := range req.Buckets {
			res := BucketFetchResult{TB: f.TB}
			r, err := m.Replica(f.TB)
			if err == nil {
				res = r.fetchAsLeader(req.Follower, req.Incarnation, f, min(f.MaxBytes, budget), time.Now(), req.Buffer)
			} else {
				res.Err = err
			}
			budget -= len(res.Batches)
			ready = ready || res.Err != nil || len(res.Batches) > 0 || res.HighWatermark != f.HighWatermark
			out[i] = res
		}
		if ready {
			return out
		}
		select {
		case <-changed:
		case <-timer.C:
			return out
		case <-ctx.Done():
			return out
		}
	}
}

// fetchAsLeader serves one bucket of a follower's fetch, with at most
// maxBytes of batches (none when maxBytes ≤ 0), read into a buffer of
// get's of maxBytes (log.Tablet.ReadInto), lent in the result.
func (r *Replica) fetchAsLeader(follower int32, incarnation int64, f BucketFetch, maxBytes int, now time.Time, get func(n int) []byte) BucketFetchResult {
	res := BucketFetchResult{TB: r.tb}
	r.mu.Lock()
	res.HighWatermark, res.LogStartOffset, res.LogEndOffset = r.log.HighWatermark(), r.log.LogStartOffset(), r.log.LogEndOffset()
	switch {
	case r.mu.closed:
		res.Err = ErrClosed
	case r.mu.leader != r.nodeID:
		res.Err = r.notLeaderLocked()
	case f.LeaderEpoch < r.mu.leaderEpoch:
		res.Err = fmt.Errorf("bucket %s: %w: the follower's epoch %d is older than the leader's %d", r.tb, log.ErrFencedLeaderEpoch, f.LeaderEpoch, r.mu.leaderEpoch)
	case f.LeaderEpoch > r.mu.leaderEpoch:
		res.Err = fmt.Errorf("bucket %s: %w: epoch %d is newer than this node's %d (its metadata lags)", r.tb, ErrNotLeader, f.LeaderEpoch, r.mu.leaderEpoch)
	case f.FetchOffset < res.LogStartOffset || f.FetchOffset > res.LogEndOffset:
		res.Err = fmt.Errorf("bucket %s: replica fetch: %w", r.tb, &log.OffsetOutOfRangeError{Offset: f.FetchOffset, LogStart: res.LogStartOffset, LogEnd: res.LogEndOffset})
	}
	if res.Err != nil {
		r.mu.Unlock()
		return res
	}
	r.recordFollowerLocked(follower, incarnation, f.FetchOffset, res.LogEndOffset, now)
	if err := r.maybeAdvanceLocked(); err != nil {
		res.Err = err
	}
	r.wakeISRCheckLocked(follower)
	res.HighWatermark = r.log.HighWatermark()
	r.mu.Unlock()
	if res.Err != nil || f.FetchOffset == res.LogEndOffset || maxBytes <= 0 {
		return res
	}
	// The leader's log is only cut by retention below the high watermark
	// or by a truncation after it stops leading; a read overlapping either
	// fails and the follower fetches again.
	if get != nil {
		res.Lent = get(maxBytes)
	}
	info, err := r.log.ReadInto(res.Lent, f.FetchOffset, maxBytes, res.LogEndOffset)
	var oor *log.OffsetOutOfRangeError
	if errors.As(err, &oor) {
		res.LogStartOffset, res.LogEndOffset = oor.LogStart, oor.LogEnd
	}
	res.Batches, res.Err = info.Batches, err
	return res
}

// recordFollowerLocked notes a follower's fetch at fetchOffset, sent by
// its run incarnation, while the leader's log ends at logEnd. The follower
// is caught up as of now when it asks for the log end, and as of its
// previous fetch when it asks for at least the log end of then (Kafka's
// lastCaughtUpTime).
//
// A fetch from another run than the one the metadata shows (Incarnations)
// is not recorded: one sent before the follower restarted and answered
// late (a long poll the leader still holds, a request delayed in the
// network) names a log end the node may no longer have (a power cut lost
// its unsynced tail, or it truncated), and would let it rejoin the ISR or
// move the high watermark on it (Kafka's KIP-903). It is still answered:
// the batches are of no harm. A fetch from a new run starts the
// follower's state afresh.
func (r *Replica) recordFollowerLocked(follower int32, incarnation, fetchOffset, logEnd int64, now time.Time) {
	if cur := r.incarnationOfLocked(follower); cur != 0 && incarnation != cur {
		return
	}
	if r.mu.followers == nil {
		r.mu.followers = map[int32]FollowerState{}
	}
	prev := r.mu.followers[follower]
	if prev.Incarnation != incarnation {
		prev = FollowerState{}
	}
	st := FollowerState{LogEnd: fetchOffset, CaughtUpAt: prev.CaughtUpAt, Incarnation: incarnation, fetchedAt: now, leaderEndAtFetch: logEnd}
	switch {
	case fetchOffset >= logEnd:
		st.CaughtUpAt = now
	case !prev.fetchedAt.IsZero() && fetchOffset >= prev.leaderEndAtFetch:
		st.CaughtUpAt = prev.fetchedAt
	}
	r.mu.followers[follower] = st
}

// incarnationOfLocked is node's incarnation as the metadata shows it, 0
// when unknown (or no Incarnations).
func (r *Replica) incarnationOfLocked(node int32) int64 {
	if r.incarnations == nil {
		return 0
	}
	return r.incarnations(node)
}

// currentLocked reports whether follower state f of node is of the run the
// metadata shows (or the metadata shows none): the state an earlier run's
// fetches left counts neither for the ISR nor for the high watermark.
func (r *Replica) currentLocked(node int32, f FollowerState) bool {
	cur := r.incarnationOfLocked(node)
	return cur == 0 || f.Incarnation == cur
}

// OffsetForLeaderEpoch answers a replica becoming follower (Kafka
// KIP-101/KIP-279): the largest epoch ≤ epoch in this leader's log and the
// offset where it ends there (log.Tablet.EndOffsetForEpoch). currentEpoch
// is the leader epoch the follower believes current, checked as a fetch's.
func (m *Manager) OffsetForLeaderEpoch(tb TableBucket, currentEpoch, epoch int32) (int32, int64, error) {
	r, err := m.Replica(tb)
	if err != nil {
		return 0, 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.mu.closed:
		return 0, 0, ErrClosed
	case r.mu.leader != r.nodeID || currentEpoch > r.mu.leaderEpoch:
		return 0, 0, r.notLeaderLocked()
	case currentEpoch < r.mu.leaderEpoch:
		return 0, 0, fmt.Errorf("bucket %s: %w: the follower's epoch %d is older than the leader's %d", r.tb, log.ErrFencedLeaderEpoch, currentEpoch, r.mu.leaderEpoch)
	}
	e, end := r.log.EndOffsetForEpoch(epoch)
	return e, end, nil
}

// State is a snapshot of a replica's role and progress, for diagnostics
// (the API's DescribeBuckets).
type State struct {
	// Leader is the bucket's leader as this replica applied it (-1: none),
	// at LeaderEpoch, with the in-sync replicas ISR.
	Leader, LeaderEpoch int32
	ISR                 []int32
	// HighWatermark, LogStartOffset and LogEndOffset are this replica's.
	HighWatermark, LogStartOffset, LogEndOffset int64
	// Followers is, on the leader, what it knows of each follower that has
	// fetched since its leadership started; nil on a follower.
	Followers map[int32]FollowerState
	// CorruptBatches counts the damaged batches (or ranges) the background
	// check of sealed segments found in this replica's log since it opened
	// (log.Tablet.CorruptBatches); CorruptRefetched those of them this
	// replica, as a follower, repaired by fetching them again;
	// CorruptRepaired those it, as the leader, rewrote in place from a
	// follower's copy (log.Tablet.RepairedRanges).
	CorruptBatches, CorruptRefetched, CorruptRepaired int64
	// KVRebuilt counts the times this replica's KV store, damaged (a
	// Pebble checksum failure), was rebuilt (repairKV).
	KVRebuilt int64
}

// State returns a snapshot of the replica's role and progress.
func (r *Replica) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := State{
		Leader: r.mu.leader, LeaderEpoch: r.mu.leaderEpoch, ISR: slices.Clone(r.mu.isr),
		HighWatermark: r.log.HighWatermark(), LogStartOffset: r.log.LogStartOffset(), LogEndOffset: r.log.LogEndOffset(),
		CorruptBatches: r.log.CorruptBatches(), CorruptRefetched: r.mu.corruptRefetched,
		CorruptRepaired: r.log.RepairedRanges(), KVRebuilt: r.mu.kvRebuilt,
	}
	if r.mu.leader == r.nodeID {
		st.Followers = maps.Clone(r.mu.followers)
	}
	return st
}
