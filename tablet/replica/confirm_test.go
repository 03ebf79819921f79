package replica

import (
	"context"
	"errors"
	"testing"

	"strom/internal/metatest"
	"strom/raftmeta/catalog"
)

// An acks=-1 write whose batch the high watermark passed is acknowledged
// only if the metadata, read after a barrier begun then, still names this
// node leader at the write's epoch and every replica of its ISR holds the
// batch (confirmCommitted). The metadata changes here between the high
// watermark passing the batch and the barrier, as it does for a leader whose
// metadata lags (robustness seed 2615): the replica's own view is the old
// one when the write commits.
func TestAcksAllConfirmedWithTheMetadata(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// now is the leader_isr written after the commit, before the barrier.
		now  catalog.LeaderAndISR
		want error
	}{
		{"unchanged", catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 3, ISR: []int32{1}, BucketEpoch: 1}, nil},
		{"deposed", catalog.LeaderAndISR{Leader: 2, LeaderEpoch: 4, ISR: []int32{2}, BucketEpoch: 2}, ErrNotLeader},
		{"a new epoch of this leader", catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 4, ISR: []int32{1}, BucketEpoch: 2}, ErrNotLeader},
		{"an ISR member the high watermark did not count", catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}, BucketEpoch: 2}, ErrNotEnoughReplicas},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := metatest.NewNode(t)
			m := startManager(t, meta, t.TempDir())
			id := createTable(t, meta, "t", 1, []int32{1})
			tb := TableBucket{id, 0}
			setLeaderISR(t, meta, tb, catalog.LeaderAndISR{Leader: 1, LeaderEpoch: 3, ISR: []int32{1}, BucketEpoch: 1})
			r := leadingReplica(t, m, tb)
			waitFor(t, "leader epoch 3", func() bool { return r.State().LeaderEpoch == 3 })
			confirm := r.confirm
			r.confirm = func(ctx context.Context, tb TableBucket) (catalog.LeaderAndISR, error) {
				setLeaderISR(t, meta, tb, tc.now)
				return confirm(ctx, tb)
			}
			_, err := r.Append(ctx, batch(1), -1)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("acks=-1 append with the metadata at %+v: %v, want %v", tc.now, err, tc.want)
			}
			if hw := r.Log().HighWatermark(); hw != 1 {
				t.Fatalf("high watermark %d, want 1 (committed in the replica's view)", hw)
			}
		})
	}
}

// A leader that cannot complete the barrier (cut off from the metadata
// quorum) acknowledges nothing: the write is answered ErrNotLeader.
func TestAcksAllWithoutTheBarrierNotAcknowledged(t *testing.T) {
	meta := metatest.NewNode(t)
	m := startManager(t, meta, t.TempDir())
	id := createTable(t, meta, "t", 1, []int32{1})
	r := leadingReplica(t, m, TableBucket{id, 0})
	r.confirm = func(context.Context, TableBucket) (catalog.LeaderAndISR, error) {
		return catalog.LeaderAndISR{}, errors.New("test: no metadata quorum")
	}
	if _, err := r.Append(context.Background(), batch(1), -1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("acks=-1 append without a barrier: %v, want ErrNotLeader", err)
	}
	if _, err := r.Append(context.Background(), batch(1), 1); err != nil {
		t.Fatalf("acks=1 append: %v (it takes no barrier)", err)
	}
}
