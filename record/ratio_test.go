package record

import (
	"math"
	"testing"
)

func TestCompressionRatio(t *testing.T) {
	var r CompressionRatio
	if r.Estimate() != 1 {
		t.Fatalf("initial estimate %v, want 1", r.Estimate())
	}
	r.Observe(0.25) // better: down by one small step
	if got := r.Estimate(); math.Abs(got-0.995) > 1e-6 {
		t.Fatalf("after a better batch: %v, want 0.995", got)
	}
	for range 1000 {
		r.Observe(0.25)
	}
	if got := r.Estimate(); math.Abs(got-0.25) > 1e-6 {
		t.Fatalf("after many better batches: %v, want 0.25 (never below the observed)", got)
	}
	r.Observe(0.26) // worse: up by at least the large step
	if got := r.Estimate(); math.Abs(got-0.30) > 1e-6 {
		t.Fatalf("after a slightly worse batch: %v, want 0.30", got)
	}
	r.Observe(0.9) // much worse: straight to it
	if got := r.Estimate(); math.Abs(got-0.9) > 1e-6 {
		t.Fatalf("after a much worse batch: %v, want 0.9", got)
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		r.Observe(bad)
		if got := r.Estimate(); math.Abs(got-0.9) > 1e-6 {
			t.Fatalf("Observe(%v) moved the estimate to %v", bad, got)
		}
	}
}
