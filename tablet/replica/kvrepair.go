package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// A replica's KV store whose Pebble found a damaged SST (a checksum
// failure on a read or in a compaction: kv.Tablet.Damaged) refuses reads
// and writes with kv.ErrStoreCorrupt (retriable) and is rebuilt here, in
// place, whatever the replica's role (DESIGN.md "Corruption"): refolded
// from the replica's own log when it starts at 0 (kv.Tablet.Rebuild), or,
// over a trimmed log, restored from the bucket's latest KV snapshot plus
// the log above it (kv.Tablet.Restore).

// kvRepairInterval is how often the manager looks for damaged KV stores.
const kvRepairInterval = time.Second

// repairKVs rebuilds the damaged KV stores of the hosted replicas, every
// kvRepairInterval, until ctx is done.
func (m *Manager) repairKVs(ctx context.Context) {
	every(ctx, kvRepairInterval, func() {
		for _, r := range m.replicas() {
			m.repairKV(ctx, r, time.Now())
		}
	})
}

// repairKV rebuilds r's KV if it is damaged, unless a failed try is less
// than repairBackoff old. It reports whether the KV is sound afterwards.
func (m *Manager) repairKV(ctx context.Context, r *Replica, now time.Time) bool {
	if r.kv == nil {
		return true
	}
	cause := r.kv.Damaged()
	if cause == nil {
		return true
	}
	r.mu.Lock()
	skip := r.mu.closed || now.Before(r.mu.kvRepairAfter)
	r.mu.Unlock()
	if skip {
		return false
	}
	if err := m.rebuildKV(ctx, r); err != nil {
		r.mu.Lock()
		r.mu.kvRepairAfter = now.Add(repairBackoff)
		r.mu.Unlock()
		r.lg.Error("a damaged kv could not be rebuilt: its reads stay refused", "cause", cause.Error(), "err", err.Error())
		return false
	}
	r.mu.Lock()
	r.mu.kvRebuilt++
	r.mu.Unlock()
	r.lg.Warn("rebuilt a damaged kv", "cause", cause.Error(), "log_start", r.log.LogStartOffset(), "flushed", r.kv.FlushedOffset())
	return true
}

// rebuildKV replaces r's damaged KV: from the log when it starts at 0, else
// from the latest KV snapshot at or above the log start. A leader's log is
// never cut for it (a snapshot above a leader's log end is refused); a
// follower's log restarts at the snapshot's offset when it ends below it,
// and the fetcher goes on from there.
func (m *Manager) rebuildKV(ctx context.Context, r *Replica) error {
	if r.log.LogStartOffset() == 0 {
		return r.kv.Rebuild()
	}
	s, err := m.latestSnapshot(r.tb)
	if err != nil {
		return err
	}
	if start := r.log.LogStartOffset(); s.LogOffset < start {
		return fmt.Errorf("bucket %s: %w: the latest (%d at offset %d) is below the log start %d", r.tb, ErrNoSnapshot, s.ID, s.LogOffset, start)
	}
	m.mu.RLock()
	t, ok := m.mu.tables[r.tb.TableID]
	m.mu.RUnlock()
	if !ok {
		return fmt.Errorf("bucket %s: %w", r.tb, ErrUnknownBucket)
	}
	dir := filepath.Join(m.dir(r.tb), "kv-restore")
	if err := m.downloadSnapshot(ctx, t, r.tb, s, dir); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return ErrClosed
	}
	if end := r.log.LogEndOffset(); s.LogOffset > end {
		if r.mu.leader == r.nodeID {
			return errors.Join(ErrNoSnapshot, fmt.Errorf("bucket %s: the latest snapshot's offset %d is above the leader's log end %d", r.tb, s.LogOffset, end))
		}
		if err := r.log.TruncateFullyAndStartAt(s.LogOffset); err != nil {
			return err
		}
	}
	return r.kv.Restore(dir)
}
