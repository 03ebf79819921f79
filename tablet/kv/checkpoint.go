package kv

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// idFile holds a Pebble database's identity, beside Pebble's own files
// (Pebble ignores names it does not know, and Checkpoint does not copy it).
const idFile = "STROM-KV-ID"

// ID is the identity of this tablet's Pebble database: random, made when
// the directory first held no identity (a new database, or one restored
// from a snapshot). Within one identity an SST's file name always names the
// same bytes (Pebble never reuses a file number), so remote copies of SSTs
// are shared by (ID, file name); two databases never share an ID.
func (t *Tablet) ID() string { return t.id }

// loadID reads the identity in dir, making one if there is none.
func loadID(fs vfs.FS, dir string) (string, error) {
	path := filepath.Join(dir, idFile)
	if f, err := fs.Open(path); err == nil {
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("kv: read %s: %w", path, err)
		}
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("kv: read %s: %w", path, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	id := hex.EncodeToString(b[:])
	tmp := path + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return "", fmt.Errorf("kv: write %s: %w", path, err)
	}
	_, err = io.WriteString(f, id+"\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil {
		var d vfs.File
		if d, err = fs.OpenDir(dir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return "", fmt.Errorf("kv: write %s: %w", path, err)
	}
	return id, nil
}

// Checkpoint writes a Pebble checkpoint of the committed rows into dir
// (which must not exist; on the tablet's file system, where SSTs are hard
// links) and returns the log offset it holds every change below: the
// flushed offset at that moment (the meta key inside says the same). A
// database opened from the checkpoint is this tablet's Pebble as of that
// offset, and Open then replays the log from it. The memtable is flushed
// to SSTs first, so the checkpoint's WAL (the changes of the moment between
// that flush and the checkpoint) is small; FlushTo waits only for the
// checkpoint itself.
func (t *Tablet) Checkpoint(dir string) (int64, error) {
	// readMu (shared) keeps Close from closing Pebble under these calls;
	// Close marks the tablet closed before it takes readMu.
	if err := t.refuseDamaged(); err != nil {
		return 0, fmt.Errorf("kv: checkpoint: %w", err)
	}
	t.readMu.RLock()
	err := ErrClosed
	if !t.isClosed() {
		err = t.db.Flush()
	}
	t.readMu.RUnlock()
	if err != nil {
		return 0, fmt.Errorf("kv: checkpoint: flush memtable: %w", err)
	}
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	t.readMu.RLock()
	defer t.readMu.RUnlock()
	if t.isClosed() {
		return 0, ErrClosed
	}
	if t.cfg.DisableWAL {
		// No WAL to carry what came since the flush: flush it too.
		if err := t.db.Flush(); err != nil {
			return 0, fmt.Errorf("kv: checkpoint: flush memtable: %w", err)
		}
	}
	t.mu.Lock()
	offset := t.mu.flushed
	t.mu.Unlock()
	if err := t.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return 0, fmt.Errorf("kv: checkpoint into %s: %w", dir, err)
	}
	return offset, nil
}

// IsSharedFile reports whether a checkpoint's file is immutable for the
// life of its database (an SST or a blob file), so a copy of it taken for
// one snapshot serves every later one; the others (MANIFEST, OPTIONS,
// markers, WAL) change and are copied with each snapshot.
func IsSharedFile(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// ReplaceDir makes checkpointDir (a checkpoint, e.g. a downloaded KV
// snapshot) the KV directory dir, on fs: dir's old content is removed, the
// checkpoint renamed to it, and the parent directory fsynced. The tablet
// of dir must be closed (Open it afterwards), or use Tablet.Restore.
func ReplaceDir(fs vfs.FS, dir, checkpointDir string) error {
	if err := fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("kv: replace %s: %w", dir, err)
	}
	if err := fs.Rename(checkpointDir, dir); err != nil {
		return fmt.Errorf("kv: replace %s: %w", dir, err)
	}
	d, err := fs.OpenDir(filepath.Dir(dir))
	if err == nil {
		err = d.Sync()
		d.Close()
	}
	if err != nil {
		return fmt.Errorf("kv: replace %s: %w", dir, err)
	}
	return nil
}

// Restore replaces the tablet's Pebble database by the checkpoint in
// checkpointDir (ReplaceDir) and recovers from it as Open does: the rows
// are the checkpoint's, the pre-write buffer is refilled from the log
// above the checkpoint's offset F. The caller first positions the log so
// that it holds F (its start at or below F, its end at or above: a replica
// whose log does not, restarts it at F, log.TruncateFullyAndStartAt).
// Open scans of the old database are closed. The database gets a new ID.
// On an error the tablet is closed.
func (t *Tablet) Restore(checkpointDir string) error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	seen := t.damage.p.Load()
	if err := t.swapDB(checkpointDir); err != nil {
		return err
	}
	// As in Open, with writeMu held: nothing else extends or cuts the
	// buffer, and a FlushTo meanwhile finds nothing to flush.
	if err := t.recover(); err != nil {
		t.closeAfterFailure()
		return err
	}
	t.damage.clearIf(seen) // the damaged database is gone
	t.lg.Info("restored from a snapshot", "flushed", t.FlushedOffset())
	return nil
}

// swapDB closes Pebble and opens the checkpoint in its place, with an
// empty pre-write buffer; writeMu held.
func (t *Tablet) swapDB(checkpointDir string) error {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	snaps := t.mu.snapshots
	t.mu.snapshots = map[*Snapshot]struct{}{}
	t.mu.Unlock()
	t.readMu.Lock()
	defer t.readMu.Unlock()
	for s := range snaps {
		s.closeLocked()
	}
	err := t.db.Close()
	if err == nil {
		err = ReplaceDir(t.cfg.fs(), t.cfg.Dir, checkpointDir)
	}
	var db *pebble.DB
	if err == nil {
		db, t.id, err = openPebble(t.cfg, &t.damage)
	}
	if err != nil {
		t.mu.Lock()
		t.mu.closed, t.mu.snapshots = true, nil
		t.mu.Unlock()
		t.builder.Release()
		return fmt.Errorf("kv: restore: %w", err)
	}
	t.db = db
	t.mu.Lock()
	t.mu.buf = newPreWriteBuffer()
	t.mu.flushed, t.mu.end = 0, 0
	t.mu.Unlock()
	return nil
}

// closeAfterFailure closes a tablet whose restore failed after the swap.
func (t *Tablet) closeAfterFailure() {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	t.mu.Lock()
	t.mu.closed, t.mu.snapshots = true, nil
	t.mu.Unlock()
	t.readMu.Lock()
	defer t.readMu.Unlock()
	t.builder.Release()
	t.db.Close()
}
