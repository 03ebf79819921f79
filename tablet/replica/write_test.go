package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"strom/internal/metatest"
)

// AppendThen returns once the batches are in the leader's log, before the
// high watermark passes them: the next write appends behind it at once,
// and each write's acks=-1 wait is its Pending's. Node 2 is in the ISR but
// nothing replicates to it, so the waits end with the context, as
// Append's: ErrNotEnoughReplicas, the write in the log unacknowledged. An
// acks=1 write's Wait returns at once.
func TestAppendThenReturnsBeforeTheAcks(t *testing.T) {
	meta := metatest.NewNode(t)
	m := startManager(t, meta, t.TempDir())
	id := createTable(t, meta, "t", 1, []int32{1, 2})
	r := leadingReplica(t, m, TableBucket{id, 0})
	ctx := context.Background()
	var pending []Pending
	for i := range 3 {
		v, err := r.Validate(batch(2))
		if err != nil {
			t.Fatal(err)
		}
		p, err := r.AppendThen(ctx, v, -1)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if got, want := p.Info().FirstOffset, int64(2*i); got != want {
			t.Fatalf("append %d at offset %d, want %d", i, got, want)
		}
		if end := r.Log().LogEndOffset(); end != int64(2*i+2) {
			t.Fatalf("log end %d after append %d, want %d", end, i, 2*i+2)
		}
		pending = append(pending, p)
	}
	if hw := r.Log().HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d, want 0 (nothing replicated)", hw)
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	for i, p := range pending {
		if info, err := p.Wait(wctx); !errors.Is(err, ErrNotEnoughReplicas) || info.FirstOffset != int64(2*i) {
			t.Fatalf("wait %d: %+v, %v; want offset %d, ErrNotEnoughReplicas", i, info, err, 2*i)
		}
	}
	v, err := r.Validate(batch(1))
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.AppendThen(ctx, v, 1)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := p.Wait(wctx); err != nil || info.FirstOffset != 6 {
		t.Fatalf("acks=1 wait: %+v, %v; want offset 6 at once", info, err)
	}
}
