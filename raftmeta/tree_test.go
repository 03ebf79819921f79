package raftmeta

import (
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestValidatePath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"/", true},
		{"/a", true},
		{"/a/b/c", true},
		{"/a.b", true},
		{"/.a", true},
		{"/a..", true},
		{"/...", true},
		{"/zookeeper", true},
		{"/ünïcode/ok", true},
		{"", false},
		{"a", false},
		{"a/b", false},
		{"/a/", false},
		{"//", false},
		{"/a//b", false},
		{"/.", false},
		{"/./a", false},
		{"/a/.", false},
		{"/..", false},
		{"/a/../b", false},
		{"/a/..", false},
		{"/a\x00b", false},
		{"/a\x01", false},
		{"/a\x7f", false},
		{"/a\u0085", false},
		{"/a\ue000", false},     // private use, Java's U+D800..U+F8FF range
		{"/a\ufff0", false},     // specials
		{"/a\U0001F600", false}, // outside the BMP: surrogates in Java
		{"/a\xff", false},       // invalid UTF-8
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			err := validatePath(tc.path)
			if tc.ok && err != nil {
				t.Fatalf("validatePath(%q) = %v, want ok", tc.path, err)
			}
			if !tc.ok && !errors.Is(err, ErrBadArguments) {
				t.Fatalf("validatePath(%q) = %v, want ErrBadArguments", tc.path, err)
			}
		})
	}
}

func TestRootAndReservedNodes(t *testing.T) {
	h := newHarness(t)
	st := h.stat("/")
	if st != (Stat{NumChildren: 1}) {
		t.Fatalf("root stat = %+v, want zero with the /zookeeper child", st)
	}
	kids, _, err := h.f.children("/", nil)
	if err != nil || !slices.Equal(kids, []string{"zookeeper"}) {
		t.Fatalf("children(/) = %v, %v", kids, err)
	}
	kids, _, _ = h.f.children("/zookeeper", nil)
	if !slices.Equal(kids, []string{"config", "quota"}) {
		t.Fatalf("children(/zookeeper) = %v", kids)
	}
	acl, st, _ := h.f.getACL("/zookeeper/config")
	if st.Aversion != -1 || !reflect.DeepEqual(acl, []ACL{{Perms: PermRead, Scheme: "world", ID: "anyone"}}) {
		t.Fatalf("/zookeeper/config acl %v stat %+v", acl, st)
	}
	for _, p := range []string{"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
		_, err := h.do(0, DeleteOp(p, -1))
		wantErr(t, err, ErrBadArguments)
	}
	_, err = h.do(0, CreateOp("/", nil, Persistent))
	wantErr(t, err, ErrNodeExists)
}

func TestOpErrors(t *testing.T) {
	type step struct {
		session bool // run in the test's session
		op      Op
		want    error
	}
	ttlOp := func(path string, mode CreateMode, ttl time.Duration) Op {
		return CreateTTLOp(path, nil, mode, ttl)
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"create parent missing", []step{{op: CreateOp("/a/b", nil, Persistent), want: ErrNoNode}}},
		{"create exists", []step{
			{op: CreateOp("/a", nil, Persistent)},
			{op: CreateOp("/a", nil, Persistent), want: ErrNodeExists},
			{op: CreateOp("/a", nil, Ephemeral), session: true, want: ErrNodeExists},
		}},
		{"create under ephemeral", []step{
			{op: CreateOp("/e", nil, Ephemeral), session: true},
			{op: CreateOp("/e/c", nil, Persistent), want: ErrNoChildrenForEphemerals},
			{op: CreateOp("/e/c", nil, PersistentSequential), want: ErrNoChildrenForEphemerals},
		}},
		{"create under container and ttl is allowed", []step{
			{op: CreateOp("/c", nil, Container)},
			{op: CreateOp("/c/x", nil, Persistent)},
			{op: ttlOp("/t", PersistentWithTTL, time.Second)},
			{op: CreateOp("/t/x", nil, Persistent)},
		}},
		{"create bad paths", []step{
			{op: CreateOp("a", nil, Persistent), want: ErrBadArguments},
			{op: CreateOp("/a/", nil, Persistent), want: ErrBadArguments},
			{op: CreateOp("/a//b", nil, PersistentSequential), want: ErrBadArguments},
			{op: CreateOp("/a/./", nil, PersistentSequential), want: ErrBadArguments},
			{op: CreateOp("/x\x00", nil, Persistent), want: ErrBadArguments},
		}},
		{"ephemeral without session", []step{
			{op: CreateOp("/e", nil, Ephemeral), want: ErrSessionExpired},
			{op: CreateOp("/e", nil, EphemeralSequential), want: ErrSessionExpired},
		}},
		{"ttl rules", []step{
			{op: ttlOp("/t", PersistentWithTTL, 0), want: ErrBadArguments},
			{op: ttlOp("/t", Persistent, time.Second), want: ErrBadArguments},
			{op: ttlOp("/t", PersistentWithTTL, MaxTTL)},
			{op: ttlOp("/t-", PersistentSequentialWithTTL, time.Millisecond)},
		}},
		{"invalid acl", []step{
			{op: Op{Kind: OpCreate, Path: "/a", ACL: []ACL{{Perms: PermAll, Scheme: "", ID: "x"}}}, want: ErrInvalidACL},
			{op: CreateOp("/a", nil, Persistent)},
			{op: SetACLOp("/a", []ACL{{Perms: 1, Scheme: "digest"}}, -1), want: ErrInvalidACL},
		}},
		{"delete", []step{
			{op: DeleteOp("/nope", -1), want: ErrNoNode},
			{op: DeleteOp("/a/", -1), want: ErrBadArguments},
			{op: CreateOp("/a", nil, Persistent)},
			{op: CreateOp("/a/b", nil, Persistent)},
			{op: DeleteOp("/a", 0), want: ErrNotEmpty},
			{op: DeleteOp("/a", 3), want: ErrBadVersion}, // version is checked before children
			{op: DeleteOp("/a/b", 1), want: ErrBadVersion},
			{op: DeleteOp("/a/b", 0)},
			{op: DeleteOp("/a", -1)},
			{op: DeleteOp("/a", -1), want: ErrNoNode},
		}},
		{"setData", []step{
			{op: SetDataOp("/a", nil, -1), want: ErrNoNode},
			{op: SetDataOp("a", nil, -1), want: ErrBadArguments},
			{op: CreateOp("/a", nil, Persistent)},
			{op: SetDataOp("/a", []byte("x"), 1), want: ErrBadVersion},
			{op: SetDataOp("/a", []byte("x"), 0)},
			{op: SetDataOp("/a", []byte("y"), 0), want: ErrBadVersion},
			{op: SetDataOp("/a", []byte("y"), -1)},
		}},
		{"check", []step{
			{op: CheckOp("/a", -1), want: ErrNoNode},
			{op: CheckOp("/a/", -1), want: ErrBadArguments},
			{op: CreateOp("/a", nil, Persistent)},
			{op: CheckOp("/a", 0)},
			{op: CheckOp("/a", -1)},
			{op: CheckOp("/a", 1), want: ErrBadVersion},
		}},
		{"setACL", []step{
			{op: SetACLOp("/a", nil, -1), want: ErrNoNode},
			{op: CreateOp("/a", nil, Persistent)},
			{op: SetACLOp("/a", nil, 1), want: ErrBadVersion},
			{op: SetACLOp("/a", nil, 0)},
			{op: SetACLOp("/a", nil, 0), want: ErrBadVersion},
		}},
		{"ops in a live session", []step{
			{op: CreateOp("/a", nil, Persistent), session: true},
			{op: SetDataOp("/a", nil, -1), session: true},
			{op: DeleteOp("/a", -1), session: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			sid := h.newSession(time.Minute)
			for i, s := range tc.steps {
				var session int64
				if s.session {
					session = sid
				}
				_, err := h.do(session, s.op)
				if s.want == nil && err != nil {
					t.Fatalf("step %d (%s %s): %v", i, s.op.Kind, s.op.Path, err)
				}
				if s.want != nil && !errors.Is(err, s.want) {
					t.Fatalf("step %d (%s %s): error %v, want %v", i, s.op.Kind, s.op.Path, err, s.want)
				}
			}
		})
	}
}

// Kinds and modes the log cannot carry are refused before proposing
// (prevalidate) and, should one get through, by the txn as well.
func TestInvalidKindAndMode(t *testing.T) {
	for _, op := range []Op{
		{Kind: 0, Path: "/a"},
		{Kind: 99, Path: "/a"},
		{Kind: OpCreate, Path: "/a", Mode: 7},
		{Kind: OpCreate, Path: "/a", Mode: PersistentWithTTL, TTL: -time.Millisecond},
		{Kind: OpCreate, Path: "/a", Mode: PersistentWithTTL, TTL: 1500 * time.Microsecond},
		{Kind: OpCreate, Path: "/a", Mode: PersistentWithTTL, TTL: MaxTTL + time.Millisecond},
	} {
		wantErr(t, prevalidate(&op), ErrBadArguments)
		x := &txn{t: newTree(), zxid: 1}
		wantErr(t, x.apply(&op).Err, ErrBadArguments)
	}
}

func TestUnknownSessionRejected(t *testing.T) {
	h := newHarness(t)
	h.create("/a", nil, Persistent)
	for _, op := range []Op{
		CreateOp("/b", nil, Persistent),
		CreateOp("/b", nil, Ephemeral),
		DeleteOp("/a", -1),
		SetDataOp("/a", nil, -1),
		CheckOp("/a", -1),
		SetACLOp("/a", nil, -1),
	} {
		_, err := h.do(12345, op)
		wantErr(t, err, ErrSessionExpired)
	}
}

func TestStatFields(t *testing.T) {
	h := newHarness(t)
	h.now = testEpochMs + 10
	r := h.mustDo(0, CreateOp("/p", []byte("abc"), Persistent))
	zp := int64(h.idx)
	want := Stat{Czxid: zp, Mzxid: zp, Pzxid: zp, Ctime: h.now, Mtime: h.now, DataLength: 3}
	if r.Stat != want || h.stat("/p") != want {
		t.Fatalf("create stat = %+v / %+v, want %+v", r.Stat, h.stat("/p"), want)
	}
	if root := h.stat("/"); root.Cversion != 1 || root.Pzxid != zp || root.NumChildren != 2 {
		t.Fatalf("root after create = %+v", root)
	}

	h.now += 10
	h.create("/p/c1", nil, Persistent)
	z1 := int64(h.idx)
	h.now += 10
	h.create("/p/c2", []byte{}, Persistent)
	z2 := int64(h.idx)
	st := h.stat("/p")
	if st.Cversion != 2 || st.Pzxid != z2 || st.NumChildren != 2 || st.Mzxid != zp || st.Version != 0 || st.Mtime != testEpochMs+10 {
		t.Fatalf("parent after 2 creates = %+v", st)
	}
	if c := h.stat("/p/c1"); c.Czxid != z1 || c.Pzxid != z1 || c.DataLength != 0 {
		t.Fatalf("child stat = %+v", c)
	}

	h.now += 10
	r = h.mustDo(0, SetDataOp("/p", []byte("hello"), 0))
	zs := int64(h.idx)
	want = Stat{Czxid: zp, Mzxid: zs, Pzxid: z2, Ctime: testEpochMs + 10, Mtime: h.now, Version: 1, Cversion: 2, DataLength: 5, NumChildren: 2}
	if r.Stat != want || h.stat("/p") != want {
		t.Fatalf("setData stat = %+v, want %+v", r.Stat, want)
	}

	// Delete moves the parent's pzxid but not its cversion (ZooKeeper).
	h.mustDo(0, DeleteOp("/p/c1", -1))
	zd := int64(h.idx)
	st = h.stat("/p")
	if st.Cversion != 2 || st.Pzxid != zd || st.NumChildren != 1 || st.Mzxid != zs {
		t.Fatalf("parent after delete = %+v", st)
	}

	// setACL bumps aversion only.
	before := h.stat("/p")
	r = h.mustDo(0, SetACLOp("/p", []ACL{{Perms: PermRead, Scheme: "world", ID: "anyone"}}, 0))
	before.Aversion = 1
	if r.Stat != before || h.stat("/p") != before {
		t.Fatalf("setACL stat = %+v, want %+v", r.Stat, before)
	}
	acl, _, _ := h.f.getACL("/p")
	if !reflect.DeepEqual(acl, []ACL{{Perms: PermRead, Scheme: "world", ID: "anyone"}}) {
		t.Fatalf("acl = %v", acl)
	}
	acl, _, _ = h.f.getACL("/p/c2")
	if !reflect.DeepEqual(acl, OpenACL()) {
		t.Fatalf("default acl = %v", acl)
	}

	// Special owners.
	sid := h.newSession(time.Minute)
	r = h.mustDo(sid, CreateOp("/eph", nil, Ephemeral))
	if r.Stat.EphemeralOwner != sid {
		t.Fatalf("ephemeral owner = %x, want %x", r.Stat.EphemeralOwner, sid)
	}
	r = h.mustDo(0, CreateOp("/cont", nil, Container))
	if r.Stat.EphemeralOwner != math.MinInt64 {
		t.Fatalf("container owner = %x", r.Stat.EphemeralOwner)
	}
	r = h.mustDo(0, CreateTTLOp("/ttl", nil, PersistentWithTTL, 1500*time.Millisecond))
	if uint64(r.Stat.EphemeralOwner) != 0xFF00000000000000|1500 {
		t.Fatalf("ttl owner = %x", uint64(r.Stat.EphemeralOwner))
	}

	// nil and empty data stay apart.
	if d, _, _ := h.f.get("/p/c2", nil); d == nil {
		t.Fatal("empty data read back as nil")
	}
	h.create("/nil", nil, Persistent)
	if d, _, _ := h.f.get("/nil", nil); d != nil {
		t.Fatal("nil data read back as non-nil")
	}

	// Version wraps like Java's int.
	n := h.f.mu.t.nodes["/nil"]
	n.st.version = math.MaxInt32
	r = h.mustDo(0, SetDataOp("/nil", nil, math.MaxInt32))
	if r.Stat.Version != math.MinInt32 {
		t.Fatalf("wrapped version = %d", r.Stat.Version)
	}
}

func TestSequentialNames(t *testing.T) {
	h := newHarness(t)
	h.create("/q", nil, Persistent)
	var got []string
	for range 3 {
		got = append(got, h.create("/q/x-", nil, PersistentSequential))
	}
	want := []string{"/q/x-0000000000", "/q/x-0000000001", "/q/x-0000000002"}
	if !slices.Equal(got, want) {
		t.Fatalf("sequential = %v, want %v", got, want)
	}
	h.mustDo(0, DeleteOp("/q/x-0000000002", -1))
	h.create("/q/plain", nil, Persistent) // any child create bumps the counter
	if p := h.create("/q/x-", nil, PersistentSequential); p != "/q/x-0000000004" {
		t.Fatalf("after delete+create: %s", p)
	}
	if p := h.create("/q/", nil, PersistentSequential); p != "/q/0000000005" {
		t.Fatalf("trailing slash: %s", p)
	}
	sid := h.newSession(time.Minute)
	if r := h.mustDo(sid, CreateOp("/q/e-", nil, EphemeralSequential)); r.Path != "/q/e-0000000006" {
		t.Fatalf("ephemeral sequential: %s", r.Path)
	}
	if p := h.create("/", nil, PersistentSequential); p != "/0000000001" {
		t.Fatalf("root sequential: %s", p)
	}
	// A name taken by a plain node fails with NodeExists and changes nothing.
	h.create("/q/x-0000000008", nil, Persistent) // cversion 7 -> 8: the next name
	_, err := h.do(0, CreateOp("/q/x-", nil, PersistentSequential))
	wantErr(t, err, ErrNodeExists)
	if st := h.stat("/q"); st.Cversion != 8 {
		t.Fatalf("cversion after failed create = %d", st.Cversion)
	}
}

func TestMulti(t *testing.T) {
	h := newHarness(t)
	h.create("/m", nil, Persistent)

	res, err := h.multi(0,
		CreateOp("/m/a", []byte("1"), Persistent),
		CreateOp("/m/a/s-", nil, PersistentSequential),
		SetDataOp("/m/a", []byte("2"), 0),
		CheckOp("/m/a", 1),
		DeleteOp("/m/a/s-0000000000", 0),
	)
	if err != nil {
		t.Fatal(err)
	}
	z := int64(h.idx)
	if len(res) != 5 || res[0].Path != "/m/a" || res[1].Path != "/m/a/s-0000000000" || res[2].Stat.Version != 1 || res[3].Path != "/m/a" || res[4].Path != "/m/a/s-0000000000" {
		t.Fatalf("results = %+v", res)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("result %d err %v", i, r.Err)
		}
	}
	st := h.stat("/m/a")
	if st.Czxid != z || st.Mzxid != z || st.Version != 1 || st.Cversion != 1 || st.Pzxid != z {
		t.Fatalf("all ops share the zxid: %+v", st)
	}

	before := h.f.snapshotBytes()
	res, err = h.multi(0,
		CreateOp("/m/b", nil, Persistent),
		SetDataOp("/m/a", []byte("3"), -1),
		CreateOp("/m/b", nil, Persistent), // fails: created by op 0
		DeleteOp("/nope", -1),
		CheckOp("/m", -1),
	)
	var me *MultiError
	if !errors.As(err, &me) || me.Index != 2 {
		t.Fatalf("err = %v, want *MultiError at 2", err)
	}
	if !errors.Is(err, ErrNodeExists) {
		t.Fatalf("MultiError does not unwrap to the failing op's error: %v", err)
	}
	wantCodes := []error{nil, nil, ErrNodeExists, ErrRuntimeInconsistency, ErrRuntimeInconsistency}
	for i, w := range wantCodes {
		if (w == nil) != (res[i].Err == nil) || (w != nil && !errors.Is(res[i].Err, w)) {
			t.Fatalf("result %d err = %v, want %v", i, res[i].Err, w)
		}
		if res[i].Stat != (Stat{}) {
			t.Fatalf("failed multi result %d carries a stat", i)
		}
	}
	if !reflect.DeepEqual(me.Results, res) {
		t.Fatal("MultiError.Results differ from returned results")
	}
	after := h.f.snapshotBytes()
	// Only the header's last zxid (and so the checksum) may differ.
	if !bytes.Equal(before[18:len(before)-4], after[18:len(after)-4]) {
		t.Fatal("failed multi changed the tree")
	}

	// Failing on the first op.
	res, err = h.multi(0, DeleteOp("/nope", -1), CreateOp("/m/c", nil, Persistent))
	if !errors.As(err, &me) || me.Index != 0 || !errors.Is(res[0].Err, ErrNoNode) || !errors.Is(res[1].Err, ErrRuntimeInconsistency) {
		t.Fatalf("first-op failure: %v %+v", err, res)
	}

	// An empty multi succeeds.
	res, err = h.multi(0)
	if err != nil || len(res) != 0 {
		t.Fatalf("empty multi: %v %v", res, err)
	}

	// Ephemeral creates in a multi need the session; a rolled-back ephemeral
	// leaves no trace in the session's ephemerals.
	sid := h.newSession(time.Minute)
	_, err = h.multi(sid, CreateOp("/m/e", nil, Ephemeral), CheckOp("/m", 99))
	wantErr(t, err, ErrBadVersion)
	if e := h.f.ephemerals(sid); len(e) != 0 {
		t.Fatalf("ephemerals after rollback: %v", e)
	}
	if _, err := h.multi(sid, CreateOp("/m/e", nil, Ephemeral)); err != nil {
		t.Fatal(err)
	}
	if e := h.f.ephemerals(sid); !slices.Equal(e, []string{"/m/e"}) {
		t.Fatalf("ephemerals = %v", e)
	}
}

func TestSessionsAndEphemerals(t *testing.T) {
	for _, cmd := range []CommandType{CmdCloseSession, CmdExpireSession} {
		t.Run(cmd.String(), func(t *testing.T) {
			h := newHarness(t)
			s1 := h.newSession(30 * time.Second)
			s2 := h.newSession(time.Minute)
			if s1 != 1 || s2 != 2 {
				t.Fatalf("session ids %d %d, want the log indexes 1 2", s1, s2)
			}
			h.create("/app", nil, Persistent)
			h.mustDo(s1, CreateOp("/app/b", nil, Ephemeral))
			h.mustDo(s1, CreateOp("/app/a", nil, Ephemeral))
			h.mustDo(s2, CreateOp("/app/other", nil, Ephemeral))
			if e := h.f.ephemerals(s1); !slices.Equal(e, []string{"/app/a", "/app/b"}) {
				t.Fatalf("ephemerals = %v", e)
			}
			ss := h.f.sessions()
			if len(ss) != 2 || ss[0].ID != s1 || ss[0].Timeout != 30*time.Second || len(ss[0].Password) != 16 {
				t.Fatalf("sessions = %+v", ss)
			}

			w := newWatcherOn(h)
			defer w.Close()
			if _, _, err := h.f.children("/app", w); err != nil {
				t.Fatal(err)
			}
			if _, _, err := h.f.get("/app/a", w); err != nil {
				t.Fatal(err)
			}

			r := h.apply(&command{Type: cmd, Session: s1})
			if r.err != nil {
				t.Fatal(r.err)
			}
			z := int64(h.idx)
			expectEvents(t, w,
				Event{Type: NodeDeleted, Path: "/app/a", Zxid: z},
				Event{Type: NodeChildrenChanged, Path: "/app", Zxid: z},
			)
			if e := h.f.ephemerals(s1); len(e) != 0 {
				t.Fatalf("ephemerals after %s: %v", cmd, e)
			}
			kids, st, _ := h.f.children("/app", nil)
			if !slices.Equal(kids, []string{"other"}) || st.Pzxid != z {
				t.Fatalf("children after %s: %v %+v", cmd, kids, st)
			}
			if ss := h.f.sessions(); len(ss) != 1 || ss[0].ID != s2 {
				t.Fatalf("sessions after %s: %+v", cmd, ss)
			}
			// The session is gone for good.
			_, err := h.do(s1, CreateOp("/app/c", nil, Ephemeral))
			wantErr(t, err, ErrSessionExpired)
			r = h.apply(&command{Type: cmd, Session: s1})
			wantErr(t, r.err, ErrSessionExpired)
		})
	}
}

func TestContainerAndTTLReaping(t *testing.T) {
	h := newHarness(t)
	reap := func(path string) error {
		return h.apply(&command{Type: CmdDeleteContainer, Path: path}).err
	}
	h.create("/c", nil, Container)
	if got := h.f.reapable(h.now); len(got) != 0 {
		t.Fatalf("fresh container reapable: %v", got)
	}
	wantErr(t, reap("/c"), ErrBadVersion) // never had children
	h.create("/c/x", nil, Persistent)
	wantErr(t, reap("/c"), ErrNotEmpty)
	h.mustDo(0, DeleteOp("/c/x", -1))
	if got := h.f.reapable(h.now); !slices.Equal(got, []string{"/c"}) {
		t.Fatalf("reapable = %v", got)
	}
	wantErr(t, reap("/c"), nil)
	if _, err := h.f.exists("/c", nil); !errors.Is(err, ErrNoNode) {
		t.Fatal("container not deleted")
	}

	h.mustDo(0, CreateTTLOp("/t", nil, PersistentWithTTL, time.Second))
	h.create("/p", nil, Persistent)
	wantErr(t, reap("/p"), ErrBadVersion) // not a container or TTL node
	wantErr(t, reap("/nope"), ErrNoNode)
	h.now += 1000
	wantErr(t, reap("/t"), ErrBadVersion) // exactly TTL: not yet
	h.mustDo(0, SetDataOp("/t", []byte("x"), -1))
	h.now += 999
	if got := h.f.reapable(h.now); len(got) != 0 {
		t.Fatalf("setData did not reset the TTL: %v", got)
	}
	h.now += 2
	if got := h.f.reapable(h.now); !slices.Equal(got, []string{"/t"}) {
		t.Fatalf("reapable = %v", got)
	}
	h.create("/t/kid", nil, Persistent)
	wantErr(t, reap("/t"), ErrNotEmpty)
	if got := h.f.reapable(h.now); len(got) != 0 {
		t.Fatalf("TTL node with a child reapable: %v", got)
	}
	h.mustDo(0, DeleteOp("/t/kid", -1))
	h.now += 1001 // the delete does not touch /t's mtime, so it has expired
	wantErr(t, reap("/t"), nil)
}

func newWatcherOn(h *harness) *Watcher { return h.f.watches.newWatcher(false) }

func TestWatchTriggers(t *testing.T) {
	h := newHarness(t)
	h.create("/a", []byte("0"), Persistent)

	t.Run("one-shot data watch fires once", func(t *testing.T) {
		w := newWatcherOn(h)
		defer w.Close()
		h.f.get("/a", w)
		h.f.get("/a", w) // registered twice: still one event
		h.f.exists("/a", w)
		h.mustDo(0, SetDataOp("/a", []byte("1"), -1))
		h.mustDo(0, SetDataOp("/a", []byte("2"), -1))
		h.f.exists("/sentinel1", w)
		h.create("/sentinel1", nil, Persistent)
		expectEvents(t, w,
			Event{Type: NodeDataChanged, Path: "/a"},
			Event{Type: NodeCreated, Path: "/sentinel1"}, // so no second DataChanged was queued
		)
	})

	t.Run("exists on absent node fires NodeCreated", func(t *testing.T) {
		w := newWatcherOn(h)
		defer w.Close()
		if _, err := h.f.exists("/later", w); !errors.Is(err, ErrNoNode) {
			t.Fatalf("exists = %v", err)
		}
		if _, _, err := h.f.get("/later2", w); !errors.Is(err, ErrNoNode) {
			t.Fatal(err)
		}
		h.create("/later2", nil, Persistent) // get on an absent node registers nothing
		h.create("/later", nil, Persistent)
		expectEvents(t, w, Event{Type: NodeCreated, Path: "/later", Zxid: int64(h.idx)})
	})

	t.Run("child watch on parent", func(t *testing.T) {
		w := newWatcherOn(h)
		defer w.Close()
		h.f.children("/a", w)
		h.mustDo(0, SetDataOp("/a", nil, -1)) // data change: not a child event
		h.create("/a/k1", nil, Persistent)
		h.create("/a/k2", nil, Persistent) // already fired
		h.f.children("/a", w)
		h.mustDo(0, DeleteOp("/a/k1", -1))
		expectEvents(t, w,
			Event{Type: NodeChildrenChanged, Path: "/a"},
			Event{Type: NodeChildrenChanged, Path: "/a"},
		)
		h.mustDo(0, DeleteOp("/a/k2", -1))
	})

	t.Run("delete fires one NodeDeleted per watcher", func(t *testing.T) {
		h.create("/d", nil, Persistent)
		h.create("/d/k", nil, Persistent)
		w := newWatcherOn(h)
		defer w.Close()
		h.f.get("/d/k", w)
		h.f.children("/d/k", w)
		h.f.children("/d", w)
		h.mustDo(0, DeleteOp("/d/k", -1))
		h.f.exists("/sentinel2", w)
		h.create("/sentinel2", nil, Persistent)
		expectEvents(t, w,
			Event{Type: NodeDeleted, Path: "/d/k"},
			Event{Type: NodeChildrenChanged, Path: "/d"},
			Event{Type: NodeCreated, Path: "/sentinel2"},
		)
	})

	t.Run("persistent", func(t *testing.T) {
		w := newWatcherOn(h)
		defer w.Close()
		if err := h.f.addWatch("/p", w, WatchPersistent); err != nil {
			t.Fatal(err)
		}
		h.create("/p", nil, Persistent)
		h.mustDo(0, SetDataOp("/p", nil, -1))
		h.mustDo(0, SetDataOp("/p", nil, -1))
		h.create("/p/k", nil, Persistent)
		h.mustDo(0, SetDataOp("/p/k", nil, -1)) // not the watched path
		h.mustDo(0, DeleteOp("/p/k", -1))
		h.mustDo(0, DeleteOp("/p", -1))
		h.create("/p", nil, Persistent) // still registered after the delete
		expectEvents(t, w,
			Event{Type: NodeCreated, Path: "/p"},
			Event{Type: NodeDataChanged, Path: "/p"},
			Event{Type: NodeDataChanged, Path: "/p"},
			Event{Type: NodeChildrenChanged, Path: "/p"},
			Event{Type: NodeChildrenChanged, Path: "/p"},
			Event{Type: NodeDeleted, Path: "/p"},
			Event{Type: NodeCreated, Path: "/p"},
		)
		if err := h.f.watches.removeWatches("/p", w, WatcherData); !errors.Is(err, ErrNoWatcher) {
			t.Fatalf("removing a one-shot data watch that is not there: %v", err)
		}
		if err := h.f.watches.removeWatches("/p", w, WatcherPersistent); err != nil {
			t.Fatal(err)
		}
		h.mustDo(0, DeleteOp("/p", -1))
	})

	t.Run("persistent recursive", func(t *testing.T) {
		w := newWatcherOn(h)
		defer w.Close()
		if err := h.f.addWatch("/r", w, WatchPersistentRecursive); err != nil {
			t.Fatal(err)
		}
		h.f.get("/a", w) // a one-shot elsewhere coexists
		h.create("/r", nil, Persistent)
		h.create("/r/x", nil, Persistent)
		h.create("/r/x/y", nil, Persistent)
		h.mustDo(0, SetDataOp("/r/x/y", nil, -1))
		h.mustDo(0, SetDataOp("/a", nil, -1))
		h.create("/rr", nil, Persistent) // a sibling with a common prefix is not a descendant
		h.mustDo(0, DeleteOp("/r/x/y", -1))
		expectEvents(t, w,
			Event{Type: NodeCreated, Path: "/r"},
			Event{Type: NodeCreated, Path: "/r/x"},
			Event{Type: NodeCreated, Path: "/r/x/y"},
			Event{Type: NodeDataChanged, Path: "/r/x/y"},
			Event{Type: NodeDataChanged, Path: "/a"},
			Event{Type: NodeDeleted, Path: "/r/x/y"}, // and no NodeChildrenChanged anywhere
		)
		if err := h.f.watches.removeWatches("/r", w, WatcherAny); err != nil {
			t.Fatal(err)
		}
		if err := h.f.watches.removeWatches("/r", w, WatcherAny); !errors.Is(err, ErrNoWatcher) {
			t.Fatalf("second remove: %v", err)
		}
	})

	t.Run("remove watches", func(t *testing.T) {
		w := newWatcherOn(h)
		defer w.Close()
		h.f.get("/a", w)
		h.f.children("/a", w)
		if err := h.f.watches.removeWatches("/a", w, WatcherData); err != nil {
			t.Fatal(err)
		}
		h.mustDo(0, SetDataOp("/a", nil, -1)) // no data watch left
		h.create("/a/z", nil, Persistent)     // child watch still there
		expectEvents(t, w, Event{Type: NodeChildrenChanged, Path: "/a"})
		if err := h.f.watches.removeWatches("/a", w, WatcherChildren); !errors.Is(err, ErrNoWatcher) {
			t.Fatalf("child watch should have been consumed: %v", err)
		}
		h.mustDo(0, DeleteOp("/a/z", -1))
	})

	t.Run("close stops delivery", func(t *testing.T) {
		w := newWatcherOn(h)
		h.f.get("/a", w)
		w.Close()
		h.mustDo(0, SetDataOp("/a", nil, -1))
		if _, ok := <-w.Events(); ok {
			t.Fatal("event after Close")
		}
		w.Close() // idempotent
		if len(h.f.watches.mu.tables[tableData].paths) != 0 || len(h.f.watches.mu.tables[tableChild].paths) != 0 {
			t.Fatal("registrations left behind")
		}
	})
}

func TestWatchQueueIsUnbounded(t *testing.T) {
	h := newHarness(t)
	w := newWatcherOn(h)
	defer w.Close()
	h.f.addWatch("/", w, WatchPersistentRecursive)
	const n = 500
	for i := range n {
		h.create("/n"+string(rune('a'+i%26))+string(rune('a'+i/26)), nil, Persistent)
	}
	// Apply never blocked on the unread channel; all events are queued.
	for i := range n {
		if ev := nextEvent(t, w); ev.Type != NodeCreated || ev.Zxid != int64(i+1) {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
}

// SessionEnded's channel closes when the session's close or expiry is
// applied, or a snapshot without it restored; at once for one not held.
func TestSessionEnded(t *testing.T) {
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	for _, cmd := range []CommandType{CmdCloseSession, CmdExpireSession} {
		h := newHarness(t)
		s1, s2 := h.newSession(time.Minute), h.newSession(time.Minute)
		ch1 := h.f.sessionEnded(s1)
		if closed(ch1) || closed(h.f.sessionEnded(s2)) {
			t.Fatalf("%s: a live session's channel is closed", cmd)
		}
		if !closed(h.f.sessionEnded(99)) {
			t.Fatalf("%s: an unknown session's channel is open", cmd)
		}
		if r := h.apply(&command{Type: cmd, Session: s1}); r.err != nil {
			t.Fatal(r.err)
		}
		if !closed(ch1) || closed(h.f.sessionEnded(s2)) {
			t.Fatalf("%s: after it is applied: ended s1 %v, s2 %v; want true, false", cmd, closed(ch1), closed(h.f.sessionEnded(s2)))
		}
	}
	h := newHarness(t)
	snap := h.f.snapshotBytes() // no sessions
	s := h.newSession(time.Minute)
	ch := h.f.sessionEnded(s)
	if err := h.f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if !closed(ch) {
		t.Fatal("a session the restored snapshot lacks: channel still open")
	}
}
