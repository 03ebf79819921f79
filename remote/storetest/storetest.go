// Package storetest is the conformance suite every remote.Store backend
// passes: the same cases, run against the filesystem backend and against
// a real S3-compatible server.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"strom/remote"
)

// Harness is what the suite needs of a backend.
type Harness struct {
	// New returns an empty store of its own (a fresh directory, bucket or
	// prefix); the suite closes it.
	New func(t *testing.T) remote.Store
	// PartSize is the stores' Options.PartSize: the multipart cases put
	// objects larger than it.
	PartSize int64
	// PageSize is how many keys one page of the stores' listings holds,
	// 0 for a backend that does not page: the listing case puts more than
	// two pages' worth.
	PageSize int
	// Pending counts what unfinished puts to s have left on the backend
	// (S3: multipart uploads in progress; files: temporary files): each
	// failed put must leave none.
	Pending func(t *testing.T, s remote.Store) int
}

// Run runs every case against the backend, each as a subtest.
func Run(t *testing.T, h Harness) {
	cases := []struct {
		name string
		f    func(*testing.T, Harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"Ranges", testRanges},
		{"NotFound", testNotFound},
		{"List", testList},
		{"ListPages", testListPages},
		{"Delete", testDelete},
		{"Overwrite", testOverwrite},
		{"ConcurrentPuts", testConcurrentPuts},
		{"CancelMidPut", testCancelMidPut},
		{"ReaderFails", testReaderFails},
		{"InvalidKeys", testInvalidKeys},
		{"Closed", testClosed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.f(t, h) })
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, h Harness) remote.Store {
	s := h.New(t)
	t.Cleanup(func() { s.Close() })
	return s
}

// Bytes returns n pseudo-random bytes, the same for the same seed.
func Bytes(seed uint64, n int64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	_, _ = r.Read(b)
	return b
}

func put(t *testing.T, s remote.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(ctxFor(t), key, bytes.NewReader(data)); err != nil {
		t.Fatalf("put %q (%d bytes): %v", key, len(data), err)
	}
}

func get(t *testing.T, s remote.Store, key string, rng remote.Range) ([]byte, error) {
	t.Helper()
	rc, err := s.Get(ctxFor(t), key, rng)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func mustGet(t *testing.T, s remote.Store, key string, rng remote.Range) []byte {
	t.Helper()
	b, err := get(t, s, key, rng)
	if err != nil {
		t.Fatalf("get %q (%v): %v", key, rng, err)
	}
	return b
}

func list(t *testing.T, s remote.Store, prefix string) []remote.ObjectInfo {
	t.Helper()
	var objs []remote.ObjectInfo
	for o, err := range s.List(ctxFor(t), prefix) {
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		objs = append(objs, o)
	}
	return objs
}

func keys(objs []remote.ObjectInfo) []string {
	ks := make([]string, len(objs))
	for i, o := range objs {
		ks[i] = o.Key
	}
	return ks
}

func wantNotFound(t *testing.T, s remote.Store, key string) {
	t.Helper()
	if _, err := s.Stat(ctxFor(t), key); !errors.Is(err, remote.ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
		t.Errorf("stat %q: got %v, want ErrNotFound naming the key", key, err)
	}
	if _, err := get(t, s, key, remote.Range{}); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("get %q: got %v, want ErrNotFound", key, err)
	}
}

func equal(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s: got %d bytes, want %d (equal prefix %d)", what, len(got), len(want), commonPrefix(got, want))
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func testRoundTrip(t *testing.T, h Harness) {
	s := open(t, h)
	for _, tc := range []struct {
		name string
		size int64
	}{
		{"empty", 0},
		{"small", 100},
		{"one part", h.PartSize},
		{"part and a byte", h.PartSize + 1},
		{"multipart", 2*h.PartSize + h.PartSize/2},
	} {
		// Readers that can seek and readers that cannot: backends may take
		// different paths for each.
		for _, from := range []struct {
			name string
			r    func(*testing.T, []byte) io.Reader
		}{
			{"seekable", func(_ *testing.T, b []byte) io.Reader { return bytes.NewReader(b) }},
			{"stream", func(_ *testing.T, b []byte) io.Reader { return struct{ io.Reader }{bytes.NewReader(b)} }},
			{"file", fileReader},
			{"pipe", pipeReader},
		} {
			t.Run(tc.name+" "+from.name, func(t *testing.T) {
				key := "round/" + tc.name + "/" + from.name
				data := Bytes(uint64(tc.size), tc.size)
				before := time.Now().Add(-time.Minute)
				if err := s.Put(ctxFor(t), key, from.r(t, data)); err != nil {
					t.Fatalf("put: %v", err)
				}
				equal(t, "read back", mustGet(t, s, key, remote.Range{}), data)
				fi, err := s.Stat(ctxFor(t), key)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Key != key || fi.Size != tc.size || fi.ModTime.Before(before) {
					t.Errorf("stat: got %+v, want key %q, size %d, modified after %v", fi, key, tc.size, before)
				}
			})
		}
	}
}

// fileReader returns a file holding b, opened for reading.
func fileReader(t *testing.T, b []byte) io.Reader {
	p := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// pipeReader returns the read end of a pipe that b is written into: an
// *os.File that cannot seek.
func pipeReader(t *testing.T, b []byte) io.Reader {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Write(b)
		w.Close()
	}()
	t.Cleanup(func() { r.Close(); <-done })
	return r
}

func testRanges(t *testing.T, h Harness) {
	s := open(t, h)
	data := Bytes(1, 1000)
	put(t, s, "r/obj", data)
	put(t, s, "r/empty", nil)
	for _, tc := range []struct {
		name string
		key  string
		rng  remote.Range
		want []byte // unused when err is set
		err  error
	}{
		{"start", "r/obj", remote.Range{Offset: 0, Length: 10}, data[:10], nil},
		{"middle", "r/obj", remote.Range{Offset: 100, Length: 50}, data[100:150], nil},
		{"to the end", "r/obj", remote.Range{Offset: 900}, data[900:], nil},
		{"last byte", "r/obj", remote.Range{Offset: 999, Length: 1}, data[999:], nil},
		{"suffix", "r/obj", remote.Range{Offset: -10}, data[990:], nil},
		{"suffix longer than the object", "r/obj", remote.Range{Offset: -5000}, data, nil},
		{"past the end is cut", "r/obj", remote.Range{Offset: 990, Length: 100}, data[990:], nil},
		{"starting at the end", "r/obj", remote.Range{Offset: 1000}, nil, remote.ErrInvalidRange},
		{"starting past the end", "r/obj", remote.Range{Offset: 2000, Length: 1}, nil, remote.ErrInvalidRange},
		{"negative length", "r/obj", remote.Range{Offset: 1, Length: -1}, nil, remote.ErrInvalidRange},
		{"empty object whole", "r/empty", remote.Range{}, []byte{}, nil},
		{"empty object from 0", "r/empty", remote.Range{Length: 10}, []byte{}, nil},
		{"empty object suffix", "r/empty", remote.Range{Offset: -10}, []byte{}, nil},
		{"empty object past the end", "r/empty", remote.Range{Offset: 1}, nil, remote.ErrInvalidRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := get(t, s, tc.key, tc.rng)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %d bytes, error %v; want %v", len(got), err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			equal(t, tc.rng.String(), got, tc.want)
		})
	}
	t.Run("multipart object", func(t *testing.T) {
		big := Bytes(2, 2*h.PartSize+7)
		put(t, s, "r/big", big)
		off := h.PartSize - 3 // across the parts' boundary
		equal(t, "across parts", mustGet(t, s, "r/big", remote.Range{Offset: off, Length: 10}), big[off:off+10])
		equal(t, "suffix", mustGet(t, s, "r/big", remote.Range{Offset: -7}), big[len(big)-7:])
	})
}

func testNotFound(t *testing.T, h Harness) {
	s := open(t, h)
	put(t, s, "nf/a", []byte("x"))
	wantNotFound(t, s, "nf/b")
	wantNotFound(t, s, "nf")     // a prefix of a key, not a key
	wantNotFound(t, s, "nf/a/b") // below a key
	if _, err := get(t, s, "nf/b", remote.Range{Offset: 5, Length: 1}); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("ranged get of a missing key: got %v, want ErrNotFound", err)
	}
}

func testList(t *testing.T, h Harness) {
	s := open(t, h)
	all := []string{"a.b", "a/1", "a/2", "a/sub/3", "ab", "b", "c/d/e/f"}
	for i, k := range slices.Backward(all) { // not in order
		put(t, s, k, Bytes(uint64(i), int64(i)))
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"a/", []string{"a/1", "a/2", "a/sub/3"}},
		{"a", []string{"a.b", "a/1", "a/2", "a/sub/3", "ab"}},
		{"a/s", []string{"a/sub/3"}},
		{"c/d/", []string{"c/d/e/f"}},
		{"ab", []string{"ab"}},
		{"zz", nil},
		{"a/sub/3/x", nil},
		{"nope/", nil},
	} {
		got := list(t, s, tc.prefix)
		if !slices.Equal(keys(got), tc.want) {
			t.Errorf("list %q: got %q, want %q", tc.prefix, keys(got), tc.want)
		}
		for _, o := range got {
			if i := slices.Index(all, o.Key); o.Size != int64(i) {
				t.Errorf("list %q: %q has size %d, want %d", tc.prefix, o.Key, o.Size, i)
			}
		}
	}
	// Stopping early stops the listing.
	n := 0
	for _, err := range s.List(ctxFor(t), "") {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("broke off after %d objects, want 2", n)
	}
}

func testListPages(t *testing.T, h Harness) {
	s := open(t, h)
	n := 2*h.PageSize + 3
	if h.PageSize == 0 {
		n = 50
	}
	var want []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		k := fmt.Sprintf("many/%04d", i)
		want = append(want, k)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := s.Put(ctxFor(t), k, bytes.NewReader([]byte(k))); err != nil {
				mu.Lock()
				t.Errorf("put %q: %v", k, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	put(t, s, "manz", nil) // after the prefix in order
	if got := keys(list(t, s, "many/")); !slices.Equal(got, want) {
		t.Errorf("list of %d keys: got %d keys: %q", n, len(got), got)
	}
}

func testDelete(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxFor(t)
	if err := s.Delete(ctx, "d/never"); err != nil {
		t.Errorf("delete of an absent key: %v", err)
	}
	put(t, s, "d/x/y", []byte("y"))
	put(t, s, "d/x/z", []byte("z"))
	for range 2 {
		if err := s.Delete(ctx, "d/x/y"); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	wantNotFound(t, s, "d/x/y")
	if err := s.Delete(ctx, "d/x"); err != nil { // a prefix of a key, not a key
		t.Errorf("delete of a key's prefix: %v", err)
	}
	if got := keys(list(t, s, "d/")); !slices.Equal(got, []string{"d/x/z"}) {
		t.Errorf("list after delete: got %q, want [d/x/z]", got)
	}
	if err := s.Delete(ctx, "d/x/z"); err != nil {
		t.Fatal(err)
	}
	if got := list(t, s, ""); len(got) != 0 {
		t.Errorf("list after deleting everything: %q", keys(got))
	}
	put(t, s, "d/x/y", []byte("again")) // the emptied directories come back
	equal(t, "put after delete", mustGet(t, s, "d/x/y", remote.Range{}), []byte("again"))
}

func testOverwrite(t *testing.T, h Harness) {
	s := open(t, h)
	big, small := Bytes(3, h.PartSize+10), []byte("small")
	put(t, s, "o/k", big)
	put(t, s, "o/k", small)
	equal(t, "after overwriting big with small", mustGet(t, s, "o/k", remote.Range{}), small)
	put(t, s, "o/k", big)
	equal(t, "after overwriting small with big", mustGet(t, s, "o/k", remote.Range{}), big)
	if fi, err := s.Stat(ctxFor(t), "o/k"); err != nil || fi.Size != int64(len(big)) {
		t.Errorf("stat: %+v, %v; want size %d", fi, err, len(big))
	}
	if got := keys(list(t, s, "o/")); !slices.Equal(got, []string{"o/k"}) {
		t.Errorf("list: got %q, want [o/k]", got)
	}
}

func testConcurrentPuts(t *testing.T, h Harness) {
	s := open(t, h)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			size := int64(i) * 1000
			if i == n-1 {
				size = h.PartSize + 1 // one multipart among them
			}
			errs[i] = s.Put(ctxFor(t), fmt.Sprintf("c/%d", i), bytes.NewReader(Bytes(uint64(i), size)))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("put %d: %v", i, err)
		}
	}
	for i := range n {
		size := int64(i) * 1000
		if i == n-1 {
			size = h.PartSize + 1
		}
		equal(t, fmt.Sprintf("c/%d", i), mustGet(t, s, fmt.Sprintf("c/%d", i), remote.Range{}), Bytes(uint64(i), size))
	}
	if got := list(t, s, "c/"); len(got) != n {
		t.Errorf("list: got %q, want %d keys", keys(got), n)
	}
}

// failingReader yields data, then calls at (once) and returns err.
type failingReader struct {
	data []byte
	at   func()
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		if f.at != nil {
			f.at()
			f.at = nil
		}
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// checkFailedPut checks that a failed put of key left the old object (or
// none) and nothing pending.
func checkFailedPut(t *testing.T, h Harness, s remote.Store, key string, old []byte) {
	t.Helper()
	want := []string{"keep"} // put before, and sorting before key
	if old == nil {
		wantNotFound(t, s, key)
	} else {
		equal(t, "the old object after a failed put", mustGet(t, s, key, remote.Range{}), old)
		want = append(want, key)
	}
	if got := keys(list(t, s, "")); !slices.Equal(got, want) {
		t.Errorf("list after a failed put: got %q, want %q", got, want)
	}
	if n := h.Pending(t, s); n != 0 {
		t.Errorf("a failed put left %d unfinished uploads or temporary files", n)
	}
}

func testCancelMidPut(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name string
		size int64
		old  []byte
	}{
		{"small", 100, nil},
		{"multipart", 2*h.PartSize + 5, nil},
		{"multipart overwrite", 2*h.PartSize + 5, []byte("old")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, h)
			put(t, s, "keep", []byte("k"))
			if tc.old != nil {
				put(t, s, "x/k", tc.old)
			}
			ctx, cancel := context.WithCancel(ctxFor(t))
			defer cancel()
			// The reader's data ends with the context: Put must not
			// take the short object for a whole one.
			r := &failingReader{data: Bytes(4, tc.size), at: cancel, err: io.EOF}
			err := s.Put(ctx, "x/k", r)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("put with its context cancelled midway: got %v, want context.Canceled", err)
			}
			checkFailedPut(t, h, s, "x/k", tc.old)
		})
	}
}

func testReaderFails(t *testing.T, h Harness) {
	boom := errors.New("storetest: the reader broke")
	for _, tc := range []struct {
		name string
		size int64
	}{
		{"at once", 0},
		{"small", 100},
		{"after a part", h.PartSize},
		{"after parts", 2*h.PartSize + h.PartSize/2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, h)
			put(t, s, "keep", []byte("k"))
			err := s.Put(ctxFor(t), "x/k", &failingReader{data: Bytes(5, tc.size), err: boom})
			if !errors.Is(err, boom) {
				t.Fatalf("put from a failing reader: got %v, want the reader's error", err)
			}
			checkFailedPut(t, h, s, "x/k", nil)
		})
	}
}

func testInvalidKeys(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxFor(t)
	for _, k := range []string{"", "/a", "a/", "a//b", "./a", "a/../b", "..", "a/.", ".strom-tmp-x", "a/.strom-tmp-y"} {
		if err := s.Put(ctx, k, bytes.NewReader(nil)); !errors.Is(err, remote.ErrInvalidKey) {
			t.Errorf("put %q: got %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Get(ctx, k, remote.Range{}); !errors.Is(err, remote.ErrInvalidKey) {
			t.Errorf("get %q: got %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Stat(ctx, k); !errors.Is(err, remote.ErrInvalidKey) {
			t.Errorf("stat %q: got %v, want ErrInvalidKey", k, err)
		}
		if err := s.Delete(ctx, k); !errors.Is(err, remote.ErrInvalidKey) {
			t.Errorf("delete %q: got %v, want ErrInvalidKey", k, err)
		}
	}
	if got := list(t, s, ""); len(got) != 0 {
		t.Errorf("invalid keys stored: %q", keys(got))
	}
}

func testClosed(t *testing.T, h Harness) {
	s := h.New(t)
	put(t, s, "k", []byte("v"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	errs := map[string]error{"put": s.Put(ctx, "k", bytes.NewReader(nil)), "delete": s.Delete(ctx, "k")}
	_, errs["get"] = s.Get(ctx, "k", remote.Range{})
	_, errs["stat"] = s.Stat(ctx, "k")
	for _, err := range s.List(ctx, "") {
		errs["list"] = err
	}
	for op, err := range errs {
		if !errors.Is(err, remote.ErrClosed) {
			t.Errorf("%s after close: got %v, want ErrClosed", op, err)
		}
	}
}
