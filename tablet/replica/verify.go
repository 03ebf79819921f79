package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"strom/tablet/log"
)

// verifySegments checks the hosted replicas' sealed log segments in the
// background (log.Tablet.VerifyStep: CRCs; damage is logged, counted and
// refused to readers), a step of each replica in turn, round and round, at
// most SegmentVerifyRate bytes a second, until ctx is done.
func (m *Manager) verifySegments(ctx context.Context) {
	rate := m.cfg.SegmentVerifyRate
	step := min(rate, 1<<20) // the pause after a step is its bytes / rate
	for {
		read := int64(0)
		for _, r := range m.replicas() {
			n, err := r.log.VerifyStep(step)
			if err != nil && !errors.Is(err, log.ErrClosed) {
				m.lg.Warn("verify sealed segments", "bucket", r.tb.String(), "err", err)
			}
			m.repairAsLeader(ctx, r, time.Now())
			read += n
			if !pause(ctx, time.Duration(n)*time.Second/time.Duration(rate)) {
				return
			}
		}
		if read == 0 && !pause(ctx, time.Second) { // nothing sealed yet
			return
		}
	}
}

// repairBackoff is how long a leader waits after a failed repair of its
// damaged ranges before it tries again.
const repairBackoff = 5 * time.Second

// repairTimeout bounds a repair's calls to one follower, so that one that
// does not answer (cut off, paused) holds up the background check of the
// node's other replicas no longer than that.
const repairTimeout = 10 * time.Second

// repairAsLeader rewrites, if r leads its bucket, each damaged range of its
// log (found by VerifyStep) from the copy of an in-sync follower
// (ReadReplicaRange there, log.Tablet.RepairDamaged here): reads of the
// range serve again, the original bytes. A range no follower can give (none
// in the ISR holds it below its high watermark, or none answers: a node
// that predates ReadReplicaRange answers Unimplemented) stays refused, and
// is tried again after repairBackoff. A follower repairs itself
// (refetchCorrupt). Called by the background checker only, between its
// VerifySteps.
func (m *Manager) repairAsLeader(ctx context.Context, r *Replica, now time.Time) {
	peer := m.cfg.Fetch.Peer
	if peer == nil {
		return
	}
	r.mu.Lock()
	leading := !r.mu.closed && r.mu.leader == r.nodeID && now.After(r.mu.repairAfter)
	epoch, isr := r.mu.leaderEpoch, slices.Clone(r.mu.isr)
	r.mu.Unlock()
	if !leading {
		return
	}
	damaged := r.log.Damaged()
	failed := false
	for _, d := range damaged {
		var errs []error
		for _, node := range isr {
			if node == r.nodeID {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, repairTimeout)
			err := r.log.RepairDamaged(d.From, func(offset int64) ([]byte, error) {
				return peer.ReadReplicaRange(actx, node, RangeRequest{
					TB: r.tb, Leader: r.nodeID, LeaderEpoch: epoch,
					Offset: offset, EndOffset: d.To, MaxBytes: m.cfg.Fetch.MaxBytesForBucket,
				})
			})
			cancel()
			if err == nil {
				r.lg.Warn("repaired a corrupt range of the leader's log from a follower's copy",
					"offset", d.From, "next_offset", d.To, "from_node", node)
				errs = nil
				break
			}
			errs = append(errs, fmt.Errorf("from node %d: %w", node, err))
		}
		if errs != nil || len(isr) < 2 {
			failed = true
			r.lg.Error("a corrupt range of the leader's log could not be repaired: it stays refused to readers",
				"offset", d.From, "next_offset", d.To, "isr", isr, "err", errors.Join(errs...))
		}
	}
	if failed {
		r.mu.Lock()
		r.mu.repairAfter = now.Add(repairBackoff)
		r.mu.Unlock()
	}
}

// RangeRequest is a leader's ReadReplicaRange to one of its followers.
type RangeRequest struct {
	TB TableBucket
	// Leader is the asking node, the bucket's leader at LeaderEpoch.
	Leader, LeaderEpoch int32
	// Offset and EndOffset bound the batches asked for: from Offset,
	// below EndOffset.
	Offset, EndOffset int64
	// MaxBytes bounds the batches of the answer (at least one is given).
	MaxBytes int
}

// ReadRange answers a leader's ReadReplicaRange (repairAsLeader there):
// this replica's stored batches from req.Offset, below both req.EndOffset
// and its high watermark, at most maxBytes (at least one batch; maxBytes
// is the smaller of req.MaxBytes and the caller's bound). The replica must
// follow req.Leader at req.LeaderEpoch and have truncated its log to that
// leader's (so everything it holds agrees with the leader's log); it is
// not changed. Nothing below the high watermark is the leader's only copy
// of an acknowledged write, so what this returns is what the leader wrote.
func (m *Manager) ReadRange(req RangeRequest, maxBytes int) ([]byte, error) {
	r, err := m.Replica(req.TB)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	switch {
	case r.mu.closed:
		r.mu.Unlock()
		return nil, ErrClosed
	case req.LeaderEpoch < r.mu.leaderEpoch:
		r.mu.Unlock()
		return nil, fmt.Errorf("bucket %s: %w: the leader's epoch %d is older than this replica's %d", r.tb, log.ErrFencedLeaderEpoch, req.LeaderEpoch, r.mu.leaderEpoch)
	case r.mu.leader != req.Leader || r.mu.leaderEpoch != req.LeaderEpoch || r.nodeID == req.Leader || !r.mu.follow.truncated:
		err := fmt.Errorf("bucket %s: %w: node %d does not follow node %d at epoch %d (or has not truncated to it yet)", r.tb, ErrNotLeader, r.nodeID, req.Leader, req.LeaderEpoch)
		r.mu.Unlock()
		return nil, err
	}
	r.mu.Unlock()
	info, err := r.log.Read(req.Offset, max(min(req.MaxBytes, maxBytes), 1), min(req.EndOffset, r.log.HighWatermark()))
	return info.Batches, err
}

// pause waits d, or until ctx is done; it reports whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
