package server

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
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/tablet/replica"
)

// The follower's fetch is the hot path of replication: every byte a leader
// appends goes out once per follower. Connect's generic machinery copies a
// response's record batches twice on the leader (into the marshalled
// message, then into the connection) and three times on the follower (into
// a growing read buffer, out of it into the message, and the growth
// itself). The two sides here speak the same call, in Connect's unary
// protocol with binary protobuf, byte for byte (fetchfast_test.go), without
// those copies: the leader writes each bucket's fields and then its
// batches, as read from the log, straight to the connection; the follower
// reads the body once into a buffer of its length and takes the batches
// from it in place.

// fetchReplicaPath is the URL path of ReplicaService.FetchReplica.
const fetchReplicaPath = stromv1connect.ReplicaServiceFetchReplicaProcedure

// fetchFastPath serves FetchReplica calls in Connect's unary protocol with
// binary protobuf (what replicaPeers sends); every other form of the call
// goes to the Connect handler, fallback. It sits behind signedOnly, which
// has read the (small) request body.
type fetchFastPath struct {
	h        *replicaHandler
	ready    func() bool
	fallback http.Handler
	errors   *connect.ErrorWriter
	served   atomic.Int64 // calls taken, for tests
}

func newFetchFastPath(h *replicaHandler, ready func() bool, fallback http.Handler) *fetchFastPath {
	return &fetchFastPath{h: h, ready: ready, fallback: fallback, errors: connect.NewErrorWriter()}
}

func (p *fetchFastPath) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := connectUnaryProto(r); !ok {
		p.fallback.ServeHTTP(w, r)
		return
	}
	p.served.Add(1)
	start := time.Now()
	results, err := p.serve(r)
	p.h.s.metrics.rpc.Observe(fetchReplicaPath, err, time.Since(start))
	if err != nil {
		_ = p.errors.Write(w, r, err)
		return
	}
	// The batches may be in buffers lent by rpc.GetBuffer (serve), given
	// back once written (PutBuffer leaves others alone).
	defer func() {
		for _, res := range results {
			rpc.PutBuffer(res.Lent)
		}
	}()
	parts, n := encodeFetchResponse(results)
	h := w.Header()
	h["Content-Type"] = []string{"application/proto"}
	h["Content-Length"] = []string{strconv.Itoa(n)}
	w.WriteHeader(http.StatusOK)
	for _, b := range parts {
		if _, err := w.Write(b); err != nil {
			return
		}
	}
}

// serve decodes and runs one call, with Connect's errors for what Connect
// would refuse and the handler's mapped as rpc.ErrorInterceptor maps them.
func (p *fetchFastPath) serve(r *http.Request) ([]replica.BucketFetchResult, error) {
	ctx, cancel, err := connectTimeout(r)
	if err != nil {
		return nil, err
	}
	defer cancel()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("read request body: %w", err))
	}
	m := &stromv1.FetchReplicaRequest{}
	if err := proto.Unmarshal(body, m); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unmarshal message: %w", err))
	}
	if !p.ready() {
		return nil, rpc.Error(rpc.ErrNotReady)
	}
	// Over HTTP/1.1 (what replicaPeers speaks) a Write has copied or sent
	// its bytes when it returns, so ServeHTTP may give the buffers back
	// after; an HTTP/2 stream reset may leave a frame queued with them, so
	// its reads get fresh buffers.
	var buffer func(int) []byte
	if r.ProtoMajor == 1 {
		buffer = rpc.GetBuffer
	}
	return p.h.fetch(ctx, m, buffer), nil
}

// resultMessage is res as the wire's message, its batches left out
// (records: the message's last field).
func resultMessage(res replica.BucketFetchResult) *stromv1.FetchReplicaBucketResult {
	out := &stromv1.FetchReplicaBucketResult{
		TableId: res.TB.TableID, Bucket: res.TB.Bucket,
		HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset, LogEndOffset: res.LogEndOffset,
	}
	if res.Err != nil {
		out.Error = rpc.Detail(res.Err)
	}
	return out
}

// encodeFetchResponse is the FetchReplicaResponse of results as proto.Marshal
// encodes it (fields in number order, records last), in parts that leave
// each bucket's batches where they are, and its length.
func encodeFetchResponse(results []replica.BucketFetchResult) ([][]byte, int) {
	var parts [][]byte
	n := 0
	for _, res := range results {
		// proto.Marshal of one small message cannot fail.
		head, _ := proto.Marshal(resultMessage(res))
		size := len(head)
		if len(res.Batches) > 0 {
			size += protowire.SizeTag(7) + protowire.SizeBytes(len(res.Batches))
		}
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(size))
		b = append(b, head...)
		if len(res.Batches) > 0 {
			b = protowire.AppendTag(b, 7, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(len(res.Batches)))
			parts = append(parts, b, res.Batches)
		} else {
			parts = append(parts, b)
		}
		n += len(b) + len(res.Batches)
	}
	return parts, n
}

// fetchResponseSlack is what a fetch response may hold beyond its
// request's byte budget: the fields around the batches, and the first
// batch of a bucket, returned whole even when over the budget.
const fetchResponseSlack = 1 << 20

// fetchReplica calls FetchReplica on the node at addr: the request as
// Connect's client sends it; the answer's body read once into a buffer of
// its length (reuse when it is large enough, else a new one) and decoded
// in place (its batches are slices of that buffer, which is returned too).
// A response longer than maxBody is refused.
func fetchReplica(ctx context.Context, hc *http.Client, addr string, m *stromv1.FetchReplicaRequest, maxBody int64, reuse []byte) ([]replica.BucketFetchResult, []byte, error) {
	body, err := proto.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+fetchReplicaPath, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header["Content-Type"] = []string{"application/proto"}
	req.Header["Connect-Protocol-Version"] = []string{"1"}
	if d, ok := ctx.Deadline(); ok {
		req.Header["Connect-Timeout-Ms"] = []string{strconv.FormatInt(max(time.Until(d).Milliseconds(), 1), 10)}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, rpc.RemoteErrorOf(connectErrorOf(resp))
	}
	buf, err := readResponse(resp, maxBody, reuse)
	if err != nil {
		return nil, nil, fmt.Errorf("replica fetch from %s: %w", addr, err)
	}
	results, err := decodeFetchResponse(buf)
	if err != nil {
		return nil, nil, fmt.Errorf("replica fetch from %s: %w", addr, err)
	}
	return results, buf, nil
}

// readResponse reads resp's body, at most maxBody bytes: at once into a
// buffer of its declared length (reuse if it has the room), else as it
// comes.
func readResponse(resp *http.Response, maxBody int64, reuse []byte) ([]byte, error) {
	if n := resp.ContentLength; n > maxBody {
		return nil, fmt.Errorf("a response of %d bytes, over the %d bytes expected at most", n, maxBody)
	} else if n >= 0 {
		buf := reuse[:0]
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			return nil, fmt.Errorf("read the response: %w", err)
		}
		return buf, nil
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read the response: %w", err)
	case int64(len(buf)) > maxBody:
		return nil, fmt.Errorf("a response over the %d bytes expected at most", maxBody)
	}
	return buf, nil
}

// decodeFetchResponse decodes a FetchReplicaResponse, its batches left in
// b.
func decodeFetchResponse(b []byte) ([]replica.BucketFetchResult, error) {
	var out []replica.BucketFetchResult
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil // as proto.Unmarshal: unknown fields are skipped
		}
		var res replica.BucketFetchResult
		err := eachField(bs, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
			switch {
			case typ == protowire.VarintType && num == 1:
				res.TB.TableID = int64(v)
			case typ == protowire.VarintType && num == 2:
				res.TB.Bucket = int32(v)
			case typ == protowire.VarintType && num == 4:
				res.HighWatermark = int64(v)
			case typ == protowire.VarintType && num == 5:
				res.LogStartOffset = int64(v)
			case typ == protowire.VarintType && num == 6:
				res.LogEndOffset = int64(v)
			case typ == protowire.BytesType && num == 3:
				d := &stromv1.ErrorDetail{}
				if err := proto.Unmarshal(bs, d); err != nil {
					return err
				}
				res.Err = rpc.ErrorOf(d)
			case typ == protowire.BytesType && num == 7:
				res.Batches = bs
			}
			return nil
		})
		out = append(out, res)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("decode the response: %w", err)
	}
	return out, nil
}

// eachField calls fn with each field of the protobuf message b: its
// number, type, and value (v for a varint, bs, a slice of b, for bytes;
// other types are skipped).
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var bs []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			bs, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, bs); err != nil {
			return err
		}
	}
	return nil
}

// connectErrorOf is the Connect error of a unary call's answer that is not
// a success: the code, message and details of its JSON body, else the HTTP
// status and the start of the body.
func connectErrorOf(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var wire struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"details"`
	}
	var code connect.Code
	if json.Unmarshal(body, &wire) != nil || code.UnmarshalText([]byte(wire.Code)) != nil {
		return fmt.Errorf("HTTP %s: %s", resp.Status, strings.TrimSpace(string(body[:min(len(body), 512)])))
	}
	ce := connect.NewWireError(code, errors.New(wire.Message))
	for _, d := range wire.Details {
		if d.Type != string((&stromv1.ErrorDetail{}).ProtoReflect().Descriptor().FullName()) {
			continue
		}
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		ed := &stromv1.ErrorDetail{}
		if err != nil || proto.Unmarshal(raw, ed) != nil {
			continue
		}
		if detail, err := connect.NewErrorDetail(ed); err == nil {
			ce.AddDetail(detail)
		}
	}
	return ce
}
