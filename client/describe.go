package client

import (
	"context"
	"sync"

	stromv1 "strom/rpc/gen/strom/v1"
)

// DescribeBuckets returns the replication state of every bucket of the
// table, in bucket order, as each bucket's leader knows it (high watermark,
// log end of each replica, lag): one call to each leader node, all at
// once, each tried once (it is a diagnostic, and a leader that does not
// answer is news in itself). A bucket whose leader could not describe it
// has Error set: the leader's answer (NOT_LEADER_OR_FOLLOWER when the
// leadership moved or the bucket has no leader), or, when the node could
// not be reached, code -1, name UNKNOWN and the client's message.
func (t *Table) DescribeBuckets(ctx context.Context) []*stromv1.BucketState {
	buckets := make([]int32, t.Buckets())
	out := make([]*stromv1.BucketState, len(buckets))
	for b := range buckets {
		buckets[b] = int32(b)
		out[b] = &stromv1.BucketState{Bucket: int32(b)}
	}
	_, groups := t.byLeader(buckets)
	var mu sync.Mutex
	eachNode(groups, func(n *node, bs []int32) {
		resp, err := callOnce(ctx, n, n.tablet.DescribeBuckets, &stromv1.DescribeBucketsRequest{
			Database: t.info.Database, Table: t.info.Table, Buckets: bs,
		})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			for _, b := range bs {
				out[b].Error = errorDetail(err)
			}
			return
		}
		for _, st := range resp.Buckets {
			if st.Bucket >= 0 && int(st.Bucket) < len(out) {
				out[st.Bucket] = st
			}
		}
	})
	return out
}
