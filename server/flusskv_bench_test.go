package server

import (
	"math/rand/v2"
	"strings"
	"testing"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/record"
)

// BenchmarkFlussLookup is the listener's side of FlussBench's lookup
// workload: its primary-key table (id BIGINT key, a INT, two STRINGs of
// 100 bytes, 2 buckets), keys looked up in LOOKUP requests of 128 (the Java
// client's client.lookup.batch-size) over one connection. ns/key is the
// node's cost per key with the framing and protobuf of a real request.
//
//	go test -run '^$' -bench 'BenchmarkFlussLookup$' -benchtime 3000x -cpuprofile cpu.out ./server/
func BenchmarkFlussLookup(b *testing.B) {
	const (
		ddl     = "id BIGINT NOT NULL, a INT, s1 STRING, s2 STRING"
		keys    = 100_000
		perCall = 128
	)
	cfg := testConfig(b, b.TempDir())
	cfg.FlussListen = freeAddr(b)
	s := startServer(b, cfg)
	info := createTable(b, s, "fluss", "kv", ddl, 2, "id")
	schema := schemaOf(b, ddl)
	schema.PrimaryKey = []string{"id"}
	kc := newKvCodecs(b, schema, info.SchemaId, 2, []string{"id"})
	c := dialFluss(b, cfg.FlussListen)
	pad := strings.Repeat("x", 100)
	for from := 0; from < keys; from += 1000 {
		var rows []record.Row
		for i := from; i < from+1000; i++ {
			rows = append(rows, record.Row{int64(i), int32(i), pad, pad})
		}
		putKvRows(b, c, kc, info.TableId, rows)
	}
	// The requests, built once: 128 random keys each, grouped by bucket.
	rng := rand.New(rand.NewPCG(3, 4))
	reqs := make([]*flusspb.LookupRequest, 64)
	for i := range reqs {
		rows := make([]record.Row, perCall)
		for j := range rows {
			rows[j] = record.Row{rng.Int64N(keys), nil, nil, nil}
		}
		reqs[i], _ = kc.lookupRequest(info.TableId, rows)
	}
	b.ResetTimer()
	for i := range b.N {
		var resp flusspb.LookupResponse
		if code := flussCall(b, c, protocol.Lookup, reqs[i%len(reqs)], &resp); code != protocol.None {
			b.Fatalf("LOOKUP: %s", code)
		}
		for _, br := range resp.BucketsResp {
			if br.ErrorCode != nil || len(br.Values) == 0 || br.Values[0].Values == nil {
				b.Fatalf("LOOKUP bucket %d: %v", br.GetBucketId(), br)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perCall), "ns/key")
}
