package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrClusterMismatch: a peer belongs to another cluster (cluster ids
// differ); it is refused, so two clusters never merge.
var ErrClusterMismatch = errors.New("membership: peer belongs to another cluster")

// ErrStopped: the membership was closed.
var ErrStopped = errors.New("membership: stopped")

// SecretKeyBytes is the length of Config.SecretKey: an AES-256 key.
const SecretKeyBytes = 32

// Timings are memberlist's intervals. Zero fields take memberlist's LAN
// defaults (DefaultLANConfig), except the join retry's.
type Timings struct {
	// ProbeInterval is how often a random member is probed (LAN: 1s).
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probe waits for an ack (LAN: 500ms).
	ProbeTimeout time.Duration
	// SuspicionMult scales how long a suspect member has to refute before
	// it is declared dead: SuspicionMult × log10(N+1) × ProbeInterval
	// (LAN: 4).
	SuspicionMult int
	// GossipInterval is how often gossip messages go out (LAN: 200ms).
	GossipInterval time.Duration
	// PushPullInterval is how often full state is exchanged with a random
	// member (LAN: 30s).
	PushPullInterval time.Duration
	// TCPTimeout bounds a TCP exchange: join, push/pull (LAN: 10s).
	TCPTimeout time.Duration
	// RetryJoinMin and RetryJoinMax bound the backoff between attempts to
	// join the listed addresses (defaults 200ms and 10s).
	RetryJoinMin, RetryJoinMax time.Duration
}

// DefaultTimings are a server's defaults: memberlist's LAN profile with
// probes twice as often (every 500ms, an ack awaited 250ms; LAN: 1s and
// 500ms) and its suspicion multiplier, 4. A killed member is suspected
// within about one probe interval and declared dead SuspicionMult ×
// ProbeInterval later (2 s on up to 10 nodes) unless it refutes: about
// 2.5 s in all where the LAN profile takes about 5 s, so that its buckets'
// leaders move (the coordinator reacts when gossip declares a node dead)
// within the 5 s a client's writes may stall (issue #12). Each member
// sends one more probe a second; memberlist's Lifeguard still stretches
// the timeouts of a member that is itself slow to answer.
func DefaultTimings() Timings {
	return Timings{ProbeInterval: 500 * time.Millisecond, ProbeTimeout: 250 * time.Millisecond, SuspicionMult: 4}
}

// DetectionTime is about how long gossip with these timings takes to
// declare a killed member of a cluster of n nodes dead: one probe interval
// to be probed, then memberlist's suspicion timeout, SuspicionMult ×
// max(1, log10(n)) × ProbeInterval. Zero fields count as memberlist's LAN
// defaults (probe interval 1 s, suspicion multiplier 4), as Start applies
// them.
func (t Timings) DetectionTime(n int) time.Duration {
	probe, mult := t.ProbeInterval, t.SuspicionMult
	if probe <= 0 {
		probe = time.Second
	}
	if mult <= 0 {
		mult = 4
	}
	scale := max(1, math.Log10(float64(max(n, 1))))
	return probe + time.Duration(float64(mult)*scale*float64(probe))
}

// LocalTimings are short timings for loopback clusters (tests): a killed
// member is declared dead in about a second.
func LocalTimings() Timings {
	return Timings{
		ProbeInterval:    100 * time.Millisecond,
		ProbeTimeout:     50 * time.Millisecond,
		SuspicionMult:    2,
		GossipInterval:   20 * time.Millisecond,
		PushPullInterval: time.Second,
		TCPTimeout:       time.Second,
		RetryJoinMin:     20 * time.Millisecond,
		RetryJoinMax:     200 * time.Millisecond,
	}
}

// Config configures a Membership.
type Config struct {
	// Self is what this node tells the others. Self.Gossip is filled in
	// with the address actually advertised.
	Self Meta
	// BindAddr is the gossip address, TCP and UDP, host:port (port 0 picks
	// a free one).
	BindAddr string
	// AdvertiseAddr is the gossip address others are told to use; "" takes
	// BindAddr's (an unspecified host as 127.0.0.1).
	AdvertiseAddr string
	// SourceIP is the local IP this node's gossip TCP connections are made
	// from (UDP goes out from BindAddr); empty lets the OS choose. See
	// raftmeta.Config.SourceIP.
	SourceIP string
	// Join lists gossip addresses of members to join; any one answering is
	// enough. They are tried in the background, with backoff, until one
	// answers. This node's own address is skipped.
	Join []string
	// SecretKey, when set, encrypts and authenticates all gossip with
	// AES-256-GCM (memberlist's keyring); a node with another key can
	// neither join nor be joined. SecretKeyBytes long.
	SecretKey []byte
	// SecretKeyName names the configuration that holds SecretKey in the
	// errors and logs about it (e.g. "cluster.secret").
	SecretKeyName string
	// OnEvent, when set, is called for every change of a member, in order,
	// from memberlist's goroutines: it must not block.
	OnEvent func(Event)
	// Timings are memberlist's intervals (zero: LAN defaults).
	Timings Timings
	// Logger receives the membership's logs and memberlist's. Nil discards.
	Logger *slog.Logger
}

// EventKind is what happened to a member.
type EventKind int

const (
	// EventJoin: a member appeared, or came back after dying or leaving.
	EventJoin EventKind = iota + 1
	// EventLeave: a member left gracefully.
	EventLeave
	// EventFail: a member was declared dead (after the suspicion timeout).
	EventFail
	// EventUpdate: a member's metadata changed.
	EventUpdate
)

func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventLeave:
		return "leave"
	case EventFail:
		return "fail"
	case EventUpdate:
		return "update"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is a change of one member.
type Event struct {
	Kind   EventKind
	Member Member
}

// Member is one node as this node's gossip sees it.
type Member struct {
	Meta
	// Alive is false once the member has been declared dead or has left.
	Alive bool
	// Left distinguishes a graceful leave from a failure (Alive false).
	Left bool
	// Since is when Alive last changed, as seen by this node (its first
	// sighting for a member never seen to change).
	Since time.Time
}

// Membership is this node's gossip membership. Its methods are safe for
// concurrent use.
type Membership struct {
	cfg  Config
	lg   *slog.Logger
	list *memberlist.Memberlist

	mu struct {
		sync.Mutex
		self    Meta
		members map[string]Member // by memberlist name (the node id)
		// mismatch is the last merge refused for another cluster id:
		// memberlist's Join flattens its delegate's error to text.
		mismatch error
	}
	joined   chan struct{} // closed once a join succeeded (or none needed)
	refused  chan struct{} // closed when a join was refused for good
	joinErr  error         // why, set before refused is closed
	stop     chan struct{}
	wg       sync.WaitGroup
	closeErr error
	once     sync.Once
}

// Start binds the gossip address, and starts joining cfg.Join in the
// background. It fails when the address cannot be bound.
func Start(cfg Config) (*Membership, error) {
	if cfg.SecretKey != nil && len(cfg.SecretKey) != SecretKeyBytes {
		return nil, fmt.Errorf("membership: %s: %d bytes, want %d", cfg.secretName(), len(cfg.SecretKey), SecretKeyBytes)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "membership")
	m := &Membership{cfg: cfg, lg: lg, joined: make(chan struct{}), refused: make(chan struct{}), stop: make(chan struct{})}
	m.mu.members = make(map[string]Member)

	host, portText, err := net.SplitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("membership: bind address %q: %w", cfg.BindAddr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("membership: bind address %q: bad port", cfg.BindAddr)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if port == 0 {
		// memberlist binds TCP and UDP to one port; find one free for TCP
		// (UDP on the same number is almost always free on loopback).
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("membership: listen on %s: %w", cfg.BindAddr, err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}

	mc := memberlist.DefaultLANConfig()
	mc.Name = strconv.Itoa(int(cfg.Self.ID))
	mc.BindAddr, mc.BindPort = host, port
	adv := cfg.AdvertiseAddr
	if adv == "" {
		adv = net.JoinHostPort(host, strconv.Itoa(port))
	}
	advHost, advPort, err := net.SplitHostPort(adv)
	if err != nil {
		return nil, fmt.Errorf("membership: advertise address %q: %w", adv, err)
	}
	if advHost == "" || advHost == "0.0.0.0" || advHost == "::" {
		advHost = "127.0.0.1"
	}
	mc.AdvertiseAddr = advHost
	if mc.AdvertisePort, err = strconv.Atoi(advPort); err != nil {
		return nil, fmt.Errorf("membership: advertise address %q: bad port", adv)
	}
	cfg.Self.Gossip = net.JoinHostPort(advHost, advPort)
	m.mu.self = cfg.Self
	applyTimings(mc, cfg.Timings)
	if cfg.SecretKey != nil {
		kr, err := memberlist.NewKeyring(nil, cfg.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("membership: keyring: %w", err)
		}
		mc.Keyring = kr
	}
	mc.Delegate = (*delegate)(m)
	mc.Events = (*events)(m)
	mc.Merge = (*delegate)(m)
	mc.Alive = (*delegate)(m)
	mc.Logger = newMemberlistLogger(lg, cfg.secretName())
	if cfg.SourceIP != "" {
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{host}, BindPort: port, Logger: mc.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("membership: listen on %s (TCP and UDP): %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
		}
		mc.Transport = &sourceTransport{NetTransport: nt, source: &net.TCPAddr{IP: net.ParseIP(cfg.SourceIP)}}
	}
	if m.list, err = memberlist.Create(mc); err != nil {
		if mc.Transport != nil {
			_ = mc.Transport.Shutdown()
		}
		return nil, fmt.Errorf("membership: listen on %s (TCP and UDP): %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	lg.Info("gossip started", "addr", cfg.Self.Gossip, "encrypted", cfg.SecretKey != nil)

	var peers []string
	for _, a := range cfg.Join {
		if a != cfg.Self.Gossip && a != cfg.BindAddr {
			peers = append(peers, a)
		}
	}
	if len(peers) == 0 {
		close(m.joined)
	} else {
		m.wg.Add(1)
		go m.retryJoin(peers)
	}
	return m, nil
}

func (c Config) secretName() string {
	if c.SecretKeyName != "" {
		return c.SecretKeyName
	}
	return "the secret key"
}

func applyTimings(mc *memberlist.Config, t Timings) {
	set := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	set(&mc.ProbeInterval, t.ProbeInterval)
	set(&mc.ProbeTimeout, t.ProbeTimeout)
	set(&mc.GossipInterval, t.GossipInterval)
	set(&mc.PushPullInterval, t.PushPullInterval)
	set(&mc.TCPTimeout, t.TCPTimeout)
	if t.PushPullInterval > 0 {
		mc.GossipToTheDeadTime = t.PushPullInterval
	}
	if t.SuspicionMult > 0 {
		mc.SuspicionMult = t.SuspicionMult
	}
}

// retryJoin tries the listed peers until one answers (Consul's retry_join),
// with exponential backoff between rounds.
func (m *Membership) retryJoin(peers []string) {
	defer m.wg.Done()
	wait, most := m.cfg.Timings.RetryJoinMin, m.cfg.Timings.RetryJoinMax
	if wait <= 0 {
		wait = 200 * time.Millisecond
	}
	if most <= 0 {
		most = 10 * time.Second
	}
	for attempt := 1; ; attempt++ {
		m.mu.Lock()
		m.mu.mismatch = nil
		m.mu.Unlock()
		n, err := m.list.Join(peers)
		if n > 0 {
			m.lg.Info("joined the cluster", "contacted", n, "members", len(m.list.Members()))
			close(m.joined)
			return
		}
		m.mu.Lock()
		if m.mu.mismatch != nil {
			err = m.mu.mismatch
		}
		m.mu.Unlock()
		err = m.explainJoin(err)
		if errors.Is(err, ErrClusterMismatch) {
			// Listed nodes are of another cluster: retrying cannot help.
			m.lg.Error("cannot join: the listed nodes are of another cluster", "peers", peers, "err", err)
			m.joinErr = err
			close(m.refused)
			return
		}
		level := slog.LevelDebug
		if attempt%10 == 0 {
			level = slog.LevelWarn
		}
		m.lg.Log(context.Background(), level, "cannot join yet; retrying", "peers", peers, "attempt", attempt, "err", err)
		select {
		case <-m.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, most)
	}
}

// explainJoin adds to a failed join what the likely cause is: with
// encryption on, a peer that cannot decrypt what this node sends just
// closes the connection, so the joiner sees only an EOF or reset.
func (m *Membership) explainJoin(err error) error {
	if err == nil || m.cfg.SecretKey == nil || errors.Is(err, ErrClusterMismatch) {
		return err
	}
	return fmt.Errorf("%w (a peer that closes the connection at once may have another %s: every node needs the same)", err, m.cfg.secretName())
}

// Joined is closed once a join to a listed address succeeded, or at once
// when none was listed.
func (m *Membership) Joined() <-chan struct{} { return m.joined }

// Refused is closed when joining was given up: the listed nodes are of
// another cluster (JoinError says which). The node then stays alone.
func (m *Membership) Refused() <-chan struct{} { return m.refused }

// JoinError is why joining was given up (an ErrClusterMismatch), nil while
// it was not.
func (m *Membership) JoinError() error {
	select {
	case <-m.refused:
		return m.joinErr
	default:
		return nil
	}
}

// Self returns this node's metadata as it gossips it.
func (m *Membership) Self() Meta {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.self
}

// Update changes this node's metadata (its cluster id once known, its
// HasState flag) and gossips it. It returns once the update is queued
// and, within timeout, sent to the others.
func (m *Membership) Update(timeout time.Duration, fn func(*Meta)) error {
	m.mu.Lock()
	id := m.mu.self.ID
	fn(&m.mu.self)
	m.mu.self.ID = id
	m.mu.Unlock()
	return m.list.UpdateNode(timeout)
}

// Members returns every member this node has seen, alive or not, this
// node included, ordered by id.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.mu.members))
	for _, mb := range m.mu.members {
		out = append(out, mb)
	}
	slices.SortFunc(out, func(a, b Member) int { return int(a.ID) - int(b.ID) })
	return out
}

// Member returns the member with node id id, if it was ever seen.
func (m *Membership) Member(id int32) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb, ok := m.mu.members[strconv.Itoa(int(id))]
	return mb, ok
}

// Close leaves the cluster gracefully (the others see EventLeave rather
// than a failure, within about a second) and stops gossip.
func (m *Membership) Close() error { return m.shutdown(true) }

// Kill stops gossip without leaving, as a crash would: the others declare
// this node dead after their suspicion timeout. For tests.
func (m *Membership) Kill() error { return m.shutdown(false) }

func (m *Membership) shutdown(leave bool) error {
	m.once.Do(func() {
		close(m.stop)
		m.wg.Wait()
		if leave {
			if err := m.Update(time.Second, func(s *Meta) { s.Leaving = true }); err != nil {
				m.lg.Warn("could not tell the others this node is leaving", "err", err)
			}
			if err := m.list.Leave(time.Second); err != nil {
				m.lg.Warn("leave did not reach the others", "err", err)
			}
		}
		m.closeErr = m.list.Shutdown()
	})
	return m.closeErr
}

// events is the EventDelegate: it keeps the member table and calls OnEvent.
type events Membership

func (e *events) NotifyJoin(n *memberlist.Node)   { e.record(n, EventJoin) }
func (e *events) NotifyUpdate(n *memberlist.Node) { e.record(n, EventUpdate) }
func (e *events) NotifyLeave(n *memberlist.Node) {
	// memberlist passes the node without its new state; the Leaving flag
	// its last metadata update carried tells a leave from a failure.
	if meta, err := decodeMeta(n.Meta); err == nil && meta.Leaving {
		e.record(n, EventLeave)
	} else {
		e.record(n, EventFail)
	}
}

func (e *events) record(n *memberlist.Node, kind EventKind) {
	m := (*Membership)(e)
	meta, err := decodeMeta(n.Meta)
	if err != nil {
		m.lg.Warn("member with bad metadata ignored", "member", n.Name, "addr", n.Address(), "err", err)
		return
	}
	alive := kind == EventJoin || kind == EventUpdate
	meta.Leaving = meta.Leaving && alive
	m.mu.Lock()
	old, seen := m.mu.members[n.Name]
	mb := Member{Meta: meta, Alive: alive, Left: kind == EventLeave, Since: old.Since}
	if !seen || old.Alive != alive {
		mb.Since = time.Now()
	}
	m.mu.members[n.Name] = mb
	m.mu.Unlock()
	if kind != EventUpdate {
		m.lg.Info("member "+kind.String(), "member", meta.ID, "gossip", n.Address(), "api", meta.API, "cluster_id", meta.ClusterID)
	}
	if m.cfg.OnEvent != nil {
		m.cfg.OnEvent(Event{Kind: kind, Member: mb})
	}
}

// delegate is memberlist's Delegate, MergeDelegate and AliveDelegate.
type delegate Membership

func (d *delegate) NodeMeta(limit int) []byte {
	m := (*Membership)(d)
	m.mu.Lock()
	b := m.mu.self.encode()
	m.mu.Unlock()
	if len(b) > limit || len(b) > maxMeta {
		// Addresses and a version are far below the limit; a rack name
		// that is not is cut rather than break gossip.
		m.lg.Error("node metadata too large for gossip; sending it without the rack", "bytes", len(b), "limit", limit)
		self := m.Self()
		self.Rack = ""
		b = self.encode()
	}
	return b
}

func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// NotifyMerge refuses to join (or be joined by) a cluster whose members
// carry another cluster id than this node's.
func (d *delegate) NotifyMerge(peers []*memberlist.Node) error {
	for _, p := range peers {
		if err := d.check(p); err != nil {
			m := (*Membership)(d)
			m.mu.Lock()
			m.mu.mismatch = err
			m.mu.Unlock()
			return err
		}
	}
	return nil
}

// NotifyAlive refuses gossip about a member of another cluster, which a
// merge check alone would let in passively.
func (d *delegate) NotifyAlive(p *memberlist.Node) error { return d.check(p) }

func (d *delegate) check(p *memberlist.Node) error {
	meta, err := decodeMeta(p.Meta)
	if err != nil {
		return fmt.Errorf("member %s (%s): %w", p.Name, p.Address(), err)
	}
	m := (*Membership)(d)
	m.mu.Lock()
	own := m.mu.self.ClusterID
	m.mu.Unlock()
	if own != "" && meta.ClusterID != "" && own != meta.ClusterID {
		return fmt.Errorf("%w: node %d (%s) is in cluster %s, this node in cluster %s; a node joins only its own cluster (give it an empty data directory to make it join another)",
			ErrClusterMismatch, meta.ID, p.Address(), meta.ClusterID, own)
	}
	return nil
}

// sourceTransport is memberlist's transport with TCP dialed from a chosen
// local IP.
type sourceTransport struct {
	*memberlist.NetTransport
	source *net.TCPAddr
}

// DialTimeout implements memberlist.Transport.
func (t *sourceTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *sourceTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, LocalAddr: t.source}
	return d.Dial("tcp", a.Addr)
}
