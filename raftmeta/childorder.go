package raftmeta

import (
	"slices"
	"unicode/utf16"
)

// ZooKeeper keeps a node's children in a java.util.HashSet (DataNode's
// `new HashSet<String>(8)`) and getChildren returns them in that set's
// iteration order, which clients see. childOrder reproduces it: HashMap
// iterates its table bucket by bucket, and within a bucket in insertion
// order (new keys go to the bin's tail; a resize splits each bin keeping
// relative order), so the order is (bucket of the name under the current
// capacity, insertion stamp). The capacity only grows: 8 at the first add,
// doubled when the size passes 3/4 of it, or when a bin of a table under 64
// reaches 9 entries (treeifyBin resizes instead). Not reproduced: the order
// inside a treeified bin (9+ names in one bucket of a table of 64 or more).
type childOrder struct {
	stamps map[string]uint64 // insertion stamp of each child
	next   uint64            // last stamp given
	cap    int32             // Java table capacity; 0 before the first add
}

// javaHash is String.hashCode spread as HashMap.hash does.
func javaHash(s string) uint32 {
	var h uint32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + uint32(u)
	}
	return h ^ (h >> 16)
}

// add records name as the newest child; n.children already holds it.
func (o *childOrder) add(name string, children map[string]struct{}) {
	if o.stamps == nil {
		o.stamps = make(map[string]uint64)
	}
	if o.cap == 0 {
		o.cap = 8
	}
	o.next++
	o.stamps[name] = o.next
	if o.cap < 64 {
		mask := uint32(o.cap - 1)
		b := javaHash(name) & mask
		bin := 0
		for c := range children {
			if javaHash(c)&mask == b {
				bin++
			}
		}
		if bin >= 9 {
			o.cap *= 2
		}
	}
	for int64(len(children)) > int64(o.cap)*3/4 {
		o.cap *= 2
	}
}

// ordered returns the children in ZooKeeper's iteration order.
func (o *childOrder) ordered(children map[string]struct{}) []string {
	out := make([]string, 0, len(children))
	for c := range children {
		out = append(out, c)
	}
	mask := uint32(max(o.cap, 1) - 1)
	slices.SortFunc(out, func(a, b string) int {
		ba, bb := javaHash(a)&mask, javaHash(b)&mask
		switch {
		case ba != bb:
			if ba < bb {
				return -1
			}
			return 1
		case o.stamps[a] != o.stamps[b]:
			if o.stamps[a] < o.stamps[b] {
				return -1
			}
			return 1
		}
		if a < b {
			return -1
		}
		return 1
	})
	return out
}
