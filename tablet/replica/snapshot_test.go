package replica

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"strom/raftmeta/catalog"
	"strom/remote"
)

// countingStore records the keys put.
type countingStore struct {
	remote.Store
	mu   sync.Mutex
	puts []string
}

func (s *countingStore) Put(ctx context.Context, key string, r io.Reader) error {
	s.mu.Lock()
	s.puts = append(s.puts, key)
	s.mu.Unlock()
	return s.Store.Put(ctx, key, r)
}

// A snapshot whose SSTs a retained snapshot already holds puts only its
// other files (MANIFEST, OPTIONS, markers, WAL): the SSTs are shared by
// key (the database's ID and the file name), not sent again. The KV is left
// unchanged between the two, so both checkpoints hold the same SSTs.
func TestSnapshotSharesHeldSSTs(t *testing.T) {
	ctx := context.Background()
	r := openKVReplica(t, 1)
	if _, err := r.kv.PutKv(ctx, r.upsert(0, int32(1), "a", int32(2), "b"), nil); err != nil {
		t.Fatal(err)
	}
	if err := r.kv.FlushTo(r.log.SetHighWatermark(r.log.LogEndOffset())); err != nil {
		t.Fatal(err)
	}
	fs, err := remote.Open(ctx, "file://"+t.TempDir(), remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStore{Store: fs}
	m := &Manager{cfg: Config{Dir: t.TempDir(), Snapshot: SnapshotConfig{Store: st}}}
	table := catalog.Table{Database: "db", Name: "t"}
	first, err := m.takeSnapshot(ctx, r.Replica, table, catalog.KvSnapshots{}, 1, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	prefix := remoteKVPrefix(table, r.tb)
	var ssts []string
	for _, f := range first.Files {
		if strings.HasPrefix(f.Key, "shared/") {
			ssts = append(ssts, f.Key)
		}
	}
	if len(ssts) == 0 || len(st.puts) != len(first.Files) {
		t.Fatalf("first snapshot: %d SSTs, %d puts of %d files; want SSTs and every file put", len(ssts), len(st.puts), len(first.Files))
	}
	st.puts = nil
	second, err := m.takeSnapshot(ctx, r.Replica, table, catalog.KvSnapshots{Snapshots: []catalog.KvSnapshot{first}}, 1, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if second.ID != first.ID+1 {
		t.Fatalf("second snapshot id %d, want %d", second.ID, first.ID+1)
	}
	held := map[string]bool{}
	for _, k := range ssts {
		held[k] = true
	}
	shared := 0
	for _, f := range second.Files {
		if held[f.Key] {
			shared++
		}
	}
	if shared != len(ssts) {
		t.Fatalf("the second snapshot names %d of the first's %d SSTs", shared, len(ssts))
	}
	for _, k := range st.puts {
		if held[strings.TrimPrefix(k, prefix)] {
			t.Fatalf("the held SST %s was put again", k)
		}
		if strings.Contains(k, "/shared/") || !strings.Contains(k, "/snap-2-") {
			t.Fatalf("the second snapshot put %s, want only its own files under snap-2-*/", k)
		}
	}
	if want := len(second.Files) - shared; len(st.puts) != want {
		t.Fatalf("the second snapshot put %d files, want %d (all but the shared SSTs)", len(st.puts), want)
	}
}
