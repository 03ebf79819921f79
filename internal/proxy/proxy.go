// Package proxy forwards the traffic between cluster nodes through links a
// test harness controls: it cuts links (a partition, one way or both ways),
// delays them, and drops their connections, as etcd's and Jepsen's harnesses
// do with their proxies.
//
// Each node has its own loopback IP (127.0.0.0/8 is all local on Linux) and
// makes its node-to-node connections from it, so the source IP of a
// connection or a datagram names the node it comes from. A node listens on
// a private port and advertises the port of its Forward instead; traffic
// from a source that is no node (a client) is named by its IP and is cut
// only when that name is cut explicitly.
//
// TCP is cut per connection: a link from A to B refuses (closes at accept)
// every connection A opens to B and closes those open; connections B opened
// to A are the link from B to A. A delay is added to each chunk forwarded in
// the direction of its link. UDP datagrams are forwarded one by one from
// the sender to the target and dropped while the link is cut; answers to
// the forwarding socket are discarded (memberlist answers to the address a
// message names, not to the socket it came from).
package proxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"
)

// Network is the set of links between the nodes of one cluster. Safe for
// concurrent use.
type Network struct {
	lg *slog.Logger

	mu struct {
		sync.Mutex
		names  map[string]string // source IP → node name
		cut    map[link]bool
		delay  map[link]time.Duration
		conns  map[link]map[*pipe]struct{}
		fwds   []io.Closer
		closed bool
	}
	wg sync.WaitGroup
}

// link is the direction of traffic from one node to another.
type link struct{ from, to string }

// New returns an empty network: no nodes, nothing cut.
func New(lg *slog.Logger) *Network {
	n := &Network{lg: lg}
	n.mu.names = map[string]string{}
	n.mu.cut = map[link]bool{}
	n.mu.delay = map[link]time.Duration{}
	n.mu.conns = map[link]map[*pipe]struct{}{}
	return n
}

// AddNode names the node whose connections come from ip.
func (n *Network) AddNode(name, ip string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.names[ip] = name
}

// source names the sender of traffic from addr.
func (n *Network) source(addr net.Addr) string {
	var ip string
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip = a.IP.String()
	case *net.UDPAddr:
		ip = a.IP.String()
	default:
		ip = addr.String()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.mu.names[ip]; ok {
		return name
	}
	return ip
}

// ForwardTCP accepts connections on listen and forwards them to target, as
// traffic to node to. It returns the address it listens on (listen may name
// port 0).
func (n *Network) ForwardTCP(to, listen, target string) (string, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return "", err
	}
	if !n.addForwarder(ln) {
		return "", errors.New("proxy: network closed")
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				n.serveTCP(c, link{from: n.source(c.RemoteAddr()), to: to}, target)
			}()
		}
	}()
	return ln.Addr().String(), nil
}

// ForwardUDP receives datagrams on listen and sends them on to target, as
// traffic to node to. It returns the address it listens on.
func (n *Network) ForwardUDP(to, listen, target string) (string, error) {
	in, err := net.ListenPacket("udp", listen)
	if err != nil {
		return "", err
	}
	dst, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		in.Close()
		return "", err
	}
	out, err := net.ListenPacket("udp", net.JoinHostPort(in.LocalAddr().(*net.UDPAddr).IP.String(), "0"))
	if err != nil {
		in.Close()
		return "", err
	}
	if !n.addForwarder(in) || !n.addForwarder(out) {
		in.Close()
		out.Close()
		return "", errors.New("proxy: network closed")
	}
	n.wg.Add(2)
	go func() { // answers to the forwarding socket: discarded
		defer n.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			if _, _, err := out.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	go func() {
		defer n.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			m, from, err := in.ReadFrom(buf)
			if err != nil {
				return
			}
			l := link{from: n.source(from), to: to}
			cut, delay := n.state(l)
			if cut {
				continue
			}
			msg := append([]byte(nil), buf[:m]...)
			if delay == 0 {
				_, _ = out.WriteTo(msg, dst)
				continue
			}
			time.AfterFunc(delay, func() { _, _ = out.WriteTo(msg, dst) })
		}
	}()
	return in.LocalAddr().String(), nil
}

func (n *Network) addForwarder(c io.Closer) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return false
	}
	n.mu.fwds = append(n.mu.fwds, c)
	return true
}

func (n *Network) state(l link) (cut bool, delay time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.cut[l], n.mu.delay[l]
}

// pipe is one forwarded TCP connection.
type pipe struct {
	client, server net.Conn
	once           sync.Once
}

func (p *pipe) close() {
	p.once.Do(func() {
		p.client.Close()
		p.server.Close()
	})
}

func (n *Network) serveTCP(c net.Conn, l link, target string) {
	if cut, _ := n.state(l); cut {
		c.Close()
		return
	}
	s, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p := &pipe{client: c, server: s}
	n.mu.Lock()
	if n.mu.cut[l] || n.mu.closed {
		n.mu.Unlock()
		p.close()
		return
	}
	if n.mu.conns[l] == nil {
		n.mu.conns[l] = map[*pipe]struct{}{}
	}
	n.mu.conns[l][p] = struct{}{}
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.mu.conns[l], p)
		n.mu.Unlock()
		p.close()
	}()
	back := link{from: l.to, to: l.from}
	done := make(chan struct{})
	go func() {
		n.copy(s, c, l)
		p.close()
		close(done)
	}()
	n.copy(c, s, back)
	p.close()
	<-done
}

// copy forwards src to dst, delaying each chunk by the link's delay.
func (n *Network) copy(dst, src net.Conn, l link) {
	buf := make([]byte, 32<<10)
	for {
		m, err := src.Read(buf)
		if m > 0 {
			if _, delay := n.state(l); delay > 0 {
				time.Sleep(delay)
			}
			if _, werr := dst.Write(buf[:m]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut stops the traffic from node from to node to (one way): its open
// connections close, new ones are refused, datagrams are dropped.
func (n *Network) Cut(from, to string) {
	n.mu.Lock()
	l := link{from, to}
	n.mu.cut[l] = true
	conns := n.mu.conns[l]
	n.mu.conns[l] = nil
	n.mu.Unlock()
	for p := range conns {
		p.close()
	}
	n.lg.Info("proxy: link cut", "from", from, "to", to)
}

// CutBoth cuts the traffic between a and b both ways.
func (n *Network) CutBoth(a, b string) {
	n.Cut(a, b)
	n.Cut(b, a)
}

// Partition cuts every link between nodes of different groups, both ways.
// Nodes named in no group keep their links.
func (n *Network) Partition(groups ...[]string) {
	for i, g := range groups {
		for _, h := range groups[i+1:] {
			for _, a := range g {
				for _, b := range h {
					n.CutBoth(a, b)
				}
			}
		}
	}
}

// nodesLocked returns the names of the nodes. n.mu must be held.
func (n *Network) nodesLocked() []string {
	var names []string
	for _, name := range n.mu.names {
		names = append(names, name)
	}
	return names
}

// Isolate cuts every link between node name and the other nodes, both
// ways. Clients still reach it.
func (n *Network) Isolate(name string) {
	n.mu.Lock()
	others := n.nodesLocked()
	n.mu.Unlock()
	for _, o := range others {
		if o != name {
			n.CutBoth(name, o)
		}
	}
}

// Isolated reports whether every link between node name and the other
// nodes is cut both ways.
func (n *Network) Isolated(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, o := range n.nodesLocked() {
		if o != name && (!n.mu.cut[link{name, o}] || !n.mu.cut[link{o, name}]) {
			return false
		}
	}
	return true
}

// Rejoin restores every link of node name (and removes their delays),
// leaving the others' cuts as they are.
func (n *Network) Rejoin(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for l := range n.mu.cut {
		if l.from == name || l.to == name {
			delete(n.mu.cut, l)
		}
	}
	for l := range n.mu.delay {
		if l.from == name || l.to == name {
			delete(n.mu.delay, l)
		}
	}
}

// Heal restores every link and removes every delay.
func (n *Network) Heal() {
	n.mu.Lock()
	clear(n.mu.cut)
	clear(n.mu.delay)
	n.mu.Unlock()
	n.lg.Info("proxy: healed")
}

// Delay adds d to the traffic from node from to node to (0 removes it).
func (n *Network) Delay(from, to string, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if d == 0 {
		delete(n.mu.delay, link{from, to})
		return
	}
	n.mu.delay[link{from, to}] = d
}

// Drop closes the open connections from node from to node to, without
// cutting the link: the next connection goes through.
func (n *Network) Drop(from, to string) {
	n.mu.Lock()
	l := link{from, to}
	conns := n.mu.conns[l]
	n.mu.conns[l] = nil
	n.mu.Unlock()
	for p := range conns {
		p.close()
	}
}

// Close stops every forwarder and closes every connection, and waits for
// the goroutines.
func (n *Network) Close() error {
	n.mu.Lock()
	n.mu.closed = true
	fwds := n.mu.fwds
	n.mu.fwds = nil
	var conns []*pipe
	for _, m := range n.mu.conns {
		for p := range m {
			conns = append(conns, p)
		}
	}
	n.mu.Unlock()
	for _, f := range fwds {
		f.Close()
	}
	for _, p := range conns {
		p.close()
	}
	n.wg.Wait()
	return nil
}

// PrivateBase is where Expose's private ports start on a node's own IP:
// below the kernel's ephemeral range (32768 and up), from which the
// proxies' ports come, so that a private port is never one a proxy holds.
const PrivateBase = 24000

// Expose picks a private port for node name on its IP ip (PrivateBase+k,
// or any port free now if that one is taken) for the node to listen on,
// and a proxy listener on the same IP forwarding to it, for TCP, or for
// TCP and UDP on one port when udp is set (gossip). The node advertises
// public. A node of its own IP is the only one to bind there, so the
// private port stays free until the node binds it.
func (n *Network) Expose(name, ip string, k int, udp bool) (private, public string, err error) {
	private = net.JoinHostPort(ip, strconv.Itoa(PrivateBase+k))
	if !isFree(private, udp) {
		if private, err = freePort(ip, udp); err != nil {
			return "", "", err
		}
	}
	for range 20 {
		var addr string
		if addr, err = n.ForwardTCP(name, ip+":0", private); err != nil {
			return "", "", err
		}
		if !udp {
			return private, addr, nil
		}
		if _, err = n.ForwardUDP(name, addr, private); err == nil {
			return private, addr, nil
		}
		// The UDP port is taken: that TCP forwarder stays unused.
	}
	return "", "", fmt.Errorf("proxy: no free TCP+UDP port on %s: %w", ip, err)
}

// isFree reports whether addr can be listened on now (TCP, and UDP too
// when udp is set).
func isFree(addr string, udp bool) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer ln.Close()
	if udp {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		pc.Close()
	}
	return true
}

// freePort returns ip:port of a port free now (for TCP, and UDP too when
// udp is set).
func freePort(ip string, udp bool) (string, error) {
	for range 20 {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			return "", err
		}
		addr := ln.Addr().String()
		if !udp {
			ln.Close()
			return addr, nil
		}
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err == nil {
			pc.Close()
			return addr, nil
		}
	}
	return "", fmt.Errorf("proxy: no free port on %s", ip)
}

// LoopbackPrefix returns "127.a.b." with a and b random, the prefix of a
// cluster's node IPs (127.a.b.10+i), so that the nodes of clusters run at
// once do not meet.
func LoopbackPrefix() string {
	return fmt.Sprintf("127.%d.%d.", 1+mrand.IntN(250), 1+mrand.IntN(250))
}
