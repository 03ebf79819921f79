package zkwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"strom/internal/netlimit"
	"strom/raftmeta"
)

// Config configures a Server. Start from DefaultConfig.
type Config struct {
	// Listen is the client address, host:port (config key zookeeper.listen,
	// flag --zookeeper-listen; ZooKeeper's clientPort is 2181). Used by
	// Listen only; empty means the shim is off.
	Listen string
	// MaxPacketSize is the largest request packet accepted, in bytes
	// (config key zookeeper.jute.maxbuffer; ZooKeeper's jute.maxbuffer,
	// default 0xfffff, 1 MiB less a byte). A longer length prefix closes the
	// connection, as ZooKeeper's NIOServerCnxn.readLength does: ZooKeeper
	// answers no error for it. It also bounds a znode's data, which travels
	// in one packet (ZooKeeper has no other limit on it).
	MaxPacketSize int
	// MinSessionTimeout and MaxSessionTimeout clamp the session timeout a
	// client asks for (ZooKeeper's 2 and 20 ticks: defaults 4s and 40s).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// HandshakeTimeout bounds the wait for the connect request after a
	// connection is accepted (default 10s).
	HandshakeTimeout time.Duration
	// RequestTimeout bounds one write through Raft (default 10s). A write
	// that times out drops the connection: its outcome is unknown.
	RequestTimeout time.Duration
	// MaxConnections is the most client connections served at once (config
	// key zookeeper.maxCnxns; ZooKeeper's maxCnxns; 0: no limit, its
	// default). MaxClientConnections is the most from one client IP
	// (zookeeper.maxClientCnxns; ZooKeeper's maxClientCnxns, default 60).
	// A connection over either is closed as it is accepted, before its
	// connect request is read, and logged, as ZooKeeper does.
	MaxConnections, MaxClientConnections int
	// ProtectedRoot is the subtree clients may read but not write (NoAuth):
	// Strom's own tree (default "/strom"; "-" protects nothing).
	ProtectedRoot string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns ZooKeeper's limits and Strom's protected root.
func DefaultConfig() Config {
	return Config{
		MaxPacketSize:        0xfffff,
		MaxClientConnections: 60,
		MinSessionTimeout:    4 * time.Second,
		MaxSessionTimeout:    40 * time.Second,
		HandshakeTimeout:     10 * time.Second,
		RequestTimeout:       10 * time.Second,
		ProtectedRoot:        "/strom",
	}
}

// Validate reports every problem with c at once, each naming its field.
func (c Config) Validate() error {
	var errs []error
	if c.MaxPacketSize < 1024 {
		errs = append(errs, fmt.Errorf("zkwire: MaxPacketSize %d must be at least 1024", c.MaxPacketSize))
	}
	if c.MinSessionTimeout < time.Millisecond {
		errs = append(errs, fmt.Errorf("zkwire: MinSessionTimeout %s must be at least 1ms", c.MinSessionTimeout))
	}
	if c.MaxSessionTimeout < c.MinSessionTimeout {
		errs = append(errs, fmt.Errorf("zkwire: MaxSessionTimeout %s must be at least MinSessionTimeout %s", c.MaxSessionTimeout, c.MinSessionTimeout))
	}
	if c.HandshakeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("zkwire: HandshakeTimeout %s must be positive", c.HandshakeTimeout))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("zkwire: RequestTimeout %s must be positive", c.RequestTimeout))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("zkwire: MaxConnections %d must not be negative", c.MaxConnections))
	}
	if c.MaxClientConnections < 0 {
		errs = append(errs, fmt.Errorf("zkwire: MaxClientConnections %d must not be negative", c.MaxClientConnections))
	}
	if c.ProtectedRoot == "" {
		errs = append(errs, errors.New(`zkwire: ProtectedRoot must be a path or "-"`))
	}
	return errors.Join(errs...)
}

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("zkwire: server closed")

// Server serves the ZooKeeper protocol for one raftmeta.Node. Create it with
// Start (or Listen); Close stops it. Safe for concurrent use.
type Server struct {
	cfg  Config
	node *raftmeta.Node
	lg   *slog.Logger
	ln   net.Listener

	ctx      context.Context // cancelled by Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup // accept loop and connections
	done     chan struct{}  // closed when the accept loop returns
	serveErr error          // accept loop's error, set before done closes

	mu struct {
		sync.Mutex
		conns    map[*conn]struct{}
		sessions map[int64]*conn // the connection of each session (takeSession)
		closed   bool
	}

	started                time.Time
	received, sent         atomic.Int64
	latMin, latMax, latSum atomic.Int64 // microseconds
	latCount               atomic.Int64
	closeOnce              sync.Once
}

// Listen opens cfg.Listen (TCP) and starts serving on it.
func Listen(node *raftmeta.Node, cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		return nil, errors.New("zkwire: Listen address is empty")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("zkwire: listen on %s: %w", cfg.Listen, err)
	}
	s, err := Start(node, ln, cfg)
	if err != nil {
		_ = ln.Close()
	}
	return s, err
}

// Start serves ln in background goroutines and returns at once. The Server
// owns ln from then on: Close closes it (on an error the caller still owns
// it). cfg.Listen is ignored.
func Start(node *raftmeta.Node, ln net.Listener, cfg Config) (*Server, error) {
	if node == nil {
		return nil, errors.New("zkwire: nil node")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "zkwire", "addr", ln.Addr().String())
	s := &Server{
		cfg:  cfg,
		node: node,
		lg:   lg,
		ln: netlimit.Wrap(ln, netlimit.Limits{
			Total: cfg.MaxConnections, PerIP: cfg.MaxClientConnections,
			TotalKey: "zookeeper.maxCnxns", PerIPKey: "zookeeper.maxClientCnxns",
		}, lg),
		done:    make(chan struct{}),
		started: time.Now(),
	}
	s.latMin.Store(-1)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.conns = make(map[*conn]struct{})
	s.mu.sessions = make(map[int64]*conn)
	s.wg.Add(1)
	go s.acceptLoop()
	s.lg.Info("zookeeper shim listening")
	return s, nil
}

// Addr returns the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Done is closed when the server stops accepting (Close, or a listener
// error; Err then tells which).
func (s *Server) Done() <-chan struct{} { return s.done }

// Err returns why the accept loop stopped (ErrClosed after Close), or nil
// while it runs.
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.serveErr
	default:
		return nil
	}
}

// Close stops accepting, closes every connection (their sessions stay:
// clients reconnect elsewhere or the leader expires them) and waits for
// every goroutine of the server to exit. Safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		conns := make([]*conn, 0, len(s.mu.conns))
		for c := range s.mu.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		s.cancel()
		_ = s.ln.Close()
		for _, c := range conns {
			_ = c.nc.Close()
		}
		s.wg.Wait()
		s.lg.Info("zookeeper shim closed")
	})
	return nil
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	defer close(s.done)
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				s.serveErr = ErrClosed
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(delay):
					continue
				case <-s.ctx.Done():
					s.serveErr = ErrClosed
					return
				}
			}
			s.serveErr = fmt.Errorf("zkwire: accept: %w", err)
			s.lg.Error("accept failed", "err", err)
			return
		}
		delay = 0
		c := &conn{s: s, nc: nc}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			_ = nc.Close()
			continue
		}
		s.mu.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.mu.conns, c)
			if s.mu.sessions[c.sid] == c {
				delete(s.mu.sessions, c.sid)
			}
			s.mu.Unlock()
		}()
	}
}

// takeSession makes c the connection of session sid on this server and
// closes the connection that had it, as ZooKeeper does when a client
// connects with the id and password of a session (a client restarted with
// a saved session): the old connection's client sees a disconnect and, when
// it reconnects, takes the session back. Only one connection of a session
// reads its watch events here.
func (s *Server) takeSession(sid int64, c *conn) {
	s.mu.Lock()
	old := s.mu.sessions[sid]
	s.mu.sessions[sid] = c
	s.mu.Unlock()
	if old != nil {
		old.lg.Info("session taken over by a new connection; closing this one", "by", c.nc.RemoteAddr().String())
		_ = old.nc.Close()
	}
}

func (s *Server) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns)
}

func (s *Server) recordLatency(d time.Duration) {
	us := d.Microseconds()
	s.latSum.Add(us)
	s.latCount.Add(1)
	for {
		cur := s.latMax.Load()
		if us <= cur || s.latMax.CompareAndSwap(cur, us) {
			break
		}
	}
	for {
		cur := s.latMin.Load()
		if (cur >= 0 && us >= cur) || s.latMin.CompareAndSwap(cur, us) {
			break
		}
	}
}

// readFull reads exactly len(b) bytes.
func readFull(r io.Reader, b []byte) error {
	_, err := io.ReadFull(r, b)
	return err
}
