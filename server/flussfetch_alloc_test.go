//go:build !race

package server

import (
	"runtime"
	"testing"
)

// (Not under -race: it makes sync.Pool drop buffers at random.)

// What a FETCH_LOG through the Fluss listener allocates on the node, per
// fetch, of a bucket of the pruning table (8 batches, about 1.8 MB):
// whole batches are read into a pooled buffer, turned into 0.9.1's layout
// where they are and written from there (no copy by the conversion, none
// by marshalling the answer: 3 times the answer's bytes before), and a
// projection reads into pooled buffers and prunes into a pooled answer
// (about the stored size, and the answer's growth, before).
func TestFlussFetchDoesNotCopy(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	s := startServer(t, cfg)
	c := dialFluss(t, cfg.FlussListen)
	info, stored := flussPruningTable(t, s, c, 1, 8)
	for _, cols := range []int{20, 5, 1} {
		f := newFlussFetcher(t, c, info, 1, cols)
		f.fetch() // the pools' first buffers
		var ms0, ms1 runtime.MemStats
		const n = 20
		runtime.ReadMemStats(&ms0)
		for range n {
			f.fetch()
		}
		runtime.ReadMemStats(&ms1)
		alloc := int(ms1.TotalAlloc-ms0.TotalAlloc) / n
		t.Logf("%d columns: %d bytes answered of %d stored, %d allocated a fetch", cols, f.answered, stored, alloc)
		if limit := stored / 8; alloc > limit {
			t.Errorf("a fetch of %d columns (%d bytes answered of %d stored) allocates %d bytes, want at most %d", cols, f.answered, stored, alloc, limit)
		}
	}
}
