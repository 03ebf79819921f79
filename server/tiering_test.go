package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/server/coordinator"
)

// tieringConfig is a node whose log tiering goes to a directory and runs
// only when the test calls TierOnce, with 1 KB segments.
func tieringConfig(t *testing.T) (Config, string) {
	cfg := testConfig(t, t.TempDir())
	remoteDir := t.TempDir()
	cfg.RemoteDataDir = "file://" + remoteDir
	cfg.RemoteLogTaskInterval = time.Hour
	cfg.SegmentBytes = 1 << 10
	return cfg, remoteDir
}

const tierDDL = "id BIGINT NOT NULL, name STRING, pad STRING"

// produceRows appends rows from..to-1 (id i, name "n<i>", a long random pad), one
// batch each, acknowledged by the bucket's leader.
func produceRows(t *testing.T, s *Server, info *stromv1.TableInfo, from, to int) {
	t.Helper()
	schema := schemaOf(t, tierDDL)
	r, err := s.replicas.Replica(replicaTB(info.TableId, 0))
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		b := buildBatch(t, schema, info.SchemaId, record.Row{int64(i), "n" + strconv.Itoa(i), randomPad(i)})
		if _, err := r.Append(context.Background(), b, -1); err != nil {
			t.Fatal(err)
		}
	}
}

// randomPad is 400 incompressible characters.
func randomPad(seed int) string {
	rnd := rand.New(rand.NewPCG(uint64(seed), 1))
	b := make([]byte, 300)
	for i := range b {
		b[i] = byte(rnd.Uint32())
	}
	return base64.StdEncoding.EncodeToString(b)
}

// readAll fetches bucket 0 from offset 0 to the high watermark with the
// given columns and returns the ids (and names, when projected on them) of
// every row, in offset order, and the bytes of record batches received.
func readAll(t *testing.T, s *Server, columns []string) (ids []int64, names []string, bytes int) {
	t.Helper()
	c := tabletClient(s)
	schema := schemaOf(t, tierDDL)
	proj := schema
	var cols []int
	if columns != nil {
		for i, col := range schema.Columns {
			for _, want := range columns {
				if col.Name == want {
					cols = append(cols, i)
				}
			}
		}
		proj = schema.Project(cols)
	}
	for off := int64(0); ; {
		resp, err := c.FetchLog(context.Background(), connect.NewRequest(&stromv1.FetchLogRequest{
			Database: "demo", Table: "tiered", Columns: columns,
			Buckets: []*stromv1.FetchBucket{{Bucket: 0, Offset: off, MaxBytes: 4 << 10}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		fb := resp.Msg.Buckets[0]
		if fb.Error != nil {
			t.Fatalf("fetch at %d: %v", off, fb.Error)
		}
		bytes += len(fb.Records)
		for data := fb.Records; len(data) > 0; {
			b, rest, err := record.NextBatch(data)
			if err != nil {
				t.Fatal(err)
			}
			data = rest
			dec, err := record.DecodeArrowBatch(b, proj, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < dec.Len(); i++ {
				row := dec.Row(i)
				if columns == nil {
					ids = append(ids, row[0].(int64))
				} else {
					names = append(names, row[0].(string))
				}
			}
			dec.Release()
		}
		if fb.NextOffset == off {
			t.Fatalf("fetch at %d made no progress (high watermark %d)", off, fb.HighWatermark)
		}
		off = fb.NextOffset
		if off >= fb.HighWatermark {
			return ids, names, bytes
		}
	}
}

// A log table tiered to a directory keeps table.log.tiered.local-segments
// segments locally; its manifest in the catalog names the remote ones; a
// consumer from the earliest offset (ListOffsets earliest is the remote
// start) reads every row once and in order across remote and local
// segments, full and projected (and the projected bytes are fewer: the
// node prunes remote batches too).
func TestTieredLogReadsFromEarliest(t *testing.T) {
	cfg, remoteDir := tieringConfig(t)
	s := startServer(t, cfg)
	info := createTableWithOptions(t, s, "demo", "tiered", tierDDL, map[string]string{"table.log.tiered.local-segments": "2"})
	waitReplicas(t, s, info)
	const n = 60
	produceRows(t, s, info, 0, n)
	r, err := s.replicas.Replica(replicaTB(info.TableId, 0))
	if err != nil {
		t.Fatal(err)
	}
	before := len(r.Log().Segments())
	if before < 10 {
		t.Fatalf("%d local segments before tiering; the test wants many", before)
	}
	s.replicas.TierOnce(context.Background(), time.Now())

	if got := len(r.Log().Segments()); got != 2 {
		t.Fatalf("%d local segments after tiering, want 2 (table.log.tiered.local-segments)", got)
	}
	man, err := s.cat.RemoteLogs(info.TableId, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Every sealed segment is tiered; the local ones overlap the remote.
	if local := r.Log().Segments(); man.StartOffset() != 0 || man.EndOffset() != local[1].BaseOffset || len(man.Segments) != before-1 {
		t.Fatalf("manifest covers [%d, %d) in %d segments; want [0, %d) in %d (every sealed segment)", man.StartOffset(), man.EndOffset(), len(man.Segments), local[1].BaseOffset, before-1)
	}
	seg := man.Segments[0]
	for _, suffix := range []string{".log", ".index", ".timeindex"} {
		key := filepath.Join(remoteDir, "log", "demo", "tiered-"+strconv.Itoa(int(info.TableId)), "0", seg.ID, strings.Repeat("0", 20)+suffix)
		if _, err := os.Stat(key); err != nil {
			t.Errorf("remote object: %v", err)
		}
	}

	lo, err := tabletClient(s).ListOffsets(context.Background(), connect.NewRequest(&stromv1.ListOffsetsRequest{
		Database: "demo", Table: "tiered", Spec: stromv1.OffsetSpec_OFFSET_SPEC_EARLIEST, Buckets: []int32{0}}))
	if err != nil || lo.Msg.Buckets[0].Error != nil || lo.Msg.Buckets[0].Offset != 0 {
		t.Fatalf("ListOffsets earliest: %v %v, want 0 (the remote start)", lo, err)
	}

	ids, _, fullBytes := readAll(t, s, nil)
	_, names, projBytes := readAll(t, s, []string{"name"})
	if len(ids) != n || len(names) != n {
		t.Fatalf("read %d rows full and %d projected, want %d", len(ids), len(names), n)
	}
	for i := range n {
		if ids[i] != int64(i) || names[i] != "n"+strconv.Itoa(i) {
			t.Fatalf("row %d: id %d name %q", i, ids[i], names[i])
		}
	}
	if projBytes*2 > fullBytes {
		t.Fatalf("projected fetch took %d bytes, full %d: remote batches were not pruned", projBytes, fullBytes)
	}

	// A second round with nothing new changes nothing.
	s.replicas.TierOnce(context.Background(), time.Now())
	again, _ := s.cat.RemoteLogs(info.TableId, 0)
	if len(again.Segments) != len(man.Segments) || again.Segments[0].ID != seg.ID {
		t.Fatalf("an idle round rewrote the manifest: %d segments, first %s", len(again.Segments), again.Segments[0].ID)
	}

	// table.log.ttl (7 days by default) expires remote segments too: the
	// manifest drops them, then their objects go.
	s.replicas.TierOnce(context.Background(), time.Now().Add(8*24*time.Hour))
	if gone, _ := s.cat.RemoteLogs(info.TableId, 0); len(gone.Segments) != 0 {
		t.Fatalf("after the TTL the manifest still names %d segments", len(gone.Segments))
	}
	var left []string
	_ = filepath.WalkDir(filepath.Join(remoteDir, "log"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) != 0 {
		t.Fatalf("after the TTL %d remote objects are left, e.g. %s", len(left), left[0])
	}
}

// A crash between upload and commit leaves objects no manifest names: the
// next round of the bucket's leader removes them and keeps the committed
// ones. A commit from a deposed leader epoch is refused, the manifest
// unchanged.
func TestTieringRemovesOrphansAndFencesOldLeaders(t *testing.T) {
	cfg, remoteDir := tieringConfig(t)
	s := startServer(t, cfg)
	info := createTableWithOptions(t, s, "demo", "tiered", tierDDL, nil)
	waitReplicas(t, s, info)
	produceRows(t, s, info, 0, 20)
	s.replicas.TierOnce(context.Background(), time.Now())
	man, err := s.cat.RemoteLogs(info.TableId, 0)
	if err != nil || len(man.Segments) == 0 {
		t.Fatalf("manifest %+v, %v; want tiered segments", man, err)
	}

	// What an upload that never got committed leaves behind.
	prefix := filepath.Join(remoteDir, "log", "demo", "tiered-"+strconv.Itoa(int(info.TableId)), "0")
	orphan := filepath.Join(prefix, "00000000000000000100-0-deadbeef", "00000000000000000100.log")
	if err := os.MkdirAll(filepath.Dir(orphan), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	// And what a file store's put cut short by a crash leaves.
	tmp := filepath.Join(filepath.Dir(orphan), ".strom-tmp-00000000000000000100.log-123")
	if err := os.WriteFile(tmp, []byte("part"), 0o644); err != nil {
		t.Fatal(err)
	}
	produceRows(t, s, info, 20, 30)
	s.replicas.TierOnce(context.Background(), time.Now())
	for _, p := range []string{orphan, tmp} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("orphan %s after a round: %v, want it removed", filepath.Base(p), err)
		}
	}
	after, _ := s.cat.RemoteLogs(info.TableId, 0)
	if len(after.Segments) <= len(man.Segments) || after.Segments[0] != man.Segments[0] {
		t.Fatalf("manifest after the round: %d segments (was %d), first %+v (was %+v)", len(after.Segments), len(man.Segments), after.Segments[0], man.Segments[0])
	}
	for _, seg := range after.Segments {
		if _, err := os.Stat(filepath.Join(prefix, seg.ID, fmt.Sprintf("%020d.log", seg.BaseOffset))); err != nil {
			t.Fatalf("committed segment %s: %v", seg.ID, err)
		}
	}

	_, lisr, err := s.cat.Bucket(info.TableId, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = s.coord.CommitRemoteLog(context.Background(), coordinator.CommitRemoteLogRequest{
		TableID: info.TableId, Bucket: 0, Leader: lisr.Leader, LeaderEpoch: lisr.LeaderEpoch - 1, Segments: after.Segments[:1],
	})
	if !errors.Is(err, coordinator.ErrFencedLeaderEpoch) {
		t.Fatalf("commit at an old leader epoch: %v, want ErrFencedLeaderEpoch", err)
	}
	if now, _ := s.cat.RemoteLogs(info.TableId, 0); len(now.Segments) != len(after.Segments) {
		t.Fatalf("the refused commit changed the manifest: %d segments, want %d", len(now.Segments), len(after.Segments))
	}
}
