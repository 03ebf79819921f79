package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"strom/remote"
	"strom/remote/storetest"
	stromv1 "strom/rpc/gen/strom/v1"
)

// filesUnder lists the files below dir (relative, slash-separated).
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Dropping tables deletes their remote objects (a log table's tiered
// segments, a primary-key table's tiered changelog and KV snapshots, a
// crash's temporary file), and nothing of a table that stays; the record
// of a pending deletion survives a failed pass (a cancelled context: a
// crash mid-delete) and an object put late (a round in flight at the drop),
// and is removed only by an empty pass after the grace. On both backends:
// a directory, and S3 on a real versitygw (there a put a crash cut short
// is a multipart upload in progress, aborted by the cleanup).
func TestDroppedTablesRemoteObjectsAreDeleted(t *testing.T) {
	t.Run("file", func(t *testing.T) { testDroppedTablesRemoteObjectsAreDeleted(t, fileBackend(t)) })
	t.Run("s3", func(t *testing.T) { testDroppedTablesRemoteObjectsAreDeleted(t, s3Backend(t)) })
}

// remoteBackend is a test's view of remote.data.dir behind the store's back.
type remoteBackend struct {
	configure func(cfg *Config)
	// count is how many objects, and remains of puts a crash cut short,
	// are under prefix.
	count func(prefix string) int
	// put stores an object; crashPut leaves what a crash in the middle
	// of a put of key leaves.
	put, crashPut func(key string)
}

func fileBackend(t *testing.T) remoteBackend {
	dir := t.TempDir()
	return remoteBackend{
		configure: func(cfg *Config) { cfg.RemoteDataDir = "file://" + dir },
		count: func(prefix string) (n int) {
			for _, f := range filesUnder(t, dir) {
				if strings.HasPrefix(f, prefix) {
					n++
				}
			}
			return n
		},
		put: func(key string) {
			p := filepath.Join(dir, filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("late"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		crashPut: func(key string) {
			p := filepath.Join(dir, filepath.FromSlash(key))
			if err := os.WriteFile(filepath.Join(filepath.Dir(p), ".strom-tmp-"+filepath.Base(p)+"-1"), []byte("partial"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func s3Backend(t *testing.T) remoteBackend {
	g := storetest.StartVersitygw(t)
	opts := remote.Options{S3: remote.S3Options{Endpoint: g.Endpoint(), AccessKey: g.Access, SecretKey: g.Secret}}
	client, err := remote.NewS3Client(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	bucket := "strom-drops"
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	const root = "cluster/"
	return remoteBackend{
		configure: func(cfg *Config) {
			cfg.RemoteDataDir = "s3://" + bucket + "/cluster"
			cfg.S3Endpoint, cfg.S3AccessKey, cfg.S3SecretKey = g.Endpoint(), g.Access, g.Secret
		},
		count: func(prefix string) (n int) {
			ctx := context.Background()
			objects := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(root + prefix)})
			for objects.HasMorePages() {
				page, err := objects.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				n += len(page.Contents)
			}
			uploads, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: aws.String(root + prefix)})
			if err != nil {
				t.Fatal(err)
			}
			return n + len(uploads.Uploads)
		},
		put: func(key string) {
			if _, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(root + key), Body: strings.NewReader("late")}); err != nil {
				t.Fatal(err)
			}
		},
		crashPut: func(key string) {
			ctx := context.Background()
			up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: aws.String(root + key)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: aws.String(root + key), UploadId: up.UploadId,
				PartNumber: aws.Int32(1), Body: strings.NewReader("partial")}); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func testDroppedTablesRemoteObjectsAreDeleted(t *testing.T, b remoteBackend) {
	cfg, _ := tieringConfig(t)
	b.configure(&cfg)
	cfg.KvSnapshotInterval = time.Hour // the test runs the rounds
	s := startServer(t, cfg)
	ctx := context.Background()
	logT := createTableWithOptions(t, s, "demo", "gone", tierDDL, nil)
	kvT := createTable(t, s, "demo", "gonekv", "id BIGINT NOT NULL, v STRING", 1, "id")
	keepT := createTableWithOptions(t, s, "demo", "kept", tierDDL, nil)
	for _, info := range []*stromv1.TableInfo{logT, kvT, keepT} {
		waitReplicas(t, s, info)
	}
	produceRows(t, s, logT, 0, 30)
	produceRows(t, s, keepT, 0, 30)
	for round := range 3 {
		for id := range 20 {
			body := fmt.Sprintf(`{"database":"demo","table":"gonekv","rows":[{"id":%d,"v":"r%d-%s"}]}`, id, round, randomPad(id))
			if code, resp := postJSON(t, s, "PutKv", body); code != 200 || strings.Contains(resp, `"error"`) {
				t.Fatalf("PutKv: %d %s", code, resp)
			}
		}
		s.replicas.SnapshotOnce(ctx, time.Now())
		s.replicas.TierOnce(ctx, time.Now())
	}
	count := b.count
	gone := []string{"log/demo/gone-" + strconv.FormatInt(logT.TableId, 10) + "/", "log/demo/gonekv-" + strconv.FormatInt(kvT.TableId, 10) + "/", "kv/demo/gonekv-" + strconv.FormatInt(kvT.TableId, 10) + "/"}
	kept := "log/demo/kept-" + strconv.FormatInt(keepT.TableId, 10) + "/"
	for _, p := range append(gone, kept) {
		if count(p) == 0 {
			t.Fatalf("nothing under %s before the drop", p)
		}
	}
	keptBefore := count(kept)
	// A put a crash cut short.
	before := count(gone[0])
	b.crashPut(gone[0] + "0/x")
	if n := count(gone[0]); n != before+1 {
		t.Fatalf("%d under %s after a crashed put, %d before", n, gone[0], before)
	}

	for _, name := range []string{"gone", "gonekv"} {
		if _, err := adminClient(s).DropTable(ctx, connect.NewRequest(&stromv1.DropTableRequest{Database: "demo", Table: name})); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Metadata().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	pending := func() int {
		t.Helper()
		d, err := s.cat.RemoteDeletions()
		if err != nil {
			t.Fatal(err)
		}
		return len(d)
	}
	if n := pending(); n != 2 {
		t.Fatalf("%d pending remote deletions after two drops, want 2", n)
	}

	// A pass that fails (its context cancelled: a crash) keeps the records.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.CleanDroppedRemote(cancelled, time.Now()); err == nil {
		t.Fatal("a cancelled pass returned no error")
	}
	if n := pending(); n != 2 {
		t.Fatalf("%d pending remote deletions after a failed pass, want 2", n)
	}
	if err := s.CleanDroppedRemote(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, p := range gone {
		if n := count(p); n != 0 {
			t.Fatalf("%d files under %s after the cleanup", n, p)
		}
	}
	if n := count(kept); n != keptBefore {
		t.Fatalf("the kept table has %d remote files, had %d", n, keptBefore)
	}
	if n := pending(); n != 2 {
		t.Fatalf("%d pending remote deletions within the grace, want 2", n)
	}

	// An object put late (a round in flight at the drop) goes in a later pass.
	b.put(gone[2] + "0/shared/late.sst")
	after := time.Now().Add(droppedRemoteGrace)
	if err := s.CleanDroppedRemote(ctx, after); err != nil {
		t.Fatal(err)
	}
	if n := count(gone[2]); n != 0 {
		t.Fatalf("the late object is still there")
	}
	if n := pending(); n != 1 {
		t.Fatalf("%d pending remote deletions after a pass past the grace (one table had a late object), want 1", n)
	}
	if err := s.CleanDroppedRemote(ctx, after); err != nil {
		t.Fatal(err)
	}
	if err := s.Metadata().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 0 {
		t.Fatalf("%d pending remote deletions after an empty pass past the grace, want 0", n)
	}
	if n := count(gone[0]); n != 0 {
		t.Fatalf("%d objects or crashed puts under %s at the end", n, gone[0])
	}
}
