package testcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"strom/raftmeta/catalog"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/server"
)

// TestDeposedLeaderServesNoStaleRead (issue #13, robustness seeds 1303 and
// 1313): a primary-key bucket's leader is cut off from the two other nodes
// but not from clients; the majority elects a new leader, which
// acknowledges a newer value. Every read the old leader is then sent
// (Lookup, PrefixLookup, LimitScan, ScanKv) must fail with a retriable
// error (NOT_LEADER_OR_FOLLOWER, or a timeout), never answer from its own
// KV, which still holds the older value: lookups are linearizable
// (tablet/replica/DESIGN.md, "Reads on a deposed leader"). Before the
// cut, and after the heal on the new leader, the same reads answer. Once
// with the old leader also the metadata leader (its own heartbeat round
// fails), once with the metadata leader on the majority side (the old
// leader cannot reach it).
func TestDeposedLeaderServesNoStaleRead(t *testing.T) {
	for _, tc := range []struct {
		name        string
		coordinator bool
	}{
		{"the leader is the metadata leader", true},
		{"the metadata leader is on the majority side", false},
	} {
		t.Run(tc.name, func(t *testing.T) { testDeposedLeaderServesNoStaleRead(t, tc.coordinator) })
	}
}

func testDeposedLeaderServesNoStaleRead(t *testing.T, onMetaLeader bool) {
	ctx := ctxFor(t, 120*time.Second)
	// The cut off leader leaves the new leader's ISR after max-lag-time,
	// and only then is an acks=-1 write there acknowledged: short, but
	// long enough that a busy machine does not shrink the ISR before.
	c := New(t, Options{Nodes: 3, Verbose: os.Getenv("VERBOSE") != "", Configure: func(_ int, cfg *server.Config) {
		cfg.ReplicaMaxLagTime = 6 * time.Second
	}})
	// Tables until one's bucket leader is on the right side of the
	// metadata leader (placement spreads leaders over the nodes).
	var tbl catalog.Table
	for attempt := 1; ; attempt++ {
		tbl = createKVTable(ctx, t, c, fmt.Sprintf("stale_lookup%d", attempt))
		l, err := c.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if (tbl.LeaderISR[0].Leader == l.ID) == onMetaLeader {
			t.Logf("%s: bucket leader %d, metadata leader %d", tbl.Name, tbl.LeaderISR[0].Leader, l.ID)
			break
		}
	}
	k := newKVCodec(t, tbl)
	old := tbl.LeaderISR[0].Leader
	var others []int32
	for _, n := range c.Nodes() {
		if n.ID != old {
			others = append(others, n.ID)
		}
	}
	k.putKv(ctx, t, c, tbl, []int32{old}, -1, 1, "old")

	api := func(id int32) stromv1connect.TabletServiceClient {
		return stromv1connect.NewTabletServiceClient(http.DefaultClient, "http://"+c.Node(int(id)).API)
	}
	key := func() *structpb.Struct {
		s, err := structpb.NewStruct(map[string]any{"id": 1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// reads sends each read of key 1 to node id and returns, per read, the
	// v it answered ("" for none) or its error.
	type answer struct {
		v   string
		err error
	}
	reads := func(id int32) map[string]answer {
		tc := api(id)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out := map[string]answer{}
		first := func(rows []*structpb.Struct) answer {
			for _, r := range rows {
				if r.Fields["id"].GetNumberValue() == 1 {
					return answer{v: r.Fields["v"].GetStringValue()}
				}
			}
			return answer{}
		}
		lr, err := tc.Lookup(rctx, connect.NewRequest(&stromv1.LookupRequest{Database: "fluss", Table: tbl.Name, Keys: []*structpb.Struct{key()}}))
		if err == nil {
			out["Lookup"] = first(lr.Msg.GetRows())
		} else {
			out["Lookup"] = answer{err: err}
		}
		pr, err := tc.PrefixLookup(rctx, connect.NewRequest(&stromv1.PrefixLookupRequest{Database: "fluss", Table: tbl.Name, Prefixes: []*structpb.Struct{key()}}))
		if err == nil {
			out["PrefixLookup"] = first(pr.Msg.GetRows())
		} else {
			out["PrefixLookup"] = answer{err: err}
		}
		ls, err := tc.LimitScan(rctx, connect.NewRequest(&stromv1.LimitScanRequest{Database: "fluss", Table: tbl.Name, Bucket: 0, Limit: 10, JsonRows: true}))
		if err == nil {
			out["LimitScan"] = first(ls.Msg.GetRows())
		} else {
			out["LimitScan"] = answer{err: err}
		}
		sk, err := tc.ScanKv(rctx, connect.NewRequest(&stromv1.ScanKvRequest{Database: "fluss", Table: tbl.Name, Bucket: 0, JsonRows: true}))
		if err != nil {
			out["ScanKv"] = answer{err: err}
		} else {
			out["ScanKv"] = first(sk.Msg.GetRows())
		}
		if err == nil && sk.Msg.HasMore {
			_, _ = tc.ScanKv(rctx, connect.NewRequest(&stromv1.ScanKvRequest{Database: "fluss", Table: tbl.Name, ScannerId: sk.Msg.ScannerId, Bucket: 0, Close: true}))
		}
		return out
	}
	for name, a := range reads(old) {
		if a.err != nil || a.v != "old" {
			t.Fatalf("%s on the leader before the cut: %q, %v; want \"old\"", name, a.v, a.err)
		}
	}

	c.Partition([]int{int(old)}, []int{int(others[0]), int(others[1])})
	t.Cleanup(c.Heal)
	var nl int32
	waitUntil(ctx, t, "the majority elects a new leader", func() bool {
		nl = leaderISR(t, c.Node(int(others[0])), tbl).Leader
		return nl >= 0 && nl != old
	})
	// acks=-1 on the new leader once the old one left its ISR.
	k.putKv(ctx, t, c, tbl, others, -1, 1, "new")
	t.Logf("node %d, cut off, led at epoch %d; node %d leads now and acknowledged \"new\"", old, tbl.LeaderISR[0].LeaderEpoch, nl)

	for name, a := range reads(old) {
		switch {
		case a.err == nil:
			t.Errorf("%s on the deposed leader %d answered %q after node %d acknowledged \"new\"", name, old, a.v, nl)
		case !retriable(a.err):
			t.Errorf("%s on the deposed leader: %v, want a retriable error (NOT_LEADER_OR_FOLLOWER or a timeout)", name, a.err)
		default:
			t.Logf("%s on the deposed leader: %v", name, a.err)
		}
	}

	c.Heal()
	waitUntil(ctx, t, "the new leader answers \"new\" to every read", func() bool {
		for _, a := range reads(nl) {
			if a.err != nil || a.v != "new" {
				return false
			}
		}
		return true
	})
}

// retriable reports whether a client retries err: Unavailable (which
// NOT_LEADER_OR_FOLLOWER is) or a deadline.
func retriable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}
