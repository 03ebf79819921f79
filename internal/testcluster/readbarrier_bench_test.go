package testcluster

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"strom/internal/benchcpu"
	"strom/raftmeta"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/tablet/kv"
	"strom/tablet/replica"
)

// BenchmarkLookupReadBarrier measures, on three in-process nodes (RF 3),
// what a lookup's metadata read barrier costs next to the KV read itself
// (docs/benchmarks.md, "Lookup read barrier"): "lookup" is one key read
// from the bucket leader's KV (a lookup before the barrier, less the RPC);
// "readindex" is raftmeta.Node.ReadIndex on the metadata leader (a
// heartbeat round to the voters) and on a follower (a forwarded call, and
// the leader's round); each one caller at a time and with 8 callers per
// CPU, whose rounds coalesce. cpu-ns/op is the whole process's CPU (all
// three nodes) per operation.
func BenchmarkLookupReadBarrier(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := New(b, Options{Nodes: 3})
	meta, err := c.WaitLeader(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var follower *Node
	for _, n := range c.Nodes() {
		if n != meta {
			follower = n
		}
	}
	tbl := createKVTable(ctx, b, c, "bench_barrier")
	k := newKVCodec(b, tbl)
	var r *replica.Replica
	for r == nil || !r.IsLeader() {
		if ctx.Err() != nil {
			b.Fatal("the bucket leader does not host its replica")
		}
		r = replicaOn(c.Node(int(tbl.LeaderISR[0].Leader)), bucket0(tbl))
		time.Sleep(10 * time.Millisecond) // polling, as waitUntil (which takes a *testing.T)
	}
	if _, err := r.PutKv(ctx, k.upsert(b, tbl, record.NoWriterID, record.NoBatchSequence, 1, "one"), nil, -1); err != nil {
		b.Fatal(err)
	}
	tab, err := r.KV(ctx)
	if err != nil {
		b.Fatal(err)
	}
	key, err := k.keys.Append(nil, record.Row{int64(1)})
	if err != nil {
		b.Fatal(err)
	}
	keys := [][]byte{key}
	lookup := func(tab *kv.Tablet) func() error {
		return func() error { _, err := tab.Lookup(keys); return err }
	}
	readIndex := func(m *raftmeta.Node) func() error {
		return func() error { return m.ReadIndex(ctx) }
	}
	// A whole Lookup RPC (binary keys) to the bucket leader, barrier
	// included: what a client sees.
	leader := c.Node(int(tbl.LeaderISR[0].Leader))
	tc := stromv1connect.NewTabletServiceClient(http.DefaultClient, "http://"+leader.API)
	api := func() error {
		resp, err := tc.Lookup(ctx, connect.NewRequest(&stromv1.LookupRequest{Database: "fluss", Table: tbl.Name,
			Buckets: []*stromv1.LookupBucket{{Bucket: 0, Keys: keys}}}))
		if err != nil {
			return err
		}
		if e := resp.Msg.Buckets[0].Error; e != nil {
			return fmt.Errorf("lookup: %s", e.Message)
		}
		return nil
	}
	b.Logf("bucket leader node %d, metadata leader node %d", leader.ID, meta.ID)
	for _, bc := range []struct {
		name string
		fn   func() error
	}{
		{"api-lookup", api},
		{"lookup", lookup(tab)},
		{"readindex-metaleader", readIndex(meta.Server().Metadata())},
		{"readindex-follower", readIndex(follower.Server().Metadata())},
	} {
		benchcpu.Run(b, bc.name, bc.fn)
	}
}
