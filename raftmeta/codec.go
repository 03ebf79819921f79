package raftmeta

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The binary encoding shared by commands and snapshots: big-endian fixed-size
// integers; byte strings as an int32 length then the bytes, length -1 meaning
// nil (as in ZooKeeper's jute); text strings the same but never nil.

// ErrCorrupt marks bytes that do not decode: a log entry or a snapshot.
var ErrCorrupt = errors.New("raftmeta: corrupt encoding")

type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) i32(v int32)  { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *encoder) i64(v int64)  { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }

func (e *encoder) bytes(v []byte) {
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

func (e *encoder) acls(v []ACL) {
	if v == nil {
		e.i32(-1)
		return
	}
	e.i32(int32(len(v)))
	for _, a := range v {
		e.i32(a.Perms)
		e.str(a.Scheme)
		e.str(a.ID)
	}
}

// decoder reads the encoding. The first problem sticks in err and every later
// read returns zero values, so callers check err once at the end. It never
// allocates more than the input could describe.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: at byte %d: %s", ErrCorrupt, d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > d.remaining() {
		d.fail("%s: need %d bytes, have %d", what, n, d.remaining())
		return nil
	}
	v := d.b[d.off : d.off+n]
	d.off += n
	return v
}

func (d *decoder) u8(what string) uint8 {
	v := d.take(1, what)
	if v == nil {
		return 0
	}
	return v[0]
}

func (d *decoder) u32(what string) uint32 {
	v := d.take(4, what)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

func (d *decoder) i32(what string) int32 { return int32(d.u32(what)) }

func (d *decoder) u64(what string) uint64 {
	v := d.take(8, what)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func (d *decoder) i64(what string) int64 { return int64(d.u64(what)) }

// bytes returns a copy, so decoded values never alias the input buffer.
func (d *decoder) bytes(what string) []byte {
	n := d.i32(what + " length")
	if d.err != nil {
		return nil
	}
	if n == -1 {
		return nil
	}
	if n < -1 {
		d.fail("%s: negative length %d", what, n)
		return nil
	}
	v := d.take(int(n), what)
	if v == nil {
		return nil
	}
	return append(make([]byte, 0, len(v)), v...)
}

func (d *decoder) str(what string) string {
	n := d.i32(what + " length")
	if d.err != nil {
		return ""
	}
	if n < 0 {
		d.fail("%s: negative length %d", what, n)
		return ""
	}
	return string(d.take(int(n), what))
}

// minACLSize is the encoded size of an ACL with empty strings.
const minACLSize = 4 + 4 + 4

func (d *decoder) acls(what string) []ACL {
	n := d.i32(what + " count")
	if d.err != nil || n == -1 {
		return nil
	}
	if n < -1 || int(n) > d.remaining()/minACLSize {
		d.fail("%s: bad count %d", what, n)
		return nil
	}
	out := make([]ACL, 0, n)
	for i := int32(0); i < n && d.err == nil; i++ {
		var a ACL
		a.Perms = d.i32(what + " perms")
		a.Scheme = d.str(what + " scheme")
		a.ID = d.str(what + " id")
		out = append(out, a)
	}
	if d.err != nil {
		return nil
	}
	return out
}

func (d *decoder) end(what string) {
	if d.err == nil && d.remaining() != 0 {
		d.fail("%s: %d trailing bytes", what, d.remaining())
	}
}
