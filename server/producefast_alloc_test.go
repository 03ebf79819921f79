//go:build !race

// Allocation tests: the race detector changes allocation (sync.Pool drops a
// quarter of what is put back), so they build without it; scripts/test.sh
// runs them in a pass of their own.

package server

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// The fast path neither copies nor allocates a request's batches: the
// bytes allocated per call are a small fraction of the batch (the pooled
// body buffer is reused), where a decode into a fresh message would
// allocate the batch at least once more.
func TestProduceFastPathDoesNotCopyBatches(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "demo", "big", ddl, 1)
	waitReplicas(t, s, info)
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]record.Row, 20000)
	for i := range rows {
		rows[i] = record.Row{int64(i), strconv.FormatUint(rng.Uint64(), 36) + strconv.FormatUint(rng.Uint64(), 36)}
	}
	batch := buildBatch(t, schemaOf(t, ddl), info.SchemaId, rows...)
	body, err := proto.Marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "big",
		Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: batch}}})
	if err != nil {
		t.Fatal(err)
	}
	th := &tabletHandler{s: s}
	_, connectHandler := stromv1connect.NewTabletServiceHandler(th, s.connectOptions()...)
	fast := newProduceFastPath(th, s.ready.Load, connectHandler)
	call := func() {
		req := httptest.NewRequest(http.MethodPost, produceLogPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/proto")
		rec := httptest.NewRecorder()
		fast.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	call() // warm the pool
	const n = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		call()
	}
	runtime.ReadMemStats(&after)
	perCall := (after.TotalAlloc - before.TotalAlloc) / n
	if perCall > uint64(len(batch))/4 {
		t.Fatalf("%d bytes allocated per call of a %d-byte batch", perCall, len(batch))
	}
	t.Logf("%d bytes allocated per call of a %d-byte batch", perCall, len(batch))
}
