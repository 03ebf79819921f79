package server

import (
	"context"
	"slices"

	"connectrpc.com/connect"

	"strom/raftmeta/catalog"
	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/tablet/replica"
)

// DescribeBuckets answers, for each bucket asked about that this node
// leads, the state its replica holds: the leader's own offsets and what it
// knows of each follower from their fetches. A bucket led elsewhere gets
// NOT_LEADER_OR_FOLLOWER naming the leader.
func (h *tabletHandler) DescribeBuckets(_ context.Context, req *connect.Request[stromv1.DescribeBucketsRequest]) (*connect.Response[stromv1.DescribeBucketsResponse], error) {
	m := req.Msg
	t, err := h.table(m.Database, m.Table)
	if err != nil {
		return nil, err
	}
	resp := &stromv1.DescribeBucketsResponse{}
	for _, b := range bucketsOrAll(t, m.Buckets) {
		res := &stromv1.BucketState{Bucket: b}
		resp.Buckets = append(resp.Buckets, res)
		r, err := h.replica(t, b)
		var st replica.State
		if err == nil {
			if st = r.State(); st.Leader != h.s.cfg.NodeID {
				err = h.s.notLeader(r.TableBucket(), st.Leader)
			}
		}
		if err != nil {
			res.Error = rpc.Detail(err)
			continue
		}
		fillBucketState(res, st, h.s.cfg.NodeID, t.Assignment.Buckets[b])
		if err := fillRemoteState(res, h.s.cat, t.Registration.TableID); err != nil {
			res.Error = rpc.Detail(err)
		}
	}
	return connect.NewResponse(resp), nil
}

// fillBucketState describes, from the leader's state st, the bucket and
// each of its replicas (in assignment order).
func fillBucketState(res *stromv1.BucketState, st replica.State, self int32, replicas []int32) {
	res.Leader, res.LeaderEpoch, res.Isr = st.Leader, st.LeaderEpoch, st.ISR
	res.HighWatermark, res.LogStartOffset, res.LogEndOffset = st.HighWatermark, st.LogStartOffset, st.LogEndOffset
	for _, id := range replicas {
		rs := &stromv1.ReplicaState{Node: id, LogEndOffset: -1, Lag: -1, InSync: slices.Contains(st.ISR, id)}
		if id == self {
			rs.LogEndOffset, rs.Lag = st.LogEndOffset, 0
		} else if f, ok := st.Followers[id]; ok {
			rs.LogEndOffset, rs.Lag = f.LogEnd, max(0, st.LogEndOffset-f.LogEnd)
			if !f.CaughtUpAt.IsZero() {
				rs.CaughtUpTimeMs = f.CaughtUpAt.UnixMilli()
			}
		}
		res.Replicas = append(res.Replicas, rs)
	}
}

// bucketsOrAll is the buckets a request names, or every bucket of t when
// it names none.
func bucketsOrAll(t catalog.Table, buckets []int32) []int32 {
	if len(buckets) > 0 {
		return buckets
	}
	all := make([]int32, t.Registration.BucketCount)
	for b := range all {
		all[b] = int32(b)
	}
	return all
}

// countBuckets counts the buckets of tables (total), those with a leader
// whose ISR is smaller than their replicas (under-replicated, as Kafka
// counts partitions), and those with no leader (offline), as the metadata
// says.
func countBuckets(tables []catalog.Table) (total, underReplicated, offline int32) {
	for _, t := range tables {
		for b, replicas := range t.Assignment.Buckets {
			total++
			switch li, ok := t.LeaderISR[b]; {
			case !ok || li.Leader < 0:
				offline++
			case len(li.ISR) < len(replicas):
				underReplicated++
			}
		}
	}
	return total, underReplicated, offline
}
