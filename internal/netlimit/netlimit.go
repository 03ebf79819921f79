// Package netlimit caps the connections a listener accepts, in total and
// per client IP, as ZooKeeper's maxCnxns / maxClientCnxns and Kafka's
// max.connections / max.connections.per.ip do: a connection over a cap is
// closed as soon as it is accepted, before anything is read from it, and
// the refusal is logged (at most once a second, with the count since).
package netlimit

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// Limits are a listener's caps; 0 means no cap. TotalKey and PerIPKey name
// the configuration keys that set them, for the log line.
type Limits struct {
	Total, PerIP       int
	TotalKey, PerIPKey string
}

// Listener is a net.Listener whose Accept returns only the connections
// within its Limits. Safe for concurrent use.
type Listener struct {
	net.Listener
	lim Limits
	lg  *slog.Logger

	mu struct {
		sync.Mutex
		total   int
		byIP    map[string]int
		refused int       // since the last log line
		logged  time.Time // when the last refusal was logged
	}
}

// Wrap caps the connections ln accepts. Closing the Listener closes ln.
func Wrap(ln net.Listener, lim Limits, lg *slog.Logger) *Listener {
	l := &Listener{Listener: ln, lim: lim, lg: lg}
	l.mu.byIP = map[string]int{}
	return l
}

// Accept waits for the next connection within the limits; connections over
// a limit are closed at once and not returned. Closing the returned
// connection frees its place.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := hostOf(c.RemoteAddr())
		if l.admit(ip) {
			return &conn{Conn: c, l: l, ip: ip}, nil
		}
		_ = c.Close()
	}
}

// Open returns the number of connections accepted and not yet closed.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.total
}

func (l *Listener) admit(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	var limit int
	var key string
	switch {
	case l.lim.Total > 0 && l.mu.total >= l.lim.Total:
		limit, key = l.lim.Total, l.lim.TotalKey
	case l.lim.PerIP > 0 && l.mu.byIP[ip] >= l.lim.PerIP:
		limit, key = l.lim.PerIP, l.lim.PerIPKey
	default:
		l.mu.total++
		l.mu.byIP[ip]++
		return true
	}
	l.mu.refused++
	if now := time.Now(); now.Sub(l.mu.logged) >= time.Second {
		l.lg.Warn("connection refused: too many connections; raise the limit to accept more",
			"remote_ip", ip, "limit", limit, "key", key, "refused", l.mu.refused)
		l.mu.logged, l.mu.refused = now, 0
	}
	return false
}

func (l *Listener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.total--
	if l.mu.byIP[ip]--; l.mu.byIP[ip] <= 0 {
		delete(l.mu.byIP, ip)
	}
}

// conn frees its place in the listener when first closed.
type conn struct {
	net.Conn
	l    *Listener
	ip   string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}

// CloseWrite half-closes a TCP connection, as net/http does before closing
// one whose request it did not read to the end (so the client reads the
// response rather than a reset).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// hostOf is the IP of a TCP address (the whole address for other kinds).
func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
