package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// Table is a handle on one table: its schema as of when it was opened,
// and where its buckets' leaders are, kept up to date as requests learn
// of changes. Writers and scanners are made from it.
type Table struct {
	c      *Client
	info   *stromv1.TableInfo
	schema record.Schema
	desc   record.TableDescriptor
	routeTable
}

// Table opens a handle on db.table, with the leaders of its buckets.
func (c *Client) Table(ctx context.Context, db, table string) (*Table, error) {
	md, err := retry(ctx, time.Now().Add(c.retryTimeout), c.onRetry, func(ctx context.Context) (*stromv1.GetMetadataResponse, error) {
		return c.metadata(ctx, db, table)
	})
	if err != nil {
		return nil, err
	}
	info := md.Tables[0]
	t := &Table{c: c, info: info}
	t.route.Store(c.newRoute(info, md.Nodes))
	d := info.GetDescriptor_()
	for i, col := range d.GetSchema().GetColumns() {
		typ, err := record.ParseDataType(col.Type)
		if err != nil {
			return nil, fmt.Errorf("client: column %d of %s.%s has type %q: %w", i, db, table, col.Type, err)
		}
		t.schema.Columns = append(t.schema.Columns, record.Column{Name: col.Name, Type: typ, Comment: col.Comment})
	}
	t.schema.PrimaryKey = d.GetSchema().GetPrimaryKey()
	t.desc = record.TableDescriptor{
		Schema: t.schema, Comment: d.GetComment(), PartitionKeys: d.GetPartitionKeys(), BucketKeys: d.GetBucketKeys(),
		BucketCount: int(d.GetBucketCount()), Properties: d.GetProperties(), CustomProperties: d.GetCustomProperties(),
	}
	return t, nil
}

// Schema returns the table's schema.
func (t *Table) Schema() record.Schema { return t.schema }

// Info returns the table as the server described it.
func (t *Table) Info() *stromv1.TableInfo { return t.info }

// Buckets returns the number of buckets.
func (t *Table) Buckets() int32 { return t.info.GetDescriptor_().GetBucketCount() }

// Offsets returns, for every bucket, the offset spec asks for: EARLIEST,
// LATEST (the high watermark) or TIMESTAMP (first offset at or after at).
// A bucket's retriable error (one not served yet, just after its table was
// created) is retried as a failed call is.
func (t *Table) Offsets(ctx context.Context, spec stromv1.OffsetSpec, at time.Time) (map[int32]int64, error) {
	buckets := make([]int32, t.Buckets())
	for b := range buckets {
		buckets[b] = int32(b)
	}
	return retry(ctx, time.Now().Add(t.c.retryTimeout), t.c.onRetry, func(ctx context.Context) (map[int32]int64, error) {
		r, groups := t.byLeader(buckets)
		out := make(map[int32]int64, len(buckets))
		var mu sync.Mutex
		var errs []error
		eachNode(groups, func(n *node, bs []int32) {
			resp, err := callOnce(ctx, n, n.tablet.ListOffsets, &stromv1.ListOffsetsRequest{
				Database: t.info.Database, Table: t.info.Table, Buckets: bs, Spec: spec, TimestampMs: at.UnixMilli(),
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.reroute(ctx, r, bs[0], err)
				errs = append(errs, err)
				return
			}
			for _, b := range resp.Buckets {
				if b.Error != nil {
					err := detailError(b.Error)
					t.reroute(ctx, r, b.Bucket, err)
					errs = append(errs, err)
					continue
				}
				out[b.Bucket] = b.Offset
			}
		})
		return out, errors.Join(errs...)
	})
}

// detailError turns a per-bucket ErrorDetail into an *Error.
func detailError(d *stromv1.ErrorDetail) *Error {
	return &Error{Code: d.Code, Name: d.Name, Retriable: d.Retriable, Field: d.Field, Message: d.Message,
		LeaderID: d.LeaderId, LeaderAddress: d.LeaderAddress}
}

// ProduceBatches sends pre-built log record batches to one bucket and waits
// for acks (-1, 0 or 1). Retriable errors are retried for up to a minute.
// It is the low-level path under AppendWriter, for callers that encode
// their own batches.
func (t *Table) ProduceBatches(ctx context.Context, bucket int32, batches []byte, acks int) error {
	a := int32(acks)
	_, err := retry(ctx, time.Now().Add(time.Minute), t.c.onRetry, func(ctx context.Context) (struct{}, error) {
		r, n := t.leader(bucket)
		resp, err := t.c.produce(ctx, n, &stromv1.ProduceLogRequest{
			Database: t.info.Database, Table: t.info.Table, Acks: &a,
			Buckets: []*stromv1.ProduceBucket{{Bucket: bucket, Records: batches}},
		})
		if err == nil && len(resp.Buckets) == 1 && resp.Buckets[0].Error != nil {
			err = detailError(resp.Buckets[0].Error)
		}
		t.reroute(ctx, r, bucket, err)
		return struct{}{}, err
	})
	return err
}

// InitWriter returns a new idempotent writer id from the cluster, for
// programs that stamp batches themselves (record.Batch.SetWriter) before
// ProduceBatches: a writer's batches, sequences 0, 1, ... per bucket, are
// appended once each and in sequence order, however they arrive.
func (c *Client) InitWriter(ctx context.Context) (int64, error) {
	resp, err := callSeed(ctx, c, viaTablet(tabletAPI.InitWriter), &stromv1.InitWriterRequest{})
	if err != nil {
		return 0, err
	}
	return resp.WriterId, nil
}
