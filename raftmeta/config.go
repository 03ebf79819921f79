package raftmeta

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Config configures a Node. Start from DefaultConfig.
type Config struct {
	// NodeID is this node's Raft server id, unique in the cluster for all
	// time. Required.
	NodeID string
	// Dir holds the Raft log and stable store (Dir/raft.db, bbolt via
	// raft-boltdb/v2) and the snapshots (Dir/snapshots/). Required by Open;
	// unused by OpenWith.
	Dir string
	// BindAddr is the Raft TCP listen address, host:port (default
	// "127.0.0.1:9124"; port 0 picks a free port). Required by Open.
	BindAddr string
	// AdvertiseAddr is the host:port other nodes dial to reach this one.
	// Empty means the address BindAddr actually listens on.
	AdvertiseAddr string
	// SourceIP is the local IP this node's connections to other nodes
	// (Raft, forwarding) are made from; empty lets the OS choose. A test
	// harness gives each node its own loopback IP so that a proxy can tell
	// the nodes' connections apart (internal/proxy).
	SourceIP string
	// Bootstrap makes this node bootstrap a cluster with itself as the only
	// voter when it has no Raft state yet. Ignored when state exists.
	Bootstrap bool
	// Logger receives the node's logs and, bridged, hashicorp/raft's. Nil
	// discards them.
	Logger *slog.Logger

	// HeartbeatTimeout is how long a follower waits without contact from the
	// leader before it starts an election (default 1s, at least 5ms).
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits before starting a new
	// election (default 1s, at least HeartbeatTimeout).
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without contact
	// from a quorum (default 500ms, at least 5ms, at most HeartbeatTimeout).
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is the longest a leader's replication to a follower
	// stays idle before it sends an AppendEntries with no new entries
	// (default 50ms, at least 1ms). The leader also sends one as soon as
	// its commit index advances (the patch in third_party/README.md), so
	// followers apply a commit about half a round trip after the leader.
	CommitTimeout time.Duration
	// SnapshotThreshold is the number of log entries since the last
	// snapshot that triggers a new one (default 8192, at least 1).
	SnapshotThreshold uint64
	// SnapshotInterval is how often Raft checks whether to snapshot
	// (default 120s, at least 5ms; staggered up to 2x).
	SnapshotInterval time.Duration
	// TrailingLogs is the number of log entries kept after a snapshot so
	// that a slightly lagging follower needs no snapshot (default 10240).
	TrailingLogs uint64
	// ForwardAddr maps the leader's NodeID to the host:port where it serves
	// ForwardHandler (at ForwardPath, over HTTP/1.1 or h2c); "" when
	// unknown. With it set, a follower forwards writes, session commands,
	// heartbeats (Touch) and Sync to the leader instead of answering
	// *NotLeaderError. Nil disables forwarding.
	ForwardAddr func(nodeID string) string
	// ForwardSecret keys the HMAC-SHA256 that authenticates forward calls
	// (see forward.go): every node of the cluster has the same one, of at
	// least MinForwardSecret bytes. Required with ForwardAddr; without it
	// ForwardHandler refuses every call.
	ForwardSecret []byte
	// CheckWrite, when set, vets every Do and Multi (and their Async forms)
	// before it is proposed: on the node the write is made on, and again on
	// the leader for a forwarded one. from is the NodeID of the node the
	// write was made on (for a forwarded write, the authenticated sender),
	// session and ops are the write's. A non-nil error refuses the write:
	// nothing is proposed and the caller gets an error wrapping ErrRefused
	// and the returned error. It must be safe for concurrent use, and
	// should decide from its arguments only (it runs outside the FSM).
	CheckWrite func(from string, session int64, ops []Op) error
	// FeatureLevel, when set, returns the cluster's active feature level
	// (the server's is the coordinator's /strom/features, read from the
	// local replica). A command whose type came with a higher level
	// (commandLevels) is not proposed: the caller gets ErrFeatureNotActive,
	// on the proposing node and again on the leader for a forwarded one,
	// because a node of an older build would not know it. Nil allows every
	// command this build knows. It is called only for commands of a level
	// above 0 (none is proposed while Open runs), and must be safe for
	// concurrent use.
	FeatureLevel func() int
	// Autopilot makes the leader manage the configuration as nodes come
	// and go (autopilot.go); off unless Autopilot.Peers is set.
	Autopilot AutopilotConfig
	// SessionCheckInterval is how often the leader looks for expired
	// sessions, empty containers and expired TTL nodes (default 500ms, at
	// least 1ms).
	SessionCheckInterval time.Duration
}

// DefaultConfig returns hashicorp/raft's default timings and this package's
// defaults. NodeID and Dir must still be set.
func DefaultConfig() Config {
	return Config{
		BindAddr:             "127.0.0.1:9124",
		HeartbeatTimeout:     time.Second,
		ElectionTimeout:      time.Second,
		LeaderLeaseTimeout:   500 * time.Millisecond,
		CommitTimeout:        50 * time.Millisecond,
		SnapshotThreshold:    8192,
		SnapshotInterval:     120 * time.Second,
		TrailingLogs:         10240,
		SessionCheckInterval: 500 * time.Millisecond,
	}
}

// Validate reports every problem with c at once, each naming its field. It
// does not require Dir and BindAddr, which only Open needs.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("raftmeta: Config.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.NodeID == "" {
		bad("NodeID", "must be set")
	}
	if c.BindAddr != "" {
		if _, _, err := net.SplitHostPort(c.BindAddr); err != nil {
			bad("BindAddr", "%q is not host:port: %v", c.BindAddr, err)
		}
	}
	if c.SourceIP != "" && net.ParseIP(c.SourceIP) == nil {
		bad("SourceIP", "%q is not an IP address", c.SourceIP)
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseAddr); err != nil {
			bad("AdvertiseAddr", "%q is not host:port: %v", c.AdvertiseAddr, err)
		}
	}
	if c.HeartbeatTimeout < 5*time.Millisecond {
		bad("HeartbeatTimeout", "%s is below 5ms", c.HeartbeatTimeout)
	}
	if c.ElectionTimeout < 5*time.Millisecond {
		bad("ElectionTimeout", "%s is below 5ms", c.ElectionTimeout)
	} else if c.ElectionTimeout < c.HeartbeatTimeout {
		bad("ElectionTimeout", "%s is below HeartbeatTimeout %s", c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if c.LeaderLeaseTimeout < 5*time.Millisecond {
		bad("LeaderLeaseTimeout", "%s is below 5ms", c.LeaderLeaseTimeout)
	} else if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		bad("LeaderLeaseTimeout", "%s exceeds HeartbeatTimeout %s", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.CommitTimeout < time.Millisecond {
		bad("CommitTimeout", "%s is below 1ms", c.CommitTimeout)
	}
	if c.SnapshotThreshold < 1 {
		bad("SnapshotThreshold", "must be at least 1")
	}
	if c.SnapshotInterval < 5*time.Millisecond {
		bad("SnapshotInterval", "%s is below 5ms", c.SnapshotInterval)
	}
	if c.SessionCheckInterval < time.Millisecond {
		bad("SessionCheckInterval", "%s is below 1ms", c.SessionCheckInterval)
	}
	if c.ForwardAddr != nil && len(c.ForwardSecret) < MinForwardSecret {
		bad("ForwardSecret", "%d bytes; forwarding needs a secret of at least %d bytes, the same on every node", len(c.ForwardSecret), MinForwardSecret)
	}
	return errors.Join(errs...)
}

// validateForOpen adds Open's requirements to Validate.
func (c Config) validateForOpen() error {
	var errs []error
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("raftmeta: Config.Dir: must be set"))
	}
	if c.BindAddr == "" {
		errs = append(errs, errors.New("raftmeta: Config.BindAddr: must be set"))
	}
	return errors.Join(errs...)
}

func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}
