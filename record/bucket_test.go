package record

import (
	"fmt"
	"math"
	"testing"
)

func TestBucketVectors(t *testing.T) {
	for i, v := range loadCodecVectors(t).Bucketing {
		name := fmt.Sprintf("%02d/%s/%d", i, v.KeyHex, v.NumBuckets)
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			key := codecHex(t, v.KeyHex)
			hash := bucketHash(key)
			if hash != v.Hash {
				t.Fatalf("hash = %d, want %d", hash, v.Hash)
			}
			if mixed := bucketMix(hash); mixed != v.Mixed {
				t.Fatalf("mixed = %d, want %d", mixed, v.Mixed)
			}
			if v.Bucket == nil {
				if v.Error == "" {
					t.Fatal("vector has neither bucket nor error")
				}
				assertCodecPanics(t, func() { BucketOf(key, v.NumBuckets) })
				return
			}
			if got := BucketOf(key, v.NumBuckets); got != *v.Bucket {
				t.Fatalf("BucketOf = %d, want %d", got, *v.Bucket)
			}
		})
	}
}

// TestMurmurMixIsMurmur3 checks the second mix against a published
// MurmurHash3_x86_32 value: seed 0 over four zero bytes is 0x2362f9de.
func TestMurmurMixIsMurmur3(t *testing.T) {
	if got := bucketMix(0); got != 0x2362f9de {
		t.Fatalf("bucketMix(0) = %#x, want 0x2362f9de", got)
	}
}

func TestBucketOfPanicsOnCallerBugs(t *testing.T) {
	assertCodecPanics(t, func() { BucketOf(nil, 4) })
	assertCodecPanics(t, func() { BucketOf([]byte{1}, 0) })
	assertCodecPanics(t, func() { BucketOf([]byte{1}, -3) })
}

func TestBucketOfRange(t *testing.T) {
	key := []byte("order-12345")
	for _, n := range []int{1, 2, 3, 7, 16, 1 << 20, 1<<31 - 1, 1 << 32, math.MaxInt} {
		if b := BucketOf(key, n); b < 0 || b >= n {
			t.Fatalf("BucketOf(_, %d) = %d", n, b)
		}
	}
}

// TestBucketOfRowVectors runs rows end to end: key codecs over the bucket key
// and the primary key, then BucketOf.
func TestBucketOfRowVectors(t *testing.T) {
	for i, v := range loadCodecVectors(t).BucketOfRow {
		t.Run(codecVectorName(i, v.BucketKey, v.Values), func(t *testing.T) {
			cols := codecVectorColumns(t, v.Types, v.Names)
			row := codecVectorRow(t, cols, v.Values)
			bk, err := NewKeyCodec(cols, v.BucketKey)
			if err != nil {
				t.Fatal(err)
			}
			key, err := bk.AppendRow(nil, row)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%x", key); got != v.BucketKeyHex {
				t.Fatalf("bucket key %s, want %s", got, v.BucketKeyHex)
			}
			if got := BucketOf(key, v.NumBuckets); got != v.Bucket {
				t.Fatalf("bucket %d, want %d", got, v.Bucket)
			}
			if v.PrimaryKey == nil {
				return
			}
			pk, err := NewKeyCodec(cols, v.PrimaryKey)
			if err != nil {
				t.Fatal(err)
			}
			pkBytes, err := pk.AppendRow(nil, row)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%x", pkBytes); got != v.PrimaryKeyHex {
				t.Fatalf("primary key %s, want %s", got, v.PrimaryKeyHex)
			}
		})
	}
}

func assertCodecPanics(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Helper()
			t.Fatal("did not panic")
		}
	}()
	f()
}
