//go:build !race

package server

import (
	"runtime"
	"testing"

	stromv1 "strom/rpc/gen/strom/v1"
)

// (Not under -race: it makes sync.Pool drop buffers at random.)

// What a fetch of one bucket allocates, per fetch, besides its reply: a
// projection no longer reads into a fresh buffer (about the stored size)
// and whole batches are not copied out of the read.
func TestFetchBucketDoesNotCopyTheRead(t *testing.T) {
	h, _, schema, stored := fetchReadTable(t)
	tbl, err := h.table("demo", "wide")
	if err != nil {
		t.Fatal(err)
	}
	perFetch := func(cols []int) (alloc, reply int) {
		proj := schema
		if cols != nil {
			proj = schema.Project(cols)
		}
		var ms0, ms1 runtime.MemStats
		const n = 20
		runtime.ReadMemStats(&ms0)
		for range n {
			res, _, _ := h.fetchBucket(tbl, &stromv1.FetchBucket{Bucket: 0, Offset: 0, MaxBytes: 16 << 20}, cols, proj, false, 16<<20, 0)
			if res.Error != nil || len(res.Records) == 0 {
				t.Fatalf("fetch: %v", res.Error)
			}
			reply = len(res.Records)
		}
		runtime.ReadMemStats(&ms1)
		return int(ms1.TotalAlloc-ms0.TotalAlloc) / n, reply
	}
	size := len(stored[0])
	perFetch([]int{0}) // the pool's first buffer
	if alloc, reply := perFetch([]int{0}); alloc > reply+size/4 {
		t.Errorf("a fetch of 1 of 20 columns (%d of %d bytes) allocates %d bytes", reply, size, alloc)
	}
	if alloc, reply := perFetch(nil); alloc > reply+size/4 {
		t.Errorf("a fetch of whole batches (%d bytes) allocates %d bytes", reply, alloc)
	}
}
