//go:build !race

// An allocation test (see producefast_alloc_test.go): built without the
// race detector, run by scripts/test.sh in its pass of allocation tests.

package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"

	"strom/rpc/gen/strom/v1/stromv1connect"
)

// TestFetchFastPathLendsReadBuffers: the leader reads a fetch's batches
// into a pooled buffer and gives it back once they are sent, so its
// answers to fetches of a 1 MiB batch over HTTP/1.1 allocate far less
// than the batch each (with a fresh read buffer per fetch, more than it).
func TestFetchFastPathLendsReadBuffers(t *testing.T) {
	s, m := bigBatchLeader(t)
	rh := &replicaHandler{s: s}
	_, connectHandler := stromv1connect.NewReplicaServiceHandler(rh, s.connectOptions()...)
	fast := newFetchFastPath(rh, s.ready.Load, connectHandler)
	body, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	w := &discardWriter{h: http.Header{}}
	serve := func() {
		w.code, w.n = 0, 0
		req := httptest.NewRequest(http.MethodPost, fetchReplicaPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/proto")
		req.Header.Set("Connect-Protocol-Version", "1")
		fast.ServeHTTP(w, req)
		if w.code != http.StatusOK || w.n < 1<<19 {
			t.Fatalf("status %d, %d bytes of body", w.code, w.n)
		}
	}
	serve() // the pool's first buffer
	const n = 100
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		serve()
	}
	runtime.ReadMemStats(&after)
	perFetch := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per answer of %d bytes", perFetch, w.n)
	if perFetch > uint64(w.n)/2 {
		t.Fatalf("%d bytes allocated per answer of %d bytes: the leader's read buffer is not reused", perFetch, w.n)
	}
}

// discardWriter is an http.ResponseWriter that counts the body's bytes.
type discardWriter struct {
	h       http.Header
	code, n int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
