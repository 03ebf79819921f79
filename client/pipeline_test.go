package client

import (
	"context"
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
