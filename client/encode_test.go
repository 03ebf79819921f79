package client

import (
	"bytes"
	"fmt"
	"testing"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// TestLookupEncodeByPrefix: where the bucket key is a prefix of the
// primary key (or the key itself), encode writes the key once and cuts the
// bucket key from it; the bytes, the bucket and the errors are those of
// encoding a full row with both codecs (encodeFull, the path of the other
// tables).
func TestLookupEncodeByPrefix(t *testing.T) {
	cols := []record.Column{
		{Name: "a", Type: record.DataType{Root: record.Int}},
		{Name: "v", Type: record.DataType{Root: record.String, Nullable: true}},
		{Name: "b", Type: record.DataType{Root: record.String}},
		{Name: "c", Type: record.DataType{Root: record.BigInt}},
	}
	keys := []record.Row{{int32(7), "x", int64(1)}, {int32(-3), "", int64(1 << 40)}, {int32(1 << 30), "a longer string key", int64(-1)}}
	for _, bucketKeys := range [][]string{{"a", "b", "c"}, {"a"}, {"a", "b"}} {
		t.Run(fmt.Sprint(bucketKeys), func(t *testing.T) {
			l := testLookuper(t, cols, []string{"a", "b", "c"}, bucketKeys)
			if !l.bucketIsPrefix {
				t.Fatal("bucket key not taken as a prefix of the primary key")
			}
			for _, k := range keys {
				got, err := l.encode(k)
				if err != nil {
					t.Fatal(err)
				}
				want, err := l.encodeFull(k)
				if err != nil {
					t.Fatal(err)
				}
				if got.bucket != want.bucket || !bytes.Equal(got.key, want.key) {
					t.Fatalf("key %v: bucket %d key %x, want bucket %d key %x", k, got.bucket, got.key, want.bucket, want.key)
				}
			}
			for _, bad := range []record.Row{{int32(1), "x"}, {int32(1), nil, int64(2)}, {"1", "x", int64(2)}} {
				_, err := l.encode(bad)
				_, want := l.encodeFull(bad)
				if err == nil || want == nil || err.Error() != want.Error() {
					t.Fatalf("key %v: error %v, want %v", bad, err, want)
				}
			}
		})
	}
	if l := testLookuper(t, cols, []string{"a", "b", "c"}, []string{"b"}); l.bucketIsPrefix {
		t.Fatal("bucket key (b) taken as a prefix of the primary key (a, b, c)")
	}
}

func testLookuper(t *testing.T, cols []record.Column, pk, bucketKeys []string) *Lookuper {
	t.Helper()
	tbl := &Table{
		info:   &stromv1.TableInfo{Descriptor_: &stromv1.TableDescriptor{BucketCount: 5}},
		schema: record.Schema{Columns: cols, PrimaryKey: pk},
		desc:   record.TableDescriptor{BucketKeys: bucketKeys},
	}
	l, err := tbl.NewLookuper()
	if err != nil {
		t.Fatal(err)
	}
	return l
}
