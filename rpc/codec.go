package rpc

import (
	"errors"
	"math/bits"
	"runtime"
	"sync"
	"unicode/utf8"
	"weak"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	stromv1 "strom/rpc/gen/strom/v1"
)

// Codec is Connect's binary protobuf codec ("proto") with one difference on
// the hot path of log tables: the record batches of a ProduceLogRequest are
// copied into buffers taken from a pool instead of fresh allocations, which
// at hundreds of MB/s would otherwise cost as much in allocation and
// garbage collection as the append itself. The handler gives the buffers
// back with ReleaseRecords once the log has copied them. Every other
// message, and a ProduceLogRequest with rows or fields this decoder does
// not know, goes through proto.Unmarshal unchanged.
type Codec struct{}

// Name is the codec's name, "proto": it replaces Connect's default.
func (Codec) Name() string { return "proto" }

// IsBinary tells Connect this codec's output is not text.
func (Codec) IsBinary() bool { return true }

// Marshal encodes a protobuf message.
func (Codec) Marshal(msg any) ([]byte, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil, errNotProto
	}
	return proto.Marshal(m)
}

// MarshalAppend encodes a protobuf message onto dst (Connect passes pooled
// buffers).
func (Codec) MarshalAppend(dst []byte, msg any) ([]byte, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil, errNotProto
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}

// Unmarshal decodes data into msg; data is not retained.
func (Codec) Unmarshal(data []byte, msg any) error {
	if p, ok := msg.(*stromv1.ProduceLogRequest); ok {
		if unmarshalProduce(data, p, copyToPooled) {
			return nil
		}
		ReleaseRecords(p)
		p.Reset()
	}
	m, ok := msg.(proto.Message)
	if !ok {
		return errNotProto
	}
	return proto.Unmarshal(data, m)
}

var errNotProto = errors.New("rpc: not a protobuf message")

// UnmarshalProduceInPlace decodes a ProduceLogRequest whose records may
// alias data: each bucket's Records is a subslice of data, not a copy, so
// data must outlive every use of m. A request with rows, or fields this
// decoder does not know, is decoded by proto.Unmarshal (which copies).
func UnmarshalProduceInPlace(data []byte, m *stromv1.ProduceLogRequest) error {
	if unmarshalProduce(data, m, func(v []byte) []byte { return v[:len(v):len(v)] }) {
		return nil
	}
	m.Reset()
	return proto.Unmarshal(data, m)
}

// unmarshalProduce decodes the binary clients' form of a ProduceLogRequest
// (fields 1 to 5) into m, each bucket's records as own returns them. It
// returns false, leaving m partly filled, for anything else: rows, unknown
// fields, unexpected wire types, malformed input; the caller then falls
// back to proto.Unmarshal, which gives the proper error for bad input.
func unmarshalProduce(b []byte, m *stromv1.ProduceLogRequest, own func([]byte) []byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 2) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return false
			}
			if num == 1 {
				m.Database = string(v)
			} else {
				m.Table = string(v)
			}
			b = b[n:]
		case (num == 3 || num == 4) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			if num == 3 {
				a := int32(v)
				m.Acks = &a
			} else {
				m.TimeoutMs = int32(v)
			}
			b = b[n:]
		case num == 5 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			pb := &stromv1.ProduceBucket{}
			m.Buckets = append(m.Buckets, pb)
			if !unmarshalProduceBucket(v, pb, own) {
				return false
			}
			b = b[n:]
		default:
			return false
		}
	}
	return true
}

func unmarshalProduceBucket(b []byte, pb *stromv1.ProduceBucket, own func([]byte) []byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			pb.Bucket = int32(v)
			b = b[n:]
		case num == 2 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			// A repeated field merges, as proto.Unmarshal does for
			// bytes: the last occurrence wins.
			PutBuffer(pb.Records)
			pb.Records = own(v)
			b = b[n:]
		default:
			return false
		}
	}
	return true
}

// ReleaseRecords gives the record buffers of m back to the pool and clears
// them. Call it once nothing reads m's records any more (after the append);
// calling it on a message not decoded by Codec is harmless, and not calling
// it (a call refused before its handler ran) only costs the pool a buffer.
func ReleaseRecords(m *stromv1.ProduceLogRequest) {
	for _, pb := range m.GetBuckets() {
		PutBuffer(pb.Records)
		pb.Records = nil
	}
}

// Pooled buffers come in power-of-two size classes from 64 KiB to 64 MiB;
// smaller records are cheap to allocate and larger ones rare.
const (
	minPooledShift = 16
	maxPooledShift = 26
)

var (
	recordPools [maxPooledShift - minPooledShift + 1]sync.Pool
	// lent holds every pooled buffer handed out and not given back, so
	// that PutBuffer never pools a slice it did not lend (one a caller
	// may still use). It holds them weakly: a buffer never given back (a
	// request refused before its handler ran) is collected as garbage, and
	// its entry removed.
	lent sync.Map // weak.Pointer[byte] (a buffer's first byte) → struct{}
)

// sizeClass returns the pool index for a buffer of n bytes, or -1.
func sizeClass(n int) int {
	if n < 1<<minPooledShift || n > 1<<maxPooledShift {
		return -1
	}
	return bits.Len(uint(n-1)) - minPooledShift
}

// copyToPooled returns a copy of v in a buffer from GetBuffer.
func copyToPooled(v []byte) []byte {
	buf := GetBuffer(len(v))
	copy(buf, v)
	return buf
}

// GetBuffer returns a slice of n bytes (contents undefined), pooled when n
// has a size class; give it back with PutBuffer when done.
func GetBuffer(n int) []byte {
	c := sizeClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	var buf []byte
	if p, ok := recordPools[c].Get().(*[]byte); ok {
		buf = (*p)[:n]
	} else {
		buf = make([]byte, n, 1<<(c+minPooledShift))
		first := &buf[:1][0]
		runtime.AddCleanup(first, func(w weak.Pointer[byte]) { lent.Delete(w) }, weak.Make(first))
	}
	lent.Store(weak.Make(&buf[:1][0]), struct{}{})
	return buf
}

// PutBuffer gives back a buffer from GetBuffer; nothing may use it after.
// Other slices are left alone.
func PutBuffer(b []byte) {
	if cap(b) == 0 {
		return
	}
	if _, ok := lent.LoadAndDelete(weak.Make(&b[:1][0])); !ok {
		return
	}
	b = b[:0]
	recordPools[sizeClass(cap(b))].Put(&b)
}
