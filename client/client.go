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
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"

	stromv1 "strom/rpc/gen/strom/v1"
)

// DefaultAddress is where a client looks for a node when given none.
const DefaultAddress = "localhost:9123"

// Client talks to a Strom cluster: admin calls to a bootstrap server (any
// node serves them), data calls to each bucket's leader, found through
// GetMetadata and cached per Table. It is safe for concurrent use.
type Client struct {
	http         *http.Client
	connectOpts  []connect.ClientOption
	scheme       string  // of the bootstrap servers, for the nodes found
	seeds        []*node // the bootstrap servers, in the order given
	seedAt       atomic.Int32
	nodes        nodes
	retryTimeout time.Duration
	onRetry      func(err error, waited time.Duration)
}

type options struct {
	servers      []string
	httpClient   *http.Client
	dialTimeout  time.Duration
	retryTimeout time.Duration
	onRetry      func(err error, waited time.Duration)
}

// Option configures a Client.
type Option func(*options)

// WithServers adds bootstrap servers to those New was given (Fluss's
// bootstrap.servers): "host:port" or URLs.
func WithServers(addrs ...string) Option {
	return func(o *options) { o.servers = append(o.servers, addrs...) }
}

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

// New returns a client of the cluster whose nodes addr lists ("host:port"
// or URLs with http:// or https://, separated by commas; more with
// WithServers), its bootstrap servers: it asks them for metadata, and any
// of them for admin calls, moving on to the next one that answers. It
// does not connect until the first call.
func New(addr string, opts ...Option) (*Client, error) {
	o := options{dialTimeout: 5 * time.Second, retryTimeout: 30 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	var addrs []string
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	addrs = append(addrs, o.servers...)
	if len(addrs) == 0 {
		addrs = []string{DefaultAddress}
	}
	if o.httpClient == nil {
		o.httpClient = newHTTPClient(o.dialTimeout)
	}
	c := &Client{
		http: o.httpClient,
		// Data is Arrow batches compressed per buffer already: no gzip on top.
		connectOpts:  []connect.ClientOption{connect.WithAcceptCompression("gzip", nil, nil)},
		retryTimeout: o.retryTimeout,
		onRetry:      o.onRetry,
	}
	c.nodes.m = map[string]*node{}
	for _, a := range addrs {
		base := a
		if !strings.Contains(a, "://") {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("client: server address %q: want host:port", a)
			}
			base = "http://" + a
		}
		scheme, _, _ := strings.Cut(base, "://")
		if c.scheme == "" {
			c.scheme = scheme
		} else if scheme != c.scheme {
			return nil, fmt.Errorf("client: server addresses %q: all http or all https", addr)
		}
		c.seeds = append(c.seeds, c.nodeAt(base))
	}
	return c, nil
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

// Address returns the URL of the bootstrap server the client sends admin
// calls to.
func (c *Client) Address() string { return c.seed().base }

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
	// LeaderID and LeaderAddress name the node to send to instead, when
	// the node knows it (NOT_LEADER_OR_FOLLOWER); LeaderAddress is "" when
	// it does not.
	LeaderID      int32
	LeaderAddress string
}

func (e *Error) Error() string { return e.Message }

// ErrUnreachable: no node answered at the address.
var ErrUnreachable = errors.New("client: cannot reach a Strom node")

// wrap turns a Connect error from n into *Error, and a failure to connect
// into an error wrapping ErrUnreachable.
func (n *node) wrap(err error) error {
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
			out.LeaderID, out.LeaderAddress = ed.LeaderId, ed.LeaderAddress
			found = true
		}
	}
	if !found && (ce.Code() == connect.CodeUnavailable || isTransportError(err)) {
		// No Strom detail: the transport failed (refused, reset, closed).
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, n.base, ce.Message())
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

// callOnce sends req with fn (a method of n's clients) once, with errors
// as wrap returns them.
func callOnce[Req, Resp any](ctx context.Context, n *node, fn rpcFunc[Req, Resp], req *Req) (*Resp, error) {
	resp, err := fn(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, n.wrap(err)
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
