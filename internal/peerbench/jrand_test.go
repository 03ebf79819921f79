package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// The expected values were printed by OpenJDK 17.0.15 (java.util.SplittableRandom,
// java.util.Random, Collections.shuffle) and by FlussBench.java's own generators.

func TestSplittableMatchesJava(t *testing.T) {
	s := newSplittable(42)
	var b strings.Builder
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&b, "%d ", s.nextIntN(100000))
	}
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&b, "%d ", s.nextLongN(1_000_000_000))
	}
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&b, "%d ", s.nextIntN(50))
	}
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&b, "%v ", s.nextDouble())
	}
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&b, "%d ", s.nextIntN(1<<31-1-5))
	}
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&b, "%d ", s.nextLongN(1<<63-1-5))
	}
	fmt.Fprintf(&b, "%d %d ", s.nextIntN(64), s.nextLongN(1024))
	want := "45031 97556 22481 3172 86781 831494531 388812462 493887954 806241002 125334487 45 1 21 46 28 " +
		"0.20343510930023068 0.10357423567927071 0.49549865814924343 1530713248 2066953660 1352885458 " +
		"673802091135743820 5532328924952201962 5716821554398651464 48 273 "
	if got := b.String(); got != want {
		t.Fatalf("SplittableRandom(42):\n got %s\nwant %s", got, want)
	}
}

func TestJavaRandomAndShuffle(t *testing.T) {
	l := make([]int, 20)
	for i := range l {
		l[i] = i
	}
	shuffle(l, newJRandom(3))
	if got, want := fmt.Sprint(l), "[2 4 0 11 10 3 9 19 15 13 18 7 17 16 12 1 5 6 8 14]"; got != want {
		t.Fatalf("Collections.shuffle(Random(3)): got %s, want %s", got, want)
	}
	r := newJRandom(3)
	var b strings.Builder
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&b, "%d ", r.nextIntN(1000))
	}
	fmt.Fprintf(&b, "%d %d", r.nextIntN(16), r.nextIntN(1<<31-1-1))
	if got, want := b.String(), "734 660 210 581 128 9 1649604549"; got != want {
		t.Fatalf("Random(3): got %s, want %s", got, want)
	}
}

// TestRowsMatchFlussBench: the first 2000 pruning rows and 2000 KV rows
// hash as FlussBench's do (fields joined by '|', a row per line).
func TestRowsMatchFlussBench(t *testing.T) {
	strLen := pruningStrLen(2048)
	if strLen != 196 {
		t.Fatalf("string length %d, want 196", strLen)
	}
	rng := newSplittable(42)
	h := sha256.New()
	for i := 0; i < 2000; i++ {
		var b strings.Builder
		for _, v := range pruningRow(rng, strLen) {
			fmt.Fprintf(&b, "%v|", v)
		}
		b.WriteByte('\n')
		h.Write([]byte(b.String()))
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), "d185b85c1e869008176f9904528697a4cad93a37d00c47b6553c080f86bddf81"; got != want {
		t.Fatalf("pruning rows hash %s, want %s", got, want)
	}
	kv := kvRows(2000, 100, 0.3, 7)
	h.Reset()
	for _, r := range kv {
		fmt.Fprintf(h, "%v|%v|%v|%v\n", r[0], r[1], r[2], r[3])
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), "9ef957bef35f8759473078766f1512c1160a4c0d4f6f8c0d24b1348a6e4b4042"; got != want {
		t.Fatalf("kv rows hash %s, want %s", got, want)
	}
	keys := lookupKeys(kv)
	if len(keys) != 1384 || fmt.Sprint(keys[:5]) != "[884193869 170873151 614059130 540905604 206444207]" {
		t.Fatalf("lookup keys: %d distinct, first %v; want 1384, [884193869 170873151 614059130 540905604 206444207]", len(keys), keys[:5])
	}
}

// TestWideRowsMatchFlussBench: the first 2000 rows of the Fluss user's
// workload hash as `java FlussBench rowhash` prints (fields joined by '|',
// a row per line).
func TestWideRowsMatchFlussBench(t *testing.T) {
	h := sha256.New()
	for _, r := range wideRows(2000, wideStrLen(1024), 11) {
		var b strings.Builder
		for i, v := range r {
			if i > 0 {
				b.WriteByte('|')
			}
			fmt.Fprintf(&b, "%v", v)
		}
		b.WriteByte('\n')
		h.Write([]byte(b.String()))
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), "5e1840b5faffc2deca7ce8de5e0e50c914bf405c04defac6b456cbd699fc7b65"; got != want {
		t.Fatalf("wide rows hash %s, want %s (java FlussBench rowhash)", got, want)
	}
}
