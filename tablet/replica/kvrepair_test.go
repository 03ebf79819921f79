package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"strom/internal/metatest"
	"strom/record"
	"strom/tablet/kv"
)

const repairRows = 2000

func repairName(id int32) string { return fmt.Sprintf("n-%d-%s", id, strings.Repeat("x", 40)) }

// putRepairRows writes rows 0..repairRows-1 on leader, acks=-1, 100 a
// batch; after each, follow (if any) fetches it.
func putRepairRows(t *testing.T, leader *kvReplica, follow func()) {
	t.Helper()
	for i := int32(0); i < repairRows; i += 100 {
		var pairs []any
		for id := i; id < i+100; id++ {
			pairs = append(pairs, id, repairName(id))
		}
		if _, err := leader.PutKv(context.Background(), leader.upsert(i/100, pairs...), nil, -1); err != nil {
			t.Fatal(err)
		}
		if follow != nil {
			follow()
		}
	}
}

// flushAndFlipSST flushes r's Pebble memtable to an SST (a checkpoint
// does) and flips a bit a third of the way into its largest SST: a data
// block no read has brought into the block cache.
func flushAndFlipSST(t *testing.T, r *kvReplica) {
	t.Helper()
	if _, err := r.kv.Checkpoint(filepath.Join(t.TempDir(), "cp")); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(r.dir, "kv", "*.sst"))
	var path string
	var size int64
	for _, p := range ssts {
		if st, err := os.Stat(p); err == nil && st.Size() > size {
			path, size = p, st.Size()
		}
	}
	if path == "" {
		t.Fatal("no SST after the flush")
	}
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	b := make([]byte, 1)
	if _, err := fh.ReadAt(b, size/3); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x04
	if _, err := fh.WriteAt(b, size/3); err != nil {
		t.Fatal(err)
	}
}

// lookupRepairRows looks every row up in kt: the first error, and no
// value other than the one written.
func lookupRepairRows(t *testing.T, r *kvReplica, kt *kv.Tablet) error {
	t.Helper()
	for id := int32(0); id < repairRows; id++ {
		key, err := r.keys.Append(nil, record.Row{id})
		if err != nil {
			t.Fatal(err)
		}
		vals, err := kt.Lookup([][]byte{key})
		if err != nil {
			return fmt.Errorf("id %d: %w", id, err)
		}
		if vals[0] == nil {
			t.Fatalf("id %d: no row (acknowledged)", id)
		}
		_, rb, err := record.ParseKvValue(vals[0])
		if err != nil {
			t.Fatal(err)
		}
		row, err := r.rows.Decode(rb)
		if err != nil {
			t.Fatal(err)
		}
		if row[1] != repairName(id) {
			t.Fatalf("id %d = %v, want %q", id, row[1], repairName(id))
		}
	}
	return nil
}

// checkRebuilt: lookups over the flipped bit are refused with
// kv.ErrStoreCorrupt (never a wrong value); repairKV rebuilds the KV;
// then every acknowledged row reads back, a write goes through, the fold
// invariant holds and the rebuild is counted.
func checkRebuilt(t *testing.T, r *kvReplica) {
	t.Helper()
	ctx := context.Background()
	kt, err := r.KV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lookupRepairRows(t, r, kt); !errors.Is(err, kv.ErrStoreCorrupt) {
		t.Fatalf("lookups over a flipped bit in an SST: %v, want kv.ErrStoreCorrupt", err)
	}
	m := NewManager(Config{NodeID: r.nodeID, Logger: metatest.Logger(t)}, nil)
	if !m.repairKV(ctx, r.Replica, time.Now()) {
		t.Fatal("repairKV did not rebuild the damaged KV")
	}
	if err := lookupRepairRows(t, r, kt); err != nil {
		t.Fatalf("lookups after the rebuild: %v", err)
	}
	if _, err := r.PutKv(ctx, r.upsert(repairRows/100, int32(1), "after"), nil, -1); err != nil {
		t.Fatalf("a write after the rebuild: %v", err)
	}
	if got := r.name(kt, 1); got != "after" {
		t.Fatalf("id 1 = %q after a write on the rebuilt KV", got)
	}
	if err := kt.VerifyFold(); err != nil {
		t.Fatal(err)
	}
	if n := r.State().KVRebuilt; n != 1 {
		t.Fatalf("State().KVRebuilt = %d, want 1", n)
	}
}

// TestLeaderRebuildsACorruptKV: a bit flips in an SST of a leader's KV.
// Before, Pebble's default corruption handler panicked (the node died).
func TestLeaderRebuildsACorruptKV(t *testing.T) {
	r := openKVReplica(t, 1)
	if err := r.setLeaderAndISR(1, 1, []int32{1}); err != nil {
		t.Fatal(err)
	}
	putRepairRows(t, r, nil)
	flushAndFlipSST(t, r)
	checkRebuilt(t, r)
}

// TestPromotedFollowerRebuildsACorruptKV: a bit flips in an SST of a
// follower's KV (a hot standby fed by fetches); it is elected leader, its
// lookups meet the damage and are refused, and once rebuilt it serves
// every write the old leader acknowledged.
func TestPromotedFollowerRebuildsACorruptKV(t *testing.T) {
	leader, follower := openKVReplica(t, 1), openKVReplica(t, 2)
	for _, r := range []*kvReplica{leader, follower} {
		if err := r.setLeaderAndISR(1, 1, []int32{1}); err != nil {
			t.Fatal(err)
		}
	}
	putRepairRows(t, leader, func() { follower.followFrom(leader, leader.log.HighWatermark()) })
	flushAndFlipSST(t, follower)
	if err := follower.setLeaderAndISR(2, 2, []int32{2}); err != nil {
		t.Fatal(err)
	}
	checkRebuilt(t, follower)
}
