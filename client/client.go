// Package client is the Go client of Strom. New connects to any node; Admin
// manages databases and tables. Errors returned by the server are *Error
// values carrying Strom's error code and whether a retry may succeed.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// DefaultAddress is where a client looks for a node when given none.
const DefaultAddress = "localhost:9123"

// Client talks to a Strom cluster. It is safe for concurrent use.
type Client struct {
	baseURL      string
	http         *http.Client
	admin        stromv1connect.AdminServiceClient
	tablet       stromv1connect.TabletServiceClient
	retryTimeout time.Duration
	onRetry      func(err error, waited time.Duration)
}

type options struct {
	httpClient   *http.Client
	dialTimeout  time.Duration
	retryTimeout time.Duration
	onRetry      func(err error, waited time.Duration)
}

// Option configures a Client.
type Option func(*options)

// WithHTTPClient makes the client send requests through hc.
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.httpClient = hc } }

// WithDialTimeout bounds how long connecting to a node may take (default 5s).
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithRetryTimeout bounds how long, from its first try, a call is retried
// while it fails with a retriable error (default 30s; the call's context
// bounds it too). It does not bound a try: a long-poll fetch takes as long
// as it asks to.
func WithRetryTimeout(d time.Duration) Option { return func(o *options) { o.retryTimeout = d } }

// WithRetryNotify has f called before each retry of a call, with the error
// of the try that failed and the time since the call's first try, so a
// program can say what it is waiting for. f must not block.
func WithRetryNotify(f func(err error, waited time.Duration)) Option {
	return func(o *options) { o.onRetry = f }
}

// New returns a client for the node at addr ("host:port", or a URL with
// http:// or https://). It does not connect until the first call.
func New(addr string, opts ...Option) (*Client, error) {
	o := options{dialTimeout: 5 * time.Second, retryTimeout: 30 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if addr == "" {
		addr = DefaultAddress
	}
	base := addr
	if !strings.Contains(addr, "://") {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("client: server address %q: want host:port", addr)
		}
		base = "http://" + addr
	}
	if o.httpClient == nil {
		o.httpClient = newHTTPClient(o.dialTimeout)
	}
	// Data is Arrow batches compressed per buffer already: no gzip on top.
	noGzip := connect.WithAcceptCompression("gzip", nil, nil)
	return &Client{
		baseURL: base,
		http:    o.httpClient,
		admin:   stromv1connect.NewAdminServiceClient(o.httpClient, base, noGzip),
		tablet:  stromv1connect.NewTabletServiceClient(o.httpClient, base, noGzip),

		retryTimeout: o.retryTimeout,
		onRetry:      o.onRetry,
	}, nil
}

// newHTTPClient speaks HTTP/1.1 to http:// addresses and HTTP/2 over TLS
// (or HTTP/1.1, as the server offers) to https:// ones. Over loopback and
// LANs HTTP/1.1 moves bulk batches with less CPU than HTTP/2 without TLS:
// a request's body goes to its connection as it is, not cut into frames
// and copied through flow-control buffers on both sides; the cost is a
// connection per request in flight, which a client of a few nodes affords.
func newHTTPClient(dialTimeout time.Duration) *http.Client {
	t := &http.Transport{
		DialContext:     (&net.Dialer{Timeout: dialTimeout}).DialContext,
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12},
	}
	// Keep those connections open (the default keeps 2 per host and
	// closes the rest after use).
	t.MaxIdleConnsPerHost = 64
	// Close idle connections well before the server does
	// (netty.connection.max-idle-time, 10 minutes), so a request is not
	// sent on a connection the server is closing.
	t.IdleConnTimeout = 90 * time.Second
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP2(true)
	t.Protocols.SetHTTP1(true)
	// Large frames and windows for bulk data (the server uses the same).
	t.HTTP2 = &http.HTTP2Config{
		MaxReadFrameSize:              1 << 20,
		MaxReceiveBufferPerConnection: 4<<20 - 1,
		MaxReceiveBufferPerStream:     4<<20 - 1,
	}
	return &http.Client{Transport: t}
}

// Address returns the node URL the client sends to.
func (c *Client) Address() string { return c.baseURL }

// Admin returns the administrative API.
func (c *Client) Admin() *Admin { return &Admin{c: c} }

// Error is an error returned by a Strom node.
type Error struct {
	// Code is Strom's error code (Fluss's number where Fluss has the error).
	Code int32
	// Name is the code's name, e.g. "TABLE_NOT_EXIST".
	Name string
	// Retriable tells whether the same request may succeed later.
	Retriable bool
	// Field names the request field at fault, when there is one.
	Field string
	// Connect is the transport-level code.
	Connect connect.Code
	// Message is the node's description of the problem.
	Message string
}

func (e *Error) Error() string { return e.Message }

// ErrUnreachable: no node answered at the address.
var ErrUnreachable = errors.New("client: cannot reach a Strom node")

// wrap turns a Connect error into *Error, and a failure to connect into an
// error wrapping ErrUnreachable.
func (c *Client) wrap(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	out := &Error{Code: -1, Name: "UNKNOWN", Connect: ce.Code(), Message: ce.Message()}
	found := false
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if ed, ok := v.(*stromv1.ErrorDetail); ok {
			out.Code, out.Name, out.Retriable, out.Field = ed.Code, ed.Name, ed.Retriable, ed.Field
			found = true
		}
	}
	if !found && (ce.Code() == connect.CodeUnavailable || isTransportError(err)) {
		// No Strom detail: the transport failed (refused, reset, closed).
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, c.baseURL, ce.Message())
	}
	return out
}

// isTransportError reports whether err is a failure of the connection
// rather than an answer from a node.
func isTransportError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// call sends req with fn, and sends it again, with backoff, while it fails
// with a retriable error (the node said so, as NODE_NOT_READY while it
// starts, or no node answered), until ctx ends or the client's retry
// timeout has passed since the first try; then it returns the last error.
// For calls that are safe to repeat: a mutating call whose answer was lost
// may, sent again, report that its effect exists already (as with Kafka's
// admin client).
func call[Req, Resp any](ctx context.Context, c *Client, fn func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), req *Req) (*Resp, error) {
	return retry(ctx, time.Now().Add(c.retryTimeout), c.onRetry, func(ctx context.Context) (*Resp, error) { return callOnce(ctx, c, fn, req) })
}

// callOnce sends req with fn once, with errors as wrap returns them.
func callOnce[Req, Resp any](ctx context.Context, c *Client, fn func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), req *Req) (*Resp, error) {
	resp, err := fn(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, c.wrap(err)
	}
	return resp.Msg, nil
}

// retry calls fn until it succeeds, fails with an error that is not
// retriable, ctx ends, or the next try would start after until, sleeping
// between tries from 50ms doubling to 1s. It returns fn's last result. It
// bounds the retrying, not a try: a try may take as long as ctx allows.
// onRetry, when not nil, hears of each retry before its sleep.
func retry[T any](ctx context.Context, until time.Time, onRetry func(error, time.Duration), fn func(ctx context.Context) (T, error)) (T, error) {
	backoff := 50 * time.Millisecond
	start := time.Now()
	for {
		v, err := fn(ctx)
		if err == nil || !retriable(err) || ctx.Err() != nil || time.Now().Add(backoff).After(until) {
			return v, err
		}
		if d, ok := ctx.Deadline(); ok && time.Until(d) < backoff {
			return v, err
		}
		if onRetry != nil {
			onRetry(err, time.Since(start))
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return v, err
		}
		backoff = min(2*backoff, time.Second)
	}
}
