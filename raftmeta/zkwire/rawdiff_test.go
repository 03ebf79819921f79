package zkwire

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
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
// case's root (every path of the case is under it) and the zxid of the
// last reply (for setWatches' relativeZxid). xid, when set, is sent instead
// of the next one (auth -4, setWatches -8).
type rawStep struct {
	op   int32
	body func(e *encoder, x rawCtx)
	xid  int32
	ttl  bool // createTTL or a TTL mode (see needsTTL)
	// zk39 marks a step ZooKeeper 3.9 answers differently from 3.8: the
	// shim follows 3.9 (watcher types Persistent and PersistentRecursive;
	// Children and Data match one-shot watches only); it is compared only
	// with a 3.9 server.
	zk39 bool
}

// rawCtx is what a step's record may depend on.
type rawCtx struct {
	root string
	zxid int64 // of the last reply
}

func (x rawCtx) path(p string) string { return strings.TrimSuffix(x.root+p, "/") }

// rawCase is one scripted exchange over one raw connection.
type rawCase struct {
	name  string
	steps []rawStep
}

// needsTTL reports whether c creates with a TTL mode or createTTL: a real
// ZooKeeper answers those Unimplemented unless started with
// -Dzookeeper.extendedTypesEnabled=true, while the shim always has TTL
// nodes; without it such cases are skipped.
func (c rawCase) needsTTL() bool {
	for _, s := range c.steps {
		if s.ttl {
			return true
		}
	}
	return false
}

func (c rawCase) needs39() bool {
	for _, s := range c.steps {
		if s.zk39 {
			return true
		}
	}
	return false
}

var worldACL = []raftmeta.ACL{{Perms: 31, Scheme: "world", ID: "anyone"}}

func stepCreate(op int32, p string, flags int32) rawStep {
	return rawStep{op: op, ttl: op == opCreateTTL || raftmeta.CreateMode(flags).IsTTL(), body: func(e *encoder, x rawCtx) {
		e.str(x.path(p))
		e.buffer([]byte("d"))
		e.acls(worldACL)
		e.i32(flags)
	}}
}

func stepCreateTTL(p string, flags int32, ttl int64) rawStep {
	return rawStep{op: opCreateTTL, ttl: true, body: func(e *encoder, x rawCtx) {
		stepCreate(opCreateTTL, p, flags).body(e, x)
		e.i64(ttl)
	}}
}

func stepSetData(p string) rawStep {
	return rawStep{op: opSetData, body: func(e *encoder, x rawCtx) { e.str(x.path(p)); e.buffer([]byte("x")); e.i32(-1) }}
}

func stepDelete(p string) rawStep {
	return rawStep{op: opDelete, body: func(e *encoder, x rawCtx) { e.str(x.path(p)); e.i32(-1) }}
}

// stepRead is the record of exists, getData, getChildren(2): path, watch.
func stepRead(op int32, p string, watch bool) rawStep {
	return rawStep{op: op, body: func(e *encoder, x rawCtx) { e.str(x.path(p)); e.boolean(watch) }}
}

// stepPathInt is the record of addWatch (mode), checkWatches and
// removeWatches (watcher type): path, i32.
func stepPathInt(op int32, p string, v int32) rawStep {
	return rawStep{op: op, body: func(e *encoder, x rawCtx) { e.str(x.path(p)); e.i32(v) }}
}

// stepPath is the record of sync, getEphemerals, getAllChildrenNumber: a path.
func stepPath(op int32, p string) rawStep {
	return rawStep{op: op, body: func(e *encoder, x rawCtx) { e.str(x.path(p)) }}
}

// stepSetWatches2 re-registers watches relative to the last reply's zxid
// (rel 0: relative to zxid 0, so every existing node changed since).
func stepSetWatches2(rel bool, data, exist, child, pers, rec []string) rawStep {
	return rawStep{op: opSetWatches2, xid: xidSetWatches, body: func(e *encoder, x rawCtx) {
		if rel {
			e.i64(x.zxid)
		} else {
			e.i64(0)
		}
		for _, ps := range [][]string{data, exist, child, pers, rec} {
			e.i32(int32(len(ps)))
			for _, p := range ps {
				e.str(x.path(p))
			}
		}
	}}
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
	case opGetACL:
		d.acls("acl")
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
// when it is the session's: they differ between any two servers. Other
// owners (container, TTL) are kept.
func maskStat(st []byte, sid int64) {
	clear(st[0:32])
	clear(st[60:68])
	if owner := st[44:52]; int64(binary.BigEndian.Uint64(owner)) == sid {
		binary.BigEndian.PutUint64(owner, 1)
	}
}

// maskMulti masks the stats in a multi's results.
func maskMulti(body []byte, sid int64) {
	d := &decoder{b: body}
	for d.err == nil {
		typ, done := d.i32("type"), d.boolean("done")
		d.i32("err")
		if done {
			return
		}
		switch typ {
		case opCreate:
			d.str("path")
		case opCreate2:
			d.str("path")
			fallthrough
		case opSetData:
			if st := d.take(68, "stat"); st != nil {
				maskStat(st, sid)
			}
		case opError:
			d.i32("err")
		}
	}
}

// runRaw runs c on a fresh connection to addr under root and returns its
// transcript: per step the reply's err, body (hex, stats masked) and the
// events that came before it; a final exists collects late events.
func runRaw(t *testing.T, addr, root string, c rawCase) []string {
	rc := dialRaw(t, addr, 10000)
	steps := append([]rawStep{stepCreate(opCreate, "", 0)}, c.steps...)
	steps = append(steps, stepRead(opExists, "", false))
	x := rawCtx{root: root}
	var out []string
	for _, s := range steps {
		req := &encoder{}
		s.body(req, x)
		desc := &encoder{} // the request without the zxid, which differs
		s.body(desc, rawCtx{root: root})
		code, zxid, body, evs := rc.callXid(s.xid, s.op, func(e *encoder) { e.b = append(e.b, req.b...) })
		x.zxid = zxid
		if at := statAt(s.op, body); code == codeOK && at >= 0 {
			maskStat(body[at:at+68], rc.sid)
		}
		if s.op == opMulti {
			maskMulti(body, rc.sid)
		}
		line := fmt.Sprintf("%s(%s) -> err %d body [%s]", opName(s.op),
			strings.ReplaceAll(hex.EncodeToString(desc.b), hex.EncodeToString([]byte(root)), "<root>"), code,
			strings.ReplaceAll(hex.EncodeToString(body), hex.EncodeToString([]byte(root)), "<root>"))
		for _, ev := range evs {
			line += fmt.Sprintf("\n      event %s %s", ev.Type, strings.TrimPrefix(ev.Path, root))
		}
		out = append(out, line)
	}
	return out
}

// deleteTree deletes p and everything under it.
func (rc *rawClient) deleteTree(p string) {
	code, d, _ := rc.call(opGetChildren, func(e *encoder) { e.str(p); e.boolean(false) })
	if code != codeOK {
		return
	}
	for _, k := range d.strs("children") {
		rc.deleteTree(p + "/" + k)
	}
	rc.call(opDelete, func(e *encoder) { e.str(p); e.i32(-1) })
}

// serverVersion is the version a server reports to srvr ("3.8.0-...").
func serverVersion(t *testing.T, addr string) string {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	v, ok := strings.CutPrefix(string(b), "Zookeeper version: ")
	if !ok {
		t.Fatalf("srvr on %s: %q", addr, b)
	}
	return v
}

// runRawCases runs every case against the real ZooKeeper and the shim and
// requires identical transcripts.
func runRawCases(t *testing.T, cases []rawCase) {
	real := realZooKeeper(t)
	_, s := newShim(t)
	run := fmt.Sprintf("/strom-raw-%d", time.Now().UnixNano())
	cleaner := dialRaw(t, real, 60000)
	t.Cleanup(func() { cleaner.deleteTree(run) })
	for _, addr := range []string{real, s.Addr().String()} {
		code, _, _ := dialRaw(t, addr, 10000).call(opCreate, func(e *encoder) { stepCreate(opCreate, "", 0).body(e, rawCtx{root: run}) })
		if code != codeOK {
			t.Fatalf("create %s on %s: %d", run, addr, code)
		}
	}
	// Does the real ZooKeeper have TTL nodes?
	code, _, _ := dialRaw(t, real, 10000).call(opCreateTTL, func(e *encoder) { stepCreateTTL("/ttl", 5, 1000).body(e, rawCtx{root: run}) })
	ttl := code != codeUnimplemented
	zk39 := serverVersion(t, real) >= "3.9"
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.needsTTL() && !ttl {
				msg := "the real ZooKeeper has no TTL nodes (start it with SERVER_JVMFLAGS=-Dzookeeper.extendedTypesEnabled=true): not compared"
				fmt.Fprintf(os.Stderr, "!!!! %s: SKIPPED. %s\n", t.Name(), msg)
				t.Skip(msg)
			}
			if c.needs39() && !zk39 {
				t.Skip("ZooKeeper 3.9 answers this differently from 3.8, and the shim follows 3.9: compared only with a 3.9 server")
			}
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
		{"relativePath", []rawStep{
			{op: opAddWatch, body: func(e *encoder, x rawCtx) { e.str("rel"); e.i32(0) }},
			{op: opAddWatch, body: func(e *encoder, x rawCtx) { e.str("rel/"); e.i32(1) }},
			stepCreate(opCreate, "/n", 0),
		}},
	})
}

func TestRawCreateOpsAgainstZooKeeper(t *testing.T) {
	var cases []rawCase
	for _, op := range []int32{opCreate, opCreate2, opCreateContainer, opCreateTTL} {
		for flags := int32(-1); flags <= 7; flags++ {
			if op == opCreateContainer && raftmeta.CreateMode(flags).IsSequential() && !raftmeta.CreateMode(flags).IsTTL() {
				continue // a sequential container: not reproduced (DESIGN.md)
			}
			for _, ttl := range []int64{1000, 0, int64(raftmeta.MaxTTL / time.Millisecond), int64(raftmeta.MaxTTL/time.Millisecond) + 1} {
				create := func(p string) rawStep {
					if op == opCreateTTL {
						return stepCreateTTL(p, flags, ttl)
					}
					return stepCreate(op, p, flags)
				}
				if op != opCreateTTL && ttl != 1000 {
					continue
				}
				name := fmt.Sprintf("%s-%d", opName(op), flags)
				if op == opCreateTTL {
					name += fmt.Sprintf("-%d", ttl)
				}
				cases = append(cases, rawCase{name, []rawStep{
					create("/n"),
					create("/n"),
					create("/none/n"),
					stepRead(opExists, "/n", false),
					stepRead(opGetChildren2, "", false),
				}})
			}
		}
	}
	cases = append(cases, rawCase{"create2-seq", []rawStep{
		stepCreate(opCreate2, "/s-", 2),
		stepCreate(opCreate2, "/s-", 2),
		stepCreate(opCreate2, "/s-", 3),
		stepCreate(opCreate2, "/e", 1),
		stepCreate(opCreate2, "/e/k", 0),
		stepCreate(opCreate2, "rel", 0),
		stepCreate(opCreate2, "/", 0),
	}})
	runRawCases(t, cases)
}

// Watcher types of checkWatches and removeWatches (Watcher.WatcherType).
const (
	wtChildren, wtData, wtAny, wtPersistent, wtRecursive int32 = 1, 2, 3, 4, 5
)

func TestRawWatchOpsAgainstZooKeeper(t *testing.T) {
	var cases []rawCase
	// Each kind of watch, then checkWatches and removeWatches of every type.
	watches := []struct {
		name string
		set  []rawStep
	}{
		{"data", []rawStep{stepRead(opGetData, "/n", true)}},
		{"exist", []rawStep{stepRead(opExists, "/none", true)}},
		{"child", []rawStep{stepRead(opGetChildren, "/n", true)}},
		{"dataAndChild", []rawStep{stepRead(opGetData, "/n", true), stepRead(opGetChildren2, "/n", true)}},
		{"persistent", []rawStep{stepPathInt(opAddWatch, "/n", 0)}},
		{"recursive", []rawStep{stepPathInt(opAddWatch, "/n", 1)}},
		{"persistentAndData", []rawStep{stepPathInt(opAddWatch, "/n", 0), stepRead(opGetData, "/n", true)}},
	}
	for _, w := range watches {
		for _, typ := range []int32{wtChildren, wtData, wtAny, wtPersistent, wtRecursive, 0, 6} {
			for _, op := range []int32{opCheckWatches, opRemoveWatches} {
				p := "/n"
				if w.name == "exist" {
					p = "/none"
				}
				steps := []rawStep{stepCreate(opCreate, "/n", 0)}
				steps = append(steps, w.set...)
				// 3.8 has no types 4 and 5, and its Children and Data
				// also match persistent watches.
				v39 := typ == wtPersistent || typ == wtRecursive ||
					(typ == wtChildren || typ == wtData) && (strings.HasPrefix(w.name, "persistent") || w.name == "recursive")
				first, check := stepPathInt(op, p, typ), stepPathInt(opCheckWatches, p, typ)
				first.zk39, check.zk39 = v39, v39
				steps = append(steps,
					first,
					check,
					// What is still registered fires now.
					stepCreate(opCreate, "/n/k", 0),
					stepSetData("/n"),
					stepCreate(opCreate, "/none", 0),
				)
				cases = append(cases, rawCase{fmt.Sprintf("%s-%s-%d", w.name, opName(op), typ), steps})
			}
		}
	}
	cases = append(cases,
		rawCase{"noWatch", []rawStep{stepPathInt(opCheckWatches, "/x", wtData), stepPathInt(opRemoveWatches, "/x", wtAny)}},
		rawCase{"badPath", []rawStep{
			{op: opRemoveWatches, body: func(e *encoder, x rawCtx) { e.str("rel"); e.i32(wtAny) }},
		}},
		// 3.8's checkWatches throws on a relative path (MarshallingError).
		rawCase{"badPathCheck", []rawStep{
			{op: opCheckWatches, zk39: true, body: func(e *encoder, x rawCtx) { e.str("rel"); e.i32(wtData) }},
		}},
	)
	runRawCases(t, cases)
}

func TestRawSetWatches2AgainstZooKeeper(t *testing.T) {
	setup := []rawStep{
		stepCreate(opCreate, "/a", 0),
		stepCreate(opCreate, "/a/k", 0),
		stepCreate(opCreate, "/b", 0),
	}
	all := []string{"/a", "/b", "/none"}
	changes := []rawStep{
		stepSetData("/a"),
		stepCreate(opCreate, "/a/k2", 0),
		stepCreate(opCreate, "/none", 0),
		stepCreate(opCreate, "/b/k", 0),
		stepCreate(opCreate, "/b/k/g", 0),
		stepSetData("/b/k/g"),
		stepDelete("/b/k/g"),
		stepSetData("/b"),
		stepDelete("/a/k2"),
	}
	var cases []rawCase
	for _, rel := range []bool{false, true} {
		name := map[bool]string{false: "zxid0", true: "current"}[rel]
		// "all" but recursive: 3.8 keeps one mode per session and path, so
		// a recursive watch replaces a persistent one on the same path;
		// 3.9 (and the shim) keep both ("both", compared with 3.9 only).
		for _, kind := range []string{"data", "exist", "child", "persistent", "recursive", "all", "both"} {
			var lists [5][]string
			for i, k := range []string{"data", "exist", "child", "persistent", "recursive"} {
				if kind == k || kind == "all" && k != "recursive" || kind == "both" && i >= 3 {
					lists[i] = all
				}
			}
			sw := stepSetWatches2(rel, lists[0], lists[1], lists[2], lists[3], lists[4])
			sw.zk39 = kind == "both"
			steps := append(append([]rawStep{}, setup...), sw)
			cases = append(cases, rawCase{name + "-" + kind, append(steps, changes...)})
		}
	}
	cases = append(cases, rawCase{"empty", []rawStep{stepSetWatches2(true, nil, nil, nil, nil, nil)}})
	runRawCases(t, cases)
}

func TestRawOtherOpsAgainstZooKeeper(t *testing.T) {
	tree := []rawStep{
		stepCreate(opCreate, "/a", 0),
		stepCreate(opCreate, "/a/b", 0),
		stepCreate(opCreate, "/a/b/c", 0),
		stepCreate(opCreate, "/ab", 1),
		stepCreate(opCreate, "/a/e", 1),
	}
	with := func(steps ...rawStep) []rawStep { return append(append([]rawStep{}, tree...), steps...) }
	raw := func(op int32, s string) rawStep {
		return rawStep{op: op, body: func(e *encoder, x rawCtx) { e.str(s) }}
	}
	whoAmI := rawStep{op: opWhoAmI, body: func(e *encoder, x rawCtx) {}}
	auth := func(userPass string) rawStep {
		return rawStep{op: opAuth, xid: xidAuth, body: func(e *encoder, x rawCtx) { e.i32(0); e.str("digest"); e.buffer([]byte(userPass)) }}
	}
	runRawCases(t, []rawCase{
		{"getAllChildrenNumber", with(
			stepPath(opGetAllChildrenNumber, ""),
			stepPath(opGetAllChildrenNumber, "/a"),
			stepPath(opGetAllChildrenNumber, "/a/b/c"),
			stepPath(opGetAllChildrenNumber, "/none"),
			raw(opGetAllChildrenNumber, "rel"),
		)},
		{"getEphemerals", with(
			stepPath(opGetEphemerals, "/a"),
			stepPath(opGetEphemerals, "/ab"),
			stepPath(opGetEphemerals, "/none"),
			stepPath(opGetEphemerals, "/a/e/"),
		)},
		{"getEphemeralsOrder", []rawStep{
			stepCreate(opCreate, "/e1", 1),
			stepCreate(opCreate, "/e2", 1),
			stepCreate(opCreate, "/x", 1),
			stepCreate(opCreate, "/e-", 3),
			stepCreate(opCreate, "/e-", 3),
			stepCreate(opCreate, "/e-", 3),
			stepCreate(opCreate, "/b", 1),
			stepPath(opGetEphemerals, ""),
			stepPath(opGetEphemerals, "/e"),
			stepDelete("/e1"),
			stepCreate(opCreate, "/e1", 1),
			stepPath(opGetEphemerals, ""),
		}},
		{"getEphemeralsAll", []rawStep{
			stepCreate(opCreate, "/e", 1),
			raw(opGetEphemerals, "/"),
			raw(opGetEphemerals, ""),
			raw(opGetEphemerals, " / "),
			{op: opGetEphemerals, body: func(e *encoder, x rawCtx) { e.i32(-1) }},
		}},
		{"sync", with(
			stepPath(opSync, "/a"),
			stepPath(opSync, "/none"),
			raw(opSync, "/"),
			raw(opSync, "rel"),
			raw(opSync, ""),
		)},
		// ZooKeeper keeps a connection's ids in a hash set: whoAmI and an
		// "auth" ACL list them in its order, each once (the Java client
		// found alice before the ip id).
		{"whoAmI", []rawStep{
			whoAmI,
			auth("user:secret"),
			whoAmI,
			auth("alice:secret"),
			whoAmI,
			auth("alice:secret"),
			auth("bob:x"),
			whoAmI,
			{op: opCreate, body: func(e *encoder, x rawCtx) {
				e.str(x.path("/mine"))
				e.buffer(nil)
				e.acls([]raftmeta.ACL{{Perms: 31, Scheme: "auth"}})
				e.i32(0)
			}},
			{op: opGetACL, body: func(e *encoder, x rawCtx) { e.str(x.path("/mine")) }},
		}},
	})
}

func TestRawEdgesAgainstZooKeeper(t *testing.T) {
	rel := func(op int32, body func(e *encoder)) rawStep {
		return rawStep{op: op, body: func(e *encoder, x rawCtx) { body(e) }}
	}
	multi := func(subs ...rawStep) rawStep {
		ttl := false
		for _, s := range subs {
			ttl = ttl || s.ttl
		}
		return rawStep{op: opMulti, ttl: ttl, body: func(e *encoder, x rawCtx) {
			for _, s := range subs {
				e.i32(s.op)
				e.boolean(false)
				e.i32(-1)
				s.body(e, x)
			}
			e.i32(-1)
			e.boolean(true)
			e.i32(-1)
		}}
	}
	runRawCases(t, []rawCase{
		{"relativePaths", []rawStep{
			rel(opExists, func(e *encoder) { e.str("rel"); e.boolean(false) }),
			rel(opGetData, func(e *encoder) { e.str("rel"); e.boolean(false) }),
			rel(opGetChildren, func(e *encoder) { e.str("rel"); e.boolean(false) }),
			rel(opGetChildren2, func(e *encoder) { e.str("rel"); e.boolean(false) }),
			rel(opGetACL, func(e *encoder) { e.str("rel") }),
		}},
		{"multiCreates", []rawStep{
			multi(stepCreate(opCreate2, "/a", 0), stepCreate(opCreateContainer, "/c", 4), stepCreate(opCreate, "/b", 2)),
			multi(stepCreate(opCreate2, "/a", 0), stepCreate(opCreateContainer, "/d", 4)),
			multi(stepCreate(opCreateContainer, "/d", 0)),
		}},
		{"multiTTL", []rawStep{
			multi(stepCreateTTL("/t", 5, 1000), stepCreate(opCreate2, "/u", 0)),
			multi(stepCreateTTL("/t2", 0, 1000)),
		}},
	})
}
