package client

import (
	"bytes"
	"context"
	"net/http"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// replyBufs holds the buffers of FetchLog replies whose batches have been
// decoded.
var replyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// fetchLog calls TabletService.FetchLog on n once, with errors as callOnce
// returns them (its callers retry), reading the reply without connect-go:
// connect-go reads a reply into a pooled buffer and unmarshals it from
// there, copying every bucket's record batches out of it. Here the reply
// is read into a pooled buffer and each bucket's Records alias it
// (unmarshalFetchLog): they are valid until release, which the caller
// calls once it has decoded them (into buffers of their own).
func (c *Client) fetchLog(ctx context.Context, n *node, m *stromv1.FetchLogRequest) (resp *stromv1.FetchLogResponse, release func(), err error) {
	body, err := proto.Marshal(m)
	if err != nil {
		return nil, nil, n.wrap(connect.NewError(connect.CodeInternal, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.base+stromv1connect.TabletServiceFetchLogProcedure, bytes.NewReader(body))
	if err != nil {
		return nil, nil, n.wrap(connect.NewError(connect.CodeInternal, err))
	}
	// A reply holds at most MaxBytes of batches (and a first batch larger
	// than that), with some protobuf framing.
	limit := max(64<<20, 2*int64(m.MaxBytes))
	buf := replyBufs.Get().(*bytes.Buffer)
	out := &stromv1.FetchLogResponse{}
	if err := c.unary(ctx, req, limit, buf, func(data []byte) error { return unmarshalFetchLog(data, out) }); err != nil {
		replyBufs.Put(buf)
		return nil, nil, n.wrap(err)
	}
	return out, func() { replyBufs.Put(buf) }, nil
}

// Field numbers of FetchLogResponse.buckets and FetchBucketResult.records.
const (
	fetchLogBucketsField    = 1
	fetchBucketRecordsField = 4
)

// unmarshalFetchLog is proto.Unmarshal of a FetchLogResponse into out,
// except that each bucket's Records is a slice of data, not a copy.
func unmarshalFetchLog(data []byte, out *stromv1.FetchLogResponse) error {
	buckets, rest, err := splitBytesField(data, fetchLogBucketsField)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(rest, out); err != nil {
		return err
	}
	for _, b := range buckets {
		records, rest, err := splitBytesField(b, fetchBucketRecordsField)
		if err != nil {
			return err
		}
		r := &stromv1.FetchBucketResult{}
		if err := proto.Unmarshal(rest, r); err != nil {
			return err
		}
		if len(records) > 0 {
			r.Records = records[len(records)-1] // the last one wins, as in proto.Unmarshal
		}
		out.Buckets = append(out.Buckets, r)
	}
	return nil
}

// splitBytesField splits a message's encoding into the values of field
// num, where it has the bytes wire type (slices of data), and the encoding
// of every other field (a new slice, nil if there is none).
func splitBytesField(data []byte, num protowire.Number) (values [][]byte, rest []byte, err error) {
	for len(data) > 0 {
		n, typ, tagLen := protowire.ConsumeTag(data)
		if tagLen < 0 {
			return nil, nil, protowire.ParseError(tagLen)
		}
		valLen := protowire.ConsumeFieldValue(n, typ, data[tagLen:])
		if valLen < 0 {
			return nil, nil, protowire.ParseError(valLen)
		}
		if n == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(data[tagLen:])
			values = append(values, v)
		} else {
			rest = append(rest, data[:tagLen+valLen]...)
		}
		data = data[tagLen+valLen:]
	}
	return values, rest, nil
}
