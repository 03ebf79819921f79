package record

import (
	"math"
	"sync/atomic"
)

// CompressionRatio estimates, for one table, how much an Arrow batch
// shrinks when compressed: compressed size / estimated uncompressed size.
// Writers multiply a batch's estimated size by it, so that
// client.writer.batch-size bounds batches as sent, as in Fluss
// (ArrowCompressionRatioEstimator). The estimate starts at 1, follows a
// worse observed ratio at once (moving up by at least 0.05) and a better
// one slowly (down by at most 0.005 a batch), so that batches rarely come
// out larger than estimated. Safe for concurrent use.
type CompressionRatio struct {
	bits atomic.Uint32 // float32; 0 means 1.0 (the zero value is ready)
}

const (
	ratioImprovingStep     = 0.005
	ratioDeterioratingStep = 0.05
)

// Estimate returns the current estimate.
func (r *CompressionRatio) Estimate() float64 {
	b := r.bits.Load()
	if b == 0 {
		return 1
	}
	return float64(math.Float32frombits(b))
}

// Observe updates the estimate with a batch's observed ratio.
func (r *CompressionRatio) Observe(observed float64) {
	if !(observed > 0) || math.IsInf(observed, 0) {
		return
	}
	cur := r.Estimate()
	next := cur
	switch {
	case observed > cur:
		next = max(cur+ratioDeterioratingStep, observed)
	case observed < cur:
		next = max(cur-ratioImprovingStep, observed)
	}
	r.bits.Store(math.Float32bits(float32(next)))
}
