package server

import (
	"testing"

	"strom/raftmeta/catalog"
)

// TestCountBuckets: a bucket with a leader and an ISR smaller than its
// replicas is under-replicated; one with no leader (or no leader_isr yet)
// is offline, and not counted under-replicated too.
func TestCountBuckets(t *testing.T) {
	rf3 := []int32{1, 2, 3}
	tables := []catalog.Table{
		{
			Assignment: catalog.TableAssignment{Buckets: map[int32][]int32{0: rf3, 1: rf3, 2: rf3, 3: rf3}},
			LeaderISR: map[int32]catalog.LeaderAndISR{
				0: {Leader: 1, ISR: []int32{1, 2, 3}},
				1: {Leader: 2, ISR: []int32{2, 3}},
				2: {Leader: -1, ISR: []int32{3}},
				// 3: not elected yet
			},
		},
		{
			Assignment: catalog.TableAssignment{Buckets: map[int32][]int32{0: {2}}},
			LeaderISR:  map[int32]catalog.LeaderAndISR{0: {Leader: 2, ISR: []int32{2}}},
		},
	}
	total, under, offline := countBuckets(tables)
	if total != 5 || under != 1 || offline != 2 {
		t.Errorf("countBuckets = %d total, %d under-replicated, %d offline; want 5, 1, 2", total, under, offline)
	}
}
