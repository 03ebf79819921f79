package replica

import (
	"context"
	"errors"
	"time"

	"strom/tablet/log"
)

// verifySegments checks the hosted replicas' sealed log segments in the
// background (log.Tablet.VerifyStep: CRCs; damage is logged, counted and
// refused to readers), a step of each replica in turn, round and round, at
// most SegmentVerifyRate bytes a second, until ctx is done.
func (m *Manager) verifySegments(ctx context.Context) {
	rate := m.cfg.SegmentVerifyRate
	step := min(rate, 1<<20) // the pause after a step is its bytes / rate
	for {
		read := int64(0)
		for _, r := range m.replicas() {
			n, err := r.log.VerifyStep(step)
			if err != nil && !errors.Is(err, log.ErrClosed) {
				m.lg.Warn("verify sealed segments", "bucket", r.tb.String(), "err", err)
			}
			read += n
			if !pause(ctx, time.Duration(n)*time.Second/time.Duration(rate)) {
				return
			}
		}
		if read == 0 && !pause(ctx, time.Second) { // nothing sealed yet
			return
		}
	}
}

// pause waits d, or until ctx is done; it reports whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
