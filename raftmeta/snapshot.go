package raftmeta

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"slices"
)

// Snapshot format (big-endian, see DESIGN.md):
//
//	header:  magic "RMETASNP" | version u16 (2; 1 is still read) | lastZxid i64
//	records: kind u8 then the body
//	  1 node:    path str | data bytes | czxid mzxid pzxid ctime mtime i64 |
//	             version cversion aversion i32 | ephemeralOwner i64 | acl list |
//	             (version 2:) childCap i32 | childNext u64 | stamp u64
//
// childCap and childNext are the node's childOrder state, stamp its own
// insertion stamp in its parent's (0 for the root). A version 1 snapshot
// has none: children are then added in path order, as a restarted
// ZooKeeper re-adds them from its snapshot.
//	  2 session: id i64 | timeoutMs i64 | password bytes
//	  255 end:   nodeCount u32 | sessionCount u32 | crc32c u32 of every byte before it
//
// Nodes come in byte-wise path order (so every parent precedes its children)
// and sessions in id order, so the same state always encodes to the same
// bytes. Nothing may follow the end record.

var snapshotMagic = []byte("RMETASNP")

const (
	snapshotVersion = 2

	recNode    = 1
	recSession = 2
	recEnd     = 255
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func encodeSnapshot(t *tree) []byte {
	e := &encoder{b: make([]byte, 0, 4096)}
	e.b = append(e.b, snapshotMagic...)
	e.b = append(e.b, 0, snapshotVersion)
	e.i64(t.lastZxid)
	paths := make([]string, 0, len(t.nodes))
	for p := range t.nodes {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		n := t.nodes[p]
		e.u8(recNode)
		e.str(p)
		e.bytes(n.data)
		e.i64(n.st.czxid)
		e.i64(n.st.mzxid)
		e.i64(n.st.pzxid)
		e.i64(n.st.ctime)
		e.i64(n.st.mtime)
		e.i32(n.st.version)
		e.i32(n.st.cversion)
		e.i32(n.st.aversion)
		e.i64(n.st.ephemeralOwner)
		e.acls(n.acl)
		e.i32(n.order.cap)
		e.u64(n.order.next)
		var stamp uint64
		if p != "/" {
			parent, name := splitPath(p)
			if pn := t.nodes[parent]; pn != nil {
				stamp = pn.order.stamps[name]
			}
		}
		e.u64(stamp)
	}
	sessions := t.sortedSessions()
	for _, s := range sessions {
		e.u8(recSession)
		e.i64(s.id)
		e.i64(s.timeoutMs)
		e.bytes(s.password)
	}
	e.u8(recEnd)
	e.u32(uint32(len(paths)))
	e.u32(uint32(len(sessions)))
	e.u32(crc32.Checksum(e.b, crcTable))
	return e.b
}

// decodeSnapshot parses and checks a snapshot into a new tree. Any problem
// (bad magic or version, truncation, bad order, a node whose parent is
// missing or ephemeral, an ephemeral whose session is missing, a checksum
// mismatch) is an error wrapping ErrCorrupt; it never panics.
func decodeSnapshot(b []byte) (*tree, error) {
	fail := func(format string, args ...any) (*tree, error) {
		return nil, fmt.Errorf("raftmeta: restore snapshot: %w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if len(b) < len(snapshotMagic)+2+8 || !bytes.Equal(b[:len(snapshotMagic)], snapshotMagic) {
		return fail("bad magic")
	}
	d := &decoder{b: b, off: len(snapshotMagic)}
	if v := d.u8("version hi"); v != 0 {
		return fail("unsupported version")
	}
	version := d.u8("version")
	if version != 1 && version != snapshotVersion {
		return fail("unsupported version %d", version)
	}
	type parentStamp struct {
		parent string
		stamp  uint64
	}
	seen := make(map[parentStamp]bool)
	t := emptyTree()
	t.lastZxid = d.i64("last zxid")
	var lastPath string
	var lastSession int64
	nodes, sessions := 0, 0
	for d.err == nil {
		kind := d.u8("record kind")
		if d.err != nil {
			break
		}
		switch kind {
		case recNode:
			if sessions > 0 {
				return fail("node record after session records")
			}
			p := d.str("node path")
			n := &znode{children: make(map[string]struct{})}
			n.data = d.bytes("node data")
			n.st.czxid = d.i64("czxid")
			n.st.mzxid = d.i64("mzxid")
			n.st.pzxid = d.i64("pzxid")
			n.st.ctime = d.i64("ctime")
			n.st.mtime = d.i64("mtime")
			n.st.version = d.i32("version")
			n.st.cversion = d.i32("cversion")
			n.st.aversion = d.i32("aversion")
			n.st.ephemeralOwner = d.i64("ephemeral owner")
			n.acl = d.acls("node acl")
			var stamp uint64
			if version >= 2 {
				n.order.cap = d.i32("child capacity")
				n.order.next = d.u64("child stamp counter")
				stamp = d.u64("stamp")
			}
			if d.err != nil {
				break
			}
			if c := n.order.cap; (c == 0) != (n.order.next == 0) || (c != 0 && (c < 8 || c > 1<<30 || c&(c-1) != 0)) {
				return fail("node %q has child capacity %d and counter %d", p, c, n.order.next)
			}
			if err := validatePath(p); err != nil {
				return fail("node path: %v", err)
			}
			if nodes == 0 {
				if p != "/" {
					return fail("first node is %q, not the root", p)
				}
				if stamp != 0 {
					return fail("root has stamp %d", stamp)
				}
			} else {
				if p <= lastPath {
					return fail("node %q out of order after %q", p, lastPath)
				}
				parentPath, name := splitPath(p)
				parent := t.nodes[parentPath]
				if parent == nil {
					return fail("node %q has no parent", p)
				}
				if isSessionOwner(parent.st.ephemeralOwner) {
					return fail("node %q is the child of an ephemeral", p)
				}
				if version < 2 {
					parent.addChild(name)
				} else {
					key := parentStamp{parentPath, stamp}
					if stamp == 0 || stamp > parent.order.next || seen[key] {
						return fail("node %q has stamp %d (parent counter %d)", p, stamp, parent.order.next)
					}
					seen[key] = true
					parent.restoreChild(name, stamp)
				}
			}
			if n.acl == nil {
				return fail("node %q has no ACL", p)
			}
			t.nodes[p] = n
			t.index(p, n.st.ephemeralOwner)
			lastPath = p
			nodes++
		case recSession:
			s := &sessionState{}
			s.id = d.i64("session id")
			s.timeoutMs = d.i64("session timeout")
			s.password = d.bytes("session password")
			if d.err != nil {
				break
			}
			if s.id <= 0 || (sessions > 0 && s.id <= lastSession) {
				return fail("session 0x%x out of order", s.id)
			}
			t.sessions[s.id] = s
			lastSession = s.id
			sessions++
		case recEnd:
			wantNodes := d.u32("node count")
			wantSessions := d.u32("session count")
			crcAt := d.off
			crc := d.u32("checksum")
			d.end("snapshot")
			if d.err != nil {
				break
			}
			if uint64(wantNodes) != uint64(nodes) || uint64(wantSessions) != uint64(sessions) {
				return fail("counts %d/%d do not match records %d/%d", wantNodes, wantSessions, nodes, sessions)
			}
			if got := crc32.Checksum(b[:crcAt], crcTable); got != crc {
				return fail("checksum mismatch")
			}
			if nodes == 0 {
				return fail("no root node")
			}
			for owner := range t.ephemerals {
				if _, ok := t.sessions[owner]; !ok {
					return fail("ephemerals of missing session 0x%x", owner)
				}
			}
			return t, nil
		default:
			return fail("unknown record kind %d", kind)
		}
	}
	return nil, fmt.Errorf("raftmeta: restore snapshot: %w", d.err)
}
