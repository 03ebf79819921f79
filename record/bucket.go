package record

import "math/bits"

// Bucketing follows Fluss's FlussBucketingFunction (the default, non-lake
// bucketing), MurmurHashUtils.hashBytes and MathUtils.murmurHash; see
// FORMATS.md §1 and CODECS.md.

// MurmurHash constants (MurmurHash3_x86_32).
const (
	murmurC1   uint32 = 0xcc9e2d51
	murmurC2   uint32 = 0x1b873593
	murmurN    uint32 = 0xe6546b64
	bucketSeed uint32 = 42 // MurmurHashUtils.DEFAULT_SEED
)

// BucketOf returns the bucket, in [0, numBuckets), of a row whose bucket key
// encodes to key: the compacted key encoding (KeyCodec) of the bucket-key
// columns, in bucket-key order. It is Fluss's FlussBucketingFunction, so a
// row lands in the bucket Fluss would choose.
//
// key must not be empty (no compacted key is: every field takes at least one
// byte) and numBuckets must be at least 1; BucketOf panics otherwise, as Fluss
// throws, because either is a caller bug. Callers holding key bytes from
// outside check len(key) > 0 first.
func BucketOf(key []byte, numBuckets int) int {
	if len(key) == 0 {
		panic("record: BucketOf: empty bucket key")
	}
	if numBuckets < 1 {
		panic("record: BucketOf: numBuckets must be at least 1")
	}
	// bucketMix is below 2^31, so int holds it on every platform.
	return int(bucketMix(bucketHash(key))) % numBuckets
}

// bucketHash is MurmurHashUtils.hashBytes(key) with seed 42: MurmurHash3
// x86_32, except that each of the 0–3 tail bytes is mixed in as a whole
// block, sign-extended (Fluss's hashBytesByInt). It equals standard
// MurmurHash3 for lengths that are multiples of 4.
func bucketHash(key []byte) int32 {
	h := bucketSeed
	n := len(key) &^ 3
	for i := 0; i < n; i += 4 {
		h = murmurMixH(h, murmurMixK(le.Uint32(key[i:])))
	}
	for _, c := range key[n:] {
		h = murmurMixH(h, murmurMixK(uint32(int32(int8(c)))))
	}
	return int32(murmurFmix(h ^ uint32(len(key))))
}

// bucketMix is MathUtils.murmurHash(hash): MurmurHash3 x86_32 with seed 0 of
// the four little-endian bytes of hash, made non-negative. Java's Math.abs
// would leave MinInt32 negative; Fluss maps it to 0.
func bucketMix(hash int32) uint32 {
	m := int32(murmurFmix(murmurMixH(0, murmurMixK(uint32(hash))) ^ 4))
	switch {
	case m == -1<<31:
		return 0
	case m < 0:
		return uint32(-m)
	}
	return uint32(m)
}

func murmurMixK(k uint32) uint32 {
	k *= murmurC1
	k = bits.RotateLeft32(k, 15)
	return k * murmurC2
}

func murmurMixH(h, k uint32) uint32 {
	h ^= k
	h = bits.RotateLeft32(h, 13)
	return h*5 + murmurN
}

func murmurFmix(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
