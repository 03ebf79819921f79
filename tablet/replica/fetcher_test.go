package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"strom/internal/metatest"
)

// fakePeer serves a follower's fetches from real leader replicas on the
// same process; a bucket whose leader is missing, or not at the epoch
// asked for, is answered ErrNotLeader. It counts the fetches of each
// bucket.
type fakePeer struct {
	mu      sync.Mutex
	leaders map[TableBucket]*Replica
	fetches map[TableBucket]int
	// ranges answers ReadReplicaRange (nil: as a node without the call).
	ranges func(ctx context.Context, node int32, req RangeRequest) ([]byte, error)
}

func (p *fakePeer) ReadReplicaRange(ctx context.Context, node int32, req RangeRequest) ([]byte, error) {
	if p.ranges == nil {
		return nil, errors.New("unimplemented: strom.v1.ReplicaService/ReadReplicaRange is not supported")
	}
	return p.ranges(ctx, node, req)
}

func (p *fakePeer) FetchReplica(_ context.Context, _ int32, req FetchRequest) ([]BucketFetchResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []BucketFetchResult
	for _, b := range req.Buckets {
		p.fetches[b.TB]++
		l := p.leaders[b.TB]
		if l == nil || l.leaderEpochOf() != b.LeaderEpoch {
			out = append(out, BucketFetchResult{TB: b.TB, Err: fmt.Errorf("bucket %s: %w", b.TB, ErrNotLeader)})
			continue
		}
		out = append(out, l.fetchAsLeader(req.Follower, req.Incarnation, b, b.MaxBytes, time.Now(), nil))
	}
	return out, nil
}

func (p *fakePeer) OffsetForLeaderEpoch(context.Context, int32, TableBucket, int32, int32) (int32, int64, error) {
	panic("not called: the followers' logs are empty")
}

func (p *fakePeer) fetchesOf(tb TableBucket) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fetches[tb]
}

func (r *Replica) leaderEpochOf() int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.leaderEpoch
}

// TestBucketErrorBacksOffThatBucketOnly: node 2 follows buckets a and b
// from node 1, whose answer for a is NOT_LEADER (its metadata lags). Only
// a backs off (for an hour here): b keeps fetching, one batch a fetch,
// until it holds the leader's whole log, while a is not asked again. A
// new epoch of a ends its backoff at once. Before, the error of a paused
// the whole fetcher, b with it.
func TestBucketErrorBacksOffThatBucketOnly(t *testing.T) {
	a, b := TableBucket{TableID: 1, Bucket: 0}, TableBucket{TableID: 1, Bucket: 1}
	newLeader := func(tb TableBucket, epoch int32) *Replica {
		l := openLogReplica(t, 1)
		l.tb = tb
		if err := l.setLeaderAndISR(1, epoch, []int32{1, 2}); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if _, err := l.Append(context.Background(), batch(1), 1); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}
	peer := &fakePeer{leaders: map[TableBucket]*Replica{b: newLeader(b, 1)}, fetches: map[TableBucket]int{}}
	m := NewManager(Config{NodeID: 2, Logger: metatest.Logger(t), Fetch: FetchConfig{
		Peer: peer, MaxBytes: 1 << 20, MaxBytesForBucket: 1, MaxWait: 10 * time.Millisecond, Backoff: time.Hour,
	}}, nil)
	followers := map[TableBucket]*Replica{}
	for _, tb := range []TableBucket{a, b} {
		r := openLogReplica(t, 2)
		r.tb = tb
		if err := r.setLeaderAndISR(1, 1, []int32{1, 2}); err != nil {
			t.Fatal(err)
		}
		followers[tb] = r
		m.mu.replicas[tb] = r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := m.startFetcher(ctx, 1)
	defer f.stop()
	f.set(followers)

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: not by the deadline", what)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	waitFor("bucket b fetches the leader's 5 batches", func() bool { return followers[b].log.LogEndOffset() == 5 })
	if n := peer.fetchesOf(a); n != 1 {
		t.Errorf("bucket a fetched %d times during its backoff, want 1", n)
	}
	if n := peer.fetchesOf(b); n < 5 {
		t.Errorf("bucket b fetched %d times, want at least 5 (one batch a fetch)", n)
	}

	// Node 1 leads a at epoch 2, and node 2 learns it: a fetches at once.
	la := newLeader(a, 2)
	peer.mu.Lock()
	peer.leaders[a] = la
	peer.mu.Unlock()
	if err := followers[a].setLeaderAndISR(1, 2, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	f.set(followers)
	waitFor("bucket a fetches at its new epoch", func() bool { return followers[a].log.LogEndOffset() == 5 })
}
