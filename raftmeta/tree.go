package raftmeta

import (
	"fmt"
	"slices"
	"time"
)

// znode is one node of the tree. Its data slice is never modified in place
// (setData replaces it), so readers may share it while holding the lock.
type znode struct {
	data     []byte
	acl      []ACL
	st       persistedStat
	children map[string]struct{}
	order    childOrder // ZooKeeper's iteration order of children (childorder.go)
}

// persistedStat is ZooKeeper's StatPersisted: the stat fields that are stored;
// DataLength and NumChildren are derived.
type persistedStat struct {
	czxid, mzxid, pzxid         int64
	ctime, mtime                int64
	version, cversion, aversion int32
	ephemeralOwner              int64
}

func (n *znode) stat() Stat {
	return Stat{
		Czxid:          n.st.czxid,
		Mzxid:          n.st.mzxid,
		Pzxid:          n.st.pzxid,
		Ctime:          n.st.ctime,
		Mtime:          n.st.mtime,
		Version:        n.st.version,
		Cversion:       n.st.cversion,
		Aversion:       n.st.aversion,
		EphemeralOwner: n.st.ephemeralOwner,
		DataLength:     int32(len(n.data)),
		NumChildren:    int32(len(n.children)),
	}
}

// addChild adds name as the newest child.
func (n *znode) addChild(name string) {
	n.children[name] = struct{}{}
	n.order.add(name, n.children)
}

// removeChild removes name and returns its insertion stamp.
func (n *znode) removeChild(name string) uint64 {
	delete(n.children, name)
	st := n.order.stamps[name]
	delete(n.order.stamps, name)
	return st
}

// restoreChild puts back a child removed by removeChild (undo).
func (n *znode) restoreChild(name string, stamp uint64) {
	n.children[name] = struct{}{}
	if n.order.stamps == nil {
		n.order.stamps = make(map[string]uint64)
	}
	n.order.stamps[name] = stamp
}

// zkChildren returns the children in ZooKeeper's order.
func (n *znode) zkChildren() []string { return n.order.ordered(n.children) }

func (n *znode) sortedChildren() []string {
	out := make([]string, 0, len(n.children))
	for c := range n.children {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// sessionState is a session as the FSM stores it.
type sessionState struct {
	id        int64
	timeoutMs int64
	password  []byte
}

func (s *sessionState) public() Session {
	return Session{ID: s.id, Password: slices.Clone(s.password), Timeout: time.Duration(s.timeoutMs) * time.Millisecond}
}

// tree is the replicated state: the znode tree, its indexes, and the
// sessions. It has no lock of its own; the fsm guards it.
type tree struct {
	nodes      map[string]*znode
	ephemerals map[int64]map[string]struct{} // session id -> paths it owns
	containers map[string]struct{}
	ttls       map[string]struct{}
	sessions   map[int64]*sessionState
	lastZxid   int64 // index of the last applied command
}

func emptyTree() *tree {
	return &tree{
		nodes:      make(map[string]*znode),
		ephemerals: make(map[int64]map[string]struct{}),
		containers: make(map[string]struct{}),
		ttls:       make(map[string]struct{}),
		sessions:   make(map[int64]*sessionState),
	}
}

// newTree returns the tree a fresh ZooKeeper server starts with: "/" with a
// zero stat, and the reserved "/zookeeper", "/zookeeper/quota" and
// "/zookeeper/config" (READ_ACL_UNSAFE, aversion -1 as ZooKeeper sets it).
func newTree() *tree {
	t := emptyTree()
	t.nodes["/"] = &znode{data: []byte{}, acl: OpenACL(), children: map[string]struct{}{}}
	t.nodes["/zookeeper"] = &znode{data: []byte{}, acl: OpenACL(), children: map[string]struct{}{}}
	t.nodes["/zookeeper/quota"] = &znode{data: []byte{}, acl: OpenACL(), children: map[string]struct{}{}}
	t.nodes["/zookeeper/config"] = &znode{data: []byte{}, acl: readACL(), st: persistedStat{aversion: -1}, children: map[string]struct{}{}}
	// In ZooKeeper's DataTree constructor order.
	t.nodes["/"].addChild("zookeeper")
	t.nodes["/zookeeper"].addChild("quota")
	t.nodes["/zookeeper"].addChild("config")
	return t
}

func (t *tree) index(path string, owner int64) {
	switch {
	case owner == 0:
	case owner == containerOwner:
		t.containers[path] = struct{}{}
	case isTTLOwner(owner):
		t.ttls[path] = struct{}{}
	default:
		set := t.ephemerals[owner]
		if set == nil {
			set = make(map[string]struct{})
			t.ephemerals[owner] = set
		}
		set[path] = struct{}{}
	}
}

func (t *tree) unindex(path string, owner int64) {
	switch {
	case owner == 0:
	case owner == containerOwner:
		delete(t.containers, path)
	case isTTLOwner(owner):
		delete(t.ttls, path)
	default:
		if set := t.ephemerals[owner]; set != nil {
			delete(set, path)
			if len(set) == 0 {
				delete(t.ephemerals, owner)
			}
		}
	}
}

func (t *tree) ephemeralPaths(session int64) []string {
	set := t.ephemerals[session]
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (t *tree) sortedSessions() []*sessionState {
	out := make([]*sessionState, 0, len(t.sessions))
	for _, s := range t.sessions {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *sessionState) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return out
}

// trigger is one watch trigger produced by a change, in ZooKeeper's terms:
// NodeCreated/NodeDataChanged fire the data watches of Path, NodeDeleted the
// data and child watches of Path, NodeChildrenChanged the child watches of
// Path (the parent of the changed node).
type trigger struct {
	typ  EventType
	path string
}

// txn applies the operations of one command to the tree, keeping an undo log
// so that a failed multi leaves the tree exactly as it was, and collecting the
// watch triggers to fire if the command succeeds.
type txn struct {
	t        *tree
	zxid     int64
	now      int64 // command time, ms since epoch
	session  int64 // 0: no session (system writes)
	undo     []func()
	triggers []trigger
}

func (x *txn) rollback() {
	for i := len(x.undo) - 1; i >= 0; i-- {
		x.undo[i]()
	}
	x.undo = nil
	x.triggers = nil
}

func (x *txn) fire(typ EventType, path string) {
	x.triggers = append(x.triggers, trigger{typ: typ, path: path})
}

func (x *txn) checkSession(path string) error {
	if x.session == 0 {
		return nil
	}
	if _, ok := x.t.sessions[x.session]; !ok {
		return fmt.Errorf("%w: session 0x%x (%s)", ErrSessionExpired, x.session, path)
	}
	return nil
}

// apply runs one operation. On error the tree is unchanged by this op (ops
// validate fully before mutating), but earlier ops of the txn remain until
// rollback.
func (x *txn) apply(op *Op) OpResult {
	var res OpResult
	switch op.Kind {
	case OpCreate:
		res = x.create(op)
	case OpDelete:
		res = x.delete(op)
	case OpSetData:
		res = x.setData(op)
	case OpCheck:
		res = x.check(op)
	case OpSetACL:
		res = x.setACL(op)
	default:
		res = OpResult{Path: op.Path, Err: fmt.Errorf("%w: unknown op kind %d", ErrBadArguments, op.Kind)}
	}
	return res
}

// fixACL applies ZooKeeper's defaulting: none means OPEN_ACL_UNSAFE. It
// rejects entries without a scheme or id.
func fixACL(acl []ACL) ([]ACL, error) {
	if len(acl) == 0 {
		return OpenACL(), nil
	}
	for _, a := range acl {
		if a.Scheme == "" || a.ID == "" {
			return nil, fmt.Errorf("%w: entry %+v needs a scheme and an id", ErrInvalidACL, a)
		}
	}
	return slices.Clone(acl), nil
}

// ttlMillis validates op's TTL against its mode and returns it in ms.
func ttlMillis(op *Op) (int64, error) {
	if !op.Mode.IsTTL() {
		if op.TTL != 0 {
			return 0, fmt.Errorf("%w: TTL given for mode %s", ErrBadArguments, op.Mode)
		}
		return 0, nil
	}
	if op.TTL <= 0 || op.TTL > MaxTTL || op.TTL%time.Millisecond != 0 {
		return 0, fmt.Errorf("%w: TTL %s must be whole milliseconds in [1ms, %s]", ErrBadArguments, op.TTL, MaxTTL)
	}
	return op.TTL.Milliseconds(), nil
}

func (x *txn) create(op *Op) OpResult {
	res := OpResult{Path: op.Path}
	if !op.Mode.valid() {
		res.Err = fmt.Errorf("%w: unknown create mode %d", ErrBadArguments, op.Mode)
		return res
	}
	seq := op.Mode.IsSequential()
	if err := validateCreatePath(op.Path, seq); err != nil {
		res.Err = err
		return res
	}
	ttl, err := ttlMillis(op)
	if err != nil {
		res.Err = err
		return res
	}
	acl, err := fixACL(op.ACL)
	if err != nil {
		res.Err = err
		return res
	}
	if op.Mode.IsEphemeral() && x.session == 0 {
		res.Err = fmt.Errorf("%w: ephemeral %s needs a session", ErrSessionExpired, op.Path)
		return res
	}
	if err := x.checkSession(op.Path); err != nil {
		res.Err = err
		return res
	}
	parentPath, _ := splitPath(op.Path)
	parent := x.t.nodes[parentPath]
	if parent == nil {
		res.Err = pathErr(ErrNoNode, parentPath)
		return res
	}
	path := op.Path
	if seq {
		path += fmt.Sprintf("%010d", parent.st.cversion)
		res.Path = path
	}
	if _, exists := x.t.nodes[path]; exists {
		res.Err = pathErr(ErrNodeExists, path)
		return res
	}
	if isSessionOwner(parent.st.ephemeralOwner) {
		res.Err = pathErr(ErrNoChildrenForEphemerals, path)
		return res
	}
	var owner int64
	switch {
	case op.Mode.IsContainer():
		owner = containerOwner
	case op.Mode.IsTTL():
		owner = ttlOwner(ttl)
	case op.Mode.IsEphemeral():
		owner = x.session
	}
	_, name := splitPath(path)
	n := &znode{
		data: op.Data,
		acl:  acl,
		st: persistedStat{
			czxid: x.zxid, mzxid: x.zxid, pzxid: x.zxid,
			ctime: x.now, mtime: x.now,
			ephemeralOwner: owner,
		},
		children: make(map[string]struct{}),
	}
	oldCversion, oldPzxid := parent.st.cversion, parent.st.pzxid
	oldNext, oldCap := parent.order.next, parent.order.cap
	parent.st.cversion++
	parent.st.pzxid = x.zxid
	parent.addChild(name)
	x.t.nodes[path] = n
	x.t.index(path, owner)
	t := x.t
	x.undo = append(x.undo, func() {
		t.unindex(path, owner)
		delete(t.nodes, path)
		parent.removeChild(name)
		parent.order.next, parent.order.cap = oldNext, oldCap
		parent.st.cversion, parent.st.pzxid = oldCversion, oldPzxid
	})
	x.fire(NodeCreated, path)
	x.fire(NodeChildrenChanged, parentPath)
	res.Stat = n.stat()
	return res
}

func checkVersion(path string, have, want int32) error {
	if want != -1 && want != have {
		return fmt.Errorf("%w: %s has version %d, expected %d", ErrBadVersion, path, have, want)
	}
	return nil
}

func (x *txn) delete(op *Op) OpResult {
	res := OpResult{Path: op.Path}
	if err := validatePath(op.Path); err != nil {
		res.Err = err
		return res
	}
	if reservedPaths[op.Path] {
		res.Err = fmt.Errorf("%w: %s is reserved", ErrBadArguments, op.Path)
		return res
	}
	if err := x.checkSession(op.Path); err != nil {
		res.Err = err
		return res
	}
	n := x.t.nodes[op.Path]
	if n == nil {
		res.Err = pathErr(ErrNoNode, op.Path)
		return res
	}
	if err := checkVersion(op.Path, n.st.version, op.Version); err != nil {
		res.Err = err
		return res
	}
	if len(n.children) > 0 {
		res.Err = pathErr(ErrNotEmpty, op.Path)
		return res
	}
	x.removeNode(op.Path, n)
	return res
}

// removeNode deletes a childless node. As in ZooKeeper, the parent's pzxid
// moves to this zxid but its cversion does not change (only creates bump it,
// which keeps sequence numbers increasing).
func (x *txn) removeNode(path string, n *znode) {
	parentPath, name := splitPath(path)
	parent := x.t.nodes[parentPath]
	oldPzxid := parent.st.pzxid
	stamp := parent.removeChild(name)
	if x.zxid > parent.st.pzxid {
		parent.st.pzxid = x.zxid
	}
	delete(x.t.nodes, path)
	owner := n.st.ephemeralOwner
	x.t.unindex(path, owner)
	t := x.t
	x.undo = append(x.undo, func() {
		t.nodes[path] = n
		t.index(path, owner)
		parent.restoreChild(name, stamp)
		parent.st.pzxid = oldPzxid
	})
	x.fire(NodeDeleted, path)
	x.fire(NodeChildrenChanged, parentPath)
}

func (x *txn) setData(op *Op) OpResult {
	res := OpResult{Path: op.Path}
	if err := validatePath(op.Path); err != nil {
		res.Err = err
		return res
	}
	if err := x.checkSession(op.Path); err != nil {
		res.Err = err
		return res
	}
	n := x.t.nodes[op.Path]
	if n == nil {
		res.Err = pathErr(ErrNoNode, op.Path)
		return res
	}
	if err := checkVersion(op.Path, n.st.version, op.Version); err != nil {
		res.Err = err
		return res
	}
	oldData, oldSt := n.data, n.st
	n.data = op.Data
	n.st.version++ // wraps like Java's int
	n.st.mzxid = x.zxid
	n.st.mtime = x.now
	x.undo = append(x.undo, func() { n.data, n.st = oldData, oldSt })
	x.fire(NodeDataChanged, op.Path)
	res.Stat = n.stat()
	return res
}

func (x *txn) check(op *Op) OpResult {
	res := OpResult{Path: op.Path}
	if err := validatePath(op.Path); err != nil {
		res.Err = err
		return res
	}
	if err := x.checkSession(op.Path); err != nil {
		res.Err = err
		return res
	}
	n := x.t.nodes[op.Path]
	if n == nil {
		res.Err = pathErr(ErrNoNode, op.Path)
		return res
	}
	res.Err = checkVersion(op.Path, n.st.version, op.Version)
	return res
}

func (x *txn) setACL(op *Op) OpResult {
	res := OpResult{Path: op.Path}
	if err := validatePath(op.Path); err != nil {
		res.Err = err
		return res
	}
	acl, err := fixACL(op.ACL)
	if err != nil {
		res.Err = err
		return res
	}
	if err := x.checkSession(op.Path); err != nil {
		res.Err = err
		return res
	}
	n := x.t.nodes[op.Path]
	if n == nil {
		res.Err = pathErr(ErrNoNode, op.Path)
		return res
	}
	if err := checkVersion(op.Path, n.st.aversion, op.Version); err != nil {
		res.Err = err
		return res
	}
	oldACL, oldAversion := n.acl, n.st.aversion
	n.acl = acl
	n.st.aversion++
	x.undo = append(x.undo, func() { n.acl, n.st.aversion = oldACL, oldAversion })
	res.Stat = n.stat()
	return res
}

// killSession removes a session and deletes its ephemerals in path order.
func (x *txn) killSession(id int64) error {
	s, ok := x.t.sessions[id]
	if !ok {
		return fmt.Errorf("%w: session 0x%x", ErrSessionExpired, id)
	}
	for _, p := range x.t.ephemeralPaths(id) {
		// Ephemerals never have children, so each can go directly.
		x.removeNode(p, x.t.nodes[p])
	}
	delete(x.t.sessions, id)
	t := x.t
	x.undo = append(x.undo, func() { t.sessions[id] = s })
	return nil
}

// deleteContainer deletes a container that has had children and has none,
// or a TTL node without children whose mtime is more than its TTL before the
// command time. Otherwise it changes nothing and says why.
func (x *txn) deleteContainer(path string) error {
	if err := validatePath(path); err != nil {
		return err
	}
	n := x.t.nodes[path]
	if n == nil {
		return pathErr(ErrNoNode, path)
	}
	if len(n.children) > 0 {
		return pathErr(ErrNotEmpty, path)
	}
	owner := n.st.ephemeralOwner
	switch {
	case owner == containerOwner:
		if n.st.cversion <= 0 {
			return fmt.Errorf("%w: container %s never had children", ErrBadVersion, path)
		}
	case isTTLOwner(owner):
		if x.now-n.st.mtime <= ttlOf(owner) {
			return fmt.Errorf("%w: TTL node %s has not expired", ErrBadVersion, path)
		}
	default:
		return fmt.Errorf("%w: %s is neither a container nor a TTL node", ErrBadVersion, path)
	}
	x.removeNode(path, n)
	return nil
}

// reapable lists, in path order, the containers and TTL nodes that
// deleteContainer would delete at time nowMs.
func (t *tree) reapable(nowMs int64) []string {
	var out []string
	for p := range t.containers {
		if n := t.nodes[p]; n != nil && len(n.children) == 0 && n.st.cversion > 0 {
			out = append(out, p)
		}
	}
	for p := range t.ttls {
		if n := t.nodes[p]; n != nil && len(n.children) == 0 && nowMs-n.st.mtime > ttlOf(n.st.ephemeralOwner) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
