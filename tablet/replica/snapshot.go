package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"strom/raftmeta/catalog"
	"strom/record"
	"strom/remote"
	"strom/tablet/kv"
	"strom/tablet/log"
)

// KV snapshots (issue 14 item 3; DESIGN.md "KV snapshots"): every
// SnapshotConfig.Interval the leader of each primary-key bucket takes a
// Pebble checkpoint, uploads the files remote storage does not hold yet,
// commits the list of retained snapshots through the coordinator, deletes
// the objects no retained snapshot names, and trims the changelog below the
// oldest retained snapshot once every in-sync replica holds the log up to
// it. Followers trim their own changelog the same way (below the oldest
// retained snapshot and their KV's flushed offset). A replica whose KV is
// missing or unusable restores the latest snapshot (restore.go).

// SnapshotConfig configures KV snapshots.
type SnapshotConfig struct {
	// Store is remote.data.dir's store; nil turns snapshots off.
	Store remote.Store
	// Interval is how often each leader snapshots its KV
	// (kv.snapshot.interval).
	Interval time.Duration
	// NumRetained is how many snapshots a bucket keeps
	// (kv.snapshot.num-retained); below 1 counts as 1.
	NumRetained int
	// Committer sends the retained snapshots to the coordinator.
	Committer KvSnapshotCommitter
}

// KvSnapshotCommit is a bucket leader's new list of retained snapshots.
type KvSnapshotCommit struct {
	TB          TableBucket
	Leader      int32
	LeaderEpoch int32
	Snapshots   []catalog.KvSnapshot
}

// KvSnapshotCommitter sends a bucket's retained KV snapshots to the
// coordinator (server's node-to-node call). It returns nil once the
// coordinator wrote them, or the error it refused them with (a fenced
// leader epoch).
type KvSnapshotCommitter interface {
	CommitKvSnapshots(ctx context.Context, c KvSnapshotCommit) error
}

// remoteKVPrefix is where a bucket's snapshots go:
// kv/<db>/<table>-<table id>/<bucket>/ (Fluss's layout): SSTs under
// shared/, the other files of each snapshot under snap-<id>-<random>/.
func remoteKVPrefix(t catalog.Table, tb TableBucket) string {
	return fmt.Sprintf("%s%d/", catalog.RemoteKVPrefix(t.Database, t.Name, tb.TableID), tb.Bucket)
}

// SnapshotOnce runs one round of KV snapshots on every primary-key bucket
// this node hosts: a leader snapshots its KV (when it changed since the
// latest snapshot) and trims its changelog, a follower trims its own.
// now is the snapshots' creation time (the manager's Run does it every
// SnapshotConfig.Interval).
func (m *Manager) SnapshotOnce(ctx context.Context, now time.Time) {
	m.eachBucket(ctx, "kv snapshot", func(r *Replica, t catalog.Table) error { return m.snapshotBucket(ctx, r, t, now) })
}

// eachBucket runs round on every hosted replica of a primary-key table,
// logging its errors as what.
func (m *Manager) eachBucket(ctx context.Context, what string, round func(*Replica, catalog.Table) error) {
	m.eachReplica(ctx, what, func(r *Replica, t catalog.Table) error {
		if r.kv == nil {
			return nil
		}
		return round(r, t)
	})
}

// eachReplica runs round on every hosted replica, logging its errors as
// what.
func (m *Manager) eachReplica(ctx context.Context, what string, round func(*Replica, catalog.Table) error) {
	m.mu.RLock()
	tables := m.mu.tables
	m.mu.RUnlock()
	for _, r := range m.replicas() {
		t, ok := tables[r.tb.TableID]
		if !ok {
			continue
		}
		if err := round(r, t); err != nil && ctx.Err() == nil {
			m.lg.Warn(what, "bucket", r.tb.String(), "err", err)
		}
	}
}

// every runs fn every d until ctx is done.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}

// snapshotBucket is one round on one bucket. A failure before the commit
// leaves the retained snapshots as they were (what was uploaded is an
// orphan the next successful round deletes).
func (m *Manager) snapshotBucket(ctx context.Context, r *Replica, t catalog.Table, now time.Time) error {
	r.mu.Lock()
	leader, epoch := r.mu.leader, r.mu.leaderEpoch
	r.mu.Unlock()
	snaps, err := m.kvSnapshots(r, epoch)
	if err != nil {
		return err
	}
	if leader != m.cfg.NodeID {
		return m.trimChangelog(r, t, snaps, nil, now)
	}
	// An idle bucket takes none, and an empty one none yet (latest is
	// the zero snapshot, at offset 0, when there is none).
	if latest, _ := snaps.Latest(); latest.LogOffset < r.kv.FlushedOffset() {
		s, err := m.takeSnapshot(ctx, r, t, snaps, leader, epoch, now)
		if err != nil {
			return err
		}
		kept := append(append([]catalog.KvSnapshot(nil), snaps.Snapshots...), s)
		kept = kept[max(0, len(kept)-max(1, m.cfg.Snapshot.NumRetained)):]
		if err := m.cfg.Snapshot.Committer.CommitKvSnapshots(ctx, KvSnapshotCommit{TB: r.tb, Leader: leader, LeaderEpoch: epoch, Snapshots: kept}); err != nil {
			return fmt.Errorf("commit kv snapshot %d: %w", s.ID, err)
		}
		snaps = catalog.KvSnapshots{LeaderEpoch: epoch, Snapshots: kept}
		r.mu.Lock()
		r.mu.snapshots = &snaps
		r.mu.Unlock()
		m.lg.Info("kv snapshot", "bucket", r.tb.String(), "id", s.ID, "log_offset", s.LogOffset, "bytes", s.Size())
		// Right after a commit this node was the leader: no other node
		// puts under the prefix now (a deposed leader's uploads are
		// orphans), so whatever no retained snapshot names goes.
		live := map[string]bool{}
		for _, s := range kept {
			for _, f := range s.Files {
				live[f.Key] = true
			}
		}
		prefix := remoteKVPrefix(t, r.tb)
		if err := removeObjectsExcept(ctx, m.cfg.Snapshot.Store, prefix, func(key string) bool { return live[strings.TrimPrefix(key, prefix)] }); err != nil {
			return err
		}
	}
	return m.trimChangelog(r, t, snaps, r.isrLogEnds(), now)
}

// kvSnapshots is the bucket's retained snapshots as the leader at epoch
// knows them: the ones it committed last at epoch, else the metadata's.
func (m *Manager) kvSnapshots(r *Replica, epoch int32) (catalog.KvSnapshots, error) {
	r.mu.Lock()
	own := r.mu.snapshots
	r.mu.Unlock()
	if own != nil && own.LeaderEpoch == epoch {
		return *own, nil
	}
	return m.cat.KvSnapshots(r.tb.TableID, r.tb.Bucket)
}

// takeSnapshot checkpoints the bucket's KV and uploads the checkpoint:
// an SST a retained snapshot already holds (same database, same name) is
// shared, every other file is put.
func (m *Manager) takeSnapshot(ctx context.Context, r *Replica, t catalog.Table, snaps catalog.KvSnapshots, leader, epoch int32, now time.Time) (catalog.KvSnapshot, error) {
	fs := m.fs()
	dir := filepath.Join(m.dir(r.tb), "kv-snapshot")
	if err := fs.RemoveAll(dir); err != nil { // a crash's leftover
		return catalog.KvSnapshot{}, err
	}
	offset, err := r.kv.Checkpoint(dir)
	if err != nil {
		return catalog.KvSnapshot{}, err
	}
	defer fs.RemoveAll(dir)
	id := int64(1)
	if latest, ok := snaps.Latest(); ok {
		id = latest.ID + 1
	}
	s := catalog.KvSnapshot{ID: id, LogOffset: offset, CreatedAt: now.UnixMilli(), Leader: leader, LeaderEpoch: epoch}
	held := map[string]int64{}
	for _, old := range snaps.Snapshots {
		for _, f := range old.Files {
			held[f.Key] = f.Size
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails (Go 1.24+)
	own := fmt.Sprintf("snap-%d-%s/", id, hex.EncodeToString(rnd[:]))
	names, err := fs.List(dir)
	if err != nil {
		return s, err
	}
	prefix := remoteKVPrefix(t, r.tb)
	for _, name := range names {
		st, err := fs.Stat(filepath.Join(dir, name))
		if err != nil {
			return s, err
		}
		f := catalog.KvSnapshotFile{Name: name, Key: own + name, Size: st.Size()}
		if kv.IsSharedFile(name) {
			f.Key = "shared/" + r.kv.ID() + "-" + name
		}
		if size, ok := held[f.Key]; !ok || size != f.Size {
			if err := m.putFile(ctx, filepath.Join(dir, name), prefix+f.Key, f.Size); err != nil {
				return s, fmt.Errorf("kv snapshot %d: %w", id, err)
			}
		}
		s.Files = append(s.Files, f)
	}
	return s, nil
}

// putFile uploads size bytes of a local file to key, as one streamed put.
func (m *Manager) putFile(ctx context.Context, path, key string, size int64) error {
	f, err := m.fs().Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return m.cfg.Snapshot.Store.Put(ctx, key, io.NewSectionReader(f, 0, size))
}

// isrLogEnds is, on the leader, the log end of every in-sync replica as
// its fetches tell (the leader's own included); a follower that has not
// fetched in this leadership counts as 0.
func (r *Replica) isrLogEnds() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ends := make([]int64, 0, len(r.mu.isr))
	for _, id := range r.mu.isr {
		if id == r.nodeID {
			ends = append(ends, r.log.LogEndOffset())
		} else {
			ends = append(ends, r.mu.followers[id].LogEnd)
		}
	}
	return ends
}

// trimChangelog deletes the changelog's oldest segments that every reader
// of it can do without (DESIGN.md "Changelog trim"):
//   - the KV: wholly below the oldest retained snapshot's offset and this
//     replica's own KV flushed offset (its own recovery replays from
//     there), and below each of holders (the in-sync replicas' log ends, on
//     a leader): a replica that falls behind the trimmed log restores a
//     snapshot;
//   - with tiering on, a consumer of the changelog: each segment is also
//     either expired (table.log.ttl at now) or in the committed remote log
//     manifest and older than the newest table.log.tiered.local-segments.
//
// Everything it reads is committed (the snapshots and the manifest through
// the coordinator), so a crash between any two steps of a snapshot or a
// tiering round leaves only segments it may still delete.
func (m *Manager) trimChangelog(r *Replica, t catalog.Table, snaps catalog.KvSnapshots, holders []int64, now time.Time) error {
	if len(snaps.Snapshots) == 0 {
		return nil
	}
	upTo := min(snaps.Snapshots[0].LogOffset, r.kv.FlushedOffset())
	for _, end := range holders {
		upTo = min(upTo, end)
	}
	if m.cfg.Tier.Store != nil {
		r.mu.Lock()
		epoch := r.mu.leaderEpoch
		r.mu.Unlock()
		man, err := m.manifest(r, epoch)
		if err != nil {
			return err
		}
		upTo = min(upTo, tieredTrimPoint(r.log.Segments(), man, t.Descriptor(), now))
	}
	if upTo <= r.log.LogStartOffset() {
		return nil
	}
	n, err := r.log.DeleteSegmentsBefore(upTo)
	if n > 0 {
		m.lg.Info("changelog trimmed", "bucket", r.tb.String(), "segments", n, "log_start", r.log.LogStartOffset())
	}
	return err
}

// tieredTrimPoint is the end of the longest run of oldest local segments
// of which each is expired (table.log.ttl at now) or held by man and
// older than the newest table.log.tiered.local-segments: the offset below
// which a changelog consumer loses nothing when they go.
func tieredTrimPoint(local []log.SegmentInfo, man catalog.RemoteLogManifest, d record.TableDescriptor, now time.Time) int64 {
	limit, keep := ttlLimit(d, now), localSegmentsKept(d)
	if len(local) == 0 {
		return 0
	}
	upTo := local[0].BaseOffset
	for i, s := range local {
		tiered := len(man.Segments) > 0 && man.StartOffset() <= s.BaseOffset && s.NextOffset <= man.EndOffset() && i < len(local)-keep
		expired := s.BaseOffset == s.NextOffset || s.MaxTimestamp < limit
		if !s.Sealed || !(tiered || expired) {
			break
		}
		upTo = s.NextOffset
	}
	return upTo
}
