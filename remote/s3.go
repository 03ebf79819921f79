package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// S3Store is a Store in an S3 bucket, under a key prefix: the object under
// key k is bucket/prefix/k. Small objects go up in one PutObject, larger
// ones as a multipart upload of parts of Options.PartSize, which is
// aborted when anything fails, so that no part of a failed Put stays
// behind (S3Store.Put says which path an object takes).
//
// Requests are retried by the AWS SDK's standard retryer (exponential
// backoff with jitter) on network errors, 5xx and throttling, at most
// Options.MaxAttempts tries each; what still fails with one of those
// errors wraps ErrUnavailable.
type S3Store struct {
	client      *s3.Client
	bucket      string
	prefix      string // "" or ending with '/'
	partSize    int64
	threshold   int64
	concurrency int
	pageSize    int32
	closed      atomic.Bool
}

// OpenS3 returns a store in bucket under prefix ("" for the bucket's root).
func OpenS3(ctx context.Context, bucket, prefix string, opts Options) (*S3Store, error) {
	opts = opts.withDefaults()
	if opts.PartSize < minS3PartSize {
		return nil, fmt.Errorf("remote: open s3://%s: part size %d bytes is below S3's minimum of %d", bucket, opts.PartSize, minS3PartSize)
	}
	client, err := NewS3Client(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("remote: open s3://%s: %w", bucket, err)
	}
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		prefix += "/"
	}
	return &S3Store{client: client, bucket: bucket, prefix: prefix, partSize: opts.PartSize, threshold: opts.MultipartThreshold, concurrency: opts.PartConcurrency, pageSize: 1000}, nil
}

// NewS3Client returns the S3 client an S3Store of opts uses: path-style
// unless opts.S3.VirtualHost, retrying as Options says. Tests and
// benchmarks use it to reach the bucket around the Store.
func NewS3Client(ctx context.Context, opts Options) (*s3.Client, error) {
	opts = opts.withDefaults()
	loaders := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = opts.MaxAttempts
				o.MaxBackoff = opts.MaxBackoff
				// The token bucket would refuse retries after a burst of
				// failures; MaxAttempts bounds them already.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if opts.S3.Region != "" {
		loaders = append(loaders, config.WithRegion(opts.S3.Region))
	}
	if opts.S3.AccessKey != "" || opts.S3.SecretKey != "" {
		loaders = append(loaders, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(opts.S3.AccessKey, opts.S3.SecretKey, "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = !opts.S3.VirtualHost
		// Objects put without a checksum (as by many S3-compatible
		// servers) are read without one: not worth a log line each.
		o.DisableLogOutputChecksumValidationSkipped = true
		if opts.S3.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.S3.Endpoint)
		}
	}), nil
}

// SetListPageSize sets how many keys one page of List asks for (S3's
// MaxKeys; default 1000). Tests make it small to list many pages.
func (s *S3Store) SetListPageSize(n int) { s.pageSize = int32(n) }

// s3Err wraps err, from an operation op on key, with the sentinel its
// kind maps to.
func s3Err(op, key string, err error) error {
	var sentinel error
	var re *smithyhttp.ResponseError
	var ae smithy.APIError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
	case errors.As(err, &ae) && (ae.ErrorCode() == "NoSuchKey" || ae.ErrorCode() == "NotFound"):
		sentinel = ErrNotFound
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound:
		sentinel = ErrNotFound
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable:
		sentinel = ErrInvalidRange
	case retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary:
		sentinel = ErrUnavailable
	}
	if sentinel != nil {
		return fmt.Errorf("remote: %s %q: %w: %w", op, key, sentinel, err)
	}
	return fmt.Errorf("remote: %s %q: %w", op, key, err)
}

// Get implements Store.
func (s *S3Store) Get(ctx context.Context, key string, rng Range) (io.ReadCloser, error) {
	if err := checkCall(&s.closed, "get", key); err != nil {
		return nil, err
	}
	if rng.Length < 0 {
		return nil, fmt.Errorf("remote: get %q (%s): %w", key, rng, ErrInvalidRange)
	}
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)}
	switch {
	case rng.whole():
	case rng.Offset < 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d", rng.Offset))
	case rng.Length == 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", rng.Offset))
	default:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", rng.Offset, rng.Offset+rng.Length-1))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		err = s3Err(fmt.Sprintf("get (%s)", rng), key, err)
		// S3 cannot satisfy any range of an empty object, but Range says
		// a suffix or offset 0 of one reads as empty.
		if errors.Is(err, ErrInvalidRange) && rng.Offset <= 0 {
			if fi, serr := s.Stat(ctx, key); serr == nil && fi.Size == 0 {
				return io.NopCloser(bytes.NewReader(nil)), nil
			}
		}
		return nil, err
	}
	return out.Body, nil
}

// Stat implements Store.
func (s *S3Store) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := checkCall(&s.closed, "stat", key); err != nil {
		return ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)})
	if err != nil {
		return ObjectInfo{}, s3Err("stat", key, err)
	}
	return ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// List implements Store: one ListObjectsV2 page at a time, as the caller
// iterates. Keys that are not valid Store keys (a console's "dir/"
// markers) are skipped.
func (s *S3Store) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		if s.closed.Load() {
			yield(ObjectInfo{}, fmt.Errorf("remote: list %q: %w", prefix, ErrClosed))
			return
		}
		pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
			Bucket: &s.bucket, Prefix: aws.String(s.prefix + prefix), MaxKeys: aws.Int32(s.pageSize),
		})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				yield(ObjectInfo{}, s3Err("list", prefix, err))
				return
			}
			for _, o := range page.Contents {
				key := strings.TrimPrefix(aws.ToString(o.Key), s.prefix)
				if checkKey(key) != nil {
					continue
				}
				if !yield(ObjectInfo{Key: key, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)}, nil) {
					return
				}
			}
		}
	}
}

// Delete implements Store.
func (s *S3Store) Delete(ctx context.Context, key string) error {
	if err := checkCall(&s.closed, "delete", key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key)})
	if err != nil {
		if err = s3Err("delete", key, err); errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// RemoveTemporary aborts the multipart uploads in progress under prefix, a
// key prefix ending in "/" (a put a crash cut short leaves its parts
// stored and billed, never listed as an object), and returns how many it
// aborted. It is remote.TemporarySweeper, as the file store's: only a
// caller that knows no put under prefix is in progress, or that may fail
// any that is, should call it.
func (s *S3Store) RemoveTemporary(ctx context.Context, prefix string) (int, error) {
	if err := checkCall(&s.closed, "abort the multipart uploads under", strings.TrimSuffix(prefix, "/")); err != nil {
		return 0, err
	}
	n := 0
	in := &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: aws.String(s.prefix + prefix)}
	for {
		page, err := s.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return n, s3Err("list the multipart uploads under", prefix, err)
		}
		for _, u := range page.Uploads {
			_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: u.Key, UploadId: u.UploadId})
			if err != nil {
				if err = s3Err("abort the multipart upload of", strings.TrimPrefix(aws.ToString(u.Key), s.prefix), err); !errors.Is(err, ErrNotFound) {
					return n, err
				}
				continue // finished or aborted meanwhile
			}
			n++
		}
		if !aws.ToBool(page.IsTruncated) {
			return n, nil
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

// Close implements Store.
func (s *S3Store) Close() error {
	s.closed.Store(true)
	return nil
}
