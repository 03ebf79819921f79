package zkwire

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"strom/raftmeta"
)

// The raw differential tests send the requests go-zookeeper has no API for
// (addWatch, removeWatches, create2, whoAmI, ...) by hand to the shim and a
// real ZooKeeper and require the same replies byte for byte: the reply
// header's err and the whole body, with the zxids and times of stats
// masked, and the same watch events (type, state, path) before each reply.
// Real clients (the Java client inside Fluss, Curator) read these bodies,
// and a body of the wrong length drops their connection.

// rawStep is one request of a raw case: op and its record, built with the
// case's root (every path of the case is under it).
type rawStep struct {
	op   int32
	body func(e *encoder, root string)
}

// rawCase is one scripted exchange over one raw connection.
type rawCase struct {
	name  string
	steps []rawStep
}

func rawPath(root, p string) string { return strings.TrimSuffix(root+p, "/") }

func stepCreate(op int32, p string, flags int32) rawStep {
	return rawStep{op, func(e *encoder, root string) {
		e.str(rawPath(root, p))
		e.buffer([]byte("d"))
		e.acls([]raftmeta.ACL{{Perms: 31, Scheme: "world", ID: "anyone"}})
		e.i32(flags)
	}}
}

func stepSetData(p string) rawStep {
	return rawStep{opSetData, func(e *encoder, root string) { e.str(rawPath(root, p)); e.buffer([]byte("x")); e.i32(-1) }}
}

func stepDelete(p string) rawStep {
	return rawStep{opDelete, func(e *encoder, root string) { e.str(rawPath(root, p)); e.i32(-1) }}
}

// stepPathInt is the record of addWatch (mode), checkWatches and
// removeWatches (watcher type): path, i32.
func stepPathInt(op int32, p string, v int32) rawStep {
	return rawStep{op, func(e *encoder, root string) { e.str(rawPath(root, p)); e.i32(v) }}
}

// statAt reports where a successful reply to op carries a Stat (-1: none).
func statAt(op int32, body []byte) int {
	d := &decoder{b: body}
	switch op {
	case opExists, opSetData, opSetACL:
	case opGetData:
		d.buffer("data")
	case opGetChildren2:
		d.strs("children")
	case opCreate2, opCreateTTL, opCreateContainer:
		d.str("path")
	default:
		return -1
	}
	if d.err != nil || d.remaining() < 68 {
		return -1
	}
	return d.off
}

// maskStat zeroes a Stat's zxids and times, and its ephemeral owner to 1
// when set: they differ between any two servers.
func maskStat(st []byte) {
	for _, f := range [][2]int{{0, 32}, {60, 68}} {
		clear(st[f[0]:f[1]])
	}
	owner := st[44:52]
	if strings.Trim(string(owner), "\x00") != "" {
		clear(owner)
		owner[7] = 1
	}
}

// runRaw runs c on a fresh connection to addr under root and returns its
// transcript: per step the reply's err, body (hex, stats masked) and the
// events that came before it; a final exists collects late events.
func runRaw(t *testing.T, addr, root string, c rawCase) []string {
	rc := dialRaw(t, addr, 10000)
	steps := append([]rawStep{stepCreate(opCreate, "", 0)}, c.steps...)
	steps = append(steps, rawStep{opExists, func(e *encoder, root string) { e.str(root); e.boolean(false) }})
	var out []string
	for _, s := range steps {
		code, d, evs := rc.call(s.op, func(e *encoder) { s.body(e, root) })
		body := append([]byte(nil), d.b[d.off:]...)
		if at := statAt(s.op, body); code == codeOK && at >= 0 {
			maskStat(body[at : at+68])
		}
		req := &encoder{}
		s.body(req, root)
		line := fmt.Sprintf("%s(%s) -> err %d body [%s]", opName(s.op), strings.ReplaceAll(hex.EncodeToString(req.b), hex.EncodeToString([]byte(root)), "<root>"), code, hex.EncodeToString(body))
		for _, ev := range evs {
			line += fmt.Sprintf("\n      event %s %s", ev.Type, strings.TrimPrefix(ev.Path, root))
		}
		out = append(out, line)
	}
	return out
}

// runRawCases runs every case against the real ZooKeeper and the shim and
// requires identical transcripts.
func runRawCases(t *testing.T, cases []rawCase) {
	real := realZooKeeper(t)
	_, s := newShim(t)
	rc, _ := connect(t, []string{real}, 10*time.Second, nil)
	run := fmt.Sprintf("/strom-raw-%d", time.Now().UnixNano())
	t.Cleanup(func() { deleteTree(rc, run) })
	for _, addr := range []string{real, s.Addr().String()} {
		code, _, _ := dialRaw(t, addr, 10000).call(opCreate, func(e *encoder) { stepCreate(opCreate, "", 0).body(e, run) })
		if code != codeOK {
			t.Fatalf("create %s on %s: %d", run, addr, code)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := run + "/" + c.name
			want := runRaw(t, real, root, c)
			got := runRaw(t, s.Addr().String(), root, c)
			if strings.Join(want, "\n") != strings.Join(got, "\n") {
				t.Fatalf("shim diverges from ZooKeeper:\nzookeeper:\n  %s\nshim:\n  %s", strings.Join(want, "\n  "), strings.Join(got, "\n  "))
			}
		})
	}
}

func TestRawAddWatchAgainstZooKeeper(t *testing.T) {
	runRawCases(t, []rawCase{
		{"persistent", []rawStep{
			stepPathInt(opAddWatch, "/p", 0),
			stepCreate(opCreate, "/p", 0),
			stepCreate(opCreate, "/p/kid", 0),
			stepSetData("/p"),
			stepSetData("/p"),
			stepDelete("/p/kid"),
			stepDelete("/p"),
			stepCreate(opCreate, "/p", 0),
		}},
		{"recursive", []rawStep{
			stepPathInt(opAddWatch, "/t", 1),
			stepCreate(opCreate, "/t", 0),
			stepCreate(opCreate, "/t/a", 0),
			stepCreate(opCreate, "/t/a/b", 0),
			stepSetData("/t/a/b"),
			stepDelete("/t/a/b"),
			stepSetData("/t"),
		}},
		{"badMode", []rawStep{stepPathInt(opAddWatch, "/p", 2)}},
	})
}
