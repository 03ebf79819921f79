package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"strom/internal/metatest"
	"strom/record"
	"strom/tablet/kv"
	"strom/tablet/log"
)

// kvReplica is a primary-key bucket replica opened directly (no manager):
// id INT key, name STRING.
type kvReplica struct {
	*Replica
	t    *testing.T
	dir  string // the replica's directory: log/ and kv/
	desc record.TableDescriptor
	rows *record.CompactedRowCodec
	keys *record.KeyCodec
}

func openKVReplica(t *testing.T, node int32) *kvReplica {
	t.Helper()
	s := record.Schema{Columns: []record.Column{
		{Name: "id", Type: record.DataType{Root: record.Int}},
		{Name: "name", Type: record.DataType{Root: record.String, Nullable: true}},
	}, PrimaryKey: []string{"id"}}
	desc, err := record.TableDescriptor{Schema: s}.Normalize(1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lg := metatest.Logger(t).With("node", node)
	lc := log.DefaultConfig()
	lc.Dir, lc.NoSync, lc.Logger = filepath.Join(dir, "log"), true, lg
	lt, err := log.Open(lc)
	if err != nil {
		t.Fatal(err)
	}
	kt, err := kv.Open(kv.Config{Dir: filepath.Join(dir, "kv"), Log: lt, Table: desc, SchemaID: 1, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	r := &kvReplica{Replica: newReplica(TableBucket{TableID: 1}, node, lt, kt, lg, new(broadcast)), t: t, dir: dir, desc: desc}
	t.Cleanup(func() {
		if err := r.close(); err != nil {
			t.Error(err)
		}
	})
	if r.rows, err = record.NewCompactedRowCodec(s.Columns); err != nil {
		t.Fatal(err)
	}
	if r.keys, err = record.NewKeyCodec(s.Columns, s.PrimaryKey); err != nil {
		t.Fatal(err)
	}
	return r
}

// upsert builds a KV batch of writer 7 at seq upserting id → name pairs.
func (r *kvReplica) upsert(seq int32, pairs ...any) record.KvBatch {
	r.t.Helper()
	b := record.NewKvBatchBuilder(record.KvBatchHeader{SchemaID: 1, WriterID: 7, BatchSequence: seq})
	for i := 0; i < len(pairs); i += 2 {
		row := record.Row{pairs[i], pairs[i+1]}
		key, err := r.keys.AppendRow(nil, row)
		if err != nil {
			r.t.Fatal(err)
		}
		enc, err := r.rows.Append(nil, row)
		if err != nil {
			r.t.Fatal(err)
		}
		if err := b.Append(key, enc); err != nil {
			r.t.Fatal(err)
		}
	}
	return b.Build()
}

// followFrom copies the leader's batches this replica lacks into its log
// and KV, as fetching does, and sets its high watermark to hw.
func (r *kvReplica) followFrom(leader *kvReplica, hw int64) {
	r.t.Helper()
	from, to := r.log.LogEndOffset(), leader.log.LogEndOffset()
	if from < to {
		info, err := leader.log.Read(from, 1<<20, to)
		if err != nil {
			r.t.Fatal(err)
		}
		if err := r.log.AppendAsFollower(info.Batches); err != nil {
			r.t.Fatal(err)
		}
		if err := r.kv.ApplyChangelog(info.Batches); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.kv.FlushTo(r.log.SetHighWatermark(hw)); err != nil {
		r.t.Fatal(err)
	}
}

// changes returns the log's changelog in [from, to) as "+I[1 a]" strings.
func (r *kvReplica) changes(from, to int64) []string {
	r.t.Helper()
	var out []string
	for off := from; off < to; {
		info, err := r.log.Read(off, 1<<20, to)
		if err != nil {
			r.t.Fatal(err)
		}
		for rest := info.Batches; len(rest) > 0; {
			b, next, err := record.NextBatch(rest)
			if err != nil {
				r.t.Fatal(err)
			}
			rest, off = next, b.NextOffset()
			if b.RecordCount() == 0 {
				continue
			}
			ab, err := record.DecodeArrowBatch(b, r.desc.Schema, nil)
			if err != nil {
				r.t.Fatal(err)
			}
			for i := range ab.Len() {
				if b.BaseOffset()+int64(i) >= from {
					out = append(out, fmt.Sprintf("%s%v", ab.ChangeType(i), []any(ab.Row(i))))
				}
			}
			ab.Release()
		}
	}
	return out
}

// name looks up id in kt and returns its name ("" when absent).
func (r *kvReplica) name(kt *kv.Tablet, id int32) string {
	r.t.Helper()
	key, err := r.keys.Append(nil, record.Row{id})
	if err != nil {
		r.t.Fatal(err)
	}
	vals, err := kt.Lookup([][]byte{key})
	if err != nil {
		r.t.Fatal(err)
	}
	if vals[0] == nil {
		return ""
	}
	_, rb, err := record.ParseKvValue(vals[0])
	if err != nil {
		r.t.Fatal(err)
	}
	row, err := r.rows.Decode(rb)
	if err != nil {
		r.t.Fatal(err)
	}
	return row[1].(string)
}

// A follower promoted to leader (its high watermark a batch behind the old
// leader's, as it learns the high watermark only on its next fetch) holds
// its reads until its high watermark reaches its epoch's start, then
// serves every acknowledged write; a retry of the last batch is a
// duplicate; the next upsert merges against the acknowledged row.
func TestNewLeaderServesEveryAcknowledgedWrite(t *testing.T) {
	ctx := context.Background()
	leader, follower := openKVReplica(t, 1), openKVReplica(t, 2)
	if err := leader.setLeaderAndISR(1, 1, []int32{1}); err != nil {
		t.Fatal(err)
	}
	if err := follower.setLeaderAndISR(1, 1, []int32{1}); err != nil {
		t.Fatal(err)
	}
	var last log.AppendInfo
	for seq, name := range []string{"a", "b", "c"} {
		hw := leader.log.HighWatermark()
		info, err := leader.PutKv(ctx, leader.upsert(int32(seq), int32(1), name, int32(10+seq), name), nil, -1)
		if err != nil {
			t.Fatal(err)
		}
		last = info
		follower.followFrom(leader, hw)
	}
	// The old leader is gone; the follower leads with another replica in
	// its ISR that has not fetched from it yet.
	if err := follower.setLeaderAndISR(2, 2, []int32{2, 3}); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := follower.KV(done); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("KV before the high watermark reaches the epoch start: %v", err)
	}
	ready := make(chan *kv.Tablet)
	go func() {
		kt, err := follower.KV(ctx)
		if err != nil {
			t.Error(err)
		}
		ready <- kt
	}()
	// Replica 3 leaves the ISR: the high watermark moves to the log end.
	if err := follower.setLeaderAndISR(2, 2, []int32{2}); err != nil {
		t.Fatal(err)
	}
	kt := <-ready
	if kt == nil {
		t.FailNow()
	}
	for id, want := range map[int32]string{1: "c", 10: "a", 11: "b", 12: "c"} {
		if got := follower.name(kt, id); got != want {
			t.Fatalf("new leader's lookup of %d = %q, want %q (acknowledged)", id, got, want)
		}
	}
	if err := kt.VerifyFold(); err != nil {
		t.Fatal(err)
	}

	end := follower.log.LogEndOffset()
	dup, err := follower.PutKv(ctx, follower.upsert(2, int32(1), "c", int32(12), "c"), nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate || dup.FirstOffset != last.FirstOffset || follower.log.LogEndOffset() != end {
		t.Fatalf("retry on the new leader: %+v (first write %+v), log end %d → %d", dup, last, end, follower.log.LogEndOffset())
	}
	info, err := follower.PutKv(ctx, follower.upsert(3, int32(1), "d"), nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	if got := follower.changes(info.FirstOffset, info.LastOffset+1); !slices.Equal(got, []string{"-U[1 c]", "+U[1 d]"}) {
		t.Fatalf("new leader's changelog %v", got)
	}
	if err := kt.VerifyFold(); err != nil {
		t.Fatal(err)
	}
}
