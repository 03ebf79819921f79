// Package strictfs is an in-memory file system for power-loss tests: a
// vfs.FS (Pebble's interface, which tablet/log and tablet/kv do their I/O
// through) that keeps, beside what was written, what was fsynced, and can
// give the file system a machine would find after losing power: only
// fsynced file data and fsynced directory entries survive.
//
// It is Pebble's crashable vfs.MemFS with one addition the log tablet
// needs: its files can be truncated (Truncate(size int64) error, as
// *os.File).
package strictfs

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is a strict in-memory file system. Safe for concurrent use.
type FS struct {
	*vfs.MemFS

	off atomic.Bool // set by Crash: every fsync fails from then on

	mu   sync.Mutex
	open map[*file]struct{} // files opened for writing, renamed along with their name
}

// ErrPowerOff is what an fsync on a file system that Crash was called on
// returns: the power is off, nothing more reaches the disk.
var ErrPowerOff = errors.New("strictfs: the power is off")

var _ vfs.FS = (*FS)(nil)

// New returns an empty file system.
func New() *FS { return wrap(vfs.NewCrashableMem()) }

func wrap(m *vfs.MemFS) *FS { return &FS{MemFS: m, open: map[*file]struct{}{}} }

// Crash returns the file system a machine finds after losing power now:
// what was fsynced, plus (with cfg.UnsyncedDataPercent above 0) a random
// part of what was not, in 4 KiB blocks: torn writes. The zero cfg keeps
// exactly what was fsynced. fs itself is unchanged and may go on being used
// (by a node shutting down after the crash): nothing done to it reaches the
// result; but every fsync on it fails with ErrPowerOff from now on, so
// that a node still running on it cannot acknowledge what waits for one.
func (fs *FS) Crash(cfg vfs.CrashCloneCfg) *FS {
	fs.off.Store(true)
	return wrap(fs.MemFS.CrashClone(cfg))
}

// OpenDir implements vfs.FS.
func (fs *FS) OpenDir(name string) (vfs.File, error) {
	d, err := fs.MemFS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &file{fs: fs, name: name, f: d}, nil
}

// Create implements vfs.FS.
func (fs *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.MemFS.Create(name, category)
	return fs.track(name, f, err)
}

// OpenReadWrite implements vfs.FS.
func (fs *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.MemFS.OpenReadWrite(name, category, opts...)
	return fs.track(name, f, err)
}

// ReuseForWrite implements vfs.FS.
func (fs *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.MemFS.ReuseForWrite(oldname, newname, category)
	return fs.track(newname, f, err)
}

// Rename implements vfs.FS.
func (fs *FS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.MemFS.Rename(oldname, newname); err != nil {
		return err
	}
	for f := range fs.open {
		f.mu.Lock()
		if f.name == oldname {
			f.name = newname
		}
		f.mu.Unlock()
	}
	return nil
}

func (fs *FS) track(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	tf := &file{fs: fs, name: name, f: f}
	fs.mu.Lock()
	fs.open[tf] = struct{}{}
	fs.mu.Unlock()
	return tf, nil
}

// file is a file opened for writing. Truncate replaces the MemFS file
// under it (MemFS files cannot shrink) by a new one at the same name
// holding the kept bytes; other handles open on the name keep the old
// contents, so the log opens each segment once.
type file struct {
	fs *FS

	mu       sync.RWMutex // guards the fields below against Truncate and Rename
	name     string
	f        vfs.File
	replaced bool // since the last Sync: the directory entry must be synced too
}

// Truncate cuts the file to size bytes (at most its size). As with
// ftruncate, the cut is durable once the file is fsynced.
func (f *file) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := f.f.Stat()
	if err != nil {
		return err
	}
	if size > st.Size() {
		return fmt.Errorf("strictfs: truncate %s to %d: larger than its %d bytes", f.name, size, st.Size())
	}
	keep := make([]byte, size)
	if _, err := f.f.ReadAt(keep, 0); err != nil && err != io.EOF {
		return err
	}
	nf, err := f.fs.MemFS.Create(f.name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := nf.Write(keep); err != nil {
		nf.Close()
		return err
	}
	f.f.Close()
	f.f, f.replaced = nf, true
	return nil
}

func (f *file) Close() error { // also of a directory, never tracked
	f.fs.mu.Lock()
	delete(f.fs.open, f)
	f.fs.mu.Unlock()
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.f.Close()
}

func (f *file) Read(p []byte) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.f.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.f.ReadAt(p, off)
}

func (f *file) Write(p []byte) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.f.Write(p)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.f.WriteAt(p, off)
}

func (f *file) Preallocate(off, n int64) error { return nil }

func (f *file) Stat() (vfs.FileInfo, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.f.Stat()
}

// Sync makes the file's data durable, and after a Truncate its directory
// entry too (the new file replacing the old one).
func (f *file) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fs.off.Load() {
		return ErrPowerOff
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	if !f.replaced {
		return nil
	}
	d, err := f.fs.MemFS.OpenDir(filepath.Dir(f.name))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return err
	}
	f.replaced = false
	return nil
}

func (f *file) SyncData() error { return f.Sync() }

// SyncTo syncs nothing, and says so (as MemFS's): no durability is promised
// when fullSync is false.
func (f *file) SyncTo(length int64) (fullSync bool, err error) { return false, nil }

func (f *file) Prefetch(off, n int64) error { return nil }

func (f *file) Fd() uintptr { return vfs.InvalidFd }
