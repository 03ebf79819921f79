package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"time"
)

// Sentinel errors. Errors from a Store wrap one of them where one applies,
// together with the operation and the object's key.
var (
	// ErrNotFound: no object has the key.
	ErrNotFound = errors.New("remote: object not found")
	// ErrInvalidKey: the key is empty, starts or ends with '/', has an
	// empty, "." or ".." element, or is otherwise not one a Store can hold.
	ErrInvalidKey = errors.New("remote: invalid object key")
	// ErrInvalidRange: a Range starts at or past the end of the object
	// (an empty object read from offset 0 is not an error), or has a
	// negative length.
	ErrInvalidRange = errors.New("remote: invalid range")
	// ErrUnavailable: the store could not be reached, or kept answering
	// with a server error or throttling, after Options.MaxAttempts tries.
	// The operation changed nothing visible; it is worth retrying later.
	ErrUnavailable = errors.New("remote: store unavailable")
	// ErrInvalidURL: Open or ParseURL was given a URL it cannot use (a
	// *URLError says why).
	ErrInvalidURL = errors.New("remote: invalid store URL")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("remote: store closed")
)

// Store is a remote object store. Its methods are safe for concurrent use
// and take a context that bounds the whole call, retries included.
//
// Keys are slash-separated paths relative to the store's root
// ("log/3/0/00000000000000000000.log"); see ErrInvalidKey for the rules.
type Store interface {
	// Put stores the bytes r yields under key, replacing any object there.
	// It reads r to its end in pieces of a bounded size (never the whole
	// object at once) and does not close it. The object appears whole when
	// Put returns nil and not at all otherwise: when r fails, ctx ends or
	// the store fails, Put returns the error and readers see the key's old
	// object, or none.
	Put(ctx context.Context, key string, r io.Reader) error
	// Get opens the bytes of key that rng selects. The caller reads and
	// closes the ReadCloser; ctx must stay live while it reads. A missing
	// key is ErrNotFound, a range outside the object ErrInvalidRange.
	Get(ctx context.Context, key string, rng Range) (io.ReadCloser, error)
	// Stat describes the object under key, or returns ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List yields every object whose key starts with prefix (a plain
	// string prefix: "log/1" matches "log/10/x"), in byte order of keys,
	// fetching pages of the listing as the caller iterates. An error ends
	// the sequence: it is yielded with a zero ObjectInfo.
	List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error]
	// Delete removes key. A missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases the store's resources; later calls return ErrClosed.
	// It does not wait for calls in flight.
	Close() error
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key     string
	Size    int64     // bytes
	ModTime time.Time // when the object was last put, as the store records it
}

// Range selects bytes of an object. The zero Range is the whole object.
type Range struct {
	// Offset is the first byte to read. A negative Offset selects a suffix:
	// the last -Offset bytes (all of them if the object is shorter), and
	// Length is then ignored.
	Offset int64
	// Length is how many bytes to read from Offset; 0 reads to the end. A
	// range past the end of the object is cut at the end.
	Length int64
}

func (r Range) String() string {
	switch {
	case r.Offset < 0:
		return fmt.Sprintf("last %d bytes", -r.Offset)
	case r.Length == 0:
		return fmt.Sprintf("bytes %d-", r.Offset)
	default:
		return fmt.Sprintf("bytes %d-%d", r.Offset, r.Offset+r.Length-1)
	}
}

// whole reports whether r selects the whole object.
func (r Range) whole() bool { return r.Offset == 0 && r.Length == 0 }

// TemporarySweeper is a store that can leave the remains of puts a crash
// interrupted: the file store's temporary files, S3's multipart uploads in
// progress (an unfinished PutObject is nothing; an upload's parts stay
// until aborted or the bucket's lifecycle rule expires them).
// RemoveTemporary deletes those under a key prefix ending in "/". Both
// backends implement it.
type TemporarySweeper interface {
	RemoveTemporary(ctx context.Context, prefix string) (int, error)
}

// Options configures the stores Open makes. The zero value is usable: each
// field's zero means its default.
type Options struct {
	// PartSize is the size of the pieces Put reads and sends, in bytes
	// (default 8 MiB; S3 needs at least 5 MiB). An S3 object larger than it
	// is sent as a multipart upload of parts this size; each Put holds at
	// most a few parts of its object in memory (see PartConcurrency).
	PartSize int64
	// MultipartThreshold is the size above which an object Put can read at
	// offsets (a file) goes up in a multipart upload rather than one
	// PutObject, in bytes (default 128 MiB, Hadoop S3A's
	// fs.s3a.multipart.threshold; at least PartSize). An object read from
	// a stream takes the multipart path above PartSize: it must be
	// buffered.
	MultipartThreshold int64
	// PartConcurrency is how many parts of one multipart upload are sent
	// at once (default 4). A Put from a reader that cannot be read at
	// offsets buffers up to PartConcurrency+1 parts.
	PartConcurrency int
	// MaxAttempts bounds the tries of one request to the store, the first
	// included, when it fails with a network error, a server error (5xx)
	// or throttling (503 SlowDown); default 5. Tries back off
	// exponentially with jitter, up to MaxBackoff apart.
	MaxAttempts int
	// MaxBackoff is the longest pause between two tries (default 5s).
	MaxBackoff time.Duration
	// S3 configures s3:// stores.
	S3 S3Options
}

// S3Options are an S3 store's endpoint and credentials (Fluss's s3.* keys).
type S3Options struct {
	// Endpoint is the S3 service's URL, e.g. http://127.0.0.1:7070 for an
	// S3-compatible server (s3.endpoint). Empty: AWS's endpoint for Region.
	Endpoint string
	// Region signs requests (s3.region). Empty: the AWS SDK's chain
	// (AWS_REGION, the shared config), else us-east-1.
	Region string
	// AccessKey and SecretKey are static credentials (s3.access-key,
	// s3.secret-key). Empty: the AWS SDK's default chain (environment,
	// shared credentials file, web identity, instance role).
	AccessKey, SecretKey string
	// VirtualHost addresses buckets as bucket.endpoint rather than
	// endpoint/bucket (s3.path.style.access false). Path-style, the
	// default, works with every S3-compatible server.
	VirtualHost bool
}

const (
	defaultPartSize           = 8 << 20
	minS3PartSize             = 5 << 20
	defaultMaxAttempts        = 5
	defaultPartConcurrency    = 4
	defaultMultipartThreshold = 128 << 20
	defaultMaxBackoff         = 5 * time.Second
)

func (o Options) withDefaults() Options {
	if o.PartSize <= 0 {
		o.PartSize = defaultPartSize
	}
	if o.MultipartThreshold < o.PartSize {
		o.MultipartThreshold = max(defaultMultipartThreshold, o.PartSize)
	}
	if o.PartConcurrency <= 0 {
		o.PartConcurrency = defaultPartConcurrency
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = defaultMaxAttempts
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = defaultMaxBackoff
	}
	return o
}

// Location is a parsed store URL.
type Location struct {
	// Scheme is "file" or "s3".
	Scheme string
	// Dir is a file store's directory, as written (relative paths are
	// relative to the working directory).
	Dir string
	// Bucket and Prefix name an S3 store's bucket and the key prefix
	// (without a trailing '/'; empty for the bucket's root).
	Bucket, Prefix string
}

// URLError is a store URL ParseURL cannot use, and why. It wraps
// ErrInvalidURL, and its text names the configuration key the URL comes
// from, remote.data.dir.
type URLError struct {
	URL    string
	Reason string // what is wrong and what is accepted
}

func (e *URLError) Error() string {
	return fmt.Sprintf("remote: remote.data.dir %q: %s", e.URL, e.Reason)
}

func (e *URLError) Unwrap() error { return ErrInvalidURL }

// ParseURL checks a store URL without touching the store: file:///abs/path,
// file://./relative/path, or s3://bucket[/prefix]. Errors are *URLError.
func ParseURL(raw string) (Location, error) {
	bad := func(format string, args ...any) (Location, error) {
		return Location{}, &URLError{URL: raw, Reason: fmt.Sprintf(format, args...)}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("%v", err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		return bad("no user, query or fragment allowed")
	}
	switch u.Scheme {
	case "file":
		switch u.Host {
		case "":
			if u.Path == "" || u.Path == "/" {
				return bad("want file:///absolute/path or file://./relative/path")
			}
			return Location{Scheme: "file", Dir: u.Path}, nil
		case ".", "..":
			return Location{Scheme: "file", Dir: u.Host + u.Path}, nil
		default:
			return bad("a file URL has no host (%q): want file:///absolute/path or file://./relative/path", u.Host)
		}
	case "s3":
		if u.Host == "" {
			return bad("want s3://bucket/prefix")
		}
		prefix := strings.Trim(u.Path, "/")
		if prefix != "" {
			if err := checkKey(prefix); err != nil {
				return bad("prefix %q: want slash-separated names, none empty, . or ..", prefix)
			}
		}
		return Location{Scheme: "s3", Bucket: u.Host, Prefix: prefix}, nil
	case "":
		return bad("no scheme: want file:///absolute/path, file://./relative/path or s3://bucket/prefix")
	default:
		return bad("unsupported scheme %q: want file:// or s3://", u.Scheme)
	}
}

// Open returns the store that url names (see ParseURL). An S3 store's
// bucket must exist; Open does not check that, nor the credentials: the
// first call that needs them reports what is wrong.
func Open(ctx context.Context, url string, opts Options) (Store, error) {
	loc, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if loc.Scheme == "file" {
		return OpenFile(loc.Dir, opts)
	}
	return OpenS3(ctx, loc.Bucket, loc.Prefix, opts)
}

// checkCall checks a call op on key to a store: open, and a valid key.
func checkCall(closed *atomic.Bool, op, key string) error {
	if closed.Load() {
		return fmt.Errorf("remote: %s %q: %w", op, key, ErrClosed)
	}
	if err := checkKey(key); err != nil {
		return fmt.Errorf("remote: %s: %w", op, err)
	}
	return nil
}

// checkKey enforces the key rules of ErrInvalidKey.
func checkKey(key string) error {
	if key == "" || len(key) > 1024 {
		return fmt.Errorf("%w %q: want 1 to 1024 bytes", ErrInvalidKey, key)
	}
	for _, el := range strings.Split(key, "/") {
		if el == "" || el == "." || el == ".." || strings.HasPrefix(el, tmpPrefix) || strings.ContainsRune(el, 0) {
			return fmt.Errorf("%w %q: want slash-separated names, none empty, \".\", \"..\" or starting with %q", ErrInvalidKey, key, tmpPrefix)
		}
	}
	if path.Clean(key) != key {
		return fmt.Errorf("%w %q: not a clean path", ErrInvalidKey, key)
	}
	return nil
}

// ctxReader fails a Read once ctx is done, so that copying a reader stops
// when a caller gives up.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// readPart fills buf from r. It returns the bytes read and whether r ended
// (io.EOF); any other error of r is returned.
func readPart(r io.Reader, buf []byte) (int, bool, error) {
	n, err := io.ReadFull(r, buf)
	switch {
	case err == nil:
		return n, false, nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return n, true, nil
	default:
		return n, false, err
	}
}
