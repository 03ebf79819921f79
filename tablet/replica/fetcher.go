package replica

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"strom/tablet/log"
)

// Peer is how a follower calls its leaders' nodes (the node-to-node
// ReplicaService, signed with the cluster secret).
type Peer interface {
	// FetchReplica sends a fetch to node leader (Manager.FetchAsLeader
	// there). The batches of its results may be overwritten by the next
	// FetchReplica to the same leader: the leader's one fetcher has applied
	// them (appended, and handed to the KV, which copies what it keeps)
	// before it fetches again.
	FetchReplica(ctx context.Context, leader int32, req FetchRequest) ([]BucketFetchResult, error)
	// OffsetForLeaderEpoch asks node leader where epoch ends in its log of
	// tb (Manager.OffsetForLeaderEpoch there).
	OffsetForLeaderEpoch(ctx context.Context, leader int32, tb TableBucket, currentEpoch, epoch int32) (int32, int64, error)
	// ReadReplicaRange asks node, a follower of req.TB, for its copy of
	// batches the leader's log holds damaged (Manager.ReadRange there).
	ReadReplicaRange(ctx context.Context, node int32, req RangeRequest) ([]byte, error)
}

// FetchConfig configures the replica fetchers.
type FetchConfig struct {
	// Peer calls the leaders; nil: no fetching (a single node).
	Peer Peer
	// MaxBytes bounds the batches of one fetch response
	// (log.replica.fetch.max-bytes).
	MaxBytes int
	// MaxBytesForBucket bounds one bucket's batches in it
	// (log.replica.fetch.max-bytes-for-bucket).
	MaxBytesForBucket int
	// MaxWait is how long the leader holds a fetch with nothing to answer
	// (log.replica.fetch.wait-max-time).
	MaxWait time.Duration
	// Backoff is the pause of a fetcher after a failed call to its leader,
	// and of one bucket after its own error
	// (log.replica.fetch.backoff-interval).
	Backoff time.Duration
}

// fetchTimeoutSlack is how much longer than MaxWait a fetch may take before
// the follower gives up on it (a leader that stopped answering).
const fetchTimeoutSlack = 5 * time.Second

// fetcher fetches, in one goroutine, every bucket this node follows from
// one leader node, in one long-polling request at a time (Kafka's and
// Fluss's ReplicaFetcherThread).
type fetcher struct {
	m      *Manager
	leader int32
	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		replicas map[TableBucket]*Replica
	}
	// wake is signalled when the buckets or their roles change.
	wake chan struct{}
}

func (m *Manager) startFetcher(ctx context.Context, leader int32) *fetcher {
	ctx, cancel := context.WithCancel(ctx)
	f := &fetcher{m: m, leader: leader, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	f.mu.replicas = map[TableBucket]*Replica{}
	go func() {
		defer close(f.done)
		f.run(ctx)
	}()
	return f
}

// set replaces the buckets the fetcher fetches and wakes it.
func (f *fetcher) set(rs map[TableBucket]*Replica) {
	f.mu.Lock()
	f.mu.replicas = rs
	f.mu.Unlock()
	f.poke()
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

func (f *fetcher) run(ctx context.Context) {
	lg := f.m.lg.With("leader", f.leader)
	backoff := bucketBackoff{lg: lg, d: f.m.cfg.Fetch.Backoff}
	var failing bool // log a failing leader once, not at every try
	for ctx.Err() == nil {
		err := f.round(ctx, &backoff)
		switch {
		case err == nil:
			if failing {
				lg.Info("fetching from the leader again")
			}
			failing = false
			continue
		case ctx.Err() != nil:
			return
		case !failing:
			lg.Warn("replica fetch failed; retrying", "err", err, "backoff", f.m.cfg.Fetch.Backoff)
		}
		failing = true
		t := time.NewTimer(f.m.cfg.Fetch.Backoff)
		select {
		case <-ctx.Done():
		case <-f.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// nodeError marks an error of the leader node rather than of one bucket:
// it could not be reached, or failed the whole call.
type nodeError struct{ err error }

func (e *nodeError) Error() string { return e.err.Error() }
func (e *nodeError) Unwrap() error { return e.err }

// bucketBackoff holds the buckets of one fetcher that failed (Kafka's
// delayed partitions of a fetcher thread): each is left out of the
// fetcher's requests for the backoff, while its role stays the one it
// failed in; a role change (a new leader or epoch) ends it at once. Owned
// by the fetcher's goroutine.
type bucketBackoff struct {
	lg *slog.Logger
	d  time.Duration
	m  map[TableBucket]backedOff
}

type backedOff struct {
	epoch int32
	until time.Time
}

// fail backs bucket tb off after err at leader epoch epoch (nothing when
// failed(err) is nil: the role changed meanwhile, and the bucket is tried
// again in its new one).
func (b *bucketBackoff) fail(tb TableBucket, epoch int32, err error, now time.Time) {
	if err = failed(err); err == nil {
		return
	}
	if b.m == nil {
		b.m = map[TableBucket]backedOff{}
	}
	if prev, ok := b.m[tb]; !ok || prev.epoch != epoch {
		b.lg.Warn("replica fetch of the bucket failed; retrying it", "bucket", tb, "err", err, "backoff", b.d)
	}
	b.m[tb] = backedOff{epoch: epoch, until: now.Add(b.d)}
}

// ok records a bucket fetched without error.
func (b *bucketBackoff) ok(tb TableBucket) {
	if _, failing := b.m[tb]; failing {
		delete(b.m, tb)
		b.lg.Info("fetching the bucket again", "bucket", tb)
	}
}

// waiting reports whether bucket tb, at leader epoch epoch, is backed off
// at now.
func (b *bucketBackoff) waiting(tb TableBucket, epoch int32, now time.Time) bool {
	e, ok := b.m[tb]
	return ok && e.epoch == epoch && now.Before(e.until)
}

// next is when the first backoff still running at now ends (zero: none).
func (b *bucketBackoff) next(now time.Time) time.Time {
	var first time.Time
	for _, e := range b.m {
		if e.until.After(now) && (first.IsZero() || e.until.Before(first)) {
			first = e.until
		}
	}
	return first
}

// round truncates the buckets that just became followers and fetches the
// others once, leaving out the buckets backed off. An error of one bucket
// (the leader's answer for it, or its local append or truncation) backs
// that bucket off only; an error of the call to the leader node is
// returned, and backs the whole fetcher off.
func (f *fetcher) round(ctx context.Context, backoff *bucketBackoff) error {
	f.mu.Lock()
	rs := make([]*Replica, 0, len(f.mu.replicas))
	for _, r := range f.mu.replicas {
		rs = append(rs, r)
	}
	for tb := range backoff.m {
		if f.mu.replicas[tb] == nil {
			delete(backoff.m, tb) // no longer followed from this leader
		}
	}
	f.mu.Unlock()
	cfg := f.m.cfg.Fetch
	req := FetchRequest{Follower: f.m.cfg.NodeID, Incarnation: f.m.cfg.Incarnation, MaxWait: cfg.MaxWait, MaxBytes: cfg.MaxBytes}
	epochs := map[TableBucket]int32{}
	now := time.Now()
	for _, r := range rs {
		st, ok := r.following(f.leader)
		if !ok || backoff.waiting(r.tb, st.epoch, now) {
			continue
		}
		if !st.truncated {
			ask := func(ctx context.Context, epoch int32) (int32, int64, error) {
				e, end, err := cfg.Peer.OffsetForLeaderEpoch(ctx, f.leader, r.tb, st.epoch, epoch)
				if err != nil && !isBucketError(err) {
					err = &nodeError{err}
				}
				return e, end, err
			}
			if err := r.truncateToLeader(ctx, f.leader, st.epoch, ask); err != nil {
				if ne := (*nodeError)(nil); errors.As(err, &ne) {
					return err
				}
				backoff.fail(r.tb, st.epoch, err, time.Now())
				continue
			}
			if st, ok = r.following(f.leader); !ok || !st.truncated {
				continue
			}
		}
		if o := r.log.FirstCorruptOffset(); o >= 0 {
			if err := r.refetchCorrupt(f.leader, st.epoch, o); err != nil {
				backoff.fail(r.tb, st.epoch, err, time.Now())
				continue
			}
			if st, ok = r.following(f.leader); !ok {
				continue
			}
		}
		st.fetch.MaxBytes = cfg.MaxBytesForBucket
		req.Buckets = append(req.Buckets, st.fetch)
		epochs[r.tb] = st.epoch
	}
	if len(req.Buckets) == 0 {
		var retry <-chan time.Time
		if next := backoff.next(time.Now()); !next.IsZero() {
			t := time.NewTimer(time.Until(next))
			defer t.Stop()
			retry = t.C
		}
		select {
		case <-ctx.Done():
		case <-f.wake:
		case <-retry:
		}
		return nil
	}
	fctx, cancel := context.WithTimeout(ctx, cfg.MaxWait+fetchTimeoutSlack)
	defer cancel()
	results, err := cfg.Peer.FetchReplica(fctx, f.leader, req)
	if err != nil {
		return err
	}
	for _, res := range results {
		epoch, ok := epochs[res.TB]
		r, err := f.m.Replica(res.TB)
		if !ok || err != nil {
			continue
		}
		switch {
		case errors.Is(res.Err, log.ErrOffsetOutOfRange):
			err = r.resetTo(f.leader, epoch, res)
		case res.Err != nil:
			err = res.Err
		default:
			if err = r.appendFetched(f.leader, epoch, res); err == nil && len(res.Batches) > 0 {
				err = r.flushFetched()
			}
		}
		if err != nil {
			backoff.fail(res.TB, epoch, err, time.Now())
		} else {
			backoff.ok(res.TB)
		}
	}
	return nil
}

// isBucketError reports whether err, from a leader, is its answer about
// one bucket (it does not lead it, or not at this epoch, or does not host
// it) rather than a failure of the call.
func isBucketError(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrUnknownBucket) || errors.Is(err, ErrClosed) ||
		errors.Is(err, log.ErrFencedLeaderEpoch) || errors.Is(err, log.ErrOffsetOutOfRange)
}

// failed is what a bucket's error makes the fetcher back off for: nil
// when the role changed meanwhile. A leader that refuses the fetch's epoch
// (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER) is retried after the
// backoff, or as soon as this node's metadata changes: either side's
// metadata may be the one that lags.
func failed(err error) error {
	if errors.Is(err, errStaleRole) || errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// syncFetchers gives each leader's fetcher the buckets this node follows
// from it, starting and stopping fetchers as leaders come and go. Run
// calls it after each reconcile.
func (m *Manager) syncFetchers(ctx context.Context, fetchers map[int32]*fetcher) {
	if m.cfg.Fetch.Peer == nil {
		return
	}
	by := map[int32]map[TableBucket]*Replica{}
	for _, r := range m.replicas() {
		if leader := r.leaderID(); leader >= 0 && leader != m.cfg.NodeID {
			if by[leader] == nil {
				by[leader] = map[TableBucket]*Replica{}
			}
			by[leader][r.tb] = r
		}
	}
	for leader, f := range fetchers {
		if by[leader] == nil {
			f.stop()
			delete(fetchers, leader)
		}
	}
	for leader, rs := range by {
		f := fetchers[leader]
		if f == nil {
			f = m.startFetcher(ctx, leader)
			fetchers[leader] = f
		}
		f.set(rs)
	}
}

// leaderID is the bucket's leader as the replica knows it (-1: none).
func (r *Replica) leaderID() int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.leader
}
