package remote_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"strom/remote"
	"strom/remote/storetest"
)

// BenchmarkS3 measures the S3 store's Put and Get against the server of
// scripts/versitygw.sh, each against the plain S3 call on the same bytes
// (one PutObject, one GetObject), alternating the two in every iteration
// so that both see the same machine. It reports both throughputs and
// their ratio (the tiering target of issue 14 is Put ≥ 0.7 of PutObject):
//
//	eval "$(scripts/versitygw.sh start)"
//	go test -run '^$' -bench S3 -benchtime 6x ./remote/
func BenchmarkS3(b *testing.B) {
	srv := envServer(b)
	for _, bc := range []struct {
		from string
		size int64
	}{
		// From a reader that can seek (a file): one PutObject up to the
		// multipart threshold (128 MiB), parts of 8 MiB above.
		{"seekable", 64 << 20}, {"seekable", 256 << 20},
		// From a stream: buffered parts of 8 MiB.
		{"stream", 64 << 20},
	} {
		size := bc.size
		b.Run(fmt.Sprintf("%s-%dMiB", bc.from, size>>20), func(b *testing.B) {
			opts := srv.options(0) // the default part size
			client, err := remote.NewS3Client(b.Context(), opts)
			if err != nil {
				b.Fatal(err)
			}
			bucket := newBucket(b, client)
			s, err := remote.Open(b.Context(), "s3://"+bucket+"/store", opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			data := storetest.Bytes(9, size)
			ctx := context.Background()
			var put, rawPut, get, rawGet time.Duration
			timed := func(d *time.Duration, f func() error) {
				start := time.Now()
				if err := f(); err != nil {
					b.Fatal(err)
				}
				*d += time.Since(start)
			}
			drain := func(rc io.ReadCloser) error {
				defer rc.Close()
				_, err := io.Copy(io.Discard, rc)
				return err
			}
			b.SetBytes(2 * size) // a store call and a raw one per iteration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				key := fmt.Sprintf("obj-%d", i%4)
				ops := []func(){
					func() {
						timed(&put, func() error {
							var r io.Reader = bytes.NewReader(data)
							if bc.from == "stream" {
								r = struct{ io.Reader }{r}
							}
							return s.Put(ctx, key, r)
						})
					},
					func() {
						timed(&rawPut, func() error {
							_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("raw/" + key),
								Body: bytes.NewReader(data), ContentLength: aws.Int64(size)})
							return err
						})
					},
					func() {
						timed(&get, func() error {
							rc, err := s.Get(ctx, key, remote.Range{})
							if err != nil {
								return err
							}
							return drain(rc)
						})
					},
					func() {
						timed(&rawGet, func() error {
							out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("raw/" + key)})
							if err != nil {
								return err
							}
							return drain(out.Body)
						})
					},
				}
				// Each goes first every other iteration: what runs after a
				// put competes with its writeback.
				if i%2 == 1 {
					ops[0], ops[1], ops[2], ops[3] = ops[1], ops[0], ops[3], ops[2]
				}
				for _, op := range ops {
					op()
				}
			}
			mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e6 }
			b.ReportMetric(mbps(put), "put-MB/s")
			b.ReportMetric(mbps(rawPut), "PutObject-MB/s")
			b.ReportMetric(rawPut.Seconds()/put.Seconds(), "put-ratio")
			b.ReportMetric(mbps(get), "get-MB/s")
			b.ReportMetric(mbps(rawGet), "GetObject-MB/s")
			b.ReportMetric(rawGet.Seconds()/get.Seconds(), "get-ratio")
		})
	}
}
