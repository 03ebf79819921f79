package client

import (
	"sync/atomic"
	"testing"
	"time"
)

// parallel runs every job once, and runs n at once: each of the first two
// jobs waits for the other to start, which one goroutine never finishes.
func TestParallelRunsJobsAtOnce(t *testing.T) {
	started := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var calls [100]atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		parallel(3, len(calls), func(k int) {
			calls[k].Add(1)
			if k < 2 {
				close(started[k])
				<-started[1-k]
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a deadlock guard, not a measurement
		t.Fatal("jobs 0 and 1 never ran at once")
	}
	for k := range calls {
		if c := calls[k].Load(); c != 1 {
			t.Errorf("job %d ran %d times", k, c)
		}
	}
}
