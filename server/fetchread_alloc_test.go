//go:build !race

package server

import (
	"runtime"
	"testing"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// (Not under -race: it makes sync.Pool drop buffers at random.)

// What a fetch of one bucket allocates, per fetch, besides its reply: a
// projection no longer reads into a fresh buffer (about the stored size),
// also when its read ends short of its bytes (before a batch that does not
// fit), and whole batches are not copied out of the read.
func TestFetchBucketDoesNotCopyTheRead(t *testing.T) {
	h, _, schema, stored := fetchReadTable(t)
	tbl, err := h.table("demo", "wide")
	if err != nil {
		t.Fatal(err)
	}
	perFetch := func(cols []int, maxBytes int32) (alloc, reply int) {
		proj := schema
		if cols != nil {
			proj = schema.Project(cols)
		}
		var ms0, ms1 runtime.MemStats
		const n = 20
		runtime.ReadMemStats(&ms0)
		for range n {
			res, _, _ := h.fetchBucket(tbl, &stromv1.FetchBucket{Bucket: 0, Offset: 0, MaxBytes: maxBytes}, cols, proj, false, 16<<20, 0, new(int))
			if res.Error != nil || len(res.Records) == 0 {
				t.Fatalf("fetch: %v", res.Error)
			}
			reply = len(res.Records)
		}
		runtime.ReadMemStats(&ms1)
		return int(ms1.TotalAlloc-ms0.TotalAlloc) / n, reply
	}
	size := len(stored[0])
	// First (the pool empty), reads that end short of their bytes, before
	// a batch that does not fit, as a scanner's reads of 1 MiB do: the
	// buffer the pool keeps is the one read into, not the batches' length.
	first, rest, err := record.NextBatch(stored[0])
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := record.NextBatch(rest)
	if err != nil {
		t.Fatal(err)
	}
	short := int32(first.Size() + second.Size() - 1) // the read ends after the first batch
	perFetch([]int{0}, short)
	if alloc, reply := perFetch([]int{0}, short); alloc > reply+first.Size()/4 {
		t.Errorf("a fetch of 1 of 20 columns reading %d of %d bytes (%d served) allocates %d bytes", first.Size(), short, reply, alloc)
	}
	perFetch([]int{0}, 16<<20) // the pool's first buffer of the whole bucket
	if alloc, reply := perFetch([]int{0}, 16<<20); alloc > reply+size/4 {
		t.Errorf("a fetch of 1 of 20 columns (%d of %d bytes) allocates %d bytes", reply, size, alloc)
	}
	if alloc, reply := perFetch(nil, 16<<20); alloc > reply+size/4 {
		t.Errorf("a fetch of whole batches (%d bytes) allocates %d bytes", reply, alloc)
	}
}
