package raftmeta

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// sampleCommands returns one real command of every type.
func sampleCommands() []*command {
	return []*command{
		{Type: CmdNoop, Nonce: 7, Time: testEpochMs},
		{Type: CmdCreateSession, Nonce: 8, Time: testEpochMs, Timeout: 30000, Password: bytes.Repeat([]byte{0xAB}, 16)},
		{Type: CmdCloseSession, Time: testEpochMs, Session: 3},
		{Type: CmdExpireSession, Time: testEpochMs, Session: 4},
		{Type: CmdOp, Nonce: 9, Time: testEpochMs, Session: 2, Ops: []Op{CreateOp("/a", []byte("x"), Ephemeral)}},
		{Type: CmdMulti, Nonce: 10, Time: testEpochMs, Session: 0, Ops: []Op{
			CreateOp("/b", nil, Persistent),
			CreateOp("/b/s-", []byte{}, PersistentSequential),
			CreateTTLOp("/b/t", []byte("ttl"), PersistentWithTTL, 5*time.Second),
			{Kind: OpCreate, Path: "/b/acl", Mode: Container, ACL: []ACL{{Perms: 3, Scheme: "digest", ID: "u:p"}}},
			SetDataOp("/b", []byte("y"), 0),
			CheckOp("/b", 1),
			SetACLOp("/b", OpenACL(), -1),
			DeleteOp("/b/s-0000000000", -1),
		}},
		{Type: CmdDeleteContainer, Time: testEpochMs, Path: "/c"},
	}
}

func TestCommandRoundTrip(t *testing.T) {
	for _, c := range sampleCommands() {
		t.Run(c.Type.String(), func(t *testing.T) {
			b := encodeCommand(c)
			got, err := decodeCommand(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
			}
			// Every strict prefix is rejected cleanly.
			for i := range len(b) {
				if _, err := decodeCommand(b[:i]); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("prefix %d/%d: err = %v", i, len(b), err)
				}
			}
			if _, err := decodeCommand(append(slices.Clone(b), 0)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("trailing byte accepted: %v", err)
			}
		})
	}
}

func TestDecodeCommandRejects(t *testing.T) {
	op := encodeCommand(&command{Type: CmdOp, Ops: []Op{CreateOp("/a", nil, Persistent)}})
	mutate := func(off int, v byte) []byte {
		b := slices.Clone(op)
		b[off] = v
		return b
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown op kind", mutate(commandHeaderSize+8, 99)},
		{"negative path length", mutate(commandHeaderSize+8+1, 0x80)},
		{"huge path length", mutate(commandHeaderSize+8+1, 0x7f)},
		{"unknown mode", mutate(commandHeaderSize+8+1+4+2+4, 9)},
		{"huge multi count", append(encodeCommand(&command{Type: CmdMulti})[:commandHeaderSize+8], 0xff, 0xff, 0xff, 0xff)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeCommand(tc.b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestUnknownCommand(t *testing.T) {
	h := newHarness(t)
	h.create("/a", nil, Persistent)
	before := h.f.snapshotBytes()

	// With the ignore flag an unknown type is skipped (the zxid still moves).
	entry := encodeCommand(&command{Type: CmdNoop, Time: testEpochMs})
	entry[0] = byte(IgnoreUnknownFlag | 0x7e)
	entry = append(entry, 1, 2, 3) // a body this node cannot read
	r := h.f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: entry}).(applyResult)
	if !errors.Is(r.err, errIgnoredCommand) {
		t.Fatalf("ignored command result: %v", r.err)
	}
	after := h.f.snapshotBytes()
	if !bytes.Equal(before[18:len(before)-4], after[18:len(after)-4]) || h.f.lastZxid.Load() != 2 {
		t.Fatal("ignored command changed the state")
	}

	// Without it the FSM refuses to go on: a broken invariant.
	entry[0] = 0x7e
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("unknown command without the ignore flag did not panic")
			}
		}()
		h.f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: entry})
	}()

	// A known type with the flag is applied normally.
	c := &command{Type: CmdOp | IgnoreUnknownFlag, Time: testEpochMs, Ops: []Op{CreateOp("/b", nil, Persistent)}}
	r = h.f.Apply(&raft.Log{Index: 4, Type: raft.LogCommand, Data: encodeCommand(c)}).(applyResult)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := h.f.exists("/b", nil); err != nil {
		t.Fatal(err)
	}
}

// buildSampleTree applies a varied history and returns the harness.
func buildSampleTree(t testing.TB) *harness {
	h := newHarness(t)
	s1 := h.newSession(10 * time.Second)
	s2 := h.newSession(20 * time.Second)
	h.create("/strom", []byte("root"), Persistent)
	h.create("/strom/empty", []byte{}, Persistent)
	h.create("/strom/nil", nil, Persistent)
	for range 3 {
		h.create("/strom/seq-", []byte("s"), PersistentSequential)
	}
	h.create("/strom/cont", nil, Container)
	h.create("/strom/cont/kid", nil, Persistent)
	h.mustDo(0, CreateTTLOp("/strom/ttl", []byte("t"), PersistentWithTTL, time.Minute))
	h.mustDo(s1, CreateOp("/strom/e1", []byte("e"), Ephemeral))
	h.mustDo(s2, CreateOp("/strom/e2-", nil, EphemeralSequential))
	h.mustDo(0, Op{Kind: OpCreate, Path: "/strom/acl", ACL: []ACL{{Perms: PermRead | PermWrite, Scheme: "digest", ID: "user:hash"}, {Perms: PermAll, Scheme: "ip", ID: "10.0.0.0/8"}}})
	h.now += 5
	h.mustDo(0, SetDataOp("/strom", []byte("root2"), -1))
	h.mustDo(0, SetACLOp("/strom/nil", nil, -1))
	h.mustDo(0, DeleteOp("/strom/seq-0000000003", -1))
	h.create("/a-b", nil, Persistent) // sorts between "/a" and "/a/..." style paths
	h.create("/a", nil, Persistent)
	h.create("/a/b", nil, Persistent)
	s3 := h.newSession(time.Second)
	h.apply(&command{Type: CmdCloseSession, Session: s3})
	return h
}

func TestSnapshotRoundTrip(t *testing.T) {
	h := buildSampleTree(t)
	b1 := h.f.snapshotBytes()

	// The same history gives the same bytes.
	if b := buildSampleTree(t).f.snapshotBytes(); !bytes.Equal(b, b1) {
		t.Fatal("same history, different snapshot bytes")
	}

	// Through raft's FSMSnapshot.Persist and Restore into a fresh FSM.
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !bytes.Equal(sink.buf.Bytes(), b1) || !sink.closed {
		t.Fatal("Persist wrote other bytes")
	}
	h2 := newHarness(t)
	h2.create("/junk", nil, Persistent) // Restore must discard prior state
	if err := h2.f.Restore(io.NopCloser(bytes.NewReader(b1))); err != nil {
		t.Fatal(err)
	}
	if b2 := h2.f.snapshotBytes(); !bytes.Equal(b1, b2) {
		t.Fatal("restore then snapshot gives other bytes")
	}
	if !reflect.DeepEqual(dumpTree(t, fsmReader{h.f}), dumpTree(t, fsmReader{h2.f})) {
		t.Fatal("restored tree reads differently")
	}
	if !reflect.DeepEqual(h.f.sessions(), h2.f.sessions()) {
		t.Fatal("restored sessions differ")
	}
	for _, s := range h.f.sessions() {
		if !slices.Equal(h.f.ephemerals(s.ID), h2.f.ephemerals(s.ID)) {
			t.Fatalf("ephemerals of %d differ", s.ID)
		}
	}
	if h2.f.lastZxid.Load() != h.f.lastZxid.Load() {
		t.Fatal("lastZxid not restored")
	}
	if !slices.Equal(h.f.reapable(h.now+time.Hour.Milliseconds()), h2.f.reapable(h.now+time.Hour.Milliseconds())) {
		t.Fatal("container/TTL indexes differ")
	}

	// Both continue identically.
	h2.idx, h2.now = h.idx, h.now
	for _, hh := range []*harness{h, h2} {
		hh.create("/strom/seq-", nil, PersistentSequential)
		hh.apply(&command{Type: CmdExpireSession, Session: 1})
		hh.apply(&command{Type: CmdDeleteContainer, Path: "/strom/ttl", Time: hh.now + time.Hour.Milliseconds()})
	}
	if !bytes.Equal(h.f.snapshotBytes(), h2.f.snapshotBytes()) {
		t.Fatal("diverged after restore")
	}

	// Restore fires no watches.
	w := h2.f.watches.newWatcher(false)
	defer w.Close()
	h2.f.addWatch("/", w, WatchPersistentRecursive)
	if err := h2.f.Restore(io.NopCloser(bytes.NewReader(b1))); err != nil {
		t.Fatal(err)
	}
	h2.idx++
	h2.f.applyCommand(int64(h2.idx), &command{Type: CmdOp, Time: h2.now, Ops: []Op{CreateOp("/after", nil, Persistent)}})
	expectEvents(t, w, Event{Type: NodeCreated, Path: "/after"})
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	good := buildSampleTree(t).f.snapshotBytes()
	f := newFSM(testLogger(t, "fsm"), newWatchManager())
	restore := func(b []byte) error { return f.Restore(io.NopCloser(bytes.NewReader(b))) }
	for i := range len(good) {
		if err := restore(good[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix %d/%d: err = %v", i, len(good), err)
		}
	}
	for i := range len(good) {
		b := slices.Clone(good)
		b[i] ^= 0x41
		if err := restore(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipped byte %d: err = %v", i, err)
		}
	}
	if err := restore(append(slices.Clone(good), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
	// Structural checks behind a valid checksum.
	bad := []struct {
		name string
		t    func() *tree
	}{
		{"child of ephemeral", func() *tree {
			tr := newTree()
			tr.sessions[5] = &sessionState{id: 5, timeoutMs: 1}
			tr.nodes["/e"] = &znode{acl: OpenACL(), st: persistedStat{ephemeralOwner: 5}, children: map[string]struct{}{"x": {}}}
			tr.nodes["/e/x"] = &znode{acl: OpenACL(), children: map[string]struct{}{}}
			return tr
		}},
		{"ephemeral without session", func() *tree {
			tr := newTree()
			tr.nodes["/e"] = &znode{acl: OpenACL(), st: persistedStat{ephemeralOwner: 5}, children: map[string]struct{}{}}
			return tr
		}},
		{"orphan", func() *tree {
			tr := newTree()
			tr.nodes["/x/y"] = &znode{acl: OpenACL(), children: map[string]struct{}{}}
			return tr
		}},
		{"invalid path", func() *tree {
			tr := newTree()
			tr.nodes["/x/"] = &znode{acl: OpenACL(), children: map[string]struct{}{}}
			return tr
		}},
		{"no root", func() *tree {
			tr := emptyTree()
			tr.nodes["/x"] = &znode{acl: OpenACL(), children: map[string]struct{}{}}
			return tr
		}},
		{"empty", emptyTree},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if err := restore(encodeSnapshot(tc.t())); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	// The FSM is untouched by failed restores.
	if err := restore(good); err != nil {
		t.Fatal(err)
	}
}

type memSink struct {
	buf    bytes.Buffer
	closed bool
}

func (s *memSink) Write(p []byte) (int, error) { return s.buf.Write(p) }
func (s *memSink) Close() error                { s.closed = true; return nil }
func (s *memSink) ID() string                  { return "mem" }
func (s *memSink) Cancel() error               { return nil }

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	c.NodeID = "n1"
	if err := c.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	if err := c.validateForOpen(); err == nil {
		t.Fatal("Open without Dir accepted")
	}
	bad := Config{
		BindAddr:           "nocolon",
		HeartbeatTimeout:   time.Millisecond,
		ElectionTimeout:    time.Millisecond,
		LeaderLeaseTimeout: time.Second,
	}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, field := range []string{"NodeID", "BindAddr", "HeartbeatTimeout", "ElectionTimeout", "LeaderLeaseTimeout", "CommitTimeout", "SnapshotThreshold", "SnapshotInterval", "SessionCheckInterval"} {
		if !bytes.Contains([]byte(err.Error()), []byte("Config."+field)) {
			t.Errorf("error does not name %s:\n%v", field, err)
		}
	}
}
