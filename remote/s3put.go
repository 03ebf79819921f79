package remote

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Put implements Store.
//
// When r can be read at offsets and its size found by seeking (an
// *os.File, a *bytes.Reader), nothing is copied: an object of up to
// Options.MultipartThreshold bytes goes up in one PutObject streamed from
// r, a larger one as a multipart upload whose parts are sections of r.
// Otherwise r is read into part buffers, PartConcurrency+1 of them at
// most: an object that fits in one goes up in one PutObject, a larger one
// as a multipart upload. Up to Options.PartConcurrency parts are in
// flight at once.
func (s *S3Store) Put(ctx context.Context, key string, r io.Reader) error {
	if err := checkCall(&s.closed, "put", key); err != nil {
		return err
	}
	parts, err := newPartReader(ctx, r, s.partSize, s.threshold, s.concurrency+1)
	if err != nil {
		return fmt.Errorf("remote: put %q: %w", key, err)
	}
	first, err := parts.next()
	if err != nil {
		return fmt.Errorf("remote: put %q: %w", key, err)
	}
	if first.last {
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.bucket, Key: aws.String(s.prefix + key),
			Body: first.body, ContentLength: aws.Int64(first.n),
		})
		parts.done(first)
		if err != nil {
			return s3Err("put", key, err)
		}
		return nil
	}
	return s.putMultipart(ctx, key, parts, first)
}

// putMultipart sends first and the rest of parts as a multipart upload,
// aborting it when anything fails.
func (s *S3Store) putMultipart(ctx context.Context, key string, parts *partReader, first part) (err error) {
	k := aws.String(s.prefix + key)
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: k})
	if err != nil {
		parts.done(first)
		return s3Err("put", key, err)
	}
	defer func() {
		if err == nil {
			return
		}
		// ctx may be what failed: abort with a context of its own.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if aerr := s.abort(actx, k, up.UploadId); aerr != nil {
			err = fmt.Errorf("%w (and aborting multipart upload %s failed, leaving its parts until the bucket's lifecycle rule removes them: %v)", err, aws.ToString(up.UploadId), aerr)
		}
	}()

	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		completed []types.CompletedPart
		failed    error // the first error
	)
	fail := func(err error) {
		mu.Lock()
		if failed == nil {
			failed = err
			cancel()
		}
		mu.Unlock()
	}
	inFlight := make(chan struct{}, s.concurrency)
	p := first
	for num := int32(1); ; num++ {
		select {
		case inFlight <- struct{}{}:
		case <-uctx.Done():
		}
		if uctx.Err() != nil { // a part failed (recorded), or ctx ended
			parts.done(p)
			fail(fmt.Errorf("remote: put %q: %w", key, uctx.Err()))
			break
		}
		pt := p
		wg.Go(func() {
			defer func() { <-inFlight }()
			defer parts.done(pt)
			out, err := s.client.UploadPart(uctx, &s3.UploadPartInput{
				Bucket: &s.bucket, Key: k, UploadId: up.UploadId, PartNumber: aws.Int32(num),
				Body: pt.body, ContentLength: aws.Int64(pt.n),
			})
			if err != nil {
				fail(s3Err(fmt.Sprintf("put (part %d)", num), key, err))
				return
			}
			mu.Lock()
			completed = append(completed, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
			mu.Unlock()
		})
		if p.last {
			break
		}
		var rerr error
		if p, rerr = parts.next(); rerr != nil {
			fail(fmt.Errorf("remote: put %q: %w", key, rerr))
			break
		}
	}
	wg.Wait()
	if failed != nil {
		// A part cancelled by another's failure reports the cancellation:
		// the caller's ctx, when it ended, says why.
		if cerr := ctx.Err(); cerr != nil && !errors.Is(failed, cerr) {
			failed = fmt.Errorf("remote: put %q: %w", key, cerr)
		}
		return failed
	}
	slices.SortFunc(completed, func(a, b types.CompletedPart) int {
		return cmp.Compare(aws.ToInt32(a.PartNumber), aws.ToInt32(b.PartNumber))
	})
	if _, err := s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: k, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: completed},
	}); err != nil {
		return s3Err("put", key, err)
	}
	return nil
}

// abortAttempts bounds how many times abort asks for an upload's removal.
const abortAttempts = 5

// abort aborts a multipart upload and checks that it is gone. A part whose
// upload was cancelled on this side may still be completing on the server
// when the abort arrives and bring the upload back; S3's documentation says
// an abort may then have to be repeated. abort repeats it, with a short
// pause, until listing the upload's parts answers NoSuchUpload.
func (s *S3Store) abort(ctx context.Context, key, uploadID *string) error {
	for attempt := 1; ; attempt++ {
		_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
			Bucket: &s.bucket, Key: key, UploadId: uploadID,
		})
		if err != nil && !isNoSuchUpload(err) {
			return err
		}
		_, err = s.client.ListParts(ctx, &s3.ListPartsInput{Bucket: &s.bucket, Key: key, UploadId: uploadID})
		switch {
		case isNoSuchUpload(err):
			return nil
		case err != nil:
			return fmt.Errorf("check the abort: %w", err)
		case attempt == abortAttempts:
			return fmt.Errorf("the upload is still there after %d aborts", attempt)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

// isNoSuchUpload reports whether err is S3's answer for an upload that does
// not exist (aborted or completed).
func isNoSuchUpload(err error) bool {
	var ae smithy.APIError
	var re *smithyhttp.ResponseError
	return errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload" ||
		errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

// part is one piece of an object being put.
type part struct {
	body io.ReadSeeker
	n    int64
	last bool   // no part follows
	buf  []byte // the buffer body reads, to give back; nil for a section
}

// partReader cuts the object a Put reads into parts.
type partReader struct {
	ctx      context.Context
	r        io.Reader
	ra       io.ReaderAt // set when the parts are sections of r
	off, end int64       // with ra: the next part's offset, the object's end
	partSize int64
	single   int64 // with ra: the largest object sent as one part
	// Without ra: free buffers, and how many more may be made.
	free     chan []byte
	makeable int
	peek     []byte // one byte read ahead to tell a full last part from more
	peeked   bool
}

func newPartReader(ctx context.Context, r io.Reader, partSize, single int64, buffers int) (*partReader, error) {
	p := &partReader{ctx: ctx, r: r, partSize: partSize, single: single}
	ra, isRA := r.(io.ReaderAt)
	if sk, ok := r.(io.Seeker); ok && isRA {
		// Sections from the current offset to the end; a reader that
		// cannot seek after all (a pipe's *os.File) is read as a stream.
		if cur, err := sk.Seek(0, io.SeekCurrent); err == nil {
			if end, err := sk.Seek(0, io.SeekEnd); err == nil {
				if _, err := sk.Seek(cur, io.SeekStart); err != nil {
					return nil, err
				}
				p.ra, p.off, p.end = ra, cur, end
				return p, nil
			}
		}
	}
	p.free, p.makeable, p.peek = make(chan []byte, buffers), buffers, make([]byte, 1)
	return p, nil
}

// next returns the next part. With buffers, it waits for a free one.
func (p *partReader) next() (part, error) {
	if err := p.ctx.Err(); err != nil {
		return part{}, err
	}
	if p.ra != nil {
		n := min(p.partSize, p.end-p.off)
		if p.end-p.off <= p.single {
			n = p.end - p.off
		}
		p.single = 0 // only the first part may be the whole object
		pt := part{body: io.NewSectionReader(p.ra, p.off, n), n: n}
		p.off += n
		pt.last = p.off == p.end
		return pt, nil
	}
	var buf []byte
	if p.makeable > 0 {
		p.makeable--
		buf = make([]byte, p.partSize)
	} else {
		select {
		case buf = <-p.free:
		case <-p.ctx.Done():
			return part{}, p.ctx.Err()
		}
	}
	n := 0
	if p.peeked {
		buf[0], n, p.peeked = p.peek[0], 1, false
	}
	m, eof, err := readPart(ctxReader{p.ctx, p.r}, buf[n:])
	n += m
	if err == nil && !eof {
		// Full: one byte more tells whether this is the last part.
		var k int
		k, eof, err = readPart(ctxReader{p.ctx, p.r}, p.peek)
		p.peeked = k == 1
	}
	if err != nil {
		p.free <- buf
		return part{}, err
	}
	return part{body: bytes.NewReader(buf[:n]), n: int64(n), last: eof, buf: buf}, nil
}

// done gives back pt's buffer once its upload is over.
func (p *partReader) done(pt part) {
	if pt.buf != nil {
		p.free <- pt.buf
	}
}
