package server

import (
	"context"
	"fmt"

	"strom/fluss/listener"
	"strom/raftmeta/catalog"
	"strom/tablet/log"
)

// flussKV is the Fluss listener's listener.KVNode: the primary-key keys
// run the TabletService handler's code (the table cache, the leader check,
// putKvBucket's batch checks and write, lookupBucket's and
// prefixLookupBucket's byte budgets, checkLimit and logTail), so a
// primary-key table written through either API reads the same through
// both. Fluss's KV batches, keys and values are Strom's own formats.
type flussKV struct{ h *tabletHandler }

var _ listener.KVNode = flussKV{}

func (f flussKV) TableByID(id int64) (catalog.Table, error) { return f.h.s.tables.getByID(id) }

// PutKv is putKvBucket in its steps: the checks, the write once inTurn
// returns, and the acks wait in the returned Pending.
func (f flussKV) PutKv(ctx context.Context, t catalog.Table, bucket int32, batch []byte, targets []int, acks int, inTurn func(context.Context) error) (listener.Pending, error) {
	r, b, err := f.h.checkPutKv(t, bucket, batch)
	if err != nil {
		return nil, err
	}
	if err := inTurn(ctx); err != nil {
		return nil, fmt.Errorf("bucket %d: %w", bucket, err)
	}
	p, err := r.PutKvThen(ctx, b, targets, acks)
	if err != nil {
		return nil, fmt.Errorf("bucket %d: %w", bucket, err)
	}
	return pendingFunc(func(ctx context.Context) (log.AppendInfo, error) {
		return f.h.waitPutKv(ctx, r, p, bucket, b)
	}), nil
}

// NewRead is one LOOKUP or PREFIX_LOOKUP request's reader: its buckets
// share one metadata read barrier, as the Connect API's Lookup's do. Before,
// each bucket ran its own, one after another: a request of 8 buckets waited
// for 8 barriers (on a cluster, 8 rounds to the metadata quorum).
func (f flussKV) NewRead() listener.KVRead { return &flussRead{f: f} }

// flussRead is flussKV.NewRead's reader.
type flussRead struct {
	f  flussKV
	rb readBarrier
}

func (r *flussRead) Lookup(ctx context.Context, t catalog.Table, bucket int32, keys [][]byte, budget *int) ([][]byte, error) {
	return r.f.h.lookupBucket(ctx, &r.rb, t, bucket, keys, budget, r.f.LookupMaxBytes())
}

func (r *flussRead) PrefixLookup(ctx context.Context, t catalog.Table, bucket int32, prefixes [][]byte, budget *int) ([][][]byte, error) {
	return r.f.h.prefixLookupBucket(ctx, &r.rb, t, bucket, prefixes, budget, r.f.PrefixLookupMaxBytes())
}

func (f flussKV) LookupMaxBytes() int { return int(f.h.s.cfg.LookupMaxBytes) }

func (f flussKV) PrefixLookupMaxBytes() int { return int(f.h.s.cfg.PrefixLookupMaxBytes) }

func (f flussKV) LimitScanKv(ctx context.Context, t catalog.Table, bucket int32, limit int32) ([][]byte, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	tab, err := f.h.kvOf(ctx, &readBarrier{}, t, bucket)
	if err != nil {
		return nil, err
	}
	return tab.LimitScan(int(limit))
}

func (f flussKV) LimitScanLog(_ context.Context, t catalog.Table, bucket int32, limit int32) ([]byte, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	tail, _, err := f.h.logTail(t, bucket, int(limit))
	return tail, err
}
