package server

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"strom/fluss/listener"
	"strom/raftmeta/catalog"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/tablet/log"
	"strom/tablet/replica"
)

// flussLog is the Fluss listener's listener.LogNode: the log keys run the
// TabletService handler's code (table lookup, leader check, produce
// validation and append, offsets, writer ids), so a log written through
// either API reads the same through both.
type flussLog struct{ h *tabletHandler }

var _ listener.LogNode = flussLog{}

func (f flussLog) TableByID(id int64) (catalog.Table, error) { return f.h.s.tables.getByID(id) }

func (f flussLog) Leader(t catalog.Table, bucket int32) (*replica.Replica, error) {
	return f.h.replica(t, bucket)
}

// flussCheckedHook and flussAppendingHook, when a test sets them, run in
// every flussLog.AppendLog with the bucket and its V2 batches: the first
// once the batches are checked (before the connection's turn), the second
// right before the append (in turn), to hold one request's checks back
// while others go ahead and to see the order of the appends.
var flussCheckedHook, flussAppendingHook func(bucket int32, batches []byte)

// AppendLog is produceBucket in its steps: the checks (concurrent with
// the connection's other requests), the append once inTurn returns, and
// the acks wait in the returned Pending.
func (f flussLog) AppendLog(ctx context.Context, t catalog.Table, bucket int32, batches []byte, acks int, inTurn func(context.Context) error) (listener.Pending, error) {
	r, v, err := f.h.checkProduce(t, &stromv1.ProduceBucket{Bucket: bucket, Records: batches})
	if err != nil {
		return nil, err
	}
	if flussCheckedHook != nil {
		flussCheckedHook(bucket, batches)
	}
	if err := inTurn(ctx); err != nil {
		return nil, fmt.Errorf("bucket %d: %w", bucket, err)
	}
	if flussAppendingHook != nil {
		flussAppendingHook(bucket, batches)
	}
	p, err := r.AppendThen(ctx, v, acks)
	if err != nil {
		return nil, err
	}
	return pendingFunc(func(ctx context.Context) (log.AppendInfo, error) {
		return f.h.waitProduce(ctx, r, p, len(batches))
	}), nil
}

// pendingFunc is a listener.Pending of a function.
type pendingFunc func(ctx context.Context) (log.AppendInfo, error)

func (p pendingFunc) Wait(ctx context.Context) (log.AppendInfo, error) { return p(ctx) }

func (f flussLog) Offset(t catalog.Table, bucket int32, spec listener.OffsetSpec, ts int64) (int64, error) {
	r, err := f.h.replica(t, bucket)
	if err != nil {
		return 0, err
	}
	switch spec {
	case listener.OffsetEarliest:
		return bucketOffset(r, stromv1.OffsetSpec_OFFSET_SPEC_EARLIEST, 0)
	case listener.OffsetLatest:
		return bucketOffset(r, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, 0)
	case listener.OffsetTimestamp:
		return bucketOffset(r, stromv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP, ts)
	}
	return 0, &record.InvalidError{Field: "offset_type", Reason: fmt.Sprintf("unknown offset spec %d", spec)}
}

func (f flussLog) NewWriterID(ctx context.Context) (int64, error) {
	resp, err := f.h.InitWriter(ctx, connect.NewRequest(&stromv1.InitWriterRequest{}))
	if err != nil {
		return 0, err
	}
	return resp.Msg.WriterId, nil
}

func (f flussLog) FetchMaxBytes() int { return int(f.h.s.cfg.FetchMaxBytes) }

func (f flussLog) Stopping() <-chan struct{} { return f.h.s.stopping }
