package zkwire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"strom/raftmeta"
)

// Jute, ZooKeeper's serialization: big-endian fixed-width integers, booleans
// as one byte, buffers and strings as an i32 length then the bytes (-1 for
// null), vectors as an i32 count (-1 for null) then the elements.

// errMalformed marks a packet that does not decode.
var errMalformed = errors.New("zkwire: malformed packet")

// encoder appends jute values to b.
type encoder struct{ b []byte }

func (e *encoder) i32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) i64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) boolean(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) buffer(v []byte) {
	if v == nil {
		e.i32(-1)
		return
	}
	e.i32(int32(len(v)))
	e.b = append(e.b, v...)
}

func (e *encoder) str(v string) {
	e.i32(int32(len(v)))
	e.b = append(e.b, v...)
}

func (e *encoder) strs(v []string) {
	e.i32(int32(len(v)))
	for _, s := range v {
		e.str(s)
	}
}

// stat encodes a Stat as ZooKeeper sends it. raftmeta's Cversion is the
// stored count of child creates (ZooKeeper's StatPersisted, which also
// numbers sequential children); ZooKeeper reports creates plus deletes,
// computed as 2*cversion - numChildren (DataNode.copyStat), so /zookeeper
// shows -2 on a fresh server. The ephemeral owner of a container or TTL
// node (ZooKeeper's EphemeralType encodings, both negative; session ids,
// Raft indexes, are positive) is reported as 0, as DataNode.copyStat does.
func (e *encoder) stat(s raftmeta.Stat) {
	owner := max(s.EphemeralOwner, 0)
	e.i64(s.Czxid)
	e.i64(s.Mzxid)
	e.i64(s.Ctime)
	e.i64(s.Mtime)
	e.i32(s.Version)
	e.i32(2*s.Cversion - s.NumChildren)
	e.i32(s.Aversion)
	e.i64(owner)
	e.i32(s.DataLength)
	e.i32(s.NumChildren)
	e.i64(s.Pzxid)
}

func (e *encoder) acls(v []raftmeta.ACL) {
	e.i32(int32(len(v)))
	for _, a := range v {
		e.i32(a.Perms)
		e.str(a.Scheme)
		e.str(a.ID)
	}
}

// decoder reads jute values from b. The first failure sticks in err and
// every later read returns a zero value, so callers check err once.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or invalid %s at byte %d", errMalformed, what, d.off)
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.fail(what)
		return nil
	}
	v := d.b[d.off : d.off+n]
	d.off += n
	return v
}

func (d *decoder) i32(what string) int32 {
	v := d.take(4, what)
	if v == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(v))
}

func (d *decoder) i64(what string) int64 {
	v := d.take(8, what)
	if v == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func (d *decoder) boolean(what string) bool {
	v := d.take(1, what)
	return v != nil && v[0] != 0
}

// buffer returns a copy (nil for jute null).
func (d *decoder) buffer(what string) []byte {
	n := d.i32(what)
	if d.err != nil || n == -1 {
		return nil
	}
	v := d.take(int(n), what)
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

func (d *decoder) str(what string) string {
	n := d.i32(what)
	if d.err != nil || n == -1 {
		return ""
	}
	return string(d.take(int(n), what))
}

// count reads a vector length; each element takes at least minSize bytes,
// which bounds the count by what is left (no huge allocation on garbage).
func (d *decoder) count(what string, minSize int) int {
	n := d.i32(what)
	if d.err != nil || n == -1 {
		return 0
	}
	if n < 0 || int(n) > (len(d.b)-d.off)/minSize {
		d.fail(what)
		return 0
	}
	return int(n)
}

func (d *decoder) strs(what string) []string {
	n := d.count(what, 4)
	var out []string
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, d.str(what))
	}
	return out
}

func (d *decoder) acls(what string) []raftmeta.ACL {
	n := d.count(what, 12)
	out := make([]raftmeta.ACL, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, raftmeta.ACL{Perms: d.i32(what), Scheme: d.str(what), ID: d.str(what)})
	}
	return out
}

func (d *decoder) remaining() int { return len(d.b) - d.off }
