package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// BodyLengthHeader carries the length of a request body sent without
// Content-Length (in chunks). Servers that do not know it ignore it.
const BodyLengthHeader = "Strom-Body-Length"

// produce calls ProduceLog on n once, with errors as callOnce returns them
// (its callers retry). Requests of JSON rows go through connect-go.
func (c *Client) produce(ctx context.Context, n *node, m *stromv1.ProduceLogRequest) (*stromv1.ProduceLogResponse, error) {
	if len(m.Rows) > 0 {
		return callOnce(ctx, n, n.tablet.ProduceLog, m)
	}
	resp, err := c.produceLog(ctx, n, m)
	return resp, n.wrap(err)
}

// produceLog calls TabletService.ProduceLog in Connect's unary protocol
// (binary protobuf over HTTP), written here rather than by connect-go,
// which marshals every request into a buffer of its own first: the record
// batches go from the caller's slices to the connection. The bytes on the
// wire are the protobuf encoding of m, so any Connect server takes them,
// and the reply and its errors are read as connect-go reads them: errors
// come back as *connect.Error with their details, ready for Client.wrap.
// m's rows are not sent (produce sends requests with rows by connect-go).
func (c *Client) produceLog(ctx context.Context, n *node, m *stromv1.ProduceLogRequest) (*stromv1.ProduceLogResponse, error) {
	body := newProduceBody(m)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.base+stromv1connect.TabletServiceProduceLogProcedure, body)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	// No Content-Length: net/http copies a body of known length through a
	// 32 KiB buffer, while one it frames in chunks it writes straight from
	// the slices (WriteTo). The length goes in BodyLengthHeader instead, so
	// that a Strom node can read the body in one buffer of the right size.
	req.ContentLength = -1
	req.GetBody = func() (io.ReadCloser, error) { return newProduceBody(m), nil }
	req.Header[BodyLengthHeader] = []string{strconv.Itoa(body.size)}
	out := &stromv1.ProduceLogResponse{}
	if err := c.unary(ctx, req, 64<<20, nil, func(data []byte) error { return proto.Unmarshal(data, out) }); err != nil {
		return nil, err
	}
	return out, nil
}

// unary makes one call in Connect's unary protocol (binary protobuf over
// HTTP) with req, whose body the caller has set, and hands the reply's
// body, at most maxReply bytes, to decode: read into buf (nil: a new
// buffer, which decode may keep). Errors come back as connect-go's do
// (*connect.Error with their details), ready for Client.wrap.
func (c *Client) unary(ctx context.Context, req *http.Request, maxReply int64, buf *bytes.Buffer, decode func([]byte) error) error {
	h := req.Header
	h["Content-Type"] = []string{"application/proto"}
	h["Connect-Protocol-Version"] = []string{"1"}
	h["User-Agent"] = []string{"strom-go"}
	if d, ok := ctx.Deadline(); ok {
		ms := max(time.Until(d).Milliseconds(), 1)
		h["Connect-Timeout-Ms"] = []string{strconv.FormatInt(ms, 10)}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return connect.NewError(connect.CodeDeadlineExceeded, err)
		case ctx.Err() != nil:
			return connect.NewError(connect.CodeCanceled, err)
		}
		return connect.NewError(connect.CodeUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := readReply(resp, maxReply, buf)
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("read reply: %w", err))
	}
	if resp.StatusCode != http.StatusOK {
		return connectErrorFrom(resp, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/proto" {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("reply has content type %q, want application/proto", ct))
	}
	if err := decode(data); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("unmarshal reply: %w", err))
	}
	return nil
}

// readReply reads a reply's body of at most limit bytes into buf (nil: a
// new buffer, of the reply's Content-Length when it has one).
func readReply(resp *http.Response, limit int64, buf *bytes.Buffer) ([]byte, error) {
	if buf != nil {
		buf.Reset()
		if n := resp.ContentLength; n > 0 && n <= limit {
			buf.Grow(int(n))
		}
		_, err := buf.ReadFrom(io.LimitReader(resp.Body, limit))
		return buf.Bytes(), err
	}
	if n := resp.ContentLength; n >= 0 {
		if n > limit {
			return nil, fmt.Errorf("%d bytes, more than the %d a reply may have", n, limit)
		}
		data := make([]byte, n)
		_, err := io.ReadFull(resp.Body, data)
		return data, err
	}
	return io.ReadAll(io.LimitReader(resp.Body, limit))
}

// produceBody is the protobuf encoding of a ProduceLogRequest as a reader:
// the fields and framing in one small buffer, the records as the caller's
// slices.
type produceBody struct {
	parts [][]byte
	size  int
}

func newProduceBody(m *stromv1.ProduceLogRequest) *produceBody {
	var head []byte
	if m.Database != "" {
		head = protowire.AppendTag(head, 1, protowire.BytesType)
		head = protowire.AppendString(head, m.Database)
	}
	if m.Table != "" {
		head = protowire.AppendTag(head, 2, protowire.BytesType)
		head = protowire.AppendString(head, m.Table)
	}
	if m.Acks != nil {
		head = protowire.AppendTag(head, 3, protowire.VarintType)
		head = protowire.AppendVarint(head, uint64(int64(*m.Acks)))
	}
	if m.TimeoutMs != 0 {
		head = protowire.AppendTag(head, 4, protowire.VarintType)
		head = protowire.AppendVarint(head, uint64(int64(m.TimeoutMs)))
	}
	b := &produceBody{}
	for _, pb := range m.Buckets {
		var inner []byte
		if pb.Bucket != 0 {
			inner = protowire.AppendTag(inner, 1, protowire.VarintType)
			inner = protowire.AppendVarint(inner, uint64(int64(pb.Bucket)))
		}
		if len(pb.Records) > 0 {
			inner = protowire.AppendTag(inner, 2, protowire.BytesType)
			inner = protowire.AppendVarint(inner, uint64(len(pb.Records)))
		}
		head = protowire.AppendTag(head, 5, protowire.BytesType)
		head = protowire.AppendVarint(head, uint64(len(inner)+len(pb.Records)))
		head = append(head, inner...)
		if len(pb.Records) > 0 {
			b.parts = append(b.parts, head, pb.Records)
			head = nil
		}
	}
	if len(head) > 0 {
		b.parts = append(b.parts, head)
	}
	for _, p := range b.parts {
		b.size += len(p)
	}
	return b
}

func (b *produceBody) Read(p []byte) (int, error) {
	n := 0
	for len(b.parts) > 0 && n < len(p) {
		c := copy(p[n:], b.parts[0])
		n += c
		if b.parts[0] = b.parts[0][c:]; len(b.parts[0]) == 0 {
			b.parts = b.parts[1:]
		}
	}
	if n == 0 && len(b.parts) == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo writes the parts straight from their slices.
func (b *produceBody) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for len(b.parts) > 0 {
		c, err := w.Write(b.parts[0])
		n += int64(c)
		b.parts[0] = b.parts[0][c:]
		if err != nil {
			return n, err
		}
		b.parts = b.parts[1:]
	}
	return n, nil
}

func (b *produceBody) Close() error { return nil }

// connectErrorFrom reads a Connect unary error reply: a JSON body with the
// code, message and details; or, from something that is not a Connect
// server, just an HTTP status, mapped as the Connect protocol says.
func connectErrorFrom(resp *http.Response, data []byte) error {
	var wire struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"details"`
	}
	var code connect.Code
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") &&
		json.Unmarshal(data, &wire) == nil && code.UnmarshalText([]byte(wire.Code)) == nil {
		ce := connect.NewWireError(code, errors.New(wire.Message))
		for _, d := range wire.Details {
			if d.Type != "strom.v1.ErrorDetail" {
				continue
			}
			raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
			if err != nil {
				continue
			}
			ed := &stromv1.ErrorDetail{}
			if proto.Unmarshal(raw, ed) != nil {
				continue
			}
			if detail, err := connect.NewErrorDetail(ed); err == nil {
				ce.AddDetail(detail)
			}
		}
		return ce
	}
	msg := strings.TrimSpace(string(bytes.ToValidUTF8(data[:min(len(data), 512)], nil)))
	return connect.NewError(httpToCode(resp.StatusCode), fmt.Errorf("HTTP %s: %s", resp.Status, msg))
}

// httpToCode maps an HTTP status to a Connect code as the Connect protocol
// specifies for replies without a Connect error body.
func httpToCode(status int) connect.Code {
	switch status {
	case 400:
		return connect.CodeInternal
	case 401:
		return connect.CodeUnauthenticated
	case 403:
		return connect.CodePermissionDenied
	case 404:
		return connect.CodeUnimplemented
	case 429, 502, 503, 504:
		return connect.CodeUnavailable
	}
	return connect.CodeUnknown
}
