package remote_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"strom/remote"
	"strom/remote/storetest"
)

func TestFileStoreConformance(t *testing.T) {
	const partSize = 64 << 10
	dirs := map[remote.Store]string{}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) remote.Store {
			dir := t.TempDir()
			s, err := remote.Open(t.Context(), "file://"+dir, remote.Options{PartSize: partSize})
			if err != nil {
				t.Fatal(err)
			}
			dirs[s] = dir
			return s
		},
		PartSize: partSize,
		Pending: func(t *testing.T, s remote.Store) int {
			n := 0
			err := filepath.WalkDir(dirs[s], func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.HasPrefix(d.Name(), ".strom-tmp-") {
					n++
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return n
		},
	})
}

// A file store cannot hold both "a" and "a/b" (S3 can): the second put is
// refused as an invalid key, and the first object stays.
func TestFileStoreKeyAndDirectory(t *testing.T) {
	ctx := t.Context()
	s, err := remote.OpenFile(t.TempDir(), remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ first, second string }{{"a", "a/b"}, {"c/d", "c"}} {
		if err := s.Put(ctx, tc.first, strings.NewReader("1")); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, tc.second, strings.NewReader("2")); !errors.Is(err, remote.ErrInvalidKey) {
			t.Errorf("put %q after %q: got %v, want ErrInvalidKey", tc.second, tc.first, err)
		}
		if fi, err := s.Stat(ctx, tc.first); err != nil || fi.Size != 1 {
			t.Errorf("stat %q: %+v, %v", tc.first, fi, err)
		}
	}
}
