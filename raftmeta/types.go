package raftmeta

import (
	"math"
	"time"
)

// CreateMode is ZooKeeper's CreateMode; the values are ZooKeeper's flags and
// are stored in the Raft log, so they never change.
type CreateMode uint8

const (
	Persistent                  CreateMode = 0
	Ephemeral                   CreateMode = 1
	PersistentSequential        CreateMode = 2
	EphemeralSequential         CreateMode = 3
	Container                   CreateMode = 4
	PersistentWithTTL           CreateMode = 5
	PersistentSequentialWithTTL CreateMode = 6
)

func (m CreateMode) valid() bool { return m <= PersistentSequentialWithTTL }

// IsSequential reports whether the mode appends a sequence number.
func (m CreateMode) IsSequential() bool {
	return m == PersistentSequential || m == EphemeralSequential || m == PersistentSequentialWithTTL
}

// IsEphemeral reports whether the node is owned by a session.
func (m CreateMode) IsEphemeral() bool { return m == Ephemeral || m == EphemeralSequential }

// IsContainer reports whether the mode is Container.
func (m CreateMode) IsContainer() bool { return m == Container }

// IsTTL reports whether the mode carries a TTL.
func (m CreateMode) IsTTL() bool { return m == PersistentWithTTL || m == PersistentSequentialWithTTL }

func (m CreateMode) String() string {
	switch m {
	case Persistent:
		return "PERSISTENT"
	case Ephemeral:
		return "EPHEMERAL"
	case PersistentSequential:
		return "PERSISTENT_SEQUENTIAL"
	case EphemeralSequential:
		return "EPHEMERAL_SEQUENTIAL"
	case Container:
		return "CONTAINER"
	case PersistentWithTTL:
		return "PERSISTENT_WITH_TTL"
	case PersistentSequentialWithTTL:
		return "PERSISTENT_SEQUENTIAL_WITH_TTL"
	}
	return "UNKNOWN"
}

// Special ephemeralOwner values, as ZooKeeper's EphemeralType encodes them:
// containers have owner Long.MIN_VALUE, TTL nodes 0xFF in the top byte and the
// TTL in milliseconds in the low 40 bits. Session ids are Raft indexes, far
// below both, so the encodings never collide.
const (
	containerOwner int64  = math.MinInt64
	ttlOwnerMask   uint64 = 0xFF00000000000000
	ttlValueMask   uint64 = 0x000000FFFFFFFFFF
	// MaxTTL is the largest TTL a node may have (ZooKeeper's limit, 2^40-1 ms).
	MaxTTL = time.Duration(ttlValueMask) * time.Millisecond
)

func ttlOwner(ttlMs int64) int64 { return int64(ttlOwnerMask | uint64(ttlMs)) }

func isTTLOwner(owner int64) bool { return uint64(owner)&ttlOwnerMask == ttlOwnerMask }

func ttlOf(owner int64) int64 { return int64(uint64(owner) & ttlValueMask) }

// isSessionOwner reports whether owner is a real session (a normal ephemeral).
func isSessionOwner(owner int64) bool {
	return owner != 0 && owner != containerOwner && !isTTLOwner(owner)
}

// Stat is ZooKeeper's Stat of a znode.
type Stat struct {
	Czxid, Mzxid, Pzxid int64
	// Ctime and Mtime are milliseconds since the Unix epoch, taken from the
	// proposing leader's clock and carried in the command.
	Ctime, Mtime                int64
	Version, Cversion, Aversion int32
	EphemeralOwner              int64
	DataLength, NumChildren     int32
}

// Permission bits of an ACL (ZooDefs.Perms).
const (
	PermRead   int32 = 1
	PermWrite  int32 = 2
	PermCreate int32 = 4
	PermDelete int32 = 8
	PermAdmin  int32 = 16
	PermAll    int32 = 31
)

// ACL is one ZooKeeper access control entry. ACLs are stored and returned
// but not enforced by this package.
type ACL struct {
	Perms  int32
	Scheme string
	ID     string
}

// OpenACL is ZooKeeper's OPEN_ACL_UNSAFE (world:anyone, all permissions), the
// ACL a node gets when none is given.
func OpenACL() []ACL { return []ACL{{Perms: PermAll, Scheme: "world", ID: "anyone"}} }

// readACL is ZooKeeper's READ_ACL_UNSAFE.
func readACL() []ACL { return []ACL{{Perms: PermRead, Scheme: "world", ID: "anyone"}} }

// OpKind names a write operation. The values are ZooKeeper's op codes and
// are stored in the Raft log, so they never change.
type OpKind uint8

const (
	OpCreate  OpKind = 1
	OpDelete  OpKind = 2
	OpSetData OpKind = 5
	OpSetACL  OpKind = 7
	OpCheck   OpKind = 13
)

func (k OpKind) valid() bool {
	switch k {
	case OpCreate, OpDelete, OpSetData, OpSetACL, OpCheck:
		return true
	}
	return false
}

func (k OpKind) String() string {
	switch k {
	case OpCreate:
		return "create"
	case OpDelete:
		return "delete"
	case OpSetData:
		return "setData"
	case OpSetACL:
		return "setACL"
	case OpCheck:
		return "check"
	}
	return "unknown"
}

// Op is one write operation, alone (Do) or in a Multi.
type Op struct {
	Kind OpKind
	Path string
	Data []byte // create, setData; nil and empty are kept apart as in ZooKeeper
	Mode CreateMode
	ACL  []ACL // create, setACL; nil or empty means OpenACL()
	// Version is the expected version for delete, setData and check, and
	// the expected aversion for setACL; -1 matches any.
	Version int32
	TTL     time.Duration // TTL modes only (whole milliseconds, 1ms..MaxTTL); zero otherwise
}

// CreateOp creates path. For TTL modes set TTL on the result.
func CreateOp(path string, data []byte, mode CreateMode) Op {
	return Op{Kind: OpCreate, Path: path, Data: data, Mode: mode}
}

// CreateTTLOp creates a TTL node.
func CreateTTLOp(path string, data []byte, mode CreateMode, ttl time.Duration) Op {
	return Op{Kind: OpCreate, Path: path, Data: data, Mode: mode, TTL: ttl}
}

// DeleteOp deletes path if its version matches (-1: any).
func DeleteOp(path string, version int32) Op {
	return Op{Kind: OpDelete, Path: path, Version: version}
}

// SetDataOp replaces the data of path if its version matches (-1: any).
func SetDataOp(path string, data []byte, version int32) Op {
	return Op{Kind: OpSetData, Path: path, Data: data, Version: version}
}

// CheckOp fails unless path exists with the version (-1: any).
func CheckOp(path string, version int32) Op {
	return Op{Kind: OpCheck, Path: path, Version: version}
}

// SetACLOp replaces the ACL of path if its aversion matches (-1: any).
func SetACLOp(path string, acl []ACL, aversion int32) Op {
	return Op{Kind: OpSetACL, Path: path, ACL: acl, Version: aversion}
}

// OpResult is the outcome of one operation. Path is the operation's path
// (for creates, the created path, with its sequence suffix). Stat is the
// node's stat after create, setData and setACL, and zero for delete and check
// (ZooKeeper returns none for those).
type OpResult struct {
	Path string
	Stat Stat
	Err  error
}

// Session is a client session. Its id is the Raft index of the command that
// created it, so ids are unique and identical on every replica.
type Session struct {
	ID       int64
	Password []byte // 16 random bytes chosen by the proposer
	Timeout  time.Duration
}

// EventType is ZooKeeper's watch event type.
type EventType int32

const (
	NodeCreated         EventType = 1
	NodeDeleted         EventType = 2
	NodeDataChanged     EventType = 3
	NodeChildrenChanged EventType = 4
)

func (t EventType) String() string {
	switch t {
	case NodeCreated:
		return "NodeCreated"
	case NodeDeleted:
		return "NodeDeleted"
	case NodeDataChanged:
		return "NodeDataChanged"
	case NodeChildrenChanged:
		return "NodeChildrenChanged"
	}
	return "Unknown"
}

// Event is one watch notification. Zxid is that of the change.
type Event struct {
	Type EventType
	Path string
	Zxid int64
}

// WatchMode is the mode of AddWatch (ZooKeeper's AddWatchMode values).
type WatchMode int

const (
	// WatchPersistent fires NodeCreated, NodeDeleted, NodeDataChanged and
	// NodeChildrenChanged for the path, and is not removed by firing.
	WatchPersistent WatchMode = 0
	// WatchPersistentRecursive fires NodeCreated, NodeDeleted and
	// NodeDataChanged for the path and every descendant (never
	// NodeChildrenChanged), and is not removed by firing.
	WatchPersistentRecursive WatchMode = 1
)

// WatcherType selects what RemoveWatches removes (ZooKeeper's WatcherType).
type WatcherType int

const (
	// WatcherChildren removes the one-shot child watch.
	WatcherChildren WatcherType = 1
	// WatcherData removes the one-shot data (getData/exists) watch.
	WatcherData WatcherType = 2
	// WatcherAny removes every watch of any kind on the path.
	WatcherAny WatcherType = 3
	// WatcherPersistent removes the persistent watch.
	WatcherPersistent WatcherType = 4
	// WatcherPersistentRecursive removes the persistent recursive watch.
	WatcherPersistentRecursive WatcherType = 5
)
