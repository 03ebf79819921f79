package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"strom/raftmeta/catalog"
	"strom/record"
	"strom/remote"
	"strom/tablet/log"
)

// Log tiering (issue 14 item 2; DESIGN.md "Log tiering"): every
// TierConfig.Interval the leader of each log-table bucket copies its rolled
// segments below the high watermark to remote storage, commits the new
// manifest through the coordinator, and only then deletes the local
// segments beyond table.log.tiered.local-segments. A primary-key table's
// changelog is tiered the same way; its local segments are deleted by the
// changelog trim (snapshot.go), which also needs them below the oldest
// retained KV snapshot. Reads below the local log start are served from
// the remote segments (remoteread.go).

// TierConfig configures log tiering.
type TierConfig struct {
	// Store is remote.data.dir's store; nil turns tiering off.
	Store remote.Store
	// Interval is how often each leader tiers its log
	// (remote.log.task-interval-duration).
	Interval time.Duration
	// Committer sends manifests to the coordinator.
	Committer RemoteLogCommitter
	// CacheDir holds downloaded remote segments; it is emptied when the
	// manager starts.
	CacheDir string
	// CacheBytes bounds the bytes of downloaded segments kept in CacheDir
	// (remote.log.cache.size); the segment being read is kept even when it
	// alone is larger.
	CacheBytes int64
}

// RemoteLogCommit is a bucket leader's new remote log manifest.
type RemoteLogCommit struct {
	TB          TableBucket
	Leader      int32
	LeaderEpoch int32
	Segments    []catalog.RemoteLogSegment
}

// RemoteLogCommitter sends a remote log manifest to the coordinator
// (server's node-to-node call). It returns nil once the coordinator wrote
// it, or the error it refused it with (a fenced leader epoch).
type RemoteLogCommitter interface {
	CommitRemoteLog(ctx context.Context, c RemoteLogCommit) error
}

// remoteLogPrefix is where a bucket's segments go:
// log/<db>/<table>-<table id>/<bucket>/ (Fluss's layout), each segment's
// objects under <segment id>/.
func remoteLogPrefix(t catalog.Table, tb TableBucket) string {
	return fmt.Sprintf("%s%d/", catalog.RemoteLogPrefix(t.Database, t.Name, tb.TableID), tb.Bucket)
}

// segmentKey is the key of one of a segment's objects: suffix is .log,
// .index or .timeindex.
func segmentKey(prefix string, s catalog.RemoteLogSegment, suffix string) string {
	return prefix + s.ID + "/" + fmt.Sprintf("%020d", s.BaseOffset) + suffix
}

// TierOnce runs the tiering task of every bucket this node leads once
// (log tables and primary-key tables' changelogs), with now the time
// table.log.ttl is judged at (the manager's Run does it every
// TierConfig.Interval).
func (m *Manager) TierOnce(ctx context.Context, now time.Time) {
	m.eachReplica(ctx, "log tiering", func(r *Replica, t catalog.Table) error { return m.tierBucket(ctx, r, t, now) })
}

// ttlLimit is the commit timestamp (ms) below which a segment of a table
// with descriptor d is expired at now (table.log.ttl); math.MinInt64 when
// nothing expires.
func ttlLimit(d record.TableDescriptor, now time.Time) int64 {
	if v, ok := d.Option(record.OptLogTTL); ok {
		if ttl, err := record.ParseDuration(v); err == nil && ttl > 0 {
			return now.UnixMilli() - ttl.Milliseconds()
		}
	}
	return math.MinInt64
}

// localSegmentsKept is table.log.tiered.local-segments (the active
// segment counted), at least 1.
func localSegmentsKept(d record.TableDescriptor) int {
	if v, ok := d.Option(record.OptLogTieredLocalSegments); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 {
			return n
		}
	}
	return 2
}

// tierBucket is one round of the tiering task of a bucket: remove orphans,
// drop expired remote segments (table.log.ttl), upload the new rolled
// segments, commit, then delete the expired segments' objects and the local segments beyond
// table.log.tiered.local-segments. A failure anywhere before the commit
// leaves the manifest as it was (what was uploaded is an orphan the next
// round removes); the next round starts again from the manifest.
func (m *Manager) tierBucket(ctx context.Context, r *Replica, t catalog.Table, now time.Time) error {
	r.mu.Lock()
	leader, epoch := r.mu.leader, r.mu.leaderEpoch
	r.mu.Unlock()
	if leader != m.cfg.NodeID {
		return nil
	}
	man, err := m.manifest(r, epoch)
	if err != nil {
		return err
	}
	store, prefix := m.cfg.Tier.Store, remoteLogPrefix(t, r.tb)
	if err := removeOrphans(ctx, store, prefix, man); err != nil {
		return err
	}
	d := t.Descriptor()
	segs := man.Segments
	// Segments whose newest batch is older than limit are expired
	// (table.log.ttl): dropped from the manifest, never uploaded.
	limit := ttlLimit(d, now)
	var expired []catalog.RemoteLogSegment
	for len(segs) > 0 && segs[0].MaxTimestamp < limit {
		expired, segs = append(expired, segs[0]), segs[1:]
	}
	segs = append([]catalog.RemoteLogSegment(nil), segs...)
	hw := r.log.HighWatermark()
	var gapErr error
	for _, s := range r.log.Segments() {
		end := man.EndOffset()
		if len(segs) > 0 {
			end = segs[len(segs)-1].EndOffset
		}
		if !s.Sealed || s.NextOffset > hw || s.NextOffset <= end || s.BaseOffset == s.NextOffset || s.MaxTimestamp < limit {
			continue
		}
		if len(segs) > 0 && s.BaseOffset != end {
			// The remote log ends at end and the local segments do not
			// continue it. The segments below end stay as they are, named
			// by the manifest (a consumer from the earliest offset reads
			// them): the range between is copied first, from a follower's
			// copy when it is below this replica's log (it restored a KV
			// snapshot, so its log starts at the snapshot's offset), else
			// from this log (its segments are cut elsewhere than the old
			// leader's). Until that works nothing above end is tiered.
			// An expired gap (local retention removed segments never
			// tiered) resolves itself: the segments below it are older,
			// so the TTL above drops them from the manifest first.
			to := s.BaseOffset
			if s.BaseOffset < end {
				to = s.NextOffset
			}
			rs, err := m.uploadRange(ctx, r, prefix, epoch, end, to)
			if err != nil {
				gapErr = fmt.Errorf("the remote log ends at %d, the local segment at %d does not continue it and offsets %d to %d could not be copied: nothing above is tiered until they are: %w",
					end, s.BaseOffset, end, to, err)
				break
			}
			segs = append(segs, rs)
			if to == s.NextOffset {
				continue
			}
		}
		rs, err := m.uploadSegment(ctx, prefix, s, epoch)
		if err != nil {
			return err
		}
		segs = append(segs, rs)
	}
	if len(expired) > 0 || len(segs) != len(man.Segments) {
		if err := m.cfg.Tier.Committer.CommitRemoteLog(ctx, RemoteLogCommit{TB: r.tb, Leader: leader, LeaderEpoch: epoch, Segments: segs}); err != nil {
			return fmt.Errorf("commit remote log manifest: %w", err)
		}
		r.mu.Lock()
		r.mu.tiered = &catalog.RemoteLogManifest{LeaderEpoch: epoch, Segments: segs}
		r.mu.Unlock()
		for _, s := range expired {
			if err := deleteSegmentObjects(ctx, store, prefix, s); err != nil {
				return err
			}
		}
	}
	if r.kv != nil {
		// A changelog's local segments are also its KV's write-ahead log:
		// the trim deletes them, below the oldest retained snapshot too.
		snaps, err := m.kvSnapshots(r, epoch)
		if err != nil {
			return err
		}
		return errors.Join(gapErr, m.trimChangelog(r, t, snaps, r.isrLogEnds(), now))
	}
	if len(segs) == 0 {
		return gapErr
	}
	keep := localSegmentsKept(d)
	local := r.log.Segments()
	if len(local) <= keep {
		return gapErr
	}
	_, err = r.log.DeleteSegmentsBefore(min(local[len(local)-keep].BaseOffset, segs[len(segs)-1].EndOffset))
	return errors.Join(gapErr, err)
}

// manifest is the bucket's remote log manifest as the leader at epoch
// knows it: the one it committed last at epoch (its metadata may not show
// it yet), else the metadata's, which holds every commit of an earlier
// leader (they precede this leader's election in the Raft log).
func (m *Manager) manifest(r *Replica, epoch int32) (catalog.RemoteLogManifest, error) {
	r.mu.Lock()
	own := r.mu.tiered
	r.mu.Unlock()
	if own != nil && own.LeaderEpoch == epoch {
		return *own, nil
	}
	return m.cat.RemoteLogs(r.tb.TableID, r.tb.Bucket)
}

// uploadSegment copies a sealed local segment and its index files to a new
// segment id under prefix.
func (m *Manager) uploadSegment(ctx context.Context, prefix string, s log.SegmentInfo, epoch int32) (catalog.RemoteLogSegment, error) {
	var id [6]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	rs := catalog.RemoteLogSegment{
		ID:         fmt.Sprintf("%020d-%d-%s", s.BaseOffset, epoch, hex.EncodeToString(id[:])),
		BaseOffset: s.BaseOffset, EndOffset: s.NextOffset, SizeBytes: s.Size, MaxTimestamp: s.MaxTimestamp,
	}
	base := strings.TrimSuffix(s.Path, ".log")
	// The .log last: a segment whose .log is there has its indexes too.
	for _, suffix := range []string{".index", ".timeindex", ".log"} {
		f, err := m.fs().Open(base + suffix)
		if errors.Is(err, os.ErrNotExist) && suffix != ".log" {
			continue // a sealed segment's indexes are rebuilt only when missing at open
		}
		if err != nil {
			return rs, fmt.Errorf("tier segment %d: %w", s.BaseOffset, err)
		}
		size := s.Size
		if suffix != ".log" {
			st, err := f.Stat()
			if err != nil {
				f.Close()
				return rs, fmt.Errorf("tier segment %d: %w", s.BaseOffset, err)
			}
			size = st.Size()
		}
		// A section reader is seekable, so the S3 store sends it as one
		// streamed PutObject (remote/DESIGN.md).
		err = m.cfg.Tier.Store.Put(ctx, segmentKey(prefix, rs, suffix), io.NewSectionReader(f, 0, size))
		f.Close()
		if err != nil {
			return rs, fmt.Errorf("tier segment %d: %w", s.BaseOffset, err)
		}
	}
	return rs, nil
}

// uploadRange copies the batches [from, to) of r's bucket to a new remote
// segment of a .log object alone (reads walk the batch headers; no index
// is needed): from this replica's log when it holds from, else from the
// first in-sync follower that holds them all (ReadReplicaRange, as the
// repair of a damaged range). They go through a temporary file in the
// segment cache's directory (emptied at start, so a crash leaves nothing
// there). Every batch is checked (frame, CRC) and must continue the one
// before; the last must end at to.
func (m *Manager) uploadRange(ctx context.Context, r *Replica, prefix string, epoch int32, from, to int64) (catalog.RemoteLogSegment, error) {
	maxBytes := max(m.cfg.Fetch.MaxBytesForBucket, 1<<20)
	if r.log.LogStartOffset() <= from {
		return m.uploadBatches(ctx, prefix, epoch, from, to, func(off int64) ([]byte, error) {
			info, err := r.log.Read(off, maxBytes, to)
			return info.Batches, err
		})
	}
	peer := m.cfg.Fetch.Peer
	if peer == nil {
		return catalog.RemoteLogSegment{}, fmt.Errorf("offsets %d to %d are below this replica's log start %d and there is no follower to copy them from", from, to, r.log.LogStartOffset())
	}
	r.mu.Lock()
	isr := slices.Clone(r.mu.isr)
	r.mu.Unlock()
	var errs []error
	for _, node := range isr {
		if node == r.nodeID {
			continue
		}
		rs, err := m.uploadBatches(ctx, prefix, epoch, from, to, func(off int64) ([]byte, error) {
			cctx, cancel := context.WithTimeout(ctx, repairTimeout)
			defer cancel()
			return peer.ReadReplicaRange(cctx, node, RangeRequest{
				TB: r.tb, Leader: r.nodeID, LeaderEpoch: epoch, Offset: off, EndOffset: to, MaxBytes: maxBytes,
			})
		})
		if err == nil {
			r.lg.Info("tiered a range below the local log start from a follower's copy", "offset", from, "next_offset", to, "from_node", node)
			return rs, nil
		}
		errs = append(errs, fmt.Errorf("from node %d: %w", node, err))
	}
	if len(errs) == 0 {
		return catalog.RemoteLogSegment{}, fmt.Errorf("offsets %d to %d are below this replica's log start %d and no other replica is in the ISR", from, to, r.log.LogStartOffset())
	}
	return catalog.RemoteLogSegment{}, errors.Join(errs...)
}

// uploadBatches writes the batches [from, to) that read returns (each call
// whole batches from its offset, at least one) to a temporary file, then
// puts it as the .log of a new segment.
func (m *Manager) uploadBatches(ctx context.Context, prefix string, epoch int32, from, to int64, read func(offset int64) ([]byte, error)) (catalog.RemoteLogSegment, error) {
	var id [6]byte
	_, _ = rand.Read(id[:])
	rs := catalog.RemoteLogSegment{
		ID:         fmt.Sprintf("%020d-%d-%s", from, epoch, hex.EncodeToString(id[:])),
		BaseOffset: from, EndOffset: to, MaxTimestamp: -1,
	}
	f, err := os.CreateTemp(m.cfg.Tier.CacheDir, ".range-*")
	if err != nil {
		return rs, err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	for off := from; off < to; {
		if err := ctx.Err(); err != nil {
			return rs, err
		}
		data, err := read(off)
		if err != nil {
			return rs, fmt.Errorf("read at %d: %w", off, err)
		}
		if len(data) == 0 {
			return rs, fmt.Errorf("read at %d: no batches", off)
		}
		for rest := data; len(rest) > 0; {
			b, next, err := record.NextBatch(rest)
			if err == nil {
				err = b.Validate()
			}
			if err != nil {
				return rs, fmt.Errorf("read at %d: %w", off, err)
			}
			if b.BaseOffset() != off || b.NextOffset() > to {
				return rs, fmt.Errorf("read at %d: %w: a batch of offsets %d to %d", off, log.ErrOffsetMismatch, b.BaseOffset(), b.NextOffset())
			}
			rs.MaxTimestamp = max(rs.MaxTimestamp, b.CommitTimestamp())
			off, rest = b.NextOffset(), next
		}
		if _, err := f.Write(data); err != nil {
			return rs, err
		}
		rs.SizeBytes += int64(len(data))
	}
	if err := m.cfg.Tier.Store.Put(ctx, segmentKey(prefix, rs, ".log"), io.NewSectionReader(f, 0, rs.SizeBytes)); err != nil {
		return rs, fmt.Errorf("tier offsets %d to %d: %w", from, to, err)
	}
	return rs, nil
}

// removeOrphans deletes the objects under prefix that belong to no segment
// of man: uploads whose commit failed or never came (a crash, a fenced
// leader), and a file store's temporary files of puts a crash cut short.
func removeOrphans(ctx context.Context, store remote.Store, prefix string, man catalog.RemoteLogManifest) error {
	live := map[string]bool{}
	for _, s := range man.Segments {
		live[s.ID] = true
	}
	return removeObjectsExcept(ctx, store, prefix, func(key string) bool {
		id, _, _ := strings.Cut(strings.TrimPrefix(key, prefix), "/")
		return live[id]
	})
}

// removeObjectsExcept deletes the objects under prefix that keep refuses,
// and a file store's temporary files under it (remote.TemporarySweeper):
// the caller knows no put is in progress under prefix.
func removeObjectsExcept(ctx context.Context, store remote.Store, prefix string, keep func(key string) bool) error {
	if ts, ok := store.(remote.TemporarySweeper); ok {
		if _, err := ts.RemoveTemporary(ctx, prefix); err != nil {
			return err
		}
	}
	var orphans []string
	for obj, err := range store.List(ctx, prefix) {
		if err != nil {
			return err
		}
		if !keep(obj.Key) {
			orphans = append(orphans, obj.Key)
		}
	}
	for _, k := range orphans {
		if err := store.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

func deleteSegmentObjects(ctx context.Context, store remote.Store, prefix string, s catalog.RemoteLogSegment) error {
	for _, suffix := range []string{".log", ".index", ".timeindex"} {
		if err := store.Delete(ctx, segmentKey(prefix, s, suffix)); err != nil {
			return err
		}
	}
	return nil
}
