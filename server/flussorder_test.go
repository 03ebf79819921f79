package server

import (
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
// connection with their batch sequences in order, all succeed with dense
// offsets in sequence order, even when the first request's append is held
// back until every later one has reached the append (flussAppendHook): the
// adversarial schedule of a loaded machine, made certain. The Fluss 0.9.1
// Java client does not retry OUT_OF_ORDER_SEQUENCE, so one refusal fails
// its write. Without the listener's write ordering (fluss/listener
// order.go) the requests 5 and more sequences ahead are refused at once.
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
	others := map[int32]bool{} // the later sequences that reached the append
	reached := make(chan struct{})
	flussAppendHook = func(_ int32, batches []byte) {
		seq := record.Batch(batches).BatchSequence()
		mu.Lock()
		if seq != 0 && !others[seq] {
			if others[seq] = true; len(others) == requests-1 {
				close(reached)
			}
		}
		mu.Unlock()
		if seq == 0 {
			select {
			case <-reached:
			case <-time.After(30 * time.Second): // not expected; the test fails on the answers then
				t.Error("the later requests did not all reach the append")
			}
		}
	}
	t.Cleanup(func() { flussAppendHook = nil })

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
}
