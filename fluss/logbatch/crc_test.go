package logbatch

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// swapPrefix must agree with computing the CRC from scratch, for prefixes of
// different lengths and suffixes of every size class (0, short, past the
// table's 2^k steps).
func TestSwapPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 7, 8, 100, 4095, 65537, 1 << 20} {
		r := make([]byte, n)
		for i := range r {
			r[i] = byte(rng.Uint32())
		}
		for _, lens := range [][2]int{{23, 27}, {27, 23}, {0, 5}, {23, 23}} {
			x, y := make([]byte, lens[0]), make([]byte, lens[1])
			for i := range x {
				x[i] = byte(rng.Uint32())
			}
			for i := range y {
				y[i] = byte(rng.Uint32())
			}
			c := crc32.Checksum(append(append([]byte(nil), x...), r...), castagnoli)
			want := crc32.Checksum(append(append([]byte(nil), y...), r...), castagnoli)
			if got := swapPrefix(c, crc32.Checksum(x, castagnoli), crc32.Checksum(y, castagnoli), n); got != want {
				t.Fatalf("n=%d prefixes %v: got %#x, want %#x", n, lens, got, want)
			}
		}
	}
}
