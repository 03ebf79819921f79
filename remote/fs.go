package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
)

// tmpPrefix starts the names of a file store's files being put. Keys may
// not have an element starting with it, on any backend, so that one
// conformance suite holds for all.
const tmpPrefix = ".strom-tmp-"

// FileStore is a Store in a local directory: the object under key k is the
// file dir/k. Puts write a temporary file beside the target, fsync it,
// rename it over the target and fsync the directory, so an object is
// either whole or absent, also after a power loss.
type FileStore struct {
	dir      string
	partSize int64
	closed   atomic.Bool
}

// OpenFile returns a store in dir, creating the directory if needed.
func OpenFile(dir string, opts Options) (*FileStore, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("remote: open %s: %w", dir, err)
	}
	return &FileStore{dir: dir, partSize: opts.PartSize}, nil
}

func (s *FileStore) path(key string) string { return filepath.Join(s.dir, filepath.FromSlash(key)) }

// Put implements Store.
func (s *FileStore) Put(ctx context.Context, key string, r io.Reader) error {
	if err := checkCall(&s.closed, "put", key); err != nil {
		return err
	}
	if err := s.put(ctx, key, r); err != nil {
		return fmt.Errorf("remote: put %q: %w", key, err)
	}
	return nil
}

func (s *FileStore) put(ctx context.Context, key string, r io.Reader) error {
	target := s.path(key)
	dir := filepath.Dir(target)
	f, err := s.createTemp(dir, tmpPrefix+filepath.Base(target)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	buf := make([]byte, min(s.partSize, 1<<20))
	if _, err := io.CopyBuffer(f, ctxReader{ctx, r}, buf); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		if fi, serr := os.Stat(target); serr == nil && fi.IsDir() {
			return fmt.Errorf("%w: a file store cannot hold a key that is also the directory of other keys: %w", ErrInvalidKey, err)
		}
		return err
	}
	ok = true
	return syncDir(dir)
}

// createTemp creates a temporary file in dir, creating dir first. A Delete
// removing dir once it is empty may come between the two: then it tries
// again.
func (s *FileStore) createTemp(dir, pattern string) (*os.File, error) {
	for try := 0; ; try++ {
		if err := s.mkdirAll(dir); err != nil {
			return nil, err
		}
		f, err := os.CreateTemp(dir, pattern)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || try == 10 {
			return f, err
		}
	}
}

// mkdirAll creates dir and its missing parents under the store's root,
// fsyncing each new directory's parent so that the entries survive a power
// loss.
func (s *FileStore) mkdirAll(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%w: a file store cannot hold a key below another key (%s is an object)", ErrInvalidKey, dir)
		}
		return nil
	}
	if dir == s.dir || len(dir) < len(s.dir) {
		return os.MkdirAll(dir, 0o755)
	}
	if err := s.mkdirAll(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Get implements Store.
func (s *FileStore) Get(ctx context.Context, key string, rng Range) (io.ReadCloser, error) {
	if err := checkCall(&s.closed, "get", key); err != nil {
		return nil, err
	}
	rc, err := s.get(key, rng)
	if err != nil {
		return nil, fmt.Errorf("remote: get %q (%s): %w", key, rng, err)
	}
	return rc, nil
}

func (s *FileStore) get(key string, rng Range) (io.ReadCloser, error) {
	if rng.Length < 0 {
		return nil, ErrInvalidRange
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		return nil, fsErr(err)
	}
	fi, err := f.Stat()
	if err != nil || fi.IsDir() {
		f.Close()
		if err == nil {
			err = ErrNotFound
		}
		return nil, err
	}
	size := fi.Size()
	off, n, err := resolveRange(rng, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, n), f}, nil
}

// resolveRange turns rng into an offset and length within an object of
// size bytes, by the rules of Range and ErrInvalidRange.
func resolveRange(rng Range, size int64) (off, n int64, err error) {
	switch {
	case rng.Length < 0:
		return 0, 0, ErrInvalidRange
	case rng.Offset < 0:
		off = max(size+rng.Offset, 0)
		return off, size - off, nil
	case rng.Offset >= size && !(rng.Offset == 0 && size == 0):
		return 0, 0, ErrInvalidRange
	case rng.Length == 0 || rng.Offset+rng.Length > size:
		return rng.Offset, size - rng.Offset, nil
	default:
		return rng.Offset, rng.Length, nil
	}
}

func fsErr(err error) error {
	// ENOTDIR: a key below another object's key ("a/b" when "a" is one).
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// Stat implements Store.
func (s *FileStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := checkCall(&s.closed, "stat", key); err != nil {
		return ObjectInfo{}, err
	}
	fi, err := os.Stat(s.path(key))
	if err == nil && fi.IsDir() {
		err = ErrNotFound
	}
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("remote: stat %q: %w", key, fsErr(err))
	}
	return ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// List implements Store. It reads the directories the prefix can match
// and sorts the keys before yielding them.
func (s *FileStore) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		objs, err := s.list(ctx, prefix)
		if err != nil {
			yield(ObjectInfo{}, fmt.Errorf("remote: list %q: %w", prefix, err))
			return
		}
		for _, o := range objs {
			if !yield(o, nil) {
				return
			}
		}
	}
}

func (s *FileStore) list(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	// Walk the deepest directory every matching key is under.
	base := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		base = prefix[:i]
	}
	root := s.dir
	if base != "" {
		if checkKey(base) != nil {
			return nil, nil // no key can be under an invalid one
		}
		root = s.path(base)
	}
	var objs []ObjectInfo
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.dir, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return err
		}
		objs = append(objs, ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(objs, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return objs, nil
}

// Delete implements Store. It also removes the directories the deletion
// leaves empty, up to the store's root.
func (s *FileStore) Delete(ctx context.Context, key string) error {
	if err := checkCall(&s.closed, "delete", key); err != nil {
		return err
	}
	p := s.path(key)
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return nil // no object has this key, only longer ones
	}
	if err := os.Remove(p); err != nil {
		if errors.Is(fsErr(err), ErrNotFound) {
			return nil
		}
		return fmt.Errorf("remote: delete %q: %w", key, err)
	}
	dir := filepath.Dir(p)
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("remote: delete %q: %w", key, err)
	}
	for ; dir != s.dir && len(dir) > len(s.dir); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil { // not empty (or a put is using it)
			break
		}
	}
	return nil
}

// Close implements Store.
func (s *FileStore) Close() error {
	s.closed.Store(true)
	return nil
}

// RemoveTemporary deletes the temporary files of puts that never finished
// (a crash mid-put leaves one) in the directory of prefix, a key prefix
// ending in "/", and below it, and returns how many it deleted. It is
// remote.TemporarySweeper: only a caller that knows no put under prefix is
// in progress, or that may fail any that is, should call it (log tiering:
// only a bucket's leader puts under its prefix).
func (s *FileStore) RemoveTemporary(ctx context.Context, prefix string) (int, error) {
	if err := checkCall(&s.closed, "remove temporary files under", strings.TrimSuffix(prefix, "/")); err != nil {
		return 0, err
	}
	n := 0
	root := s.path(prefix)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tmpPrefix) {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("remote: remove temporary files under %q: %w", prefix, err)
	}
	return n, nil
}
