package logbatch

import "hash/crc32"

// The CRC-32C arithmetic that lets a header change without a second pass
// over the records. For a CRC with Go's conditioning (initial value and final
// XOR 0xffffffff), crc(X‖R) = shift(crc(X), len(R)) ⊕ crc(R), where shift
// multiplies by x^(8·len(R)) modulo the polynomial (zlib's crc32_combine). So
// two messages that end in the same R differ in CRC by shift(crc(X) ⊕ crc(Y)),
// which costs O(log len(R)) multiplications and never reads R.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// poly is CRC-32C's polynomial in reflected bit order.
const poly = 0x82f63b78

// mulmod returns a·b modulo poly, both in reflected order (bit 31 is x^0).
func mulmod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// x2k[k] is x^(2^k) modulo poly.
var x2k = func() (t [32]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = mulmod(t[k-1], t[k-1])
	}
	return t
}()

// shift returns c multiplied by x^(8n): the CRC register c after n more zero
// bytes, without the conditioning.
func shift(c uint32, n int) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n > 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulmod(x2k[k&31], p)
		}
	}
	return mulmod(p, c)
}

// swapPrefix returns crc(y‖r) given c = crc(x‖r), cx = crc(x), cy = crc(y)
// and n = len(r).
func swapPrefix(c, cx, cy uint32, n int) uint32 { return c ^ shift(cx^cy, n) }
