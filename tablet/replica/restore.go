package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/raftmeta/catalog"
	"strom/remote"
	"strom/tablet/kv"
	"strom/tablet/log"
)

// Restore (issue 14 item 4; DESIGN.md "KV snapshots"): a replica whose KV
// is unusable (kv.ErrAheadOfLog at open: a wiped or lost KV over a trimmed
// log, or a log that starts above the KV), or a follower whose log end is
// below its leader's log start (a new replica, a wiped disk, one that fell
// behind the trimmed changelog), downloads the bucket's latest KV snapshot,
// restarts its log at the snapshot's offset when the log does not hold it,
// and replays the log from there (fetching the rest from its leader).

// ErrNoSnapshot: a replica needs a KV snapshot to rebuild its KV and the
// bucket has none that serves (KV snapshots off, or none taken yet).
var ErrNoSnapshot = errors.New("replica: no KV snapshot to restore")

// latestSnapshot is the bucket's newest retained KV snapshot.
func (m *Manager) latestSnapshot(tb TableBucket) (catalog.KvSnapshot, error) {
	if m.cfg.Snapshot.Store == nil {
		return catalog.KvSnapshot{}, fmt.Errorf("bucket %s: %w (remote.data.dir or kv.snapshot.interval not set)", tb, ErrNoSnapshot)
	}
	snaps, err := m.cat.KvSnapshots(tb.TableID, tb.Bucket)
	if err != nil {
		return catalog.KvSnapshot{}, err
	}
	s, ok := snaps.Latest()
	if !ok {
		return s, fmt.Errorf("bucket %s: %w (none taken yet)", tb, ErrNoSnapshot)
	}
	return s, nil
}

// downloadSnapshot fetches the files of snapshot s into dir (made afresh;
// every file fsynced), checking each one's size.
func (m *Manager) downloadSnapshot(ctx context.Context, t catalog.Table, tb TableBucket, s catalog.KvSnapshot, dir string) error {
	fs := m.fs()
	if err := fs.RemoveAll(dir); err != nil {
		return err
	}
	if err := log.CreateDir(fs, dir, false); err != nil {
		return err
	}
	prefix := remoteKVPrefix(t, tb)
	for _, f := range s.Files {
		if err := m.downloadFile(ctx, fs, prefix+f.Key, filepath.Join(dir, f.Name), f.Size); err != nil {
			return fmt.Errorf("bucket %s: download kv snapshot %d: %w", tb, s.ID, err)
		}
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (m *Manager) downloadFile(ctx context.Context, fs vfs.FS, key, path string, size int64) error {
	rc, err := m.cfg.Snapshot.Store.Get(ctx, key, remote.Range{})
	if err != nil {
		return err
	}
	defer rc.Close()
	out, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, rc)
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d bytes, the snapshot says %d", key, n, size)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// positionLog makes lt hold offset: unless its start is at or below offset
// and its end at or above, it restarts empty at offset.
func positionLog(lt *log.Tablet, offset int64) error {
	if lt.LogStartOffset() <= offset && offset <= lt.LogEndOffset() {
		return nil
	}
	return lt.TruncateFullyAndStartAt(offset)
}

// openRestored is open's way out of kv.ErrAheadOfLog (cause): the KV
// directory is replaced by the latest snapshot, downloaded under ctx, and
// the KV opened again. On failure the error names cause too.
func (m *Manager) openRestored(ctx context.Context, tb TableBucket, t catalog.Table, lt *log.Tablet, cfg kv.Config, cause error) (*kv.Tablet, error) {
	s, err := m.latestSnapshot(tb)
	if err != nil {
		return nil, errors.Join(cause, err)
	}
	m.lg.Warn("kv unusable: restoring the latest snapshot", "bucket", tb.String(), "cause", cause, "snapshot", s.ID, "log_offset", s.LogOffset)
	dir := filepath.Join(m.dir(tb), "kv-restore")
	if err := m.downloadSnapshot(ctx, t, tb, s, dir); err != nil {
		return nil, errors.Join(cause, err)
	}
	if err := positionLog(lt, s.LogOffset); err != nil {
		return nil, err
	}
	if err := kv.ReplaceDir(m.fs(), cfg.Dir, dir); err != nil {
		return nil, err
	}
	return kv.Open(cfg)
}

// restoreRetry is how long after a failed background restore the manager
// reconciles again (and so tries it again).
var restoreRetry = 5 * time.Second

// restoreInBackground runs restore (which opens tb's tablets from the
// latest snapshot and publishes its replica, or closes what it opened) in
// a goroutine of its own, so that a restore, a download of the whole KV,
// does not hold up the reconcile of the node's other replicas. Until it
// ends the bucket is not hosted: Replica and open return ErrRestoring
// (retriable), and removeStray leaves its directory alone. When it ends
// the manager reconciles again (the replica takes its role, the fetchers
// their buckets); after a failure, restoreRetry later, which tries again.
// Run waits for it before it closes the replicas.
func (m *Manager) restoreInBackground(tb TableBucket, restore func(ctx context.Context) error) {
	m.mu.Lock()
	m.mu.restoring[tb] = true
	ctx := m.mu.runCtx
	m.mu.Unlock()
	m.restores.Go(func() {
		err := restore(ctx)
		m.mu.Lock()
		delete(m.mu.restoring, tb)
		m.mu.Unlock()
		if err != nil {
			m.lg.Error("restore of a KV from its latest snapshot failed: tried again", "bucket", tb.String(), "err", err, "retry_in", restoreRetry)
			if !pause(ctx, restoreRetry) {
				return
			}
		} else {
			m.lg.Info("restored a KV from its latest snapshot", "bucket", tb.String())
		}
		select {
		case m.reconcileWake <- struct{}{}:
		default:
		}
	})
}

// restoreFollowerInBackground starts restoreFollower in a goroutine of its
// own (counted in restores, under Run's context): a follower's restore
// downloads the whole KV, and on the fetcher's goroutine it would stall
// every other bucket the fetcher fetches from the same leader. Until it
// ends the replica is restoring: following leaves it out of the fetches.
// When it ends the manager reconciles again, which wakes the fetchers; a
// restore that failed other than by a role change keeps the bucket out
// for restoreRetry first, so that a failing download is not tried again
// at once.
func (m *Manager) restoreFollowerInBackground(r *Replica, leader, epoch int32, leaderStart int64) error {
	r.mu.Lock()
	if err := r.checkRoleLocked(leader, epoch); err != nil || r.mu.restoring {
		r.mu.Unlock()
		return err
	}
	r.mu.restoring = true
	r.mu.Unlock()
	m.mu.RLock()
	ctx := m.mu.runCtx
	m.mu.RUnlock()
	m.restores.Go(func() {
		err := m.restoreFollower(ctx, r, leader, epoch, leaderStart)
		switch {
		case err == nil:
			r.lg.Info("follower restored its KV from the latest snapshot")
		case failed(err) != nil:
			r.lg.Error("follower restore of its KV from the latest snapshot failed: tried again", "err", err, "retry_in", restoreRetry)
			pause(ctx, restoreRetry)
		}
		r.mu.Lock()
		r.mu.restoring = false
		r.mu.Unlock()
		select {
		case m.reconcileWake <- struct{}{}:
		default:
		}
	})
	return nil
}

// restoreFollower rebuilds the KV of a follower of leader at epoch whose log
// ends below the leader's log start (leaderStart): the latest snapshot is
// downloaded (no lock held), then, if the role is still the same, the log
// restarts at the snapshot's offset and the KV is replaced by it; the
// fetcher goes on from there. restoreFollowerInBackground runs it.
func (m *Manager) restoreFollower(ctx context.Context, r *Replica, leader, epoch int32, leaderStart int64) error {
	s, err := m.latestSnapshot(r.tb)
	if err != nil {
		return fmt.Errorf("follower behind the leader's log start %d: %w", leaderStart, err)
	}
	if s.LogOffset < leaderStart {
		return fmt.Errorf("bucket %s: %w: the latest (%d at offset %d) is below the leader's log start %d", r.tb, ErrNoSnapshot, s.ID, s.LogOffset, leaderStart)
	}
	m.mu.RLock()
	t, ok := m.mu.tables[r.tb.TableID]
	m.mu.RUnlock()
	if !ok {
		return fmt.Errorf("bucket %s: %w", r.tb, ErrUnknownBucket)
	}
	r.lg.Info("follower behind the leader's log start: restoring the latest kv snapshot", "log_end", r.log.LogEndOffset(),
		"leader_log_start", leaderStart, "snapshot", s.ID, "log_offset", s.LogOffset)
	dir := filepath.Join(m.dir(r.tb), "kv-restore")
	if err := m.downloadSnapshot(ctx, t, r.tb, s, dir); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkRoleLocked(leader, epoch); err != nil {
		return err
	}
	if err := r.log.TruncateFullyAndStartAt(s.LogOffset); err != nil {
		return err
	}
	return r.kv.Restore(dir)
}
