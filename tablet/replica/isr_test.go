package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"strom/internal/metatest"
	"strom/raftmeta"
	"strom/raftmeta/catalog"
)

// The leader's ISR decisions: a follower that has not caught up for longer
// than max-lag-time leaves (one that never fetched counts from the start
// of the leadership); one outside the ISR rejoins once its log end reaches
// the high watermark and the start of the leader epoch, if it caught up
// within max-lag-time.
func TestISRProposal(t *testing.T) {
	meta := metatest.NewNode(t)
	m := startManager(t, meta, t.TempDir())
	id := createTable(t, meta, "t", 1, []int32{1, 2, 3})
	r := leadingReplica(t, m, TableBucket{id, 0})
	const lag = 30 * time.Second
	start := time.Now()
	r.mu.Lock()
	r.mu.leaderSince = start
	r.mu.Unlock()
	for _, tc := range []struct {
		name       string
		isr        []int32
		hw         int64 // the leader's high watermark
		epochStart int64
		followers  map[int32]FollowerState
		at         time.Duration // since the leadership started
		want       []int32       // nil: no change
	}{
		{name: "all caught up", isr: []int32{1, 2, 3}, at: time.Minute,
			followers: map[int32]FollowerState{2: {LogEnd: 5, CaughtUpAt: start.Add(50 * time.Second)}, 3: {LogEnd: 5, CaughtUpAt: start.Add(40 * time.Second)}}},
		{name: "one lags", isr: []int32{1, 2, 3}, at: time.Minute, want: []int32{1, 2},
			followers: map[int32]FollowerState{2: {LogEnd: 5, CaughtUpAt: start.Add(50 * time.Second)}, 3: {LogEnd: 4, CaughtUpAt: start.Add(29 * time.Second)}}},
		{name: "never fetched, within the lag", isr: []int32{1, 2, 3}, at: lag},
		{name: "never fetched, past the lag", isr: []int32{1, 2, 3}, at: lag + time.Millisecond, want: []int32{1}},
		{name: "fetched, never caught up", isr: []int32{1, 2}, at: lag + time.Millisecond, want: []int32{1},
			followers: map[int32]FollowerState{2: {LogEnd: 3}}},
		{name: "caught up rejoins", isr: []int32{1, 2}, hw: 7, at: time.Second, want: []int32{1, 2, 3},
			followers: map[int32]FollowerState{2: {LogEnd: 7, CaughtUpAt: start}, 3: {LogEnd: 7, CaughtUpAt: start}}},
		// A follower cut off after it caught up: its last fetch shows it at
		// the high watermark (nothing was written since), but long ago.
		{name: "caught up long ago stays out", isr: []int32{1, 2}, hw: 7, at: time.Minute,
			followers: map[int32]FollowerState{2: {LogEnd: 7, CaughtUpAt: start.Add(time.Minute)}, 3: {LogEnd: 7, CaughtUpAt: start.Add(29 * time.Second)}}},
		{name: "below the high watermark stays out", isr: []int32{1, 2}, hw: 7, at: time.Second,
			followers: map[int32]FollowerState{2: {LogEnd: 7, CaughtUpAt: start}, 3: {LogEnd: 6, CaughtUpAt: start}}},
		{name: "below the leader epoch's start stays out", isr: []int32{1}, hw: 2, epochStart: 4, at: time.Second,
			followers: map[int32]FollowerState{2: {LogEnd: 3, CaughtUpAt: start}}},
		{name: "both at once", isr: []int32{1, 2}, hw: 7, at: time.Minute, want: []int32{1, 3},
			followers: map[int32]FollowerState{3: {LogEnd: 7, CaughtUpAt: start.Add(time.Minute)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.mu.isr, r.mu.followers, r.mu.epochStart = tc.isr, tc.followers, tc.epochStart
			for r.log.LogEndOffset() < tc.hw {
				if _, err := r.log.AppendAsLeader(batch(1), r.mu.leaderEpoch, start); err != nil {
					t.Fatal(err)
				}
			}
			r.log.SetHighWatermark(tc.hw)
			c, ok := r.isrProposalLocked(start.Add(tc.at), lag)
			if ok != (tc.want != nil) || ok && !slices.Equal(c.ISR, tc.want) {
				t.Fatalf("proposal %v (%v), want %v", c.ISR, ok, tc.want)
			}
			if ok && (c.Leader != 1 || c.LeaderEpoch != 3 || c.TB != r.tb) {
				t.Fatalf("proposal %+v does not name the leader_isr it acts on", c)
			}
		})
	}
}

// fakeCoordinator writes the ISR changes it is asked for, refusing a stale
// bucket epoch, as the coordinator does.
type fakeCoordinator struct {
	meta *raftmeta.Node
	mu   sync.Mutex
	asks []ISRChange
}

var errStale = errors.New("fake coordinator: stale bucket epoch")

func (f *fakeCoordinator) AdjustISR(ctx context.Context, c ISRChange) error {
	f.mu.Lock()
	f.asks = append(f.asks, c)
	f.mu.Unlock()
	_, cur, err := catalog.New(f.meta).Bucket(c.TB.TableID, c.TB.Bucket)
	if err != nil {
		return err
	}
	if cur.BucketEpoch != c.BucketEpoch || cur.LeaderEpoch != c.LeaderEpoch {
		return errStale
	}
	cur.ISR, cur.BucketEpoch = c.ISR, cur.BucketEpoch+1
	_, err = f.meta.Do(ctx, 0, catalog.SetLeaderISROp(c.TB.TableID, c.TB.Bucket, cur))
	return err
}

func (f *fakeCoordinator) calls() []ISRChange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asks)
}

// A follower that never catches up leaves the ISR through the coordinator;
// the leader applies the change from its metadata, and the high watermark
// it then computes over itself alone commits an acks=-1 write that was
// waiting. Once the coordinator took the change the leader asks nothing
// more.
func TestLaggingFollowerLeavesTheISR(t *testing.T) {
	meta := metatest.NewNode(t)
	coord := &fakeCoordinator{meta: meta}
	m := startManager(t, meta, t.TempDir(), func(c *Config) { c.ISR, c.MaxLagTime = coord, 100*time.Millisecond })
	id := createTable(t, meta, "t", 1, []int32{1, 2})
	tb := TableBucket{id, 0}
	r := leadingReplica(t, m, tb)
	// A safety net only: the write waits for the ISR change.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.Append(ctx, batch(1), -1); err != nil {
		t.Fatalf("acks=-1 write waiting for node 2: %v", err)
	}
	_, lisr, err := catalog.New(meta).Bucket(id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lisr.ISR, []int32{1}) || lisr.BucketEpoch != 1 {
		t.Fatalf("leader_isr %+v, want ISR [1] at bucket epoch 1", lisr)
	}
	if res, _ := r.Read(0, 1<<20); res.HighWatermark != 1 {
		t.Fatalf("high watermark %d after the shrink, want 1", res.HighWatermark)
	}
	// Nothing more to ask: the ISR is the leader alone.
	if calls := coord.calls(); len(calls) != 1 || calls[0].BucketEpoch != 0 || !slices.Equal(calls[0].ISR, []int32{1}) {
		t.Fatalf("the leader asked %+v, want one change to [1] at bucket epoch 0", calls)
	}
}

// With fewer in-sync replicas than log.replica.min-in-sync-replicas-number
// an acks=-1 write fails at once with ErrNotEnoughReplicas and appends
// nothing; acks=1 still appends, and with enough replicas acks=-1 is
// appended.
func TestAcksAllBelowMinISRFailsAtOnce(t *testing.T) {
	meta := metatest.NewNode(t)
	m := startManager(t, meta, t.TempDir(), func(c *Config) { c.MinInSyncReplicas = 2 })
	id := createTable(t, meta, "t", 1, []int32{1})
	tb := TableBucket{id, 0}
	r := leadingReplica(t, m, tb)
	// A safety net only: the write must fail before anything waits.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.Append(ctx, batch(1), -1)
	if !errors.Is(err, ErrNotEnoughReplicas) || ctx.Err() != nil {
		t.Fatalf("acks=-1 with ISR [1] and min ISR 2: %v (ctx %v), want ErrNotEnoughReplicas at once", err, ctx.Err())
	}
	if end := r.Log().LogEndOffset(); end != 0 {
		t.Fatalf("the refused write was appended: log end %d", end)
	}
	if _, err := r.Append(ctx, batch(1), 1); err != nil {
		t.Fatalf("acks=1: %v", err)
	}
	// Two in sync: the acks=-1 write is appended (it then waits for the
	// high watermark, which a done context cuts short).
	setLeaderISR(t, meta, tb, catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}, BucketEpoch: 1})
	waitFor(t, "the ISR of two", func() bool { return len(r.ISR()) == 2 })
	done, stop := context.WithCancel(context.Background())
	stop()
	if _, err := r.Append(done, batch(1), -1); !errors.Is(err, context.Canceled) {
		t.Fatalf("acks=-1 with ISR [1 2], min ISR 2: %v, want it appended and waiting", err)
	}
	if end := r.Log().LogEndOffset(); end != 2 {
		t.Fatalf("log end %d, want 2: the write with enough replicas was not appended", end)
	}
}

// An acks=-1 write appended with two in sync, waiting for the follower,
// when the ISR shrinks to the leader alone (min ISR 2): it is answered
// ErrNotEnoughReplicas at once, not OK, and the high watermark stays
// (TestHighWatermarkHeldBelowMinISR). Only the leader holds it, and the
// coordinator may elect the follower that left (an eligible leader replica)
// without it (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND).
func TestAcksAllCommittedBelowMinISRIsNotAcknowledged(t *testing.T) {
	meta, tb, r := leaderOfTwoMinTwo(t)
	errc := make(chan error, 1)
	go func() {
		_, err := r.Append(context.Background(), batch(1), -1)
		errc <- err
	}()
	waitFor(t, "the write appended", func() bool { return r.Log().LogEndOffset() == 1 })
	setLeaderISR(t, meta, tb, catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 3, ISR: []int32{1}, BucketEpoch: 2})
	if err := <-errc; !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=-1 write committed by a shrink to ISR [1], min ISR 2: %v, want ErrNotEnoughReplicas", err)
	}
	if hw := r.Log().HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d, want 0 (an ISR below min-in-sync commits nothing)", hw)
	}
}

// An ISR below min-in-sync holds the high watermark (KIP-966): the
// replicas that left it are eligible leader replicas, which the
// coordinator may elect, and they hold only what was committed before they
// left. Robustness seed 2805 (partition): node 3's registration expired
// under load, the coordinator took it out of the ISR [2 3] (min 2) into
// the ELR, node 2, alone in the ISR, committed and served six records
// node 3 lacked, and node 3 was elected from the ELR when node 2 was
// partitioned: the records read below the high watermark were rewritten.
func TestHighWatermarkHeldBelowMinISR(t *testing.T) {
	meta, tb, r := leaderOfTwoMinTwo(t)
	setLeaderISR(t, meta, tb, catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 3, ISR: []int32{1}, BucketEpoch: 2, ELR: []int32{2}})
	waitFor(t, "the ISR of one", func() bool { return len(r.ISR()) == 1 })
	if _, err := r.Append(context.Background(), batch(3), 1); err != nil {
		t.Fatal(err)
	}
	if hw := r.Log().HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d with the ISR [1] below min-in-sync 2, want 0", hw)
	}
	// Node 2 back in the ISR, caught up: the high watermark moves.
	setLeaderISR(t, meta, tb, catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}, BucketEpoch: 3})
	waitFor(t, "the ISR of two again", func() bool { return len(r.ISR()) == 2 })
	r.fetchAsLeader(2, 0, BucketFetch{TB: tb, LeaderEpoch: 3, FetchOffset: 3}, 0, time.Now(), nil)
	if hw := r.Log().HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d once the ISR [1 2] holds 3 records, want 3", hw)
	}
}

// refusingCoordinator refuses every ISR change, counting them.
type refusingCoordinator struct{ asks int }

func (f *refusingCoordinator) AdjustISR(context.Context, ISRChange) error {
	f.asks++
	return errors.New("fake coordinator: node 2 is not live and cannot join the ISR")
}

// A follower that may rejoin the ISR, but whose node the coordinator does
// not see live yet, is asked for once, not at every one of its fetches
// (each woke an ISR check of every bucket, and each check asked the
// coordinator again and logged the refusal): the leader waits
// isrRetryBackoff at that bucket epoch, or until the bucket epoch changes.
func TestRefusedISRChangeBacksOff(t *testing.T) {
	r := openLogReplica(t, 1)
	wake := make(chan struct{}, 1)
	r.isrWake = wake
	if err := r.setLeaderAndISR(1, 1, []int32{1}); err != nil {
		t.Fatal(err)
	}
	r.setBucketEpoch(3)
	woken := func() bool {
		select {
		case <-wake:
			return true
		default:
			return false
		}
	}
	fetch := func() { // node 2 at the log end, outside the ISR
		r.fetchAsLeader(2, 0, BucketFetch{TB: r.tb, LeaderEpoch: 1, FetchOffset: r.log.LogEndOffset()}, 0, time.Now(), nil)
	}
	fetch()
	if !woken() {
		t.Fatal("a caught-up follower outside the ISR did not wake the ISR check")
	}
	coord := &refusingCoordinator{}
	ctx := context.Background()
	// The checks' clock runs an hour ahead, so that the fetches below are
	// within the backoff whatever the machine's speed; the max lag is
	// longer, so that the follower still counts as caught up then.
	at := time.Now().Add(time.Hour)
	const maxLag = 2 * time.Hour
	if asked, err := r.checkISR(ctx, coord, at, maxLag); !asked || err == nil {
		t.Fatalf("checkISR = %v, %v; want asked and refused", asked, err)
	}
	fetch()
	if woken() {
		t.Error("the follower's next fetch woke the ISR check again right after the refusal")
	}
	if asked, _ := r.checkISR(ctx, coord, at.Add(isrRetryBackoff/2), maxLag); asked || coord.asks != 1 {
		t.Errorf("asked %d times within the backoff, want once", coord.asks)
	}
	at = at.Add(isrRetryBackoff)
	if asked, _ := r.checkISR(ctx, coord, at, maxLag); !asked || coord.asks != 2 {
		t.Errorf("after the backoff: asked %v (%d in all), want asked again", asked, coord.asks)
	}
	r.setBucketEpoch(4) // the metadata moved: ask at once
	if asked, _ := r.checkISR(ctx, coord, at, maxLag); !asked || coord.asks != 3 {
		t.Errorf("at a new bucket epoch: asked %v (%d in all), want asked at once", asked, coord.asks)
	}
}

// takingCoordinator takes every ISR change and writes none (its commit is
// slow): the leader's metadata goes on showing the old ISR.
type takingCoordinator struct{ err error }

func (f *takingCoordinator) AdjustISR(context.Context, ISRChange) error { return f.err }

// A follower the leader asks into the ISR counts for the high watermark
// from the moment it is asked, not only once the metadata shows it (Kafka's
// maximal ISR, KIP-497). Robustness seed 1303 lost 81 acknowledged appends
// without it: node 3 rejoined at the high watermark, its fetches then
// stalled, the coordinator's commit of [1 2 3] took 0.7 s, meanwhile the
// leader committed ten records over [1 2] alone, and once [1 2 3] was
// written node 3 was elected without them.
func TestAskedISRJoinHoldsTheHighWatermark(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refusal error // the coordinator's answer
		held    bool  // whether node 3 holds the high watermark after it
	}{
		{name: "taken", held: true},
		{name: "not known to be taken", refusal: errors.New("coordinator node 2: connection reset"), held: true},
		{name: "refused", refusal: fmt.Errorf("%w: node 3 is not live", ErrISRChangeRefused), held: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := openLogReplica(t, 1)
			if err := r.setLeaderAndISR(1, 1, []int32{1, 2}); err != nil {
				t.Fatal(err)
			}
			r.setBucketEpoch(3)
			fetch := func(node int32, offset int64) {
				t.Helper()
				if res := r.fetchAsLeader(node, 0, BucketFetch{TB: r.tb, LeaderEpoch: 1, FetchOffset: offset}, 0, time.Now(), nil); res.Err != nil {
					t.Fatal(res.Err)
				}
			}
			fetch(2, 0)
			fetch(3, 0) // at the high watermark: may rejoin
			asked, _ := r.checkISR(context.Background(), &takingCoordinator{err: tc.refusal}, time.Now(), time.Hour)
			if !asked {
				t.Fatal("the leader did not ask for node 3 to rejoin")
			}
			ctx := context.Background()
			for range 10 {
				if _, err := r.Append(ctx, batch(1), 1); err != nil {
					t.Fatal(err)
				}
			}
			fetch(2, 10)
			hw := r.Log().HighWatermark()
			if tc.held && hw != 0 {
				t.Fatalf("high watermark %d with node 3 asked into the ISR at 0, want 0", hw)
			}
			if !tc.held && hw != 10 {
				t.Fatalf("high watermark %d after the coordinator refused node 3, want 10 (nodes 1 and 2 hold it)", hw)
			}
			if !tc.held {
				return
			}
			// The change is written: node 3, still at 0, is in the ISR.
			if err := r.setLeaderAndISR(1, 1, []int32{1, 2, 3}); err != nil {
				t.Fatal(err)
			}
			r.setBucketEpoch(4)
			if hw := r.Log().HighWatermark(); hw != 0 {
				t.Fatalf("high watermark %d with ISR [1 2 3] and node 3 at 0, want 0", hw)
			}
			fetch(3, 10)
			if hw := r.Log().HighWatermark(); hw != 10 {
				t.Fatalf("high watermark %d once node 3 fetched at 10, want 10", hw)
			}
		})
	}
}

// leaderOfTwoMinTwo is a replica leading a bucket at epoch 3 with the ISR
// [1 2] at bucket epoch 1, min-in-sync 2.
func leaderOfTwoMinTwo(t *testing.T) (*raftmeta.Node, TableBucket, *Replica) {
	t.Helper()
	meta := metatest.NewNode(t)
	m := startManager(t, meta, t.TempDir(), func(c *Config) { c.MinInSyncReplicas = 2 })
	id := createTable(t, meta, "t", 1, []int32{1})
	tb := TableBucket{id, 0}
	r := leadingReplica(t, m, tb)
	setLeaderISR(t, meta, tb, catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}, BucketEpoch: 1})
	waitFor(t, "the ISR of two", func() bool { return len(r.ISR()) == 2 })
	return meta, tb, r
}
