package client

import (
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	stromv1 "strom/rpc/gen/strom/v1"
)

// unmarshalFetchLog reads what proto.Unmarshal reads, with each bucket's
// records a slice of the reply rather than a copy.
func TestUnmarshalFetchLogIsProtoUnmarshal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &stromv1.FetchLogResponse{
			SchemaId: rapid.Int32().Draw(t, "schema"),
			Columns:  rapid.SliceOfN(rapid.String(), 0, 3).Draw(t, "columns"),
		}
		for range rapid.IntRange(0, 4).Draw(t, "buckets") {
			r := &stromv1.FetchBucketResult{
				Bucket:         rapid.Int32().Draw(t, "bucket"),
				HighWatermark:  rapid.Int64().Draw(t, "hw"),
				LogStartOffset: rapid.Int64().Draw(t, "start"),
				NextOffset:     rapid.Int64().Draw(t, "next"),
				Records:        rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "records"),
			}
			if rapid.Bool().Draw(t, "hasError") {
				r.Error = &stromv1.ErrorDetail{Code: rapid.Int32().Draw(t, "code"), Name: rapid.String().Draw(t, "name")}
			}
			m.Buckets = append(m.Buckets, r)
		}
		data, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		want := &stromv1.FetchLogResponse{}
		if err := proto.Unmarshal(data, want); err != nil {
			t.Fatal(err)
		}
		got := &stromv1.FetchLogResponse{}
		if err := unmarshalFetchLog(data, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		lo, hi := uintptr(unsafe.Pointer(unsafe.SliceData(data))), uintptr(unsafe.Pointer(unsafe.SliceData(data)))+uintptr(len(data))
		for _, r := range got.Buckets {
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(r.Records))); len(r.Records) > 0 && (p < lo || p >= hi) {
				t.Fatalf("bucket %d: records copied, not a slice of the reply", r.Bucket)
			}
		}
	})
}

// A reply that is not a valid message is an error, as for proto.Unmarshal.
func TestUnmarshalFetchLogRefusesBadInput(t *testing.T) {
	for _, data := range [][]byte{{0x0a}, {0x0a, 0x05, 0x22}, {0x0a, 0x02, 0x22, 0x05}, {0xff}} {
		if err := unmarshalFetchLog(data, &stromv1.FetchLogResponse{}); err == nil {
			t.Errorf("%x: no error", data)
		}
	}
}
