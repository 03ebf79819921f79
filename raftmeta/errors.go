package raftmeta

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Each corresponds to one ZooKeeper result code (named in
// the comment) so that the ZooKeeper wire shim can map them in one table.
// Errors returned by this package wrap them with detail (usually the path);
// compare with errors.Is, never by string.
var (
	// ErrNoNode: ZooKeeper NONODE (-101).
	ErrNoNode = errors.New("raftmeta: node does not exist")
	// ErrNodeExists: ZooKeeper NODEEXISTS (-110).
	ErrNodeExists = errors.New("raftmeta: node already exists")
	// ErrBadVersion: ZooKeeper BADVERSION (-103).
	ErrBadVersion = errors.New("raftmeta: version does not match")
	// ErrNotEmpty: ZooKeeper NOTEMPTY (-111).
	ErrNotEmpty = errors.New("raftmeta: node has children")
	// ErrNoChildrenForEphemerals: ZooKeeper NOCHILDRENFOREPHEMERALS (-108).
	ErrNoChildrenForEphemerals = errors.New("raftmeta: ephemeral nodes may not have children")
	// ErrBadArguments: ZooKeeper BADARGUMENTS (-8): an invalid path, create
	// mode, TTL or operation kind, or an attempt to delete a reserved node.
	ErrBadArguments = errors.New("raftmeta: bad arguments")
	// ErrInvalidACL: ZooKeeper INVALIDACL (-114).
	ErrInvalidACL = errors.New("raftmeta: invalid ACL")
	// ErrSessionExpired: ZooKeeper SESSIONEXPIRED (-112): the session does not
	// exist (never created, closed, or expired).
	ErrSessionExpired = errors.New("raftmeta: session expired or unknown")
	// ErrNotLeader: this node cannot accept writes. Returned errors are
	// *NotLeaderError values that name the leader when one is known.
	ErrNotLeader = errors.New("raftmeta: not the metadata leader")
	// ErrStopped: the Node has been closed.
	ErrStopped = errors.New("raftmeta: stopped")
	// ErrRuntimeInconsistency: ZooKeeper RUNTIMEINCONSISTENCY (-2), the result
	// of every operation after the failing one in a Multi.
	ErrRuntimeInconsistency = errors.New("raftmeta: multi aborted by an earlier operation")
	// ErrNoWatcher: ZooKeeper NOWATCHER (-121): RemoveWatches matched nothing.
	ErrNoWatcher = errors.New("raftmeta: no matching watch")
	// ErrRefused: Config.CheckWrite refused a write; nothing was proposed.
	// (ZooKeeper's nearest code is NOAUTH, -102.)
	ErrRefused = errors.New("raftmeta: write refused")
	// ErrSessionMoved: ZooKeeper SESSIONMOVED (-118): a write made through a
	// node that no longer holds the session's connection (its client has
	// connected through another node since, ClaimSession); nothing was
	// proposed.
	ErrSessionMoved = errors.New("raftmeta: session moved to another node")
	// ErrFeatureNotActive: a command of a type the cluster's active feature
	// level does not include yet (Config.FeatureLevel); nothing was
	// proposed. Retriable once every node runs a build that knows it.
	ErrFeatureNotActive = errors.New("raftmeta: command needs a higher cluster feature level")
)

// errIgnoredCommand is the apply result of a command of an unknown type that
// carried the ignore-if-unknown flag.
var errIgnoredCommand = errors.New("raftmeta: unknown command ignored")

// NotLeaderError is returned by writes on a node that is not the leader, or
// whose leadership was lost while the write was in flight. In the second case
// Cause is set (for example raft.ErrLeadershipLost) and the write may still
// have been committed: its outcome is unknown.
type NotLeaderError struct {
	LeaderID   string // "" when no leader is known
	LeaderAddr string // Raft address of the leader, "" when unknown
	Cause      error  // optional underlying reason
}

func (e *NotLeaderError) Error() string {
	var b strings.Builder
	b.WriteString(ErrNotLeader.Error())
	if e.LeaderID != "" || e.LeaderAddr != "" {
		fmt.Fprintf(&b, " (leader %q at %q)", e.LeaderID, e.LeaderAddr)
	} else {
		b.WriteString(" (no known leader)")
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrNotLeader) true, and exposes Cause.
func (e *NotLeaderError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrNotLeader, e.Cause}
	}
	return []error{ErrNotLeader}
}

// MultiError is returned by Multi when one operation fails. Nothing of the
// multi was applied. Results has one entry per operation exactly as ZooKeeper
// reports them: operations before the failing one have Err == nil (ZOK), the
// failing one (at Index) its own error, and later ones ErrRuntimeInconsistency.
type MultiError struct {
	Index   int
	Results []OpResult
}

func (e *MultiError) Error() string {
	if e.Index < 0 || e.Index >= len(e.Results) {
		return "raftmeta: multi failed"
	}
	return fmt.Sprintf("raftmeta: multi op %d failed: %v", e.Index, e.Results[e.Index].Err)
}

// Unwrap returns the failing operation's error.
func (e *MultiError) Unwrap() error {
	if e.Index < 0 || e.Index >= len(e.Results) {
		return nil
	}
	return e.Results[e.Index].Err
}

// pathErr wraps a sentinel with the path it concerns.
func pathErr(sentinel error, path string) error {
	return fmt.Errorf("%w: %s", sentinel, path)
}
