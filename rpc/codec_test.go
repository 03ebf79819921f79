package rpc

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"pgregory.net/rapid"

	stromv1 "strom/rpc/gen/strom/v1"
)

func genProduceRequest(t *rapid.T) *stromv1.ProduceLogRequest {
	m := &stromv1.ProduceLogRequest{
		Database:  rapid.StringN(0, 8, -1).Draw(t, "database"),
		Table:     rapid.StringN(0, 8, -1).Draw(t, "table"),
		TimeoutMs: rapid.Int32().Draw(t, "timeout"),
	}
	if rapid.Bool().Draw(t, "hasAcks") {
		a := rapid.Int32().Draw(t, "acks")
		m.Acks = &a
	}
	for i := range rapid.IntRange(0, 4).Draw(t, "buckets") {
		_ = i
		// Sizes on both sides of the pooled classes.
		n := rapid.SampledFrom([]int{0, 1, 100, 1 << 16, 1<<16 + 1, 200_000}).Draw(t, "size")
		rec := bytes.Repeat([]byte{byte(i + 1)}, n)
		m.Buckets = append(m.Buckets, &stromv1.ProduceBucket{Bucket: rapid.Int32().Draw(t, "bucket"), Records: rec})
	}
	if rapid.Bool().Draw(t, "rows") {
		st, _ := structpb.NewStruct(map[string]any{"a": 1.0})
		m.Rows = []*structpb.Struct{st}
	}
	return m
}

// Both decoders give what proto.Unmarshal gives, for every request
// protoc-generated code can write.
func TestProduceDecodersMatchProto(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genProduceRequest(t)
		data, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var pooled, inPlace stromv1.ProduceLogRequest
		if err := (Codec{}).Unmarshal(data, &pooled); err != nil {
			t.Fatalf("Codec.Unmarshal: %v", err)
		}
		if err := UnmarshalProduceInPlace(data, &inPlace); err != nil {
			t.Fatalf("UnmarshalProduceInPlace: %v", err)
		}
		if !proto.Equal(&pooled, m) || !proto.Equal(&inPlace, m) {
			t.Fatalf("decoded differently:\nwant %v\npooled %v\nin place %v", m, &pooled, &inPlace)
		}
		ReleaseRecords(&pooled)
		ReleaseRecords(&inPlace) // aliases data: nothing to give back
	})
}

// Records of a released request are reused by the next decode; a caller's
// own slices never enter the pool.
func TestReleaseRecordsPoolsOnlyLentBuffers(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 100_000)
	data, err := proto.Marshal(&stromv1.ProduceLogRequest{Buckets: []*stromv1.ProduceBucket{{Records: big}}})
	if err != nil {
		t.Fatal(err)
	}
	var m stromv1.ProduceLogRequest
	if err := (Codec{}).Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if &m.Buckets[0].Records[0] == &data[len(data)-len(big)] {
		t.Fatal("Codec.Unmarshal aliased its input")
	}
	ReleaseRecords(&m)
	if m.Buckets[0].Records != nil {
		t.Fatal("ReleaseRecords left the records set")
	}

	own := &stromv1.ProduceLogRequest{Buckets: []*stromv1.ProduceBucket{{Records: big}}}
	ReleaseRecords(own)
	for range 10 {
		b := GetBuffer(len(big))
		if &b[0] == &big[0] {
			t.Fatal("a caller's slice was pooled")
		}
		defer PutBuffer(b)
	}
	if !bytes.Equal(big, bytes.Repeat([]byte{7}, 100_000)) {
		t.Fatal("a caller's slice was written")
	}
}

// FuzzProduceDecoders: on any bytes, both decoders agree with
// proto.Unmarshal on whether the input is valid and on the message.
func FuzzProduceDecoders(f *testing.F) {
	seed := &stromv1.ProduceLogRequest{Database: "d", Table: "t", TimeoutMs: 5,
		Buckets: []*stromv1.ProduceBucket{{Bucket: 1, Records: []byte("abc")}, {Bucket: 2}}}
	a := int32(-1)
	seed.Acks = &a
	data, _ := proto.Marshal(seed)
	f.Add(data)
	f.Add([]byte{})
	f.Add([]byte{0x2a, 0x03, 0x12, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, pooled, inPlace stromv1.ProduceLogRequest
		wantErr := proto.Unmarshal(data, &want)
		pooledErr := (Codec{}).Unmarshal(data, &pooled)
		inPlaceErr := UnmarshalProduceInPlace(data, &inPlace)
		if (wantErr == nil) != (pooledErr == nil) || (wantErr == nil) != (inPlaceErr == nil) {
			t.Fatalf("errors: proto %v, pooled %v, in place %v", wantErr, pooledErr, inPlaceErr)
		}
		if wantErr == nil && (!proto.Equal(&want, &pooled) || !proto.Equal(&want, &inPlace)) {
			t.Fatalf("decoded differently:\nwant %v\npooled %v\nin place %v", &want, &pooled, &inPlace)
		}
		ReleaseRecords(&pooled)
	})
}

// A lent buffer never given back (a call refused before its handler ran)
// is garbage like any other: the record of its lending does not keep it.
func TestUnreleasedBuffersAreCollected(t *testing.T) {
	count := func() int {
		n := 0
		lent.Range(func(any, any) bool { n++; return true })
		return n
	}
	before := count()
	func() {
		buf := GetBuffer(40 << 20) // a class no other test uses: a fresh buffer
		if count() != before+1 || len(buf) != 40<<20 {
			t.Fatalf("%d buffers lent, want %d", count(), before+1)
		}
	}() // and the buffer is dropped
	for i := 0; count() != before; i++ {
		if i == 100 {
			t.Fatalf("%d buffers still recorded as lent after collection, want %d", count(), before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
