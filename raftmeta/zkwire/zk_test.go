package zkwire

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"strom/internal/metatest"
	"strom/raftmeta"
)

var openACL = zk.WorldACL(zk.PermAll)

func TestCRUDAndStat(t *testing.T) {
	n, s := newShim(t)
	c, _ := connect(t, []string{s.Addr().String()}, time.Second, nil)

	p, err := c.Create("/a", []byte("x"), 0, openACL)
	if err != nil || p != "/a" {
		t.Fatalf("create: %q %v", p, err)
	}
	data, st, err := c.Get("/a")
	if err != nil || string(data) != "x" || st.Version != 0 || st.DataLength != 1 || st.Czxid == 0 {
		t.Fatalf("get: %q %+v %v", data, st, err)
	}
	if _, err := c.Create("/a", nil, 0, openACL); !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("create again: %v", err)
	}
	if _, err := c.Create("/none/b", nil, 0, openACL); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("create orphan: %v", err)
	}
	st, err = c.Set("/a", []byte("yy"), 0)
	if err != nil || st.Version != 1 || st.DataLength != 2 {
		t.Fatalf("set: %+v %v", st, err)
	}
	if _, err := c.Set("/a", nil, 0); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("set stale: %v", err)
	}
	if _, err := c.Create("/a/b", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	kids, st, err := c.Children("/a")
	if err != nil || !slices.Equal(kids, []string{"b"}) || st.NumChildren != 1 || st.Cversion != 1 {
		t.Fatalf("children: %v %+v %v", kids, st, err)
	}
	if err := c.Delete("/a", -1); !errors.Is(err, zk.ErrNotEmpty) {
		t.Fatalf("delete non-empty: %v", err)
	}
	ok, _, err := c.Exists("/a/b")
	if err != nil || !ok {
		t.Fatalf("exists: %v %v", ok, err)
	}
	if err := c.Delete("/a/b", 0); err != nil {
		t.Fatal(err)
	}
	ok, _, err = c.Exists("/a/b")
	if err != nil || ok {
		t.Fatalf("exists after delete: %v %v", ok, err)
	}
	if _, err := c.Sync("/a"); err != nil {
		t.Fatal(err)
	}
	acl, _, err := c.GetACL("/a")
	if err != nil || len(acl) != 1 || acl[0].Scheme != "world" {
		t.Fatalf("getACL: %v %v", acl, err)
	}
	if err := c.AddAuth("digest", []byte("bob:secret")); err != nil {
		t.Fatal(err)
	}
	st, err = c.SetACL("/a", zk.DigestACL(zk.PermAll, "bob", "secret"), 0)
	if err != nil || st.Aversion != 1 {
		t.Fatalf("setACL: %+v %v", st, err)
	}
	acl, _, _ = c.GetACL("/a")
	if len(acl) != 1 || acl[0].Scheme != "digest" || acl[0].ID != zk.DigestACL(zk.PermAll, "bob", "secret")[0].ID {
		t.Fatalf("digest ACL: %+v", acl)
	}
	if _, err := c.Create("/auth", nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	acl, _, _ = c.GetACL("/auth")
	if len(acl) != 1 || acl[0].Scheme != "digest" || acl[0].ID[:4] != "bob:" {
		t.Fatalf("auth ACL: %+v", acl)
	}
	if _, err := c.Create("/bad", nil, 0, nil); !errors.Is(err, zk.ErrInvalidACL) {
		t.Fatalf("empty ACL: %v", err)
	}
	if _, err := c.Create("/zookeeper/x/", nil, 0, openACL); err == nil {
		t.Fatal("bad path accepted")
	}
	p, err = c.CreateContainer("/ctr", nil, zk.FlagTTL-1, openACL) // 4 = container
	if err != nil || p != "/ctr" {
		t.Fatalf("container: %q %v", p, err)
	}
	p, err = c.CreateTTL("/ttl", nil, zk.FlagTTL, openACL, time.Hour)
	if err != nil || p != "/ttl" {
		t.Fatalf("ttl: %q %v", p, err)
	}
	_, st, _ = c.Get("/")
	if zx := n.LastZxid(); st.Pzxid > zx {
		t.Fatalf("pzxid %d beyond last zxid %d", st.Pzxid, zx)
	}
}

func TestSequentialNames(t *testing.T) {
	_, s := newShim(t)
	c, _ := connect(t, []string{s.Addr().String()}, time.Second, nil)
	if _, err := c.Create("/q", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/q/other", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		p, err := c.Create("/q/n-", nil, zk.FlagSequence, openACL)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	p, err := c.Create("/q/e-", nil, zk.FlagSequence|zk.FlagEphemeral, openACL)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, p)
	want := []string{"/q/n-0000000001", "/q/n-0000000002", "/q/n-0000000003", "/q/e-0000000004"}
	if !slices.Equal(got, want) {
		t.Fatalf("sequential names %v, want %v", got, want)
	}
}

func TestEphemeralsRemovedAfterExpiry(t *testing.T) {
	n, s := newShim(t)
	addr := []string{s.Addr().String()}
	d := &cutDialer{}
	c1, _ := connect(t, addr, 300*time.Millisecond, d)
	if _, err := c1.Create("/eph", []byte("x"), zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	_, st, err := c1.Get("/eph")
	if err != nil || st.EphemeralOwner != c1.SessionID() {
		t.Fatalf("owner %x, session %x, %v", st.EphemeralOwner, c1.SessionID(), err)
	}
	if _, err := c1.Create("/eph/child", nil, 0, openACL); !errors.Is(err, zk.ErrNoChildrenForEphemerals) {
		t.Fatalf("child of ephemeral: %v", err)
	}
	c2, _ := connect(t, addr, 5*time.Second, nil)
	ok, _, evs, err := c2.ExistsW("/eph")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	sid := c1.SessionID()
	d.cut(true) // the client can no longer reach the server: its session expires
	ev := nextEvent(t, evs, 10*time.Second)
	if ev.Type != zk.EventNodeDeleted || ev.Path != "/eph" {
		t.Fatalf("event %+v", ev)
	}
	if _, ok := n.Session(sid); ok {
		t.Fatal("session still exists after its ephemeral was deleted")
	}
}

func TestCloseSessionDeletesEphemerals(t *testing.T) {
	_, s := newShim(t)
	addr := []string{s.Addr().String()}
	c1, _ := connect(t, addr, time.Second, nil)
	if _, err := c1.Create("/e", nil, zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	c2, _ := connect(t, addr, time.Second, nil)
	ok, _, err := c2.Exists("/e")
	if err != nil || ok {
		t.Fatalf("ephemeral after close: %v %v", ok, err)
	}
}

func TestOneShotWatchesFireOnce(t *testing.T) {
	_, s := newShim(t)
	c, _ := connect(t, []string{s.Addr().String()}, time.Second, nil)
	if _, err := c.Create("/w", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	_, _, dataW, err := c.GetW("/w")
	if err != nil {
		t.Fatal(err)
	}
	_, _, childW, err := c.ChildrenW("/w")
	if err != nil {
		t.Fatal(err)
	}
	_, _, existW, err := c.ExistsW("/w/new")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set("/w", []byte("1"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set("/w", []byte("2"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := <-dataW; ev.Type != zk.EventNodeDataChanged || ev.Path != "/w" {
		t.Fatalf("data event %+v", ev)
	}
	if _, err := c.Create("/w/new", nil, 0, openACL); err != nil {
		t.Fatal(err)
	}
	if ev := <-existW; ev.Type != zk.EventNodeCreated || ev.Path != "/w/new" {
		t.Fatalf("exist event %+v", ev)
	}
	if ev := <-childW; ev.Type != zk.EventNodeChildrenChanged || ev.Path != "/w" {
		t.Fatalf("child event %+v", ev)
	}
	// One-shot: a second change sends nothing. Check with a raw client
	// that also receives every event for its connection.
	rc := dialRaw(t, s.Addr().String(), 5000)
	code, _, _ := rc.call(opGetData, func(e *encoder) { e.str("/w"); e.boolean(true) })
	if code != codeOK {
		t.Fatalf("getData code %d", code)
	}
	if _, err := c.Set("/w", []byte("3"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set("/w", []byte("4"), -1); err != nil {
		t.Fatal(err)
	}
	// The reply to this read follows every event of the writes it sees.
	_, _, evs := rc.call(opExists, func(e *encoder) { e.str("/w"); e.boolean(false) })
	if len(evs) != 1 || evs[0].Type != raftmeta.NodeDataChanged {
		t.Fatalf("raw events %+v, want one NodeDataChanged", evs)
	}
}

func TestMultiAllOrNothing(t *testing.T) {
	_, s := newShim(t)
	c, _ := connect(t, []string{s.Addr().String()}, time.Second, nil)
	if _, err := c.Create("/m", []byte("v"), 0, openACL); err != nil {
		t.Fatal(err)
	}
	res, err := c.Multi(
		&zk.CreateRequest{Path: "/m/a", Acl: openACL},
		&zk.SetDataRequest{Path: "/m", Data: []byte("w"), Version: 0},
		&zk.CheckVersionRequest{Path: "/m", Version: 1},
		&zk.DeleteRequest{Path: "/m/a", Version: 0},
	)
	if err != nil || len(res) != 4 || res[0].String != "/m/a" || res[1].Stat == nil || res[1].Stat.Version != 1 {
		t.Fatalf("multi: %+v %v", res, err)
	}
	cases := []struct {
		name  string
		ops   []any
		codes []error
	}{
		{"exists", []any{
			&zk.CreateRequest{Path: "/m/x", Acl: openACL},
			&zk.CreateRequest{Path: "/m", Acl: openACL},
			&zk.DeleteRequest{Path: "/m", Version: -1},
		}, []error{nil, zk.ErrNodeExists, zk.ErrAPIError}},
		{"badversion", []any{
			&zk.CheckVersionRequest{Path: "/m", Version: 7},
			&zk.CreateRequest{Path: "/m/y", Acl: openACL},
		}, []error{zk.ErrBadVersion, zk.ErrAPIError}},
		{"nonode", []any{
			&zk.CreateRequest{Path: "/m/z", Acl: openACL},
			&zk.SetDataRequest{Path: "/nope", Version: -1},
		}, []error{nil, zk.ErrNoNode}},
		{"noauth", []any{
			&zk.CreateRequest{Path: "/m/z", Acl: openACL},
			&zk.CreateRequest{Path: "/strom/z", Acl: openACL},
			&zk.CreateRequest{Path: "/m/zz", Acl: openACL},
		}, []error{nil, zk.ErrNoAuth, zk.ErrAPIError}},
		{"first-failure-before-noauth", []any{
			&zk.DeleteRequest{Path: "/nope", Version: -1},
			&zk.CreateRequest{Path: "/strom/z", Acl: openACL},
		}, []error{zk.ErrNoNode, zk.ErrAPIError}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.Multi(tc.ops...)
			if err == nil {
				t.Fatal("multi succeeded")
			}
			if len(res) != len(tc.codes) {
				t.Fatalf("%d results, want %d", len(res), len(tc.codes))
			}
			for i, want := range tc.codes {
				// go-zookeeper has no RuntimeInconsistency value: -2 maps to ErrAPIError's neighbour.
				got := res[i].Error
				if want == zk.ErrAPIError {
					if got == nil || errors.Is(got, zk.ErrNoNode) || errors.Is(got, zk.ErrNodeExists) {
						t.Fatalf("result %d: %v, want runtime inconsistency", i, got)
					}
					continue
				}
				if !errors.Is(got, want) && got != want {
					t.Fatalf("result %d: %v, want %v", i, got, want)
				}
			}
			kids, st, _ := c.Children("/m")
			if len(kids) != 0 || st.Version != 1 {
				t.Fatalf("multi left changes: %v %+v", kids, st)
			}
		})
	}
}

func TestStromTreeReadOnly(t *testing.T) {
	n, s := newShim(t)
	if _, err := n.Create(t.Context(), "/strom", []byte("ours"), raftmeta.Persistent); err != nil {
		t.Fatal(err)
	}
	c, _ := connect(t, []string{s.Addr().String()}, time.Second, nil)
	data, _, err := c.Get("/strom")
	if err != nil || string(data) != "ours" {
		t.Fatalf("read /strom: %q %v", data, err)
	}
	for name, f := range map[string]func() error{
		"create": func() error { _, err := c.Create("/strom/x", nil, 0, openACL); return err },
		"set":    func() error { _, err := c.Set("/strom", nil, -1); return err },
		"delete": func() error { return c.Delete("/strom", -1) },
		"setACL": func() error { _, err := c.SetACL("/strom", openACL, -1); return err },
	} {
		if err := f(); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s: %v, want NoAuth", name, err)
		}
	}
	if _, err := c.Create("/stromboli", nil, 0, openACL); err != nil {
		t.Fatalf("sibling of /strom: %v", err)
	}
}

func TestReconnectKeepsSession(t *testing.T) {
	_, s := newShim(t)
	d := &cutDialer{}
	c, evs := connect(t, []string{s.Addr().String()}, 2*time.Second, d)
	sid := c.SessionID()
	if _, err := c.Create("/r", nil, zk.FlagEphemeral, openACL); err != nil {
		t.Fatal(err)
	}
	_, _, w, err := c.GetW("/r")
	if err != nil {
		t.Fatal(err)
	}
	d.cut(false)
	waitFor(t, 10*time.Second, "reconnect", func() bool { return d.dialCount() >= 2 && c.State() == zk.StateHasSession })
	if c.SessionID() != sid {
		t.Fatalf("session changed: %x -> %x", sid, c.SessionID())
	}
	for len(evs) > 0 {
		if ev := <-evs; ev.State == zk.StateExpired {
			t.Fatal("session expired")
		}
	}
	if ok, _, err := c.Exists("/r"); err != nil || !ok {
		t.Fatalf("ephemeral after reconnect: %v %v", ok, err)
	}
	// The watch was restored by setWatches.
	if _, err := c.Set("/r", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := <-w; ev.Type != zk.EventNodeDataChanged {
		t.Fatalf("restored watch event %+v", ev)
	}
}

func TestReconnectWrongPasswordExpires(t *testing.T) {
	_, s := newShim(t)
	rc := dialRaw(t, s.Addr().String(), 5000)
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bad := &rawClient{t: t, c: c}
	e := &encoder{b: make([]byte, 4)}
	e.i32(0)
	e.i64(0)
	e.i32(5000)
	e.i64(rc.sid)
	e.buffer(make([]byte, 16))
	bad.writeFrame(e.b)
	d := &decoder{b: bad.readFrame()}
	d.i32("proto")
	if to, sid := d.i32("timeout"), d.i64("sid"); to != 0 || sid != 0 {
		t.Fatalf("wrong password accepted: timeout %d sid %x", to, sid)
	}
	if _, err := bad.tryReadFrame(); err == nil {
		t.Fatal("connection still open")
	}
}

func TestPersistentAndRecursiveWatches(t *testing.T) {
	_, s := newShim(t)
	c, _ := connect(t, []string{s.Addr().String()}, time.Second, nil)
	rc := dialRaw(t, s.Addr().String(), 5000)
	addWatch := func(path string, mode int32) int32 {
		code, d, _ := rc.call(opAddWatch, func(e *encoder) { e.str(path); e.i32(mode) })
		// The body is ZooKeeper's ErrorResponse (err 0); the Java client
		// drops the connection without it.
		if err := d.i32("err"); code == codeOK && (err != 0 || d.err != nil || d.remaining() != 0) {
			t.Fatalf("addWatch reply body: err %d, %v, %d trailing bytes; want exactly i32 0", err, d.err, d.remaining())
		}
		return code
	}
	if code := addWatch("/p", 0); code != codeOK {
		t.Fatalf("addWatch persistent: %d", code)
	}
	if code := addWatch("/tree", 1); code != codeOK {
		t.Fatalf("addWatch recursive: %d", code)
	}
	mustCreate := func(p string) {
		if _, err := c.Create(p, nil, 0, openACL); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate("/p")
	mustCreate("/p/kid")
	if _, err := c.Set("/p", []byte("1"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set("/p", []byte("2"), -1); err != nil {
		t.Fatal(err)
	}
	mustCreate("/tree")
	mustCreate("/tree/a")
	mustCreate("/tree/a/b")
	if err := c.Delete("/tree/a/b", -1); err != nil {
		t.Fatal(err)
	}
	want := []raftmeta.Event{
		{Type: raftmeta.NodeCreated, Path: "/p"},
		{Type: raftmeta.NodeChildrenChanged, Path: "/p"},
		{Type: raftmeta.NodeDataChanged, Path: "/p"},
		{Type: raftmeta.NodeDataChanged, Path: "/p"},
		{Type: raftmeta.NodeCreated, Path: "/tree"},
		{Type: raftmeta.NodeCreated, Path: "/tree/a"},
		{Type: raftmeta.NodeCreated, Path: "/tree/a/b"},
		{Type: raftmeta.NodeDeleted, Path: "/tree/a/b"},
	}
	for i, w := range want {
		ev := rc.readEvent()
		if ev.Type != w.Type || ev.Path != w.Path {
			t.Fatalf("event %d: %v %s, want %v %s", i, ev.Type, ev.Path, w.Type, w.Path)
		}
	}
	if code, _, _ := rc.call(opCheckWatches, func(e *encoder) { e.str("/tree"); e.i32(int32(raftmeta.WatcherPersistentRecursive)) }); code != codeOK {
		t.Fatalf("checkWatches: %d", code)
	}
	if code, _, _ := rc.call(opRemoveWatches, func(e *encoder) { e.str("/tree"); e.i32(int32(raftmeta.WatcherPersistentRecursive)) }); code != codeOK {
		t.Fatalf("removeWatches: %d", code)
	}
	if code, _, _ := rc.call(opRemoveWatches, func(e *encoder) { e.str("/tree"); e.i32(int32(raftmeta.WatcherPersistentRecursive)) }); code != codeNoWatcher {
		t.Fatalf("removeWatches again: %d, want NoWatcher", code)
	}
	mustCreate("/tree/c")
	if _, err := c.Set("/p", []byte("3"), -1); err != nil {
		t.Fatal(err)
	}
	// Only /p's change arrives: the recursive watch is gone.
	if ev := rc.readEvent(); ev.Path != "/p" {
		t.Fatalf("event after removal: %+v", ev)
	}
}

func TestOtherOps(t *testing.T) {
	_, s := newShim(t)
	rc := dialRaw(t, s.Addr().String(), 5000)
	create := func(p string, flags int32) int32 {
		code, _, _ := rc.call(opCreate2, func(e *encoder) {
			e.str(p)
			e.buffer([]byte("d"))
			e.acls([]raftmeta.ACL{{Perms: 31, Scheme: "world", ID: "anyone"}})
			e.i32(flags)
		})
		return code
	}
	for _, p := range []string{"/o", "/o/a", "/o/a/b", "/o/c"} {
		if code := create(p, 0); code != codeOK {
			t.Fatalf("create %s: %d", p, code)
		}
	}
	if code := create("/o/e1", 1); code != codeOK {
		t.Fatal(code)
	}
	code, d, _ := rc.call(opGetAllChildrenNumber, func(e *encoder) { e.str("/o") })
	if n := d.i32("n"); code != codeOK || n != 4 {
		t.Fatalf("getAllChildrenNumber: %d %d", code, n)
	}
	code, d, _ = rc.call(opGetEphemerals, func(e *encoder) { e.str("/o") })
	if eph := d.strs("e"); code != codeOK || !slices.Equal(eph, []string{"/o/e1"}) {
		t.Fatalf("getEphemerals: %d %v", code, eph)
	}
	code, d, _ = rc.call(opMultiRead, func(e *encoder) {
		e.i32(opGetChildren)
		e.boolean(false)
		e.i32(-1)
		e.str("/o")
		e.boolean(false)
		e.i32(opGetData)
		e.boolean(false)
		e.i32(-1)
		e.str("/missing")
		e.boolean(false)
		e.i32(opGetData)
		e.boolean(false)
		e.i32(-1)
		e.str("/o/a")
		e.boolean(false)
		endMulti(e)
	})
	if code != codeOK {
		t.Fatalf("multiRead code %d", code)
	}
	if typ, _, _ := d.i32("t"), d.boolean("d"), d.i32("e"); typ != opGetChildren {
		t.Fatalf("multiRead result 0 type %d", typ)
	}
	if kids := d.strs("kids"); !slices.Equal(kids, []string{"a", "c", "e1"}) {
		t.Fatalf("multiRead children %v", kids)
	}
	if typ, _, errc := d.i32("t"), d.boolean("d"), d.i32("e"); typ != opError || errc != codeNoNode {
		t.Fatalf("multiRead result 1: %d %d", typ, errc)
	}
	code, _, _ = rc.call(99, nil)
	if code != codeUnimplemented {
		t.Fatalf("unknown op: %d", code)
	}
	code, _, _ = rc.call(opCreateTTL, func(e *encoder) {
		e.str("/ttl")
		e.buffer(nil)
		e.acls([]raftmeta.ACL{{Perms: 31, Scheme: "world", ID: "anyone"}})
		e.i32(0) // not a TTL mode
		e.i64(1000)
	})
	if code != codeBadArguments {
		t.Fatalf("createTTL persistent: %d", code)
	}
}

func TestBadPacketClosesOnlyItsConnection(t *testing.T) {
	_, s := newShim(t)
	c, _ := connect(t, []string{s.Addr().String()}, time.Second, nil)
	cases := map[string][]byte{
		"garbage":      []byte("\x00\x00\x00\x05hello"),
		"truncated":    buildRequest(1, opCreate, func(e *encoder) { e.str("/x"); e.i32(100) }),
		"huge length":  {0x7f, 0, 0, 0},
		"negative len": {0xff, 0xff, 0xff, 0xf0},
		"multi junk":   buildRequest(1, opMulti, func(e *encoder) { e.i32(opGetData); e.boolean(false); e.i32(-1) }),
	}
	for name, pkt := range cases {
		t.Run(name, func(t *testing.T) {
			rc := dialRaw(t, s.Addr().String(), 5000)
			if len(pkt) >= 8 && name != "garbage" {
				binary := pkt
				rc.writeFrame(binary)
			} else {
				if _, err := rc.c.Write(pkt); err != nil {
					t.Fatal(err)
				}
			}
			if b, err := rc.tryReadFrame(); err == nil {
				t.Fatalf("connection answered %x", b)
			}
			if _, err := c.Create(fmt.Sprintf("/alive-%d", len(name)), nil, 0, openACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatalf("other connection broken: %v", err)
			}
		})
	}
}

func TestFourLetterWords(t *testing.T) {
	_, s := newShim(t)
	for _, cmd := range []string{"ruok", "srvr", "stat", "mntr", "conf"} {
		out, err := zkFLW(s.Addr().String(), cmd)
		if err != nil {
			t.Fatal(err)
		}
		if cmd == "ruok" && out != "imok" || len(out) == 0 {
			t.Fatalf("%s: %q", cmd, out)
		}
	}
	stats, ok := zk.FLWSrvr([]string{s.Addr().String()}, 5*time.Second)
	if !ok || stats[0].Error != nil || stats[0].Mode != zk.ModeStandalone {
		t.Fatalf("FLWSrvr: %+v", stats[0])
	}
	if !zk.FLWRuok([]string{s.Addr().String()}, 5*time.Second)[0] {
		t.Fatal("ruok")
	}
}

func zkFLW(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var b []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil {
			return string(b), nil
		}
	}
}

func TestCloseStopsEveryGoroutine(t *testing.T) {
	n, _ := newShim(t)
	base := runtime.NumGoroutine()
	s := startServer(t, n, testConfig(t))
	var clients []*rawClient
	for range 3 {
		rc := dialRaw(t, s.Addr().String(), 5000)
		if code, _, _ := rc.call(opAddWatch, func(e *encoder) { e.str("/"); e.i32(1) }); code != codeOK {
			t.Fatal(code)
		}
		clients = append(clients, rc)
	}
	// A write in flight on one connection while the server closes.
	clients[0].writeFrame(buildRequest(99, opCreate, func(e *encoder) {
		e.str("/x")
		e.buffer(nil)
		e.acls([]raftmeta.ACL{{Perms: 31, Scheme: "world", ID: "anyone"}})
		e.i32(0)
	}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(s.Err(), ErrClosed) {
		t.Fatalf("Err after Close: %v", s.Err())
	}
	for _, rc := range clients {
		_ = rc.c.Close()
	}
	waitFor(t, 10*time.Second, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= base })
}

func TestConfigValidateAndListen(t *testing.T) {
	err := Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Millisecond, MaxConnections: -1}.Validate()
	for _, field := range []string{"MaxPacketSize", "MaxSessionTimeout", "HandshakeTimeout", "RequestTimeout", "MaxConnections", "ProtectedRoot"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate does not name %s: %v", field, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	n := metatest.NewNode(t)
	if _, err := Listen(n, DefaultConfig()); err == nil {
		t.Fatal("Listen without an address succeeded")
	}
	cfg := testConfig(t)
	cfg.Listen = "127.0.0.1:0"
	s, err := Listen(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out, err := zkFLW(s.Addr().String(), "ruok"); err != nil || out != "imok" {
		t.Fatalf("ruok: %q %v", out, err)
	}
}

// A connection made with the id and password of a session takes the
// session over: the server closes the connection that had it, as
// ZooKeeper does (the Java client then reconnects and sends setWatches2),
// and the new one goes on. The Java driver (scripts/zkdiff.sh) found the
// old connection left open.
func TestReconnectTakesSessionOver(t *testing.T) {
	node, s := newShim(t)
	old := dialRaw(t, s.Addr().String(), 5000)
	sess, _ := node.Session(old.sid)
	again := dialSession(t, s.Addr().String(), old.sid, sess.Password, 5000)
	if _, err := old.tryReadFrame(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the old connection is still open (read: %v)", err)
	}
	if code, _, _ := again.call(opExists, func(e *encoder) { e.str("/"); e.boolean(false) }); code != codeOK {
		t.Fatalf("exists on the new connection: %d", code)
	}
}
