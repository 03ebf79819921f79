package replica

import (
	"context"
	"errors"
	"fmt"

	"strom/record"
	"strom/tablet/log"
)

// errStaleRole: a fetch or truncation was for a role the replica no longer
// has (the leader or its epoch changed meanwhile); it is dropped.
var errStaleRole = errors.New("replica: the bucket's leader changed meanwhile")

// followState is a follower's progress in its current leader epoch.
type followState struct {
	// truncated: the log was cut to the point of divergence with this
	// leader (truncateToLeader), so fetching may start.
	truncated bool
	// leaderHW is the leader's high watermark as the last fetch answered.
	leaderHW int64
}

// following is what the fetcher needs of a replica that follows leader.
type following struct {
	epoch     int32
	truncated bool
	fetch     BucketFetch
}

// following reports the replica's fetch state if it follows leader (and
// is not closed, nor restoring its KV in the background).
func (r *Replica) following(leader int32) (following, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed || r.mu.restoring || r.mu.leader != leader || leader == r.nodeID || leader < 0 {
		return following{}, false
	}
	return following{
		epoch:     r.mu.leaderEpoch,
		truncated: r.mu.follow.truncated,
		fetch: BucketFetch{
			TB: r.tb, LeaderEpoch: r.mu.leaderEpoch,
			FetchOffset: r.log.LogEndOffset(), HighWatermark: r.mu.follow.leaderHW,
		},
	}, true
}

// checkRoleLocked returns errStaleRole unless the replica still follows
// leader at epoch.
func (r *Replica) checkRoleLocked(leader, epoch int32) error {
	switch {
	case r.mu.closed:
		return ErrClosed
	case r.mu.leader != leader || r.mu.leaderEpoch != epoch:
		return errStaleRole
	}
	return nil
}

// appendFetched applies the leader's answer to a fetch made at epoch: the
// batches go to the log as they are (log.AppendAsFollower: offsets, epochs
// and writer state as the leader wrote them) and, for a primary-key
// bucket, their changelog to the KV's buffer (kv.ApplyChangelog); the high
// watermark becomes the leader's, bounded by the local log end, and the
// KV flushes into Pebble up to it.
func (r *Replica) appendFetched(leader, epoch int32, res BucketFetchResult) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkRoleLocked(leader, epoch); err != nil {
		return err
	}
	if len(res.Batches) > 0 {
		if err := r.log.AppendAsFollower(res.Batches); err != nil {
			return fmt.Errorf("bucket %s: append as follower: %w", r.tb, err)
		}
		if r.kv != nil {
			if err := r.kv.ApplyChangelog(res.Batches); err != nil {
				return fmt.Errorf("bucket %s: apply the changelog: %w", r.tb, err)
			}
		}
		r.appendedLocked()
	}
	r.mu.follow.leaderHW = res.HighWatermark
	old := r.log.HighWatermark()
	hw := r.log.SetHighWatermark(min(res.HighWatermark, r.log.LogEndOffset()))
	if hw == old {
		return nil
	}
	if r.kv != nil && hw > old {
		if err := r.kv.FlushTo(hw); err != nil {
			return fmt.Errorf("bucket %s: flush KV to %d: %w", r.tb, hw, err)
		}
	}
	r.wakeLocked()
	return nil
}

// refetchCorrupt repairs a follower whose log holds a damaged range from
// offset (found by the background check of sealed segments,
// log.Tablet.VerifyStep, which then refuses it to readers): the log and
// the KV are cut at offset and the fetcher fetches the rest again from the
// leader, which holds it. A leader repairs its damaged ranges from a
// follower's copy instead (repairAsLeader).
func (r *Replica) refetchCorrupt(leader, epoch int32, offset int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkRoleLocked(leader, epoch); err != nil {
		return err
	}
	r.lg.Warn("fetching a corrupt range again from the leader", "offset", offset, "log_end", r.log.LogEndOffset())
	if err := r.truncateLocked(offset); err != nil {
		return err
	}
	r.mu.corruptRefetched++
	return nil
}

// flushFetched fsyncs, if the log has a flush policy, what appendFetched
// appended, before the fetcher fetches again: the next fetch offset tells
// the leader this replica holds everything below it, and with a policy
// the high watermark must count only what is on disk, or a power cut of
// every replica could lose an acknowledged write (the follower, elected,
// without it). Kafka's follower fsyncs in its append path likewise. Holds
// no lock (the log's flush takes its own, then OnFlush takes r.mu).
func (r *Replica) flushFetched() error {
	if !r.log.HasFlushPolicy() {
		return nil
	}
	if err := r.log.Flush(); err != nil {
		return fmt.Errorf("bucket %s: fsync fetched batches: %w", r.tb, err)
	}
	return nil
}

// resetTo handles a fetch offset outside the leader's log: below its log
// start (retention deleted what the follower lacks) the log restarts empty
// there; above its log end (a divergent tail the truncation missed) it is
// cut to it. A primary-key follower below the leader's log start restores
// the latest KV snapshot instead, in the background (restore.go), so that
// the fetcher goes on with its other buckets meanwhile.
func (r *Replica) resetTo(leader, epoch int32, res BucketFetchResult) error {
	if r.kv != nil && r.snapshots != nil && r.log.LogEndOffset() < res.LogStartOffset {
		return r.snapshots.restoreFollowerInBackground(r, leader, epoch, res.LogStartOffset)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkRoleLocked(leader, epoch); err != nil {
		return err
	}
	end := r.log.LogEndOffset()
	switch {
	case end < res.LogStartOffset:
		r.lg.Info("follower behind the leader's log start: restarting the log there", "log_end", end, "leader_log_start", res.LogStartOffset)
		if err := r.log.TruncateFullyAndStartAt(res.LogStartOffset); err != nil {
			return err
		}
	case end > res.LogEndOffset:
		if err := r.truncateLocked(res.LogEndOffset); err != nil {
			return err
		}
	}
	return nil
}

// truncateLocked cuts the log (and its writer state, which the log
// rebuilds) and the KV at offset.
func (r *Replica) truncateLocked(offset int64) error {
	if offset >= r.log.LogEndOffset() {
		return nil
	}
	r.lg.Info("truncating to the leader's log", "from", r.log.LogEndOffset(), "to", offset)
	if err := r.log.TruncateTo(offset); err != nil {
		return fmt.Errorf("bucket %s: truncate the log to %d: %w", r.tb, offset, err)
	}
	if r.kv != nil {
		if err := r.kv.TruncateTo(offset); err != nil {
			return fmt.Errorf("bucket %s: truncate the KV to %d: %w", r.tb, offset, err)
		}
	}
	return nil
}

// endOffsetAsker asks a bucket's leader for the end of a leader epoch in
// its log (Peer.OffsetForLeaderEpoch bound to the leader and bucket).
type endOffsetAsker func(ctx context.Context, epoch int32) (int32, int64, error)

// truncateToLeader cuts the log of a replica that became follower of
// leader at epoch to the true point of divergence with the leader's log
// (Kafka KIP-101, KIP-279), not to its high watermark: it asks the leader
// where its own latest epoch ends there; if the leader knows only an older
// epoch, the follower looks that one up in its own log and asks again
// until both logs hold the same epoch, and cuts at the lesser of the two
// ends. The writer state and the KV are cut with the log.
func (r *Replica) truncateToLeader(ctx context.Context, leader, epoch int32, ask endOffsetAsker) error {
	target := int64(-1)
	for asked := r.log.LatestEpoch(); target < 0; {
		if asked == record.NoLeaderEpoch {
			target = r.log.LogEndOffset() // an empty log: nothing to cut
			break
		}
		le, end, err := ask(ctx, asked)
		if err != nil {
			return err
		}
		if le == record.NoLeaderEpoch || end == log.UndefinedOffset {
			target = r.log.HighWatermark() // the leader's log knows no epoch
			break
		}
		mine, myEnd := r.log.EndOffsetForEpoch(le)
		switch {
		case mine == le:
			target = min(end, myEnd)
		case mine == record.NoLeaderEpoch || mine >= asked:
			target = min(end, r.log.LogEndOffset())
		default:
			asked = mine // this log does not hold epoch le: ask about its own last one before
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkRoleLocked(leader, epoch); err != nil {
		return err
	}
	if err := r.truncateLocked(target); err != nil {
		return err
	}
	r.mu.follow.truncated = true
	return nil
}
