package remote_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"strom/remote"
	"strom/remote/storetest"
)

// The S3 tests run against a real S3-compatible server: versitygw, from
// scripts/versitygw.sh (eval "$(scripts/versitygw.sh start)"), which sets
// these variables. Without them the tests are skipped loudly, except under
// CI=true, where they fail.
const (
	envEndpoint  = "STROM_S3_ENDPOINT"
	envAccessKey = "STROM_S3_ACCESS_KEY"
	envSecretKey = "STROM_S3_SECRET_KEY"
	envBinary    = "STROM_VERSITYGW"
)

func requireEnv(t testing.TB, names ...string) []string {
	t.Helper()
	return storetest.RequireEnv(t, names...)
}

// s3Server is an S3 endpoint and its root credentials.
type s3Server struct{ endpoint, access, secret string }

func (s s3Server) options(partSize int64) remote.Options {
	return remote.Options{PartSize: partSize, S3: remote.S3Options{
		Endpoint: s.endpoint, AccessKey: s.access, SecretKey: s.secret}}
}

// envServer is the server scripts/versitygw.sh started.
func envServer(t testing.TB) s3Server {
	v := requireEnv(t, envEndpoint, envAccessKey, envSecretKey)
	return s3Server{v[0], v[1], v[2]}
}

// newBucket creates a bucket of a random name for t and empties and
// removes it after t.
func newBucket(t testing.TB, client *s3.Client) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	bucket := "strom-test-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	t.Cleanup(func() { removeBucket(t, client, bucket) })
	return bucket
}

func removeBucket(t testing.TB, client *s3.Client, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ups, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket})
	if err == nil {
		for _, u := range ups.Uploads {
			client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: u.Key, UploadId: u.UploadId})
		}
	}
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: &bucket})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Logf("empty bucket %s: %v", bucket, err)
			return
		}
		for _, o := range page.Contents {
			client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: o.Key})
		}
	}
	if _, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &bucket}); err != nil {
		t.Logf("delete bucket %s: %v", bucket, err)
	}
}

// pendingUploads counts the multipart uploads in progress under prefix.
func pendingUploads(t testing.TB, client *s3.Client, bucket, prefix string) int {
	t.Helper()
	out, err := client.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{
		Bucket: &bucket, Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatalf("list multipart uploads: %v", err)
	}
	return len(out.Uploads)
}

func TestS3StoreConformance(t *testing.T) {
	srv := envServer(t)
	const partSize = 5 << 20 // S3's smallest
	opts := srv.options(partSize)
	opts.MultipartThreshold = partSize // files too go up in parts above one
	client, err := remote.NewS3Client(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	bucket := newBucket(t, client)
	var mu sync.Mutex
	prefixes := map[remote.Store]string{}
	n := 0
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) remote.Store {
			mu.Lock()
			n++
			prefix := fmt.Sprintf("store-%d", n)
			mu.Unlock()
			s, err := remote.Open(t.Context(), "s3://"+bucket+"/"+prefix, opts)
			if err != nil {
				t.Fatal(err)
			}
			s.(*remote.S3Store).SetListPageSize(10)
			mu.Lock()
			prefixes[s] = prefix + "/"
			mu.Unlock()
			return s
		},
		PartSize: partSize,
		PageSize: 10,
		Pending: func(t *testing.T, s remote.Store) int {
			mu.Lock()
			prefix := prefixes[s]
			mu.Unlock()
			return pendingUploads(t, client, bucket, prefix)
		},
	})
}

// versitygw is a versitygw process of the test's own.
type versitygw struct {
	*storetest.Versitygw
	s3Server
}

func startVersitygw(t *testing.T) *versitygw {
	g := storetest.StartVersitygw(t)
	return &versitygw{g, s3Server{g.Endpoint(), g.Access, g.Secret}}
}

// blockingReader yields first, then blocks until release is closed, then
// yields rest.
type blockingReader struct {
	first, rest []byte
	blocked     chan struct{} // closed when the reader has blocked
	release     chan struct{}
}

func (r *blockingReader) Read(p []byte) (int, error) {
	if len(r.first) > 0 {
		n := copy(p, r.first)
		r.first = r.first[n:]
		return n, nil
	}
	if r.blocked != nil {
		close(r.blocked)
		r.blocked = nil
		<-r.release
	}
	if len(r.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

// The S3 server is killed in the middle of a multipart put: the put fails
// with ErrUnavailable once its bounded tries are spent (it does not hang),
// and once the server is back, puts succeed.
func TestS3StoreServerStopped(t *testing.T) {
	g := startVersitygw(t)
	const partSize = 5 << 20
	const attempts = 3
	opts := g.options(partSize)
	opts.MaxAttempts, opts.MaxBackoff = attempts, 50*time.Millisecond
	client, err := remote.NewS3Client(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	bucket := "strom-fault"
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	s, err := remote.Open(t.Context(), "s3://"+bucket, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	data := storetest.Bytes(7, 2*partSize+100)
	blocked, release := make(chan struct{}), make(chan struct{})
	r := &blockingReader{first: data[:partSize+1], rest: data[partSize+1:], blocked: blocked, release: release}
	go func() {
		<-blocked // the first part is read (and being sent); the server goes
		g.Stop()
		close(release)
	}()
	err = s.Put(ctx, "big", r)
	if !errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("put with the server stopped: got %v, want ErrUnavailable", err)
	}
	var tries *retry.MaxAttemptsError
	if !errors.As(err, &tries) || tries.Attempt != attempts {
		t.Errorf("put with the server stopped: got %v, want %d tries spent", err, attempts)
	}
	if ctx.Err() != nil {
		t.Fatalf("put returned only when its context ended: %v", err)
	}

	g.Start()
	if err := s.Put(ctx, "big", bytes.NewReader(data)); err != nil {
		t.Fatalf("put after the server came back: %v", err)
	}
	rc, err := s.Get(ctx, "big", remote.Range{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v; want %d", len(got), err, len(data))
	}
}

// faultProxy is an HTTP proxy in front of a real S3 server that answers
// the next fail requests itself with status and an S3 error code, and
// counts the requests it sees.
type faultProxy struct {
	mu       sync.Mutex
	fail     int
	status   int
	code     string
	requests int
	sent     int64 // body bytes of the requests answered by the server
}

func (p *faultProxy) sentBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func (p *faultProxy) inject(n, status int, code string) {
	p.mu.Lock()
	p.fail, p.status, p.code, p.requests = n, status, code, 0
	p.mu.Unlock()
}

func (p *faultProxy) seen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

func startFaultProxy(t *testing.T, target string) (*faultProxy, string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u) // keeps the Host header the client signed
	p := &faultProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests++
		failing := p.fail > 0
		if failing {
			p.fail--
		}
		status, code := p.status, p.code
		p.mu.Unlock()
		if !failing {
			body := &countingReader{r: r.Body}
			r.Body = io.NopCloser(body)
			rp.ServeHTTP(w, r)
			p.mu.Lock()
			p.sent += body.n
			p.mu.Unlock()
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, code)
	}))
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// Throttling (503 SlowDown) and server errors are retried, up to
// MaxAttempts tries in all; other errors are not. What still fails after
// the tries wraps ErrUnavailable.
func TestS3StoreRetries(t *testing.T) {
	srv := envServer(t)
	proxy, endpoint := startFaultProxy(t, srv.endpoint)
	const attempts = 4
	opts := srv.options(5 << 20)
	opts.S3.Endpoint = endpoint
	opts.MaxAttempts, opts.MaxBackoff = attempts, 20*time.Millisecond
	client, err := remote.NewS3Client(t.Context(), srv.options(5<<20))
	if err != nil {
		t.Fatal(err)
	}
	bucket := newBucket(t, client)
	s, err := remote.Open(t.Context(), "s3://"+bucket, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		name     string
		fail     int
		status   int
		code     string
		requests int   // what the put sends
		err      error // nil: the put succeeds
	}{
		{"throttled then served", attempts - 1, http.StatusServiceUnavailable, "SlowDown", attempts, nil},
		{"internal error then served", 2, http.StatusInternalServerError, "InternalError", 3, nil},
		{"throttled throughout", 100, http.StatusServiceUnavailable, "SlowDown", attempts, remote.ErrUnavailable},
		{"bad gateway throughout", 100, http.StatusBadGateway, "BadGateway", attempts, remote.ErrUnavailable},
		{"access denied", 1, http.StatusForbidden, "AccessDenied", 1, errAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy.inject(tc.fail, tc.status, tc.code)
			err := s.Put(t.Context(), "k", strings.NewReader(tc.name))
			switch {
			case tc.err == nil && err != nil:
				t.Fatalf("put: %v", err)
			case tc.err == errAny && (err == nil || errors.Is(err, remote.ErrUnavailable)):
				t.Fatalf("put: got %v, want an error that is not ErrUnavailable", err)
			case tc.err != nil && tc.err != errAny && !errors.Is(err, tc.err):
				t.Fatalf("put: got %v, want %v", err, tc.err)
			}
			if n := proxy.seen(); n != tc.requests {
				t.Errorf("the put sent %d requests, want %d", n, tc.requests)
			}
		})
	}
}

// errAny in a test case is any error.
var errAny = errors.New("any error")

// A put from a stream holds a bounded number of parts in memory, however
// large the object: it never reads more than PartConcurrency+1 parts ahead
// of what the server has received.
func TestS3StorePutStreamsBounded(t *testing.T) {
	srv := envServer(t)
	proxy, endpoint := startFaultProxy(t, srv.endpoint)
	const partSize, parts = 5 << 20, 8
	opts := srv.options(partSize)
	opts.S3.Endpoint, opts.PartConcurrency = endpoint, 1
	client, err := remote.NewS3Client(t.Context(), srv.options(partSize))
	if err != nil {
		t.Fatal(err)
	}
	bucket := newBucket(t, client)
	s, err := remote.Open(t.Context(), "s3://"+bucket, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := storetest.Bytes(11, parts*partSize)
	r := &aheadReader{r: bytes.NewReader(data), sent: proxy.sentBytes}
	if err := s.Put(t.Context(), "big", r); err != nil {
		t.Fatal(err)
	}
	// One part in flight and one being filled; one more of slack for the
	// proxy counting a part after the client has its answer.
	if most := int64(opts.PartConcurrency+2) * partSize; r.ahead > most {
		t.Errorf("the put read %d bytes ahead of what the server had, want at most %d (%d parts); the object is %d",
			r.ahead, most, opts.PartConcurrency+2, len(data))
	}
	if r.ahead < partSize {
		t.Errorf("the put read at most %d bytes ahead of the server: the measure is broken", r.ahead)
	}
}

// aheadReader records the most bytes read from it beyond what sent
// reports as received by the server.
type aheadReader struct {
	r     io.Reader
	read  int64
	sent  func() int64
	ahead int64
}

func (a *aheadReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	a.read += int64(n)
	a.ahead = max(a.ahead, a.read-a.sent())
	return n, err
}

// RemoveTemporary aborts the multipart uploads in progress under a prefix
// (what a crash mid-put leaves on S3), only those, and leaves objects.
func TestS3StoreRemoveTemporary(t *testing.T) {
	srv := envServer(t)
	opts := srv.options(5 << 20)
	client, err := remote.NewS3Client(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	bucket := newBucket(t, client)
	s, err := remote.Open(t.Context(), "s3://"+bucket+"/p", opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, key := range []string{"p/a/x", "p/a/y/z", "p/b/w"} {
		up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: strings.NewReader("part")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "a/obj", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	n, err := s.(remote.TemporarySweeper).RemoveTemporary(ctx, "a/")
	if err != nil || n != 2 {
		t.Fatalf("RemoveTemporary(a/) = %d, %v; want 2", n, err)
	}
	if got := pendingUploads(t, client, bucket, "p/a/"); got != 0 {
		t.Fatalf("%d uploads in progress under a/ after RemoveTemporary", got)
	}
	if got := pendingUploads(t, client, bucket, "p/b/"); got != 1 {
		t.Fatalf("%d uploads in progress under b/, want 1 (not under the prefix)", got)
	}
	if fi, err := s.Stat(ctx, "a/obj"); err != nil || fi.Size != 4 {
		t.Fatalf("the object under a/: %+v, %v", fi, err)
	}
}
