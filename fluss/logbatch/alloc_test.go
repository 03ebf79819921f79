//go:build !race

package logbatch

import (
	"testing"

	"strom/record"
)

// TestToFlussOneByOneGrowsAmortised converts 64 batches one at a time onto
// one answer, as the Fluss listener's projected FETCH_LOG does: the answer
// must grow as append grows a slice (a few allocations in all), not to the
// exact size each time (one allocation, and a copy of the whole answer so
// far, per batch).
func TestToFlussOneByOneGrowsAmortised(t *testing.T) {
	b := arrowBatch(t, arrowSchema(t), 20, record.DefaultArrowCompression)
	const batches = 64
	allocs := testing.AllocsPerRun(10, func() {
		var out []byte
		for range batches {
			var err error
			if out, err = ToFluss(out, b); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs > batches/4 {
		t.Fatalf("%d batches converted onto one answer allocated %.0f times, want a few (amortised growth)", batches, allocs)
	}
}
