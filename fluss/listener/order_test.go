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
// nothing); the other tables' lookups are counted on looked. Sequence 0's
// checks (before its turn) wait until every later write has passed its
// own (checked), and its acknowledgement until the last write is
// appended (last): so the writes are appended in order only if the turns
// go by the appends, not the checks, and all are answered only if the
// turns do not wait for the acknowledgements.
type orderLog struct {
	LogNode // the other methods are not called
	table   catalog.Table
	release chan struct{}
	looked  chan struct{}
	writes  int32

	mu      sync.Mutex
	checked int32         // writes past their checks, sequence 0's aside
	passed  chan struct{} // closed when checked reaches writes-1
	last    chan struct{} // closed when the last sequence is appended
	seqs    []int32       // appended
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
func (o *orderLog) AppendLog(ctx context.Context, _ catalog.Table, _ int32, batches []byte, _ int, inTurn func(context.Context) error) (Pending, error) {
	b := record.Batch(batches)
	seq := b.BatchSequence()
	if seq == 0 {
		<-o.passed
	} else {
		o.mu.Lock()
		if o.checked++; o.checked == o.writes-1 {
			close(o.passed)
		}
		o.mu.Unlock()
	}
	if err := inTurn(ctx); err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if last := int32(len(o.seqs)) - 1; seq != last+1 {
		o.refused++
		return nil, &log.SequenceError{WriterID: b.WriterID(), Sequence: seq, Last: last}
	}
	o.seqs = append(o.seqs, seq)
	if seq == o.writes-1 {
		close(o.last)
	}
	info := log.AppendInfo{FirstOffset: int64(seq)}
	return pendingFunc(func(ctx context.Context) (log.AppendInfo, error) {
		if seq == 0 {
			select {
			case <-o.last:
			case <-ctx.Done():
				return info, ctx.Err()
			}
		}
		return info, nil
	}), nil
}

type pendingFunc func(ctx context.Context) (log.AppendInfo, error)

func (p pendingFunc) Wait(ctx context.Context) (log.AppendInfo, error) { return p(ctx) }

func (o *orderLog) Offset(catalog.Table, int32, OffsetSpec, int64) (int64, error) { return 42, nil }

// A connection's PRODUCE_LOG requests of one writer all succeed, appended
// in the order they were sent and none refused, against a log that
// refuses any batch but its writer's next, however their goroutines are
// scheduled: the first one is held before its append (its table lookup
// waits, then its node's checks until the later ones passed theirs) while
// the later ones are read and go as far as they may, and its
// acknowledgement is held until the last one is appended. A LIST_OFFSETS
// sent behind them is answered meanwhile: reads are not ordered behind
// writes. Without the write order the later requests are refused with
// OUT_OF_ORDER_SEQUENCE; with turns that go by the start of the node's
// call (its checks) they are refused too, and with turns that wait for the
// answers the writes time out.
func TestWritesAppendedInArrivalOrder(t *testing.T) {
	cols, err := record.ParseColumns("id BIGINT NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	schema := record.Schema{Columns: cols}
	const writes = 10
	n := &orderLog{table: catalog.Table{Database: "fluss", Name: "t", Schema: schema, Registration: catalog.TableRegistration{BucketCount: 1}},
		release: make(chan struct{}), looked: make(chan struct{}, writes+1), writes: writes, passed: make(chan struct{}), last: make(chan struct{})}
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
	if want := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(n.seqs, want) || n.refused != 0 {
		t.Fatalf("appends of sequences %v, %d refused; want %v (the order sent), none refused", n.seqs, n.refused, want)
	}
}
