package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"strom/remote"
	"strom/remote/storetest"
)

// KV snapshots on S3 (a real versitygw): each round uploads the
// checkpoint under kv/, the bucket holds exactly the retained snapshot's
// objects (the earlier one's unshared files deleted), the changelog is
// trimmed below it; and a node whose KV directory is wiped
// restores the snapshot from S3 on restart and serves every row.
func TestKvSnapshotsToS3AndRestore(t *testing.T) {
	g := storetest.StartVersitygw(t)
	opts := remote.Options{MaxAttempts: 2, MaxBackoff: 50 * time.Millisecond,
		S3: remote.S3Options{Endpoint: g.Endpoint(), AccessKey: g.Access, SecretKey: g.Secret}}
	client, err := remote.NewS3Client(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	bucket := "strom-kv-snapshots"
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	cfg, _ := tieringConfig(t)
	cfg.RemoteDataDir = "s3://" + bucket + "/cluster"
	cfg.S3Endpoint, cfg.S3AccessKey, cfg.S3SecretKey = opts.S3.Endpoint, g.Access, g.Secret
	cfg.KvSnapshotInterval = time.Hour // the test runs the rounds
	s := startServer(t, cfg)
	info := createTable(t, s, "demo", "kv", "id BIGINT NOT NULL, v STRING", 1, "id")
	waitReplicas(t, s, info)
	ctx := context.Background()
	upsert := func(s *Server, round int) {
		t.Helper()
		for id := range 20 {
			body := fmt.Sprintf(`{"database":"demo","table":"kv","rows":[{"id":%d,"v":"r%d-%s"}]}`, id, round, randomPad(id))
			if code, resp := postJSON(t, s, "PutKv", body); code != 200 || strings.Contains(resp, `"error"`) {
				t.Fatalf("PutKv: %d %s", code, resp)
			}
		}
	}
	objects := func(prefix string) []string {
		t.Helper()
		out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, *o.Key)
		}
		return keys
	}
	prefix := "cluster/kv/demo/kv-" + strconv.FormatInt(info.TableId, 10) + "/0/"
	for round := 1; round <= 2; round++ {
		upsert(s, round)
		s.replicas.SnapshotOnce(ctx, time.Now())
		// The changelog is trimmed only once tiered too (tablet/replica
		// DESIGN.md "Changelog trim").
		s.replicas.TierOnce(ctx, time.Now())
		snaps, err := s.cat.KvSnapshots(info.TableId, 0)
		if err != nil || len(snaps.Snapshots) != 1 || snaps.Snapshots[0].ID != int64(round) {
			t.Fatalf("round %d: snapshots %+v, %v; want the one of this round", round, snaps, err)
		}
		var want []string
		for _, f := range snaps.Snapshots[0].Files {
			want = append(want, prefix+f.Key)
		}
		slices.Sort(want)
		if got := objects("cluster/kv/"); !slices.Equal(got, want) {
			t.Fatalf("round %d: bucket holds\n%s\nwant the snapshot's files\n%s", round, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		r, err := s.replicas.Replica(replicaTB(info.TableId, 0))
		if err != nil {
			t.Fatal(err)
		}
		if start := r.Log().LogStartOffset(); start == 0 || start > snaps.Snapshots[0].LogOffset {
			t.Fatalf("round %d: changelog starts at %d, the snapshot is at %d", round, start, snaps.Snapshots[0].LogOffset)
		}
	}

	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(cfg.DataDir, "tablets", strconv.FormatInt(info.TableId, 10), "0", "kv")); err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	s2 := startServer(t, cfg)
	waitReplicas(t, s2, info)
	var keys []string
	for id := range 20 {
		keys = append(keys, fmt.Sprintf(`{"id":%d}`, id))
	}
	code, resp := postJSON(t, s2, "Lookup", `{"database":"demo","table":"kv","keys":[`+strings.Join(keys, ",")+`]}`)
	if code != 200 {
		t.Fatalf("Lookup after the restore: %d %s", code, resp)
	}
	var out struct{ Rows []map[string]any }
	if err := json.Unmarshal([]byte(resp), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Rows) != 20 {
		t.Fatalf("lookup after the restore: %d rows, want 20", len(out.Rows))
	}
	for i, row := range out.Rows {
		if v, _ := row["v"].(string); !strings.HasPrefix(v, "r2-") {
			t.Fatalf("row %d after the restore: %v", i, row)
		}
	}
}
