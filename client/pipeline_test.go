package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// fakeWriter is a pipeline over a table of one bucket whose batches are
// built by build and always acknowledged, with no server behind it: a
// batch of one row per Append.
func fakeWriter(t *testing.T, build func() ([]byte, error), opts ...WriterOption) *pipeline {
	t.Helper()
	return fakeWriterSending(t, build, func(int64) error { return nil }, opts...)
}

// fakeWriterSending is fakeWriter whose n-th batch (from 0) is sent with
// the error send(n) returns.
func fakeWriterSending(t *testing.T, build func() ([]byte, error), send func(n int64) error, opts ...WriterOption) *pipeline {
	t.Helper()
	c, err := New("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	tbl := &Table{c: c, info: &stromv1.TableInfo{Database: "db", Table: "t", Descriptor_: &stromv1.TableDescriptor{BucketCount: 1}}}
	tbl.route.Store(&route{leaders: make([]*node, 1)})
	var mu sync.Mutex
	next := int64(0)
	p, err := newPipeline(tbl, batchKind{
		newEncoder: func() (encoder, error) { return &fakeEncoder{buildFn: build}, nil },
		stamp:      func([]byte, int64, int32) {},
		send: func(context.Context, *node, int32, []byte, int32, time.Duration) (*stromv1.ProduceBucketResult, error) {
			mu.Lock()
			defer mu.Unlock()
			next++
			if err := send(next - 1); err != nil {
				return nil, err
			}
			return &stromv1.ProduceBucketResult{BaseOffset: next - 1}, nil
		},
	}, append([]WriterOption{Idempotent(false), BatchSize(1)}, opts...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type fakeEncoder struct {
	buildFn func() ([]byte, error)
	rows    int
}

func (e *fakeEncoder) add(record.Row, bool) error { e.rows++; return nil }
func (e *fakeEncoder) size() int                  { return e.rows }
func (e *fakeEncoder) build() ([]byte, error)     { return e.buildFn() }

// A batch is built (encoded, compressed) by its bucket's sender, not in
// the Append that seals it under the writer's lock: Appends go on while a
// batch is being built. Before, the first Append waited for its batch's
// build and the test failed at its deadline.
func TestBatchesAreBuiltOffTheAppendPath(t *testing.T) {
	release := make(chan struct{})
	building := make(chan struct{}, 16)
	w := fakeWriter(t, func() ([]byte, error) {
		building <- struct{}{}
		<-release
		return []byte("batch"), nil
	})
	ctx := context.Background()
	appended := make(chan []*Future)
	go func() {
		var fs []*Future
		for i := range 3 {
			fs = append(fs, w.append(ctx, record.Row{int64(i)}, false))
		}
		appended <- fs
	}()
	var fs []*Future
	select {
	case fs = <-appended:
	case <-time.After(time.Minute):
		t.Fatal("Append waited for a batch to be built")
	}
	<-building // the first batch is being built meanwhile
	close(release)
	if err := w.close(ctx); err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		if _, off, err := f.Wait(ctx); err != nil || off != int64(i) {
			t.Fatalf("row %d: offset %d, %v; want %d", i, off, err, i)
		}
	}
}

// writerGoroutines returns the stacks of the goroutines running the
// writer's code (goleak's check, for this package).
func writerGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "strom/client.(*pipeline)") || strings.Contains(g, "strom/client.(*bucketSender)") {
			out = append(out, g)
		}
	}
	return out
}

// A flushed writer leaves no goroutine running until Close: its senders
// run while their bucket has batches queued, and the batch timeout is a
// timer. Before, each bucket's sender and the linger loop ran until Close,
// and the test failed at its deadline.
func TestFlushLeavesNoGoroutine(t *testing.T) {
	ctx := context.Background()
	w := fakeWriter(t, func() ([]byte, error) { return []byte("batch"), nil }, BatchSize(1<<20), BatchTimeout(time.Millisecond))
	defer w.close(ctx)
	for round := range 2 {
		f := w.append(ctx, record.Row{int64(round)}, false) // sent by the batch timeout
		if _, _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		w.append(ctx, record.Row{int64(round)}, false) // sent by Flush
		if err := w.flush(ctx); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); ; {
			left := writerGoroutines()
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: after Flush, %d writer goroutines still run:\n%s", round, len(left), strings.Join(left, "\n\n"))
			}
			runtime.Gosched()
			time.Sleep(time.Millisecond)
		}
	}
}

// Flush returns every batch's failure since the last Flush, each naming
// its bucket and rows; before, it returned only the first.
func TestFlushReportsEveryFailure(t *testing.T) {
	ctx := context.Background()
	w := fakeWriterSending(t, func() ([]byte, error) { return []byte("batch"), nil }, func(n int64) error {
		if n%2 == 1 {
			return fmt.Errorf("refused batch %d", n)
		}
		return nil
	})
	defer w.close(ctx)
	for i := range 6 {
		w.append(ctx, record.Row{int64(i)}, false)
	}
	err := w.flush(ctx)
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 3 {
		t.Fatalf("Flush: %v; want the 3 failures joined", err)
	}
	for _, n := range []int{1, 3, 5} {
		if want := fmt.Sprintf("write of 1 rows to db.t bucket 0 (after 1 attempts): refused batch %d", n); !strings.Contains(err.Error(), want) {
			t.Errorf("Flush: %v; want it to say %q", err, want)
		}
	}
	if err := w.flush(ctx); err != nil {
		t.Errorf("a second Flush: %v, want nil (the failures were reported)", err)
	}
}

// Future.Err does not block: ErrPending until the outcome is known; OnDone
// is called with the outcome, later or at once.
func TestFutureErrAndOnDone(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	w := fakeWriter(t, func() ([]byte, error) { <-release; return []byte("batch"), nil })
	defer w.close(ctx)
	w.append(ctx, record.Row{int64(0)}, false)
	f := w.append(ctx, record.Row{int64(1)}, false)
	if err := f.Err(); err != ErrPending {
		t.Fatalf("Err before the outcome: %v, want ErrPending", err)
	}
	type outcome struct {
		bucket int32
		offset int64
		err    error
	}
	got := make(chan outcome, 2)
	f.OnDone(func(b int32, o int64, err error) { got <- outcome{b, o, err} })
	close(release)
	if o := <-got; o != (outcome{0, 1, nil}) {
		t.Fatalf("OnDone: %+v, want bucket 0 offset 1", o)
	}
	if err := f.Err(); err != nil {
		t.Fatalf("Err after the outcome: %v", err)
	}
	f.OnDone(func(b int32, o int64, err error) { got <- outcome{b, o, err} }) // known: called at once
	select {
	case o := <-got:
		if o != (outcome{0, 1, nil}) {
			t.Fatalf("OnDone after the outcome: %+v", o)
		}
	default:
		t.Fatal("OnDone after the outcome did not call at once")
	}
}
