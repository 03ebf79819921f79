package replica

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"strom/raftmeta/catalog"
	"strom/record"
	"strom/remote"
)

// remoteReadTimeout bounds the download of one remote segment for a read.
const remoteReadTimeout = 2 * time.Minute

// readRemote returns whole batches from offset, at most maxBytes (at least
// one batch), from the remote segment holding offset, downloaded into the
// segment cache first. ok is false when no remote segment holds offset.
func (m *Manager) readRemote(r *Replica, offset int64, maxBytes int) (batches []byte, ok bool, err error) {
	t, err := m.table(r.tb.TableID)
	if err != nil {
		return nil, false, err
	}
	seg, ok, err := m.remoteSegment(r, offset)
	if err != nil || !ok {
		return nil, ok, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
	defer cancel()
	f, err := m.segCache.open(ctx, m.cfg.Tier.Store, segmentKey(remoteLogPrefix(t, r.tb), seg, ".log"), seg.SizeBytes)
	if err != nil {
		return nil, true, err
	}
	defer f.Close()
	batches, err = readBatches(f, seg, offset, maxBytes)
	return batches, true, err
}

// remoteStart is the bucket's first remote offset; ok is false when
// nothing is remote.
func (m *Manager) remoteStart(r *Replica) (int64, bool) {
	man, err := m.cat.RemoteLogs(r.tb.TableID, r.tb.Bucket)
	if err != nil || len(man.Segments) == 0 {
		return 0, false
	}
	return man.StartOffset(), true
}

// remoteSegment finds the remote segment holding offset, in the metadata's
// manifest or (when it lags this leader's last commit) the leader's own.
func (m *Manager) remoteSegment(r *Replica, offset int64) (catalog.RemoteLogSegment, bool, error) {
	man, err := m.cat.RemoteLogs(r.tb.TableID, r.tb.Bucket)
	if err != nil {
		return catalog.RemoteLogSegment{}, false, err
	}
	r.mu.Lock()
	own := r.mu.tiered
	r.mu.Unlock()
	for _, segs := range [][]catalog.RemoteLogSegment{man.Segments, ownSegments(own)} {
		for _, s := range segs {
			if s.BaseOffset <= offset && offset < s.EndOffset {
				return s, true, nil
			}
		}
	}
	return catalog.RemoteLogSegment{}, false, nil
}

func ownSegments(m *catalog.RemoteLogManifest) []catalog.RemoteLogSegment {
	if m == nil {
		return nil
	}
	return m.Segments
}

func (m *Manager) table(id int64) (catalog.Table, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t, ok := m.mu.tables[id]
	if !ok {
		return t, fmt.Errorf("table id %d: %w", id, ErrUnknownBucket)
	}
	return t, nil
}

// readBatches walks the batch headers of a downloaded segment to the batch
// holding offset and returns whole batches from it, at most maxBytes but
// at least one, each checked (frame and CRC: the bytes came from outside).
func readBatches(f io.ReaderAt, seg catalog.RemoteLogSegment, offset int64, maxBytes int) ([]byte, error) {
	var hdr [record.BatchHeaderSize]byte
	pos := int64(0)
	for pos < seg.SizeBytes {
		if _, err := f.ReadAt(hdr[:], pos); err != nil {
			return nil, fmt.Errorf("remote segment %s at %d: %w", seg.ID, pos, err)
		}
		h := record.Batch(hdr[:])
		if h.Length() <= 0 {
			return nil, fmt.Errorf("remote segment %s at %d: %w: length %d", seg.ID, pos, record.ErrCorruptBatch, h.Length())
		}
		if h.NextOffset() > offset {
			break
		}
		pos += int64(h.Size())
	}
	n := min(int64(max(maxBytes, 1)), seg.SizeBytes-pos)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, pos); err != nil && err != io.EOF {
		return nil, fmt.Errorf("remote segment %s at %d: %w", seg.ID, pos, err)
	}
	out := buf[:0:0]
	for rest := buf; len(rest) > 0; {
		b, next, err := record.NextBatch(rest)
		if record.IsTorn(err) && len(out) > 0 {
			break // maxBytes ends inside this batch
		}
		if record.IsTorn(err) {
			// The first batch is larger than maxBytes: read it whole. Its
			// size is the header's read above: rest may hold less than a
			// header.
			size := int(record.Batch(hdr[:]).Size())
			full := make([]byte, size)
			if _, err := f.ReadAt(full, pos); err != nil {
				return nil, fmt.Errorf("remote segment %s at %d: %w", seg.ID, pos, err)
			}
			rest, buf = full, full
			continue
		}
		if err == nil {
			err = b.Validate()
		}
		if err != nil {
			return nil, fmt.Errorf("remote segment %s at %d: %w", seg.ID, pos+int64(len(buf)-len(rest)), err)
		}
		out = buf[:len(buf)-len(next)]
		rest = next
	}
	return out, nil
}

// segmentCache keeps downloaded remote segments in a directory, up to a
// number of bytes, dropping the least recently used first.
type segmentCache struct {
	dir string
	max int64

	mu    sync.Mutex // held during downloads: one at a time
	files map[string]*cachedSegment
	used  int64
	tick  uint64
}

type cachedSegment struct {
	path    string
	size    int64
	lastUse uint64
}

// open returns the cached file of key, downloading it first if needed.
func (c *segmentCache) open(ctx context.Context, store remote.Store, key string, size int64) (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick++
	if e, ok := c.files[key]; ok {
		e.lastUse = c.tick
		return os.Open(e.path)
	}
	path := filepath.Join(c.dir, strings.ReplaceAll(key, "/", "_"))
	if err := download(ctx, store, key, path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	c.files[key] = &cachedSegment{path: path, size: size, lastUse: c.tick}
	c.used += size
	for c.used > c.max && len(c.files) > 1 {
		oldest := ""
		for k, e := range c.files {
			if k != key && (oldest == "" || e.lastUse < c.files[oldest].lastUse) {
				oldest = k
			}
		}
		e := c.files[oldest]
		delete(c.files, oldest)
		c.used -= e.size
		os.Remove(e.path) // an open reader keeps its file
	}
	return f, nil
}

// download copies an object to path through a temporary file.
func download(ctx context.Context, store remote.Store, key, path string) error {
	rc, err := store.Get(ctx, key, remote.Range{})
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("download %s: %w", key, err)
	}
	return nil
}

// readRemoteOr is Read's path below the local log start: remote batches
// when a remote segment holds offset, else the log's answer (out of range).
// An offset between the remote log's end and the local log start (a leader
// restored from a KV snapshot, whose tiering round has not copied that
// range from a follower yet: tier.go) is remote.ErrUnavailable, retriable.
func (r *Replica) readRemoteOr(offset int64, maxBytes int, hw int64) ([]byte, error) {
	if r.remote != nil {
		b, ok, err := r.remote.readRemote(r, offset, maxBytes)
		if ok || err != nil {
			return b, err
		}
		if start, ok := r.remote.remoteStart(r); ok && start <= offset {
			return nil, fmt.Errorf("bucket %s: offset %d: %w: it is above the remote log and below this replica's log start %d; the leader's tiering copies it from a follower, retry",
				r.tb, offset, remote.ErrUnavailable, r.log.LogStartOffset())
		}
	}
	info, err := r.log.Read(offset, maxBytes, hw)
	return info.Batches, err
}

// LogStartOffset is the bucket's first offset: the remote start when
// segments are tiered, else the local log's.
func (r *Replica) LogStartOffset() int64 {
	local := r.log.LogStartOffset()
	if r.remote != nil {
		if s, ok := r.remote.remoteStart(r); ok && s < local {
			return s
		}
	}
	return local
}
