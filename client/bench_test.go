package client_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"strom/client"
	"strom/record"
)

// The benchmarks here compare a client feature on and off, in one run,
// against a real server started in-process (real Pebble and files). Their
// variants run in the order given, or reversed with
// STROM_BENCH_REVERSE=1, so that two runs in both orders show what the
// machine's load does to the ratio. docs/benchmarks.md ("Client") has the
// commands and the figures.

// variants runs each of names as a sub-benchmark of b, through run.
func variants(b *testing.B, names []string, run func(b *testing.B, name string)) {
	if os.Getenv("STROM_BENCH_REVERSE") == "1" {
		names = slices.Clone(names)
		slices.Reverse(names)
	}
	for _, n := range names {
		b.Run(n, func(b *testing.B) { run(b, n) })
	}
}

// BenchmarkLookuperGet: 1000 concurrent Gets of random keys of 10,000
// rows, with one Lookup request in flight at a time (the batcher before
// client.lookup.max-inflight-requests) and with 128 (the default).
func BenchmarkLookuperGet(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const rows = 10_000
	tbl := kvTable(b, ctx, startNode(b), rows, nil)
	variants(b, []string{"inflight=1", "inflight=128"}, func(b *testing.B, name string) {
		var n int
		if _, err := fmt.Sscanf(name, "inflight=%d", &n); err != nil {
			b.Fatal(err)
		}
		l, err := tbl.NewLookuper(client.LookupMaxInflight(n))
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.SetParallelism(1000 / max(1, testingProcs()))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
			for pb.Next() {
				if _, err := l.Get(ctx, record.Row{rng.Int64N(rows)}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
	})
}

// testingProcs is GOMAXPROCS, by which RunParallel multiplies its
// parallelism.
func testingProcs() int { return runtime.GOMAXPROCS(0) }
