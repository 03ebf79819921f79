package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// produceFastPath serves ProduceLog calls made in Connect's unary protocol
// with binary protobuf (what the Go client sends) without Connect's generic
// machinery, which copies a request's bytes twice before the handler sees
// them (into its read buffer, then out of it into the message): the body is
// read once into a pooled buffer and the batches are appended from it in
// place. The replies, errors included, are Connect's, byte for byte
// (producefast_test.go compares the two). Every other form of the call (gRPC,
// gRPC-Web, JSON, a compressed body, a body of unknown or excessive length)
// goes to the Connect handler, fallback.
type produceFastPath struct {
	h        *tabletHandler
	ready    func() bool
	fallback http.Handler
	errors   *connect.ErrorWriter
	served   atomic.Int64 // calls taken, for tests
}

func newProduceFastPath(h *tabletHandler, ready func() bool, fallback http.Handler) *produceFastPath {
	return &produceFastPath{h: h, ready: ready, fallback: fallback, errors: connect.NewErrorWriter()}
}

// takes reports whether r is a call the fast path serves, and the length
// of its body: its Content-Length, or for a body sent in chunks the length
// the Go client gives in bodyLengthHeader. limitRequests has refused a
// length over netty.server.max-request-size.
func (p *produceFastPath) takes(r *http.Request) (int, bool) { return connectUnaryProto(r) }

// connectUnaryProto reports whether r is a call in Connect's unary protocol
// with an uncompressed binary protobuf body of declared length, and that
// length.
func connectUnaryProto(r *http.Request) (int, bool) {
	if r.Method != http.MethodPost ||
		r.Header.Get("Content-Type") != "application/proto" ||
		(r.Header.Get("Content-Encoding") != "" && r.Header.Get("Content-Encoding") != "identity") ||
		(r.Header.Get("Connect-Protocol-Version") != "" && r.Header.Get("Connect-Protocol-Version") != "1") {
		return 0, false
	}
	n := declaredLength(r)
	return int(n), n >= 0
}

func (p *produceFastPath) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, ok := p.takes(r)
	if !ok {
		p.fallback.ServeHTTP(w, r)
		return
	}
	p.served.Add(1)
	start := time.Now()
	resp, err := p.serve(r, n)
	p.h.s.metrics.rpc.Observe(produceLogPath, err, time.Since(start))
	if err != nil {
		_ = p.errors.Write(w, r, err)
		return
	}
	out, err := proto.Marshal(resp)
	if err != nil {
		_ = p.errors.Write(w, r, connect.NewError(connect.CodeInternal, err))
		return
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/proto"}
	h["Content-Length"] = []string{strconv.Itoa(len(out))}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// serve reads, decodes and runs one call, in Connect's order: errors in
// reading and decoding are Connect's own; the handler's (not ready
// included) are mapped as rpc.ErrorInterceptor maps them.
func (p *produceFastPath) serve(r *http.Request, n int) (*stromv1.ProduceLogResponse, error) {
	ctx, cancel, err := connectTimeout(r)
	if err != nil {
		return nil, err
	}
	defer cancel()
	body, err := readBody(r.Body, n)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("read request body of %d bytes: %w", n, err))
	}
	defer rpc.PutBuffer(body)
	if r.ContentLength < 0 {
		if k, _ := r.Body.Read(make([]byte, 1)); k > 0 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("request body longer than its %s of %d bytes", bodyLengthHeader, n))
		}
	}
	m := &stromv1.ProduceLogRequest{}
	if err := rpc.UnmarshalProduceInPlace(body, m); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unmarshal message: %w", err))
	}
	if !p.ready() {
		return nil, rpc.Error(rpc.ErrNotReady)
	}
	resp, err := p.h.produce(ctx, m)
	var ce *connect.Error
	if err != nil && (!errors.As(err, &ce) || len(ce.Details()) == 0) {
		err = rpc.Error(err)
	}
	return resp, err
}

// connectTimeout is r's context bounded by its Connect-Timeout-Ms header,
// which is refused as connect-go refuses it.
func connectTimeout(r *http.Request) (context.Context, context.CancelFunc, error) {
	t := r.Header.Get("Connect-Timeout-Ms")
	if t == "" {
		return r.Context(), func() {}, nil
	}
	if len(t) > 10 {
		return nil, nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("parse timeout: %q has >10 digits", t))
	}
	ms, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return nil, nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("parse timeout: %w", err))
	}
	if ms < 0 {
		return nil, nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("parse timeout: %q is negative", t))
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(ms)*time.Millisecond)
	return ctx, cancel, nil
}

// minBodyGrant is the smallest step in which readBody takes memory: the
// smallest buffer rpc.GetBuffer pools.
const minBodyGrant = 64 << 10

// readBody reads a body of n bytes into a buffer from rpc.GetBuffer,
// taking memory as the bytes arrive: it starts with n>>k bytes, the
// smallest such (k even) of at least minBodyGrant (so under 256 KiB, or
// n when smaller), and each time the buffer fills it moves to one four times
// larger, up to n. A request that claims a large body and sends little
// holds about four times what it sent at most, and the moves copy about a
// third of a body in all.
func readBody(r io.Reader, n int) ([]byte, error) {
	shift := 0
	for n>>(shift+2) >= minBodyGrant {
		shift += 2
	}
	buf, got := rpc.GetBuffer(n>>shift), 0
	for {
		k, err := io.ReadFull(r, buf[got:])
		got += k
		if err != nil {
			rpc.PutBuffer(buf)
			return nil, err
		}
		if shift == 0 {
			return buf, nil
		}
		shift -= 2
		bigger := rpc.GetBuffer(n >> shift)
		copy(bigger, buf[:got])
		rpc.PutBuffer(buf)
		buf = bigger
	}
}

// bodyLengthHeader carries the length of a body the Go client sends in
// chunks (client.BodyLengthHeader).
const bodyLengthHeader = "Strom-Body-Length"

// produceLogPath is the URL path of TabletService.ProduceLog.
const produceLogPath = stromv1connect.TabletServiceProduceLogProcedure
