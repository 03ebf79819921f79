package client_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
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
	// Count the Lookup requests, keeping the connections open as the
	// client's own transport does (the default transport keeps 2).
	var lookups atomic.Int64
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	tbl := kvTable(b, ctx, startNode(b), rows, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/Lookup") {
			lookups.Add(1)
		}
		return tr.RoundTrip(r)
	}))
	// Warm the node's caches: the first variant should not pay for them.
	l, err := tbl.NewLookuper()
	if err != nil {
		b.Fatal(err)
	}
	for k := int64(0); k < rows; k += 500 {
		keys := make([]record.Row, 500)
		for i := range keys {
			keys[i] = record.Row{k + int64(i)}
		}
		if _, err := l.Lookup(ctx, keys...); err != nil {
			b.Fatal(err)
		}
	}
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
		sent := lookups.Load()
		cpu := processCPU(b)
		b.RunParallel(func(pb *testing.PB) {
			rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
			for pb.Next() {
				if _, err := l.Get(ctx, record.Row{rng.Int64N(rows)}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		// CPU per key (client and server): what a busy machine inflates
		// far less than the time per key.
		b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/key")
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
		b.ReportMetric(float64(b.N)/float64(max(1, lookups.Load()-sent)), "keys/request")
	})
}

// processCPU is the process's user and system CPU time in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// testingProcs is GOMAXPROCS, by which RunParallel multiplies its
// parallelism.
func testingProcs() int { return runtime.GOMAXPROCS(0) }

// benchLogTable creates a log table demo.scan of BIGINT, two STRINGs, a
// DOUBLE and an INT, over buckets buckets, holding rows rows.
func benchLogTable(b *testing.B, ctx context.Context, rows int, buckets int32) *client.Table {
	b.Helper()
	tbl := createTable(b, startNode(b), "demo", "scan", buckets, nil,
		&stromv1.Column{Name: "id", Type: "BIGINT"}, &stromv1.Column{Name: "name", Type: "STRING"},
		&stromv1.Column{Name: "city", Type: "STRING"}, &stromv1.Column{Name: "price", Type: "DOUBLE"},
		&stromv1.Column{Name: "qty", Type: "INT"})
	w, err := tbl.NewAppendWriter(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for i := range rows {
		w.Append(ctx, record.Row{int64(i), fmt.Sprintf("customer-%d", i), "Amsterdam", float64(i) / 100, int32(i % 50)})
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	return tbl
}

// scanAll reads every bucket of tbl from the start until it has read rows
// rows, handing each Poll's fetches to read, and returns the rows read.
func scanAll(b *testing.B, ctx context.Context, tbl *client.Table, rows int, opts []client.ScanOption, read func(client.Fetches) int) {
	b.Helper()
	sc, err := tbl.NewLogScanner(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close()
	for bucket := range tbl.Buckets() {
		if err := sc.Subscribe(ctx, bucket, client.AtOffset(0)); err != nil {
			b.Fatal(err)
		}
	}
	for n := 0; n < rows; {
		fs, err := sc.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := fs.Errors(); err != nil {
			b.Fatal(err)
		}
		n += read(fs)
		fs.Release()
	}
}

// BenchmarkScanRecordsVsView: a scan of 200,000 rows of 5 columns reading
// every value, through Records (a row per record, strings copied) and
// through Rows (a view over the Arrow batch).
func BenchmarkScanRecordsVsView(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const rows = 200_000
	tbl := benchLogTable(b, ctx, rows, 4)
	var sink int64
	read := map[string]func(client.Fetches) int{
		"records": func(fs client.Fetches) int {
			recs := fs.Records()
			for _, r := range recs {
				sink += r.Row[0].(int64) + int64(len(r.Row[1].(string))+len(r.Row[2].(string))) + int64(r.Row[3].(float64)) + int64(r.Row[4].(int32))
			}
			return len(recs)
		},
		"view": func(fs client.Fetches) int {
			n := 0
			for v := range fs.Rows() {
				sink += v.Int64(0) + int64(len(v.String(1))+len(v.String(2))) + int64(v.Float64(3)) + int64(v.Int32(4))
				n++
			}
			return n
		},
	}
	variants(b, []string{"records", "view"}, func(b *testing.B, name string) {
		for b.Loop() {
			scanAll(b, ctx, tbl, rows, []client.ScanOption{client.MaxWait(0)}, read[name])
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkScanPrefetch: the same scan, reading every value through
// Records, with the fetch as it was before prefetching (Poll sends the
// fetches and waits for them) and with prefetching (the next fetch, and
// its decoding, proceed while the caller reads).
func BenchmarkScanPrefetch(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const rows = 200_000
	tbl := benchLogTable(b, ctx, rows, 4)
	var sink int64
	read := func(fs client.Fetches) int {
		recs := fs.Records()
		for _, r := range recs {
			sink += r.Row[0].(int64) + int64(len(r.Row[1].(string))+len(r.Row[2].(string))) + int64(r.Row[3].(float64)) + int64(r.Row[4].(int32))
		}
		return len(recs)
	}
	opts := map[string][]client.ScanOption{
		"prefetch=off": {client.MaxWait(0), client.NoPrefetch()},
		"prefetch=on":  {client.MaxWait(0)},
	}
	variants(b, []string{"prefetch=off", "prefetch=on"}, func(b *testing.B, name string) {
		for b.Loop() {
			scanAll(b, ctx, tbl, rows, opts[name], read)
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// wideRows returns n rows of 20 columns, ~1 KB each (the columns of
// wideColumns: BIGINT, STRING of 200 random characters, INT, DOUBLE, and
// again).
func wideRows(n int) []record.Row {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
		s := make([]byte, 200)
		for i := range s {
			s[i] = letters[rng.IntN(len(letters))]
		}
		return string(s)
	}
	rows := make([]record.Row, n)
	for i := range rows {
		r := make(record.Row, 20)
		for c := range r {
			switch c % 4 {
			case 0:
				r[c] = rng.Int64()
			case 1:
				r[c] = word()
			case 2:
				r[c] = rng.Int32()
			case 3:
				r[c] = rng.Float64()
			}
		}
		rows[i] = r
	}
	return rows
}

// wideColumns are the columns of wideRows, c0 to c19.
func wideColumns() []*stromv1.Column {
	types := []string{"BIGINT", "STRING", "INT", "DOUBLE"}
	var cols []*stromv1.Column
	for i := range 20 {
		cols = append(cols, &stromv1.Column{Name: fmt.Sprintf("c%d", i), Type: types[i%4]})
	}
	return cols
}

// BenchmarkAppend: 50,000 rows of 20 columns (~1 KB, ZSTD level 3, the
// default) appended into 2 buckets and flushed, with each batch built
// (encoded and compressed) in the appending goroutine under the writer's
// lock, as before, and by its bucket's sender, overlapping the appends.
func BenchmarkAppend(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const n = 50_000
	tbl := createTable(b, startNode(b), "demo", "produce", 2, nil, wideColumns()...)
	rows := wideRows(n)
	opts := map[string][]client.WriterOption{
		"build=append": {client.BuildInAppend()},
		"build=sender": nil,
	}
	variants(b, []string{"build=append", "build=sender"}, func(b *testing.B, name string) {
		w, err := tbl.NewAppendWriter(ctx, opts[name]...)
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close(ctx)
		for b.Loop() {
			for _, r := range rows {
				w.Append(ctx, r)
			}
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkScanColumns: a scan of 100,000 rows of 20 columns (2 buckets)
// reading 5 and 10 of them, as the side-by-side's pruned scans do: the
// batches decoded, no value read; a fetch's batches decoded one after
// another (the default) and GOMAXPROCS at once (",parallel"; the numbers in
// docs/benchmarks.md were taken when that was the default and the serial
// variant was ",serial"); and ",after-decode", each bucket fetched again
// only once its answer is decoded and polled (the scanner before it fetched
// while decoding). Whole rows are columns=20.
func BenchmarkScanColumns(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const n = 100_000
	tbl := createTable(b, startNode(b), "demo", "wide", 2, nil, wideColumns()...)
	w, err := tbl.NewAppendWriter(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range wideRows(n) {
		w.Append(ctx, r)
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	var names []string
	for _, c := range wideColumns() {
		names = append(names, c.Name)
	}
	count := func(fs client.Fetches) int {
		n := 0
		for _, f := range fs {
			for _, bt := range f.Batches {
				n += bt.Len()
			}
		}
		return n
	}
	variants(b, []string{"columns=1", "columns=5", "columns=5,after-decode", "columns=5,parallel", "columns=10", "columns=10,after-decode", "columns=10,parallel",
		"columns=20", "columns=20,after-decode"}, func(b *testing.B, name string) {
		var k int
		if _, err := fmt.Sscanf(name, "columns=%d", &k); err != nil {
			b.Fatal(err)
		}
		opts := []client.ScanOption{client.MaxWait(0), client.FetchMaxBytes(16<<20, 1<<20), client.Columns(names[:k]...)}
		switch {
		case strings.HasSuffix(name, ",parallel"):
			opts = append(opts, client.DecodeConcurrency(runtime.GOMAXPROCS(0)))
		case strings.HasSuffix(name, ",after-decode"): // the fetch before it overlapped the decode
			opts = append(opts, client.FetchAfterDecode())
		}
		for b.Loop() {
			scanAll(b, ctx, tbl, n, opts, count)
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}
