package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"strom/remote"
	"strom/remote/storetest"
)

// Tiering to S3 (a real versitygw): with the server stopped, writes and
// reads of local data go on and the manifest and local segments stay as
// they were; once it is back, tiering catches up, and a consumer from the
// earliest offset reads every row once and in order, full and projected,
// from the S3 segments and the local ones.
func TestTieringToS3SurvivesTheServerStopping(t *testing.T) {
	g := storetest.StartVersitygw(t)
	opts := remote.Options{MaxAttempts: 2, MaxBackoff: 50 * time.Millisecond,
		S3: remote.S3Options{Endpoint: g.Endpoint(), AccessKey: g.Access, SecretKey: g.Secret}}
	client, err := remote.NewS3Client(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	bucket := "strom-tiering"
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	cfg, _ := tieringConfig(t)
	cfg.RemoteDataDir = "s3://" + bucket + "/cluster"
	cfg.S3Endpoint, cfg.S3AccessKey, cfg.S3SecretKey = opts.S3.Endpoint, g.Access, g.Secret
	s := startServer(t, cfg)
	info := createTableWithOptions(t, s, "demo", "tiered", tierDDL, nil)
	waitReplicas(t, s, info)
	r, err := s.replicas.Replica(replicaTB(info.TableId, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	produceRows(t, s, info, 0, 30)
	s.replicas.TierOnce(ctx, time.Now())
	first, _ := s.cat.RemoteLogs(info.TableId, 0)
	if len(first.Segments) == 0 || len(r.Log().Segments()) != 2 {
		t.Fatalf("after a round: %d remote segments, %d local; want some and 2", len(first.Segments), len(r.Log().Segments()))
	}
	out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket})
	if err != nil || len(out.Contents) != 3*len(first.Segments) {
		t.Fatalf("bucket holds %d objects (%v), want 3 per segment (%d)", len(out.Contents), err, len(first.Segments))
	}

	g.Stop()
	produceRows(t, s, info, 30, 60)
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	s.replicas.TierOnce(tctx, time.Now())
	cancel()
	if down, _ := s.cat.RemoteLogs(info.TableId, 0); len(down.Segments) != len(first.Segments) {
		t.Fatalf("with S3 down the manifest went from %d to %d segments", len(first.Segments), len(down.Segments))
	}
	if n := len(r.Log().Segments()); n <= 2 {
		t.Fatalf("with S3 down the leader kept %d local segments: it deleted untiered ones", n)
	}
	local := r.Log().LogStartOffset()
	if rr, err := r.Read(local, 1<<20); err != nil || len(rr.Batches) == 0 {
		t.Fatalf("a read of local data with S3 down: %v (%d bytes)", err, len(rr.Batches))
	}

	g.Start()
	s.replicas.TierOnce(ctx, time.Now())
	caught, _ := s.cat.RemoteLogs(info.TableId, 0)
	if caught.EndOffset() <= first.EndOffset() || len(r.Log().Segments()) != 2 {
		t.Fatalf("after S3 came back: remote end %d (was %d), %d local segments; want it caught up and 2",
			caught.EndOffset(), first.EndOffset(), len(r.Log().Segments()))
	}
	ids, _, fullBytes := readAll(t, s, nil)
	_, names, projBytes := readAll(t, s, []string{"name"})
	if len(ids) != 60 || len(names) != 60 {
		t.Fatalf("read %d rows full and %d projected, want 60", len(ids), len(names))
	}
	for i := range 60 {
		if ids[i] != int64(i) || names[i] != fmt.Sprintf("n%d", i) {
			t.Fatalf("row %d: id %d name %q", i, ids[i], names[i])
		}
	}
	if projBytes*2 > fullBytes {
		t.Fatalf("projected fetch took %d bytes, full %d", projBytes, fullBytes)
	}
}
