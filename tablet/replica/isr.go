package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ISRChange is a bucket leader's request to change the bucket's ISR: the
// leader_isr it acts on (leader, leader epoch, bucket epoch) and the ISR
// it wants (Fluss's AdjustIsr, Kafka's AlterPartition).
type ISRChange struct {
	TB          TableBucket
	Leader      int32
	LeaderEpoch int32
	BucketEpoch int32
	ISR         []int32
	// Incarnations holds, for each follower ISR adds, the run whose
	// fetches found it caught up (FollowerState.Incarnation; 0 when its
	// fetches carried none): the coordinator refuses a joiner registered
	// in another run since (KIP-903).
	Incarnations map[int32]int64
}

// ISRChanger sends ISR changes to the coordinator, which writes them (the
// server's node-to-node call). It returns nil once the coordinator wrote
// the change, or the error it refused it with (a stale leader or bucket
// epoch, an ineligible replica) or could not be reached with.
type ISRChanger interface {
	AdjustISR(ctx context.Context, c ISRChange) error
}

// isrProposalLocked is the ISR check of a leader at now (Kafka's
// maybeShrinkIsr and maybeExpandIsr): the current ISR without the
// followers that have not caught up with the leader's log end for longer
// than maxLag, with the followers outside it whose log end reached the
// high watermark and the start of this leader epoch and that caught up
// within maxLag. A follower in the ISR
// that has not fetched in this leadership counts as caught up when it
// started. ok is false when there is nothing to change, when this node
// does not lead, or when a change it asked for at this bucket epoch is
// not in its metadata yet.
func (r *Replica) isrProposalLocked(now time.Time, maxLag time.Duration) (c ISRChange, ok bool) {
	if r.mu.closed || r.mu.leader != r.nodeID || r.mu.isrAsked == r.mu.bucketEpoch || r.isrBackingOffLocked(now) {
		return c, false
	}
	isr := slices.DeleteFunc(slices.Clone(r.mu.isr), func(id int32) bool {
		if id == r.nodeID {
			return false
		}
		caughtUp := r.mu.leaderSince
		if f, ok := r.mu.followers[id]; ok && r.currentLocked(id, f) && f.CaughtUpAt.After(caughtUp) {
			caughtUp = f.CaughtUpAt
		}
		return now.Sub(caughtUp) > maxLag
	})
	var joining []int32
	for id, f := range r.mu.followers {
		// Only one caught up within maxLag, which the shrink above would
		// keep: a follower cut off after catching up, whose last fetch
		// still shows it at the high watermark of an idle bucket, would
		// otherwise rejoin on that stale fetch and leave again at every
		// check, holding the high watermark meanwhile.
		if !slices.Contains(r.mu.isr, id) && r.canJoinLocked(id, f) && now.Sub(f.CaughtUpAt) <= maxLag {
			joining = append(joining, id)
		}
	}
	slices.Sort(joining)
	isr = append(isr, joining...)
	if slices.Equal(isr, r.mu.isr) {
		return c, false
	}
	c = ISRChange{TB: r.tb, Leader: r.nodeID, LeaderEpoch: r.mu.leaderEpoch, BucketEpoch: r.mu.bucketEpoch, ISR: isr}
	for _, id := range joining {
		if inc := r.mu.followers[id].Incarnation; inc != 0 {
			if c.Incarnations == nil {
				c.Incarnations = make(map[int32]int64, len(joining))
			}
			c.Incarnations[id] = inc
		}
	}
	return c, true
}

// isrRetryBackoff is how long a leader waits, at the same bucket epoch,
// before it asks again for an ISR change the coordinator refused or did
// not answer (a follower rejoining before the coordinator sees its node
// live, a request the coordinator took for stale because this node's
// metadata lags): a new bucket epoch ends the wait at once.
const isrRetryBackoff = time.Second

// isrBackingOffLocked reports whether, at now, the last ISR change asked
// for at this bucket epoch was refused less than isrRetryBackoff ago.
func (r *Replica) isrBackingOffLocked(now time.Time) bool {
	return r.mu.isrRefused.epoch == r.mu.bucketEpoch && now.Before(r.mu.isrRefused.until)
}

// canJoinLocked reports whether follower node, whose state is f, may
// rejoin the ISR from outside: it holds everything committed and fetched
// in this leader epoch (Kafka's isFollowerInSync), in the run the metadata
// shows (currentLocked: an earlier run's log end may be gone).
func (r *Replica) canJoinLocked(node int32, f FollowerState) bool {
	return r.currentLocked(node, f) && f.LogEnd >= r.log.HighWatermark() && f.LogEnd >= r.mu.epochStart
}

// wakeISRCheckLocked has the manager's ISR check run now when follower,
// just recorded by a fetch, is outside the ISR and may rejoin, and no
// change is asked at this bucket epoch yet: a follower rejoins as soon as
// it caught up, not at the next tick.
func (r *Replica) wakeISRCheckLocked(follower int32) {
	f, ok := r.mu.followers[follower]
	if r.isrWake == nil || !ok || slices.Contains(r.mu.isr, follower) || r.mu.isrAsked == r.mu.bucketEpoch ||
		r.isrBackingOffLocked(time.Now()) || !r.canJoinLocked(follower, f) {
		return
	}
	select {
	case r.isrWake <- struct{}{}:
	default: // a check is due already
	}
}

// checkISR asks the coordinator for the ISR change isrProposalLocked finds,
// if any. The replica applies the new ISR only when its metadata shows it
// (setLeaderAndISR), and asks for nothing more at this bucket epoch once
// the coordinator took a change, nor for isrRetryBackoff after it refused
// one. It returns whether it asked.
func (r *Replica) checkISR(ctx context.Context, isr ISRChanger, now time.Time, maxLag time.Duration) (bool, error) {
	r.mu.Lock()
	c, ok := r.isrProposalLocked(now, maxLag)
	if ok {
		r.askingLocked(c)
	}
	r.mu.Unlock()
	if !ok {
		return false, nil
	}
	if err := isr.AdjustISR(ctx, c); err != nil {
		r.mu.Lock()
		if r.mu.bucketEpoch == c.BucketEpoch {
			r.mu.isrRefused.epoch, r.mu.isrRefused.until = c.BucketEpoch, now.Add(isrRetryBackoff)
			if errors.Is(err, ErrISRChangeRefused) && r.mu.isrMaximal.epoch == c.BucketEpoch {
				// Nothing was written at this bucket epoch: had an earlier
				// ask been, the epoch would have moved and this one been
				// refused as stale.
				r.mu.isrMaximal.ids = nil
				if aerr := r.maybeAdvanceLocked(); aerr != nil {
					r.lg.Error("advance the high watermark after a refused ISR change", "err", aerr)
				}
			}
		}
		r.mu.Unlock()
		return true, fmt.Errorf("bucket %s: change the ISR from %v to %v: %w", r.tb, r.ISR(), c.ISR, err)
	}
	r.mu.Lock()
	if r.mu.bucketEpoch == c.BucketEpoch {
		r.mu.isrAsked = c.BucketEpoch
	}
	r.mu.Unlock()
	r.lg.Info("asked for an ISR change", "to", c.ISR, "bucket_epoch", c.BucketEpoch)
	return true, nil
}

// askingLocked notes, before ISR change c is sent, the followers it takes
// into the ISR (isrMaximal): from now until the metadata shows a newer
// bucket epoch the high watermark waits for them too. Else the high
// watermark could pass a joiner, which was at it when asked but whose
// fetches then stall, over the smaller ISR, and the coordinator write it
// in below records it lacks: elected, it would lose them.
func (r *Replica) askingLocked(c ISRChange) {
	if r.mu.isrMaximal.epoch != c.BucketEpoch {
		r.mu.isrMaximal.epoch, r.mu.isrMaximal.ids = c.BucketEpoch, nil
	}
	for _, id := range c.ISR {
		if !slices.Contains(r.mu.isr, id) && !slices.Contains(r.mu.isrMaximal.ids, id) {
			r.mu.isrMaximal.ids = append(r.mu.isrMaximal.ids, id)
		}
	}
}

// ISR returns the bucket's in-sync replicas as this replica last applied
// them from the metadata.
func (r *Replica) ISR() []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mu.isr)
}

// checkMinISRLocked refuses an acks=-1 write, before it is appended, when
// the bucket has fewer in-sync replicas than minISR (Kafka's and Fluss's
// NOT_ENOUGH_REPLICAS, retriable: the ISR may grow again).
func (r *Replica) checkMinISRLocked() error {
	if len(r.mu.isr) < r.minISR {
		return fmt.Errorf("bucket %s: %w: the ISR %v has %d replicas, acks=-1 needs %d (log.replica.min-in-sync-replicas-number)",
			r.tb, ErrNotEnoughReplicas, r.mu.isr, len(r.mu.isr), r.minISR)
	}
	return nil
}

// checkISRs runs the ISR check of every replica this node leads, every
// half of MaxLagTime (Kafka's ISR expiration) and when woken, until ctx is
// done.
func (m *Manager) checkISRs(ctx context.Context) {
	t := time.NewTicker(m.cfg.MaxLagTime / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.isrWake:
		}
		for _, r := range m.replicas() {
			rctx, cancel := context.WithTimeout(ctx, m.cfg.MaxLagTime)
			if _, err := r.checkISR(rctx, m.cfg.ISR, time.Now(), m.cfg.MaxLagTime); err != nil && ctx.Err() == nil {
				m.lg.Warn("ISR change not made; waiting for the metadata", "err", err)
			}
			cancel()
		}
	}
}

// ErrISRChangeRefused wraps an ISRChanger's error when the coordinator
// looked at the change at the bucket epoch it names and did not make it
// (an ineligible replica): nothing was written at that epoch. Any other
// error leaves open whether the change was written.
var ErrISRChangeRefused = errors.New("replica: the coordinator refused the ISR change")
