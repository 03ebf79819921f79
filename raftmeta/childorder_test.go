package raftmeta

import (
	"bytes"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"testing"
)

func zkOrder(t *testing.T, h *harness, path string) []string {
	t.Helper()
	kids, _, err := h.f.childrenOrdered(path, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	return kids
}

// The expected orders were read from a real ZooKeeper 3.8 (see
// zkwire's differential test, which checks many more).
func TestChildOrderMatchesZooKeeper(t *testing.T) {
	h := newHarness(t)
	h.create("/p", nil, Persistent)
	for _, n := range []string{"b0000000000", "b0000000001", "c", "a0000000003"} {
		h.create("/p/"+n, nil, Persistent)
	}
	if got, want := zkOrder(t, h, "/p"), []string{"c", "a0000000003", "b0000000001", "b0000000000"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if got := zkOrder(t, h, "/"); !slices.Equal(got, []string{"p", "zookeeper"}) && !slices.Equal(got, []string{"zookeeper", "p"}) {
		t.Fatalf("root order %v", got)
	}
	// Node.Children stays sorted for Strom's own callers.
	if kids, _, _ := h.f.children("/p", nil); !slices.IsSorted(kids) {
		t.Fatalf("Children not sorted: %v", kids)
	}
}

func TestChildOrderCapacityAndStamps(t *testing.T) {
	h := newHarness(t)
	h.create("/p", nil, Persistent)
	for i := range 7 {
		h.create("/p/n"+strconv.Itoa(i), nil, Persistent)
	}
	if c := h.f.mu.t.nodes["/p"].order.cap; c != 16 {
		t.Fatalf("capacity after 7 children = %d, want 16", c)
	}
	// Deleting and re-adding moves a name to the end of its bucket; the
	// capacity never shrinks.
	for i := range 7 {
		if _, err := h.do(0, DeleteOp("/p/n"+strconv.Itoa(i), -1)); err != nil {
			t.Fatal(err)
		}
	}
	if c := h.f.mu.t.nodes["/p"].order.cap; c != 16 {
		t.Fatalf("capacity shrank to %d", c)
	}
	for i := 6; i >= 0; i-- {
		h.create("/p/n"+strconv.Itoa(i), nil, Persistent)
	}
	after := zkOrder(t, h, "/p")
	if len(after) != 7 {
		t.Fatalf("children %v", after)
	}
	// A failed multi leaves the order state (and snapshot bytes) unchanged.
	snap := h.f.snapshotBytes()
	if _, err := h.multi(0, CreateOp("/p/x", nil, Persistent), CreateOp("/p/y", nil, Persistent), CreateOp("/p/n1", nil, Persistent)); err == nil {
		t.Fatal("multi succeeded")
	}
	if after := h.f.snapshotBytes(); !bytes.Equal(snap[18:len(snap)-4], after[18:len(after)-4]) {
		t.Fatal("failed multi changed the snapshot")
	}
	// Restore keeps the order.
	f2 := newFSM(testLogger(t, "fsm2"), newWatchManager())
	if err := f2.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	got, _, _ := f2.childrenOrdered("/p", nil, true)
	if !slices.Equal(got, after) {
		t.Fatalf("order after restore %v, want %v", got, after)
	}
}

func TestJavaHash(t *testing.T) {
	// String.hashCode values as Java computes them (UTF-16 code units; the
	// emoji is a surrogate pair).
	for s, want := range map[string]int32{"": 0, "a": 97, "hello": 99162322, "zookeeper": 1600681804, "\U0001F600": 1772899} {
		if got := javaHash(s); got != uint32(want)^(uint32(want)>>16) {
			t.Fatalf("javaHash(%q) = %d, want spread of %d", s, got, want)
		}
	}
}

// encodeSnapshotV1 writes the version 1 format (no children order state).
func encodeSnapshotV1(t *tree) []byte {
	e := &encoder{}
	e.b = append(e.b, snapshotMagic...)
	e.b = append(e.b, 0, 1)
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

func TestRestoreVersion1Snapshot(t *testing.T) {
	h := newHarness(t)
	h.create("/p", nil, Persistent)
	for _, n := range []string{"c", "a0000000003", "b0000000001", "b0000000000"} {
		h.create("/p/"+n, nil, Persistent)
	}
	f := newFSM(testLogger(t, "v1"), newWatchManager())
	if err := f.Restore(io.NopCloser(bytes.NewReader(encodeSnapshotV1(h.f.mu.t)))); err != nil {
		t.Fatal(err)
	}
	// Children come back added in path order; the order depends only on
	// buckets here (one per name), so it equals ZooKeeper's.
	got, st, err := f.childrenOrdered("/p", nil, true)
	if err != nil || !slices.Equal(got, []string{"c", "a0000000003", "b0000000001", "b0000000000"}) || st.Cversion != 4 {
		t.Fatalf("after v1 restore: %v %+v %v", got, st, err)
	}
	// It is written back as the current version.
	if b := f.snapshotBytes(); b[len(snapshotMagic)+1] != snapshotVersion {
		t.Fatalf("re-encoded as version %d", b[len(snapshotMagic)+1])
	}
}
