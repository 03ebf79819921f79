// Package listener serves Apache Fluss's protocol on a TCP address
// (fluss.listen; fluss/DESIGN.md). API_VERSIONS answers the keys and version
// ranges Strom is to serve, so that a Fluss client picks the versions it
// will use; each served key has a handler (the table `handlers`, one file
// per group of keys) over the node's dependencies in Config. A key without
// a handler answers a Fluss error response (UNSUPPORTED_VERSION, naming the
// API) on a connection that stays open; a frame that cannot be parsed gets
// a server failure and the connection is closed, as Fluss's own server
// does.
package listener

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/fluss/wire"
	"strom/rpc"
)

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("listener: invalid config")

// Config configures a Server.
type Config struct {
	// MaxRequestBytes is the largest request frame, in bytes, the length
	// field not counted (netty.server.max-request-size, Fluss's name and
	// default: 100 MiB).
	MaxRequestBytes int64
	// IdleTimeout closes a connection that sends no request for this long,
	// or stalls inside one (netty.connection.max-idle-time, Fluss's name and
	// default: 10 minutes); 0 never does.
	IdleTimeout time.Duration
	// MaxInFlight is the most requests of one connection answered at once
	// (0: DefaultMaxInFlight); the connection is not read while it has
	// that many, or MaxRequestBytes of request frames, in flight.
	MaxInFlight int
	// Logger receives connection errors; nil discards them.
	Logger *slog.Logger

	// Ready reports whether the node serves requests (as
	// rpc.ReadyInterceptor checks for the Connect API); while it reports
	// false every key but API_VERSIONS answers LEADER_NOT_AVAILABLE
	// (retriable) naming NODE_NOT_READY. Nil: always ready.
	Ready func() bool
	// Open, when set, holds off accepting connections until it closes: the
	// port is bound from Start (its address known, a conflict reported at
	// once), and a client that connects earlier waits in the kernel's
	// backlog with its first request unanswered until the node can serve
	// it. The Fluss 0.9.1 client retries a bootstrap that fails with a
	// network error or a timeout only 3 times in 0.7 s, and one answered
	// with an error not at all (MetadataUpdater.
	// tryToInitializeClusterWithRetries), so a node that starts answering
	// before it is ready fails the clients that connect while it starts.
	// Nil: accept from Start.
	Open <-chan struct{}
	// Catalog serves the catalog keys (catalog.go); nil answers them
	// UNSUPPORTED_VERSION.
	Catalog Catalog
	// Log serves the log keys (log.go); nil answers them UNSUPPORTED_VERSION.
	Log LogNode
	// Small serves GET_TABLE_STATS and GET_LATEST_KV_SNAPSHOTS (small.go);
	// nil answers them UNSUPPORTED_VERSION.
	Small SmallNode
	// KV serves the primary-key keys (kv.go); nil answers them
	// UNSUPPORTED_VERSION.
	KV KVNode
	// Lake serves the lake keys (lake.go); nil answers them
	// UNSUPPORTED_VERSION.
	Lake LakeNode
	// LakeTableOptions are added to the properties of every table with
	// table.datalake.enabled in GET_METADATA's and GET_TABLE_INFO's
	// table_json, as Fluss's servers add the cluster's lake catalog
	// options (TableRegistration.toTableInfo: table.datalake.paimon.
	// metastore, .warehouse), from which Flink's $lake and union reads open
	// the lake catalog. Not stored with the table. Nil: none.
	LakeTableOptions map[string]string
}

// DefaultMaxInFlight is Config.MaxInFlight's default.
const DefaultMaxInFlight = 32

func (c Config) maxInFlight() int {
	if c.MaxInFlight == 0 {
		return DefaultMaxInFlight
	}
	return c.MaxInFlight
}

// Validate reports every problem of c, each naming its config key.
func (c Config) Validate() error {
	var problems []error
	if c.MaxRequestBytes < wire.RequestHeaderLen || c.MaxRequestBytes >= 1<<31 {
		problems = append(problems, fmt.Errorf("%w: netty.server.max-request-size: want %d bytes to 2 GiB, got %d", ErrConfig, wire.RequestHeaderLen, c.MaxRequestBytes))
	}
	if c.IdleTimeout < 0 {
		problems = append(problems, fmt.Errorf("%w: netty.connection.max-idle-time: want ≥ 0, got %s", ErrConfig, c.IdleTimeout))
	}
	if c.MaxInFlight < 0 {
		problems = append(problems, fmt.Errorf("%w: MaxInFlight: want ≥ 0 (0: %d), got %d", ErrConfig, DefaultMaxInFlight, c.MaxInFlight))
	}
	return errors.Join(problems...)
}

// Served are the API keys Strom is to serve to Fluss clients (issue #17's
// list), answered by API_VERSIONS with Fluss 0.9.1's version ranges. A key
// listed here without a handler yet answers UNSUPPORTED_VERSION.
var Served = []protocol.APIKey{
	protocol.ApiVersions,
	protocol.CreateDatabase, protocol.DropDatabase, protocol.ListDatabases, protocol.DatabaseExists,
	protocol.CreateTable, protocol.DropTable, protocol.GetTableInfo, protocol.ListTables, protocol.TableExists, protocol.GetTableSchema,
	protocol.GetMetadata, protocol.ProduceLog, protocol.FetchLog, protocol.PutKv, protocol.Lookup,
	protocol.PrefixLookup, protocol.ListOffsets, protocol.InitWriter, protocol.LimitScan,
	protocol.GetTableStats, protocol.GetLatestKvSnapshots, protocol.GetFilesystemSecurityToken,
	protocol.DropKvSnapshotLease, protocol.GetLakeSnapshot, protocol.LakeTieringHeartbeat,
	protocol.PrepareLakeTableSnapshot, protocol.CommitLakeTableSnapshot,
}

// Server serves Fluss's protocol on one listener.
type Server struct {
	ln       net.Listener
	cfg      Config
	lg       *slog.Logger
	versions *flusspb.ApiVersionsResponse // the same for every request; only read
	tiering  *tieringSchedule             // the lake tiering schedule (lake.go)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
}

// Start serves ln in background goroutines and returns at once. The Server
// owns ln from then on and Close closes it; on an error the caller still
// owns it.
func Start(ln net.Listener, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	resp := &flusspb.ApiVersionsResponse{} // no server_type: a node is coordinator and tablet server at once
	for _, k := range Served {
		info, _ := protocol.Info(k)
		resp.ApiVersions = append(resp.ApiVersions, &flusspb.PbApiVersion{
			ApiKey: proto.Int32(int32(k)), MinVersion: proto.Int32(int32(info.MinVersion)), MaxVersion: proto.Int32(int32(info.MaxVersion))})
	}
	s := &Server{ln: ln, cfg: cfg, lg: lg, versions: resp, tiering: newTieringSchedule(time.Now), conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the Server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, closes every connection and waits for their
// goroutines to end.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.done)
	}
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	if s.cfg.Open != nil {
		select {
		case <-s.cfg.Open:
		case <-s.done:
			return
		}
	}
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.lg.Error("fluss listener stopped accepting", "err", err)
			}
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// serve reads c's requests until c ends or sends a frame that cannot be
// parsed, answering each in a goroutine of its own: at most MaxInFlight at
// once, holding at most MaxRequestBytes of request bodies between them (a
// request that does not fit waits, and so does the reading; one request
// alone always fits). Write requests (PRODUCE_LOG, PUT_KV) are appended
// in arrival order (writeOrder); the rest of every request runs
// concurrently. Responses carry their request id and are written whole,
// one at a time, in the order they are ready, as Fluss's server does; a
// client that pipelines gets them out of order.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	cn := &conn{c: c, budget: newBudget(s.cfg.maxInFlight(), s.cfg.MaxRequestBytes), order: newWriteOrder()}
	defer func() {
		cancel()
		c.Close()
		cn.reqs.Wait()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	r := wire.NewReader(c, int(s.cfg.MaxRequestBytes), "netty.server.max-request-size")
	for {
		if s.cfg.IdleTimeout > 0 {
			c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		}
		frame, err := r.ReadFrame()
		var h wire.RequestHeader
		var body []byte
		if err == nil {
			h, body, err = wire.ParseRequest(frame)
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.lg.Debug("fluss connection closed: idle for netty.connection.max-idle-time", "remote", c.RemoteAddr().String())
			} else if err != io.EOF && !errors.Is(err, net.ErrClosed) {
				s.lg.Info("fluss connection closed on a bad frame", "remote", c.RemoteAddr().String(), "err", err)
				if errors.Is(err, wire.ErrFrameTooLarge) || errors.Is(err, wire.ErrMalformed) {
					out, _ := wire.AppendServerFailure(nil, protocol.CorruptMessage, err.Error())
					cn.write(whole(out))
				}
			}
			return
		}
		size := int64(len(frame))
		if !cn.budget.acquire(ctx, size) {
			return
		}
		var turn *writeTurn // the write requests' append order (order.go)
		if h.APIKey == protocol.ProduceLog || h.APIKey == protocol.PutKv {
			turn = cn.order.take()
		}
		cn.reqs.Add(1)
		go func() {
			defer cn.reqs.Done()
			defer cn.budget.release(size)
			defer turn.done()
			out, err := s.handle(withTurn(ctx, turn), h, body)
			if err == nil {
				err = cn.write(out)
			}
			out.done()
			if err != nil {
				s.lg.Info("fluss connection closed", "remote", c.RemoteAddr().String(), "err", err)
				c.Close() // ends the reading too
			}
		}()
	}
}

// conn is one client connection's shared state.
type conn struct {
	c      net.Conn
	budget *budget
	order  *writeOrder    // the write requests' append order
	reqs   sync.WaitGroup // the requests being answered

	wmu sync.Mutex // held while writing one response
}

// write writes one whole response frame, its parts in one vectored write
// (writev) where the connection has it.
func (cn *conn) write(p parts) error {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if len(p.bufs) == 1 {
		_, err := cn.c.Write(p.bufs[0])
		return err
	}
	_, err := p.bufs.WriteTo(cn.c)
	return err
}

// parts is a response frame, or a response body, in parts written one
// after another without copying them together; release, when set, gives
// back the buffers they are in once written (or not to be). FETCH_LOG's
// answer is one: its records go out from the buffers they were read into.
type parts struct {
	bufs    net.Buffers
	release func()
}

// whole is a frame in one part.
func whole(frame []byte) parts { return parts{bufs: net.Buffers{frame}} }

// done releases p's buffers, if it has any to give back.
func (p parts) done() {
	if p.release != nil {
		p.release()
	}
}

// budget bounds one connection's requests in flight: their number and
// their bytes.
type budget struct {
	mu       sync.Mutex
	cond     *sync.Cond
	n, max   int
	bytes    int64
	maxBytes int64
	done     bool
}

func newBudget(max int, maxBytes int64) *budget {
	b := &budget{max: max, maxBytes: maxBytes}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire waits until a request of size bytes fits, and takes its share;
// false when ctx ends first.
func (b *budget) acquire(ctx context.Context, size int64) bool {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.done = true
		b.mu.Unlock()
		b.cond.Broadcast()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.done && (b.n >= b.max || (b.n > 0 && b.bytes+size > b.maxBytes)) {
		b.cond.Wait()
	}
	if b.done {
		return false
	}
	b.n++
	b.bytes += size
	return true
}

func (b *budget) release(size int64) {
	b.mu.Lock()
	b.n--
	b.bytes -= size
	b.mu.Unlock()
	b.cond.Broadcast()
}

// handle returns the response frame to request h with body; parts' done
// gives back its buffers once it is written (or on error, not to be).
func (s *Server) handle(ctx context.Context, h wire.RequestHeader, body []byte) (parts, error) {
	info, known := protocol.Info(h.APIKey)
	hf, served := handlers[h.APIKey]
	fail := func(code protocol.ErrorCode, msg string) (parts, error) {
		out, err := wire.AppendError(nil, h.RequestID, code, msg)
		return whole(out), err
	}
	switch {
	case !known:
		return fail(protocol.UnsupportedVersion, fmt.Sprintf("unknown API key %d: not one of Fluss 0.9.1's", h.APIKey))
	case !served || !hf.ready(s):
		return fail(protocol.UnsupportedVersion, fmt.Sprintf("Strom does not serve %s yet", h.APIKey))
	case h.APIVersion < info.MinVersion || h.APIVersion > info.MaxVersion:
		return fail(protocol.UnsupportedVersion,
			fmt.Sprintf("%s version %d is not supported: Strom serves versions %d to %d", h.APIKey, h.APIVersion, info.MinVersion, info.MaxVersion))
	}
	req, _, _ := protocol.Messages(h.APIKey)
	if err := proto.Unmarshal(body, req); err != nil {
		return fail(protocol.CorruptMessage, fmt.Sprintf("%s request body: %v", h.APIKey, err))
	}
	if h.APIKey != protocol.ApiVersions && s.cfg.Ready != nil && !s.cfg.Ready() {
		return fail(errorCode(rpc.ErrNotReady))
	}
	if hf.inParts != nil {
		p, err := hf.inParts(ctx, s, h.APIVersion, req)
		if err != nil {
			code, msg := errorCode(err)
			return fail(code, fmt.Sprintf("%s: %s", h.APIKey, msg))
		}
		n := 0
		for _, b := range p.bufs {
			n += len(b)
		}
		p.bufs = append(net.Buffers{wire.AppendResponseHeader(nil, h.RequestID, n)}, p.bufs...)
		return p, nil
	}
	resp, err := hf.serve(ctx, s, h.APIVersion, req)
	if err != nil {
		code, msg := errorCode(err)
		return fail(code, fmt.Sprintf("%s: %s", h.APIKey, msg))
	}
	out, err := wire.AppendResponse(nil, h.RequestID, resp)
	return whole(out), err
}

// handler serves one API key. serve gets the decoded request (the key's
// request message, protocol.Messages) and returns the response message or
// an error, which errorCode maps to Fluss's code; ready reports whether
// the Server has what the handler needs (a Config dependency may be nil in
// a listener that serves only some groups).
type handler struct {
	serve func(ctx context.Context, s *Server, version int16, req proto.Message) (proto.Message, error)
	// inParts, set instead of serve, returns the response's body, the
	// key's response message encoded, in parts (FETCH_LOG's).
	inParts func(ctx context.Context, s *Server, version int16, req proto.Message) (parts, error)
	ready   func(s *Server) bool
}

// typed makes a handler of f, which takes the key's request message.
func typed[Req proto.Message](ready func(*Server) bool, f func(s *Server, ctx context.Context, version int16, req Req) (proto.Message, error)) handler {
	return handler{
		serve: func(ctx context.Context, s *Server, version int16, req proto.Message) (proto.Message, error) {
			return f(s, ctx, version, req.(Req))
		},
		ready: ready,
	}
}

// inParts makes a handler of f, which takes the key's request message and
// returns the response's body in parts.
func inParts[Req proto.Message](ready func(*Server) bool, f func(s *Server, ctx context.Context, version int16, req Req) (parts, error)) handler {
	return handler{
		inParts: func(ctx context.Context, s *Server, version int16, req proto.Message) (parts, error) {
			return f(s, ctx, version, req.(Req))
		},
		ready: ready,
	}
}

// handlers are the served keys' handlers, one table per group of keys, each
// in its own file (catalog.go: the catalog keys).
var handlers = join(
	map[protocol.APIKey]handler{protocol.ApiVersions: typed(always, (*Server).apiVersions)},
	catalogHandlers,
	logHandlers,
	smallHandlers,
	kvHandlers,
	lakeHandlers,
)

func always(*Server) bool { return true }

func join(tables ...map[protocol.APIKey]handler) map[protocol.APIKey]handler {
	out := map[protocol.APIKey]handler{}
	for _, t := range tables {
		for k, h := range t {
			if _, dup := out[k]; dup {
				panic(fmt.Sprintf("listener: two handlers of %s", k))
			}
			out[k] = h
		}
	}
	return out
}

func (s *Server) apiVersions(context.Context, int16, *flusspb.ApiVersionsRequest) (proto.Message, error) {
	return s.versions, nil
}
