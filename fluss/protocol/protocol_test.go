package protocol

import (
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// The tables carry Fluss 0.9.1's values: spot checks against ApiKeys.java and
// Errors.java, and the key ids dense from 1000 as Info assumes.
func TestTables(t *testing.T) {
	keys := APIKeys()
	if len(keys) != 60 {
		t.Fatalf("%d API keys, want Fluss 0.9.1's 60 (1000..1059)", len(keys))
	}
	for i, k := range keys {
		if int(k.Key) != 1000+i {
			t.Fatalf("row %d is key %d, want %d", i, k.Key, 1000+i)
		}
		if got, ok := Info(k.Key); !ok || got != k {
			t.Fatalf("Info(%d) = %v, %v", k.Key, got, ok)
		}
	}
	for _, c := range []struct {
		key      APIKey
		name     string
		min, max int16
		public   bool
	}{
		{ApiVersions, "API_VERSIONS", 0, 0, true},
		{PutKv, "PUT_KV", 0, 1, true},
		{Lookup, "LOOKUP", 0, 1, true},
		{PrefixLookup, "PREFIX_LOOKUP", 0, 1, true},
		{UpdateMetadata, "UPDATE_METADATA", 0, 0, false},
		{GetTableStats, "GET_TABLE_STATS", 0, 0, true},
	} {
		got, ok := Info(c.key)
		if !ok || got.Name != c.name || got.MinVersion != c.min || got.MaxVersion != c.max || got.Public != c.public {
			t.Errorf("Info(%d) = %+v, %v; want %s %d..%d public=%v", c.key, got, ok, c.name, c.min, c.max, c.public)
		}
	}
	for _, k := range []APIKey{0, 999, 1060, -1} {
		if _, ok := Info(k); ok {
			t.Errorf("Info(%d) found a key Fluss 0.9.1 does not have", k)
		}
	}
	if s := APIKey(1060).String(); s != "UNKNOWN(1060)" {
		t.Errorf("String of 1060 = %q", s)
	}
	if s := FetchLog.String(); s != "FETCH_LOG(1015)" {
		t.Errorf("String of FetchLog = %q", s)
	}

	if len(errorCodes) != 65 {
		t.Fatalf("%d error codes, want Fluss 0.9.1's 65 (-1..63)", len(errorCodes))
	}
	for _, c := range []struct {
		code ErrorCode
		val  int32
		name string
	}{
		{UnknownServerError, -1, "UNKNOWN_SERVER_ERROR"},
		{None, 0, "NONE"},
		{UnsupportedVersion, 2, "UNSUPPORTED_VERSION"},
		{TableNotExist, 7, "TABLE_NOT_EXIST"},
		{LakeSnapshotNotExist, 53, "LAKE_SNAPSHOT_NOT_EXIST"},
		{InvalidProducerIdException, 63, "INVALID_PRODUCER_ID_EXCEPTION"},
	} {
		if int32(c.code) != c.val || c.code.String() != c.name {
			t.Errorf("%s = %d, want %s = %d", c.code, int32(c.code), c.name, c.val)
		}
	}
	if m := TableNotExist.DefaultMessage(); m != "The table does not exist." {
		t.Errorf("TableNotExist message %q", m)
	}
	if m := None.DefaultMessage(); m != "" {
		t.Errorf("None message %q", m)
	}
}

// Every key of Fluss 0.9.1 has its request and response messages in
// FlussApi.proto, found by Messages.
func TestMessages(t *testing.T) {
	for _, k := range APIKeys() {
		req, resp, ok := Messages(k.Key)
		if !ok {
			t.Errorf("%s: no request/response messages", k.Key)
			continue
		}
		t.Logf("%s: %s, %s", k.Key, req.ProtoReflect().Descriptor().Name(), resp.ProtoReflect().Descriptor().Name())
	}
	if req, _, _ := Messages(ApiVersions); req.ProtoReflect().Descriptor().FullName() != "fluss.ApiVersionsRequest" {
		t.Errorf("API_VERSIONS request is %s", req.ProtoReflect().Descriptor().FullName())
	}
	if _, _, ok := Messages(999); ok {
		t.Error("Messages(999) found messages for a key Fluss does not have")
	}
}

// BenchmarkMessages is Messages for a key ("cached") against the lookup
// it replaced ("by-name": the names built and found in the registry for
// every call), in one process; STROM_BENCH_REVERSE=1 runs them in the other
// order. docs/benchmarks.md has the figures.
func BenchmarkMessages(b *testing.B) {
	cases := []struct {
		name string
		fn   func(APIKey) (proto.Message, proto.Message, bool)
	}{{"by-name", messagesByName}, {"cached", Messages}}
	if os.Getenv("STROM_BENCH_REVERSE") == "1" {
		slices.Reverse(cases)
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.fn(Lookup)
			}
		})
	}
}

// messagesByName is Messages as it was before messageTypes.
func messagesByName(key APIKey) (req, resp proto.Message, ok bool) {
	info, ok := Info(key)
	if !ok {
		return nil, nil, false
	}
	stem := messageStem[key]
	if stem == "" {
		for _, w := range strings.Split(strings.ToLower(info.Name), "_") {
			stem += strings.ToUpper(w[:1]) + w[1:]
		}
	}
	reqType, err1 := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("fluss." + stem + "Request"))
	respType, err2 := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("fluss." + stem + "Response"))
	if err1 != nil || err2 != nil {
		return nil, nil, false
	}
	return reqType.New().Interface(), respType.New().Interface(), true
}
