package zkwire

import (
	"errors"
	"fmt"

	"strom/raftmeta"
)

// Op codes (ZooDefs.OpCode).
const (
	opNotification         int32 = 0
	opCreate               int32 = 1
	opDelete               int32 = 2
	opExists               int32 = 3
	opGetData              int32 = 4
	opSetData              int32 = 5
	opGetACL               int32 = 6
	opSetACL               int32 = 7
	opGetChildren          int32 = 8
	opSync                 int32 = 9
	opPing                 int32 = 11
	opGetChildren2         int32 = 12
	opCheck                int32 = 13
	opMulti                int32 = 14
	opCreate2              int32 = 15
	opReconfig             int32 = 16
	opCheckWatches         int32 = 17
	opRemoveWatches        int32 = 18
	opCreateContainer      int32 = 19
	opDeleteContainer      int32 = 20
	opCreateTTL            int32 = 21
	opMultiRead            int32 = 22
	opAuth                 int32 = 100
	opSetWatches           int32 = 101
	opSASL                 int32 = 102
	opGetEphemerals        int32 = 103
	opGetAllChildrenNumber int32 = 104
	opSetWatches2          int32 = 105
	opAddWatch             int32 = 106
	opWhoAmI               int32 = 107
	opCreateSession        int32 = -10
	opCloseSession         int32 = -11
	opError                int32 = -1
)

// Special xids (ClientCnxn).
const (
	xidNotification int32 = -1
	xidPing         int32 = -2
	xidAuth         int32 = -4
	xidSetWatches   int32 = -8
)

// Result codes (KeeperException.Code).
const (
	codeOK                      int32 = 0
	codeSystemError             int32 = -1
	codeRuntimeInconsistency    int32 = -2
	codeMarshallingError        int32 = -5
	codeUnimplemented           int32 = -6
	codeOperationTimeout        int32 = -7
	codeBadArguments            int32 = -8
	codeNoNode                  int32 = -101
	codeNoAuth                  int32 = -102
	codeBadVersion              int32 = -103
	codeNoChildrenForEphemerals int32 = -108
	codeNodeExists              int32 = -110
	codeNotEmpty                int32 = -111
	codeSessionExpired          int32 = -112
	codeInvalidACL              int32 = -114
	codeAuthFailed              int32 = -115
	codeNoWatcher               int32 = -121
)

// Watch event state: SyncConnected.
const stateSyncConnected int32 = 3

// errNoAuth is the refusal of a write under the protected root.
var errNoAuth = errors.New("zkwire: not authorized")

// codeTable maps raftmeta's sentinels to ZooKeeper result codes: the one
// place errors become wire codes.
var codeTable = []struct {
	err  error
	code int32
}{
	{raftmeta.ErrNoNode, codeNoNode},
	{raftmeta.ErrNodeExists, codeNodeExists},
	{raftmeta.ErrBadVersion, codeBadVersion},
	{raftmeta.ErrNotEmpty, codeNotEmpty},
	{raftmeta.ErrNoChildrenForEphemerals, codeNoChildrenForEphemerals},
	{raftmeta.ErrBadArguments, codeBadArguments},
	{raftmeta.ErrInvalidACL, codeInvalidACL},
	{raftmeta.ErrSessionExpired, codeSessionExpired},
	{raftmeta.ErrRuntimeInconsistency, codeRuntimeInconsistency},
	{raftmeta.ErrNoWatcher, codeNoWatcher},
	{errNoAuth, codeNoAuth},
}

// errCode returns the ZooKeeper code of err and whether it is one: errors
// without a code (not leader, stopped, timeouts) are failures of the node,
// not answers, and the connection is dropped instead (the client sees
// ConnectionLoss, the outcome of a write is unknown, as with ZooKeeper).
func errCode(err error) (int32, bool) {
	if err == nil {
		return codeOK, true
	}
	var me *raftmeta.MultiError
	if errors.As(err, &me) {
		return errCode(me.Unwrap())
	}
	for _, e := range codeTable {
		if errors.Is(err, e.err) {
			return e.code, true
		}
	}
	return codeSystemError, false
}

// request is one decoded client packet after the handshake.
type request struct {
	xid, op int32

	path    string
	data    []byte
	acl     []raftmeta.ACL
	flags   int32 // create mode; watch mode (addWatch); watcher type (check/removeWatches)
	ttl     int64
	version int32
	watch   bool

	ops []request // multi, multiRead

	// setWatches, setWatches2
	relZxid                            int64
	dataW, existW, childW, persW, recW []string

	// auth
	authType int32
	scheme   string
	auth     []byte
}

// decodeRequest decodes a packet body (after the length prefix): request
// header then the op's record. Unknown op codes decode with an empty body
// (they are answered Unimplemented). Errors wrap errMalformed.
func decodeRequest(b []byte) (request, error) {
	d := &decoder{b: b}
	var r request
	r.xid = d.i32("xid")
	r.op = d.i32("type")
	if d.err != nil {
		return r, d.err
	}
	switch r.op {
	case opMulti, opMultiRead:
		for d.err == nil {
			typ := d.i32("multi header type")
			done := d.boolean("multi header done")
			_ = d.i32("multi header err")
			if done || d.err != nil {
				break
			}
			sub := request{op: typ}
			if !decodeBody(d, &sub, r.op) {
				return r, fmt.Errorf("%w: op %d not allowed in %s", errMalformed, typ, opName(r.op))
			}
			r.ops = append(r.ops, sub)
		}
	default:
		decodeBody(d, &r, 0)
	}
	if d.err != nil {
		return r, d.err
	}
	if d.remaining() != 0 && r.op != opAuth {
		return r, fmt.Errorf("%w: %d trailing bytes after %s", errMalformed, d.remaining(), opName(r.op))
	}
	return r, nil
}

// decodeBody decodes the record of r.op. In a multi (parent != 0) only the
// ops ZooKeeper allows there are accepted; it reports false otherwise.
func decodeBody(d *decoder, r *request, parent int32) bool {
	switch parent {
	case opMulti:
		switch r.op {
		case opCreate, opCreate2, opCreateContainer, opCreateTTL, opDelete, opSetData, opCheck:
		default:
			return false
		}
	case opMultiRead:
		switch r.op {
		case opGetData, opGetChildren:
		default:
			return false
		}
	}
	switch r.op {
	case opCreate, opCreate2, opCreateContainer, opCreateTTL:
		r.path = d.str("path")
		r.data = d.buffer("data")
		r.acl = d.acls("acl")
		r.flags = d.i32("flags")
		if r.op == opCreateTTL {
			r.ttl = d.i64("ttl")
		}
	case opDelete, opCheck:
		r.path = d.str("path")
		r.version = d.i32("version")
	case opExists, opGetData, opGetChildren, opGetChildren2:
		r.path = d.str("path")
		r.watch = d.boolean("watch")
	case opSetData:
		r.path = d.str("path")
		r.data = d.buffer("data")
		r.version = d.i32("version")
	case opGetACL, opSync, opGetEphemerals, opGetAllChildrenNumber:
		r.path = d.str("path")
	case opSetACL:
		r.path = d.str("path")
		r.acl = d.acls("acl")
		r.version = d.i32("version")
	case opCheckWatches, opRemoveWatches, opAddWatch:
		r.path = d.str("path")
		r.flags = d.i32("type")
	case opSetWatches, opSetWatches2:
		r.relZxid = d.i64("relativeZxid")
		r.dataW = d.strs("dataWatches")
		r.existW = d.strs("existWatches")
		r.childW = d.strs("childWatches")
		if r.op == opSetWatches2 {
			r.persW = d.strs("persistentWatches")
			r.recW = d.strs("persistentRecursiveWatches")
		}
	case opAuth:
		r.authType = d.i32("auth type")
		r.scheme = d.str("scheme")
		r.auth = d.buffer("auth")
	default:
		// ping, closeSession, whoAmI and unknown ops: no body (or ignored).
		d.off = len(d.b)
	}
	return true
}

// connectRequest is the handshake (ConnectRequest; readOnly is optional:
// newer clients send it, go-zookeeper does not).
type connectRequest struct {
	protocolVersion int32
	lastZxidSeen    int64
	timeoutMs       int32
	sessionID       int64
	passwd          []byte
	readOnly        bool
	hasReadOnly     bool
}

func decodeConnect(b []byte) (connectRequest, error) {
	d := &decoder{b: b}
	var c connectRequest
	c.protocolVersion = d.i32("protocolVersion")
	c.lastZxidSeen = d.i64("lastZxidSeen")
	c.timeoutMs = d.i32("timeOut")
	c.sessionID = d.i64("sessionId")
	c.passwd = d.buffer("passwd")
	if d.err == nil && d.remaining() >= 1 {
		c.readOnly = d.boolean("readOnly")
		c.hasReadOnly = true
	}
	if d.err != nil {
		return c, d.err
	}
	if d.remaining() != 0 {
		return c, fmt.Errorf("%w: %d trailing bytes after connect request", errMalformed, d.remaining())
	}
	return c, nil
}

var opNames = map[int32]string{
	opNotification: "notification", opCreate: "create", opDelete: "delete", opExists: "exists",
	opGetData: "getData", opSetData: "setData", opGetACL: "getACL", opSetACL: "setACL",
	opGetChildren: "getChildren", opSync: "sync", opPing: "ping", opGetChildren2: "getChildren2",
	opCheck: "check", opMulti: "multi", opCreate2: "create2", opReconfig: "reconfig",
	opCheckWatches: "checkWatches", opRemoveWatches: "removeWatches",
	opCreateContainer: "createContainer", opDeleteContainer: "deleteContainer",
	opCreateTTL: "createTTL", opMultiRead: "multiRead", opAuth: "auth", opSetWatches: "setWatches",
	opSASL: "sasl", opGetEphemerals: "getEphemerals", opGetAllChildrenNumber: "getAllChildrenNumber",
	opSetWatches2: "setWatches2", opAddWatch: "addWatch", opWhoAmI: "whoAmI",
	opCreateSession: "createSession", opCloseSession: "closeSession", opError: "error",
}

func opName(op int32) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return fmt.Sprintf("op(%d)", op)
}
