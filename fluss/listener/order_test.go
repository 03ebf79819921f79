package listener

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/logbatch"
	"strom/fluss/protocol"
	"strom/fluss/wire"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/tablet/log"
)

// orderLog is a unit-test LogNode holding one writer's batches of one
// bucket. TableByID of table heldID waits for release (and counts
// nothing); the other tables' lookups are counted on looked.
type orderLog struct {
	LogNode // the other methods are not called
	table   catalog.Table
	release chan struct{}
	looked  chan struct{}

	mu      sync.Mutex
	seqs    []int32 // appended
	refused int
}

const heldID = 7

func (o *orderLog) TableByID(id int64) (catalog.Table, error) {
	if id == heldID {
		<-o.release
	} else {
		o.looked <- struct{}{}
	}
	return o.table, nil
}

// AppendLog is a log's sequence check without the replica's wait for
// early batches: a batch that is not its writer's next is refused.
func (o *orderLog) AppendLog(_ context.Context, _ catalog.Table, _ int32, batches []byte, _ int) (log.AppendInfo, error) {
	b := record.Batch(batches)
	seq := b.BatchSequence()
	o.mu.Lock()
	defer o.mu.Unlock()
	if last := int32(len(o.seqs)) - 1; seq != last+1 {
		o.refused++
		return log.AppendInfo{}, &log.SequenceError{WriterID: b.WriterID(), Sequence: seq, Last: last}
	}
	o.seqs = append(o.seqs, seq)
	return log.AppendInfo{FirstOffset: int64(seq)}, nil
}

func (o *orderLog) Offset(catalog.Table, int32, OffsetSpec, int64) (int64, error) { return 42, nil }

// A connection's PRODUCE_LOG requests of one writer all succeed, appended
// in the order they were sent, against a log that refuses any batch but
// its writer's next, however their goroutines are scheduled: the first one
// is held before its append (its table lookup waits) while the later ones
// are read and go as far as they may. A LIST_OFFSETS sent behind them is
// answered meanwhile: reads are not ordered behind writes. Without the
// write order the later requests are refused with OUT_OF_ORDER_SEQUENCE.
func TestWritesEnterInArrivalOrder(t *testing.T) {
	cols, err := record.ParseColumns("id BIGINT NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	schema := record.Schema{Columns: cols}
	const writes = 10
	n := &orderLog{table: catalog.Table{Database: "fluss", Name: "t", Schema: schema, Registration: catalog.TableRegistration{BucketCount: 1}},
		release: make(chan struct{}), looked: make(chan struct{}, writes+1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(ln, Config{MaxRequestBytes: 1 << 20, Log: n})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, r := dial(t, s)

	var out []byte
	for i := range writes {
		bld, err := record.NewArrowBuilder(schema, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		if err := bld.Append(record.Row{int64(i)}, record.AppendOnly); err != nil {
			t.Fatal(err)
		}
		v2, _, err := bld.Build(nil, record.BatchHeader{AppendOnly: true, WriterID: 5, BatchSequence: int32(i)}, record.DefaultArrowCompression)
		if err != nil {
			t.Fatal(err)
		}
		v1, err := logbatch.ToFluss(nil, v2)
		if err != nil {
			t.Fatal(err)
		}
		table := int64(8)
		if i == 0 {
			table = heldID
		}
		out = append(out, request(t, protocol.ProduceLog, 0, int32(i), &flusspb.ProduceLogRequest{Acks: proto.Int32(-1), TableId: proto.Int64(table), TimeoutMs: proto.Int32(30000),
			BucketsReq: []*flusspb.PbProduceLogReqForBucket{{BucketId: proto.Int32(0), Records: v1}}})...)
	}
	out = append(out, request(t, protocol.ListOffsets, 0, 99, &flusspb.ListOffsetsRequest{FollowerServerId: proto.Int32(-1),
		OffsetType: proto.Int32(listLatest), TableId: proto.Int64(8), BucketId: []int32{0}})...)
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	for range writes { // the later writes' lookups and LIST_OFFSETS's
		<-n.looked
	}
	if resp := response(t, r); resp.Type != wire.SuccessResponse || resp.RequestID != 99 {
		t.Fatalf("first response %+v, want LIST_OFFSETS's (99) while the writes wait", resp)
	}
	close(n.release)
	for range writes {
		resp := response(t, r)
		var pr flusspb.ProduceLogResponse
		if resp.Type != wire.SuccessResponse || proto.Unmarshal(resp.Body, &pr) != nil {
			t.Fatalf("%+v", resp)
		}
		if br := pr.BucketsResp[0]; br.ErrorCode != nil || br.GetBaseOffset() != int64(resp.RequestID) {
			t.Errorf("request %d: %s %s, base offset %d", resp.RequestID, protocol.ErrorCode(br.GetErrorCode()), br.GetErrorMessage(), br.GetBaseOffset())
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if want := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(n.seqs, want) {
		t.Fatalf("appends of sequences %v, want %v (the order sent)", n.seqs, want)
	}
	t.Logf("%d appends refused and tried again", n.refused)
}
