package server

import (
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/fluss/wire"
	"strom/record"
)

// One writer's PRODUCE_LOG requests of a bucket, pipelined on one
// connection with their batch sequences in order, are appended strictly in
// sequence order, one after the other, and all succeed with dense offsets
// in sequence order, even when the first request's checks in the node
// (validation, before the append) are held back until every later one has
// passed its own (flussCheckedHook): the adversarial schedule of a loaded
// machine, made certain. The Fluss 0.9.1 Java client does not retry
// OUT_OF_ORDER_SEQUENCE, so one refusal fails its write. Before the
// listener released a request's turn once its appends were done
// (fluss/listener order.go), the later requests reached the append first
// (then the replica's wait for early batches and the listener's retry put
// them in order, or refused them).
func TestFlussPipelinedProduceInOrder(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	s := startServer(t, cfg)
	const ddl = "id BIGINT NOT NULL, name STRING"
	info := createTable(t, s, "fluss", "pipelined", ddl, 1)
	schema := schemaOf(t, ddl)
	c := dialFluss(t, cfg.FlussListen)
	var w flusspb.InitWriterResponse
	if code := flussCall(t, c, protocol.InitWriter, &flusspb.InitWriterRequest{}, &w); code != protocol.None {
		t.Fatalf("INIT_WRITER: %s", code)
	}

	const requests, rowsEach = 20, 3
	var mu sync.Mutex
	checked := map[int32]bool{} // the later sequences past their checks
	passed := make(chan struct{})
	var appends []int32 // the sequences in the order of their appends
	flussCheckedHook = func(_ int32, batches []byte) {
		seq := record.Batch(batches).BatchSequence()
		mu.Lock()
		if seq != 0 && !checked[seq] {
			if checked[seq] = true; len(checked) == requests-1 {
				close(passed)
			}
		}
		mu.Unlock()
		if seq == 0 {
			select {
			case <-passed:
			case <-time.After(30 * time.Second): // not expected; the test fails on the answers then
				t.Error("the later requests did not all pass their checks")
			}
		}
	}
	flussAppendingHook = func(_ int32, batches []byte) {
		mu.Lock()
		defer mu.Unlock()
		appends = append(appends, record.Batch(batches).BatchSequence())
	}
	t.Cleanup(func() { flussCheckedHook, flussAppendingHook = nil, nil })

	var out []byte
	for i := range requests {
		var rows []record.Row
		for j := range rowsEach {
			rows = append(rows, record.Row{int64(i*rowsEach + j), "n"})
		}
		b := record.Batch(buildBatch(t, schema, info.SchemaId, rows...))
		b.SetWriter(w.GetWriterId(), int32(i))
		req := &flusspb.ProduceLogRequest{Acks: proto.Int32(-1), TableId: proto.Int64(info.TableId), TimeoutMs: proto.Int32(60000),
			BucketsReq: []*flusspb.PbProduceLogReqForBucket{{BucketId: proto.Int32(0), Records: v0Batch(b)}}}
		var err error
		if out, err = wire.AppendRequest(out, wire.RequestHeader{APIKey: protocol.ProduceLog, RequestID: int32(100 + i)}, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	r := wire.NewReader(c, 1<<20, "test")
	for range requests {
		frame, err := r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := wire.ParseResponse(frame)
		if err != nil || resp.Type != wire.SuccessResponse {
			t.Fatalf("%+v, %v", resp, err)
		}
		var pr flusspb.ProduceLogResponse
		if err := proto.Unmarshal(resp.Body, &pr); err != nil {
			t.Fatal(err)
		}
		i := int64(resp.RequestID - 100)
		br := pr.BucketsResp[0]
		if br.ErrorCode != nil || br.GetBaseOffset() != i*rowsEach {
			t.Errorf("request %d (sequence %d): %s %s, base offset %d; want base offset %d",
				resp.RequestID, i, protocol.ErrorCode(br.GetErrorCode()), br.GetErrorMessage(), br.GetBaseOffset(), i*rowsEach)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var want []int32
	for i := range requests {
		want = append(want, int32(i))
	}
	if !slices.Equal(appends, want) {
		t.Errorf("appends of sequences %v, want %v (the order sent, each once)", appends, want)
	}
}
