package replica

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"strom/raftmeta/catalog"
	"strom/record"
	"strom/remote"
	"strom/tablet/kv"
	"strom/tablet/log"
)

// BenchmarkRestore measures restoring a primary-key bucket from its KV
// snapshot (download every file, replace the KV directory, open the KV)
// against downloading the same objects raw into files, from a file store
// (remote.data.dir file://) on this machine. The bucket holds
// STROM_BENCH_RESTORE_MB MiB of rows (default 64; the 1 GB is
// STROM_BENCH_RESTORE_MB=1024): 200-byte incompressible values. Compare
// the two sub-benchmarks' MB/s, measured in the same run.
func BenchmarkRestore(b *testing.B) {
	mb := 64
	if v := os.Getenv("STROM_BENCH_RESTORE_MB"); v != "" {
		var err error
		if mb, err = strconv.Atoi(v); err != nil || mb < 1 {
			b.Fatalf("STROM_BENCH_RESTORE_MB=%q: want MiB, at least 1", v)
		}
	}
	ctx := context.Background()
	dir := b.TempDir()
	s := record.Schema{Columns: []record.Column{
		{Name: "id", Type: record.DataType{Root: record.BigInt}},
		{Name: "v", Type: record.DataType{Root: record.String, Nullable: true}},
	}, PrimaryKey: []string{"id"}}
	desc, err := record.TableDescriptor{Schema: s}.Normalize(1)
	if err != nil {
		b.Fatal(err)
	}
	lc := log.DefaultConfig()
	lc.Dir, lc.NoSync = filepath.Join(dir, "log"), true
	lt, err := log.Open(lc)
	if err != nil {
		b.Fatal(err)
	}
	defer lt.Close()
	kc := kv.Config{Dir: filepath.Join(dir, "kv"), Log: lt, Table: desc, SchemaID: 1}
	kt, err := kv.Open(kc)
	if err != nil {
		b.Fatal(err)
	}
	rows, _ := record.NewCompactedRowCodec(s.Columns)
	keys, _ := record.NewKeyCodec(s.Columns, s.PrimaryKey)
	rng := rand.New(rand.NewPCG(1, 1))
	pad := make([]byte, 100)
	for id := int64(0); id*230 < int64(mb)<<20; {
		kb := record.NewKvBatchBuilder(record.KvBatchHeader{SchemaID: 1, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence})
		for range 1000 {
			for i := range pad {
				pad[i] = byte(rng.Uint32())
			}
			row := record.Row{id, fmt.Sprintf("%x", pad)}
			key, _ := keys.AppendRow(nil, row)
			enc, _ := rows.Append(nil, row)
			if err := kb.Append(key, enc); err != nil {
				b.Fatal(err)
			}
			id++
		}
		if _, err := kt.PutKv(ctx, kb.Build(), nil); err != nil {
			b.Fatal(err)
		}
		if err := kt.FlushTo(lt.SetHighWatermark(lt.LogEndOffset())); err != nil {
			b.Fatal(err)
		}
	}
	st, err := remote.Open(ctx, "file://"+filepath.Join(dir, "remote"), remote.Options{})
	if err != nil {
		b.Fatal(err)
	}
	m := &Manager{cfg: Config{Snapshot: SnapshotConfig{Store: st}}}
	table, tb := catalog.Table{Database: "bench", Name: "restore"}, TableBucket{TableID: 1}
	ckpt := filepath.Join(dir, "ckpt")
	offset, err := kt.Checkpoint(ckpt)
	if err != nil {
		b.Fatal(err)
	}
	kt.Close()
	snap := catalog.KvSnapshot{ID: 1, LogOffset: offset}
	names, _ := os.ReadDir(ckpt)
	prefix := remoteKVPrefix(table, tb)
	for _, e := range names {
		fi, _ := e.Info()
		f := catalog.KvSnapshotFile{Name: e.Name(), Key: "snap-1/" + e.Name(), Size: fi.Size()}
		if err := m.putFile(ctx, filepath.Join(ckpt, e.Name()), prefix+f.Key, f.Size); err != nil {
			b.Fatal(err)
		}
		snap.Files = append(snap.Files, f)
	}
	size := snap.Size()
	b.Logf("%d rows, snapshot of %d files, %.1f MiB", offset, len(snap.Files), float64(size)/(1<<20))

	b.Run("raw", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			out := filepath.Join(dir, "raw")
			_ = os.RemoveAll(out)
			if err := os.MkdirAll(out, 0o755); err != nil {
				b.Fatal(err)
			}
			for _, f := range snap.Files {
				rc, err := st.Get(ctx, prefix+f.Key, remote.Range{})
				if err != nil {
					b.Fatal(err)
				}
				w, err := os.Create(filepath.Join(out, f.Name))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(w, rc); err != nil {
					b.Fatal(err)
				}
				rc.Close()
				if err := w.Sync(); err != nil {
					b.Fatal(err)
				}
				w.Close()
			}
		}
	})
	b.Run("restore", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			if err := m.downloadSnapshot(ctx, table, tb, snap, filepath.Join(dir, "kv-restore")); err != nil {
				b.Fatal(err)
			}
			if err := kv.ReplaceDir(m.fs(), kc.Dir, filepath.Join(dir, "kv-restore")); err != nil {
				b.Fatal(err)
			}
			kt, err := kv.Open(kc)
			if err != nil {
				b.Fatal(err)
			}
			if got := kt.FlushedOffset(); got != offset {
				b.Fatalf("restored KV flushed to %d, want %d", got, offset)
			}
			kt.Close()
		}
	})
}
