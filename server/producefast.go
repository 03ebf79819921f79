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
// the Go client gives in bodyLengthHeader.
func (p *produceFastPath) takes(r *http.Request) (int, bool) {
	if r.Method != http.MethodPost ||
		r.Header.Get("Content-Type") != "application/proto" ||
		(r.Header.Get("Content-Encoding") != "" && r.Header.Get("Content-Encoding") != "identity") ||
		(r.Header.Get("Connect-Protocol-Version") != "" && r.Header.Get("Connect-Protocol-Version") != "1") {
		return 0, false
	}
	n := r.ContentLength
	if n < 0 {
		var err error
		if n, err = strconv.ParseInt(r.Header.Get(bodyLengthHeader), 10, 64); err != nil {
			return 0, false
		}
	}
	return int(n), n >= 0 && n <= maxRequestBytes
}

func (p *produceFastPath) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, ok := p.takes(r)
	if !ok {
		p.fallback.ServeHTTP(w, r)
		return
	}
	p.served.Add(1)
	resp, err := p.serve(r, n)
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
	ctx := r.Context()
	if t := r.Header.Get("Connect-Timeout-Ms"); t != "" {
		// As connect-go parses it, errors included.
		if len(t) > 10 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("parse timeout: %q has >10 digits", t))
		}
		ms, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("parse timeout: %w", err))
		}
		if ms < 0 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("parse timeout: %q is negative", t))
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		defer cancel()
	}
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

// upfrontBodyBytes is the most readBody allocates before the bytes arrive.
const upfrontBodyBytes = 2 << 20

// readBody reads a body of n bytes into a buffer from rpc.GetBuffer. Up to
// upfrontBodyBytes it takes the buffer at once; beyond, it takes memory as
// the bytes arrive, in steps that at most double, so that a request that
// claims a large body and sends little holds little.
func readBody(r io.Reader, n int) ([]byte, error) {
	size := min(n, upfrontBodyBytes)
	buf, got := rpc.GetBuffer(size), 0
	for {
		k, err := io.ReadFull(r, buf[got:size])
		got += k
		if err != nil {
			rpc.PutBuffer(buf)
			return nil, err
		}
		if size == n {
			return buf, nil
		}
		size = min(2*size, n)
		bigger := rpc.GetBuffer(size)
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
