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

// flussAppendHook, when a test sets it, runs at the start of every
// flussLog.AppendLog, with the bucket and its V2 batches (to hold one
// request's append back while others go ahead).
var flussAppendHook func(bucket int32, batches []byte)

func (f flussLog) AppendLog(ctx context.Context, t catalog.Table, bucket int32, batches []byte, acks int) (log.AppendInfo, error) {
	if flussAppendHook != nil {
		flussAppendHook(bucket, batches)
	}
	return f.h.produceBucket(ctx, t, &stromv1.ProduceBucket{Bucket: bucket, Records: batches}, acks)
}

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
