package raftmeta

import (
	"errors"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// dialer is how this node connects to other nodes: from SourceIP when set.
func (c Config) dialer() *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if c.SourceIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(c.SourceIP)}
	}
	return d
}

// stream is raft's TCP stream layer (raft.TCPStreamLayer), dialing with a
// chosen dialer so that Raft connections come from Config.SourceIP.
type stream struct {
	net.Listener
	advertise net.Addr
	dialer    *net.Dialer
}

// listenStream listens on bind; advertise (nil: the listen address) is the
// address other nodes are told to dial, and must be a concrete IP.
func listenStream(bind string, advertise net.Addr, d *net.Dialer) (*stream, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, errors.New("raftmeta: the advertised Raft address must be a concrete IP (set AdvertiseAddr)")
	}
	return &stream{Listener: ln, advertise: advertise, dialer: d}, nil
}

// Dial implements raft.StreamLayer.
func (s *stream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := *s.dialer
	d.Timeout = timeout
	return d.Dial("tcp", string(addr))
}

// Addr implements raft.StreamLayer: the advertised address.
func (s *stream) Addr() net.Addr { return s.advertise }
