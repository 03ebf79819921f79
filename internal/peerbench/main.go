// Command peerbench is the Strom side of scripts/bench-peers.sh. It runs
// exactly the workloads of scripts/peerbench/FlussBench.java (its `bench`
// mode) through Strom's public Go client (strom/client), on the same rows
// from the same seeds, and prints one JSON object with the keys FlussBench
// prints.
//
//	peerbench bench HOST:PORT     run the workloads against a Strom node
//	peerbench report [FILE]       aggregate bench-peers.sh's per-round results (see report.go)
//
// The workloads: a log table of 20 columns (~2 KB a row, ZSTD level 3,
// BUCKETS buckets) produced, then read whole and pruned to 1, 5 and 10
// columns; a primary-key table (id BIGINT, a INT, s1 STRING, s2 STRING)
// upserted and every key looked up; and the workload of a Fluss user's
// choosing (WIDE_*): a primary-key table of 8 columns, ~1 KB a row, in 8
// buckets, upserted, then every key looked up with lookups batched 100
// keys a request.
//
// Knobs come from the environment, named as in FlussBench: N, KV_N,
// BUCKETS, ROW_BYTES, KV_STR_BYTES, UPDATE_RATIO, LOOKUP_INFLIGHT, WIDE_N
// (100000; 0 skips the workload), WIDE_BUCKETS (8), WIDE_ROW_BYTES (1024),
// WIDE_LOOKUP_BATCH (100), DB, KEEP, DATA_DIR (the node's data dir, for the
// stored size), plus the client settings BATCH_SIZE (2 MiB, Fluss's
// client.writer.batch-size), LOOKUP_BATCH (128), LOOKUP_BATCH_TIMEOUT
// (100ms: Fluss's client.lookup.* defaults), SCAN_WAIT (0s), and CPUPROFILE
// (a file: write a CPU profile of the client), SERVER_PIDS (the server's
// processes: each workload then reports their CPU time beside the client's,
// cpu.go).
// An experiment that leaves the paired workload (never used by
// bench-peers.sh): SCAN_ROWS=records reads rows through Fetches.Records().
// Progress goes to stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

const getTimeout = 120 * time.Second

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "report" {
		if err := report(os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 3 || os.Args[1] != "bench" {
		fmt.Fprintln(os.Stderr, "usage: peerbench bench HOST:PORT | peerbench report [FILE]")
		os.Exit(2)
	}
	if p := os.Getenv("CPUPROFILE"); p != "" { // a CPU profile of the client, for finding where its time goes
		f, err := os.Create(p)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "CPUPROFILE:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	out, err := bench(context.Background(), os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "[bench] failed:", err)
		fmt.Printf(`{"peer":"strom","ok":false,"error":%q}`+"\n", strings.ReplaceAll(err.Error(), "\n", " | "))
		pprof.StopCPUProfile()
		os.Exit(1)
	}
	fmt.Println(out.json())
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "[bench] "+format+"\n", args...) }

func env(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func intEnv(k string, d int) int {
	v, err := strconv.Atoi(env(k, strconv.Itoa(d)))
	if err != nil {
		panic(fmt.Sprintf("%s: %v", k, err))
	}
	return v
}

func durEnv(k string, d time.Duration) time.Duration {
	v, err := time.ParseDuration(env(k, d.String()))
	if err != nil {
		panic(fmt.Sprintf("%s: %v", k, err))
	}
	return v
}

func bench(ctx context.Context, addr string) (*omap, error) {
	n := intEnv("N", 200000)
	kvN := intEnv("KV_N", 200000)
	buckets := intEnv("BUCKETS", 2)
	rowBytes := intEnv("ROW_BYTES", 2048)
	kvStr := intEnv("KV_STR_BYTES", 100)
	updateRatio, err := strconv.ParseFloat(env("UPDATE_RATIO", "0.3"), 64)
	if err != nil {
		return nil, fmt.Errorf("UPDATE_RATIO: %w", err)
	}
	inflight := intEnv("LOOKUP_INFLIGHT", 1000)
	db := env("DB", "bench")
	batchSize := intEnv("BATCH_SIZE", 2<<20)
	lookupBatch := intEnv("LOOKUP_BATCH", 128)
	lookupTimeout := durEnv("LOOKUP_BATCH_TIMEOUT", 100*time.Millisecond)
	scanWait := durEnv("SCAN_WAIT", 0)

	c, err := client.New(addr)
	if err != nil {
		return nil, err
	}
	adm := c.Admin()
	if err := retry(ctx, func() error {
		_, err := adm.CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: db, IgnoreIfExists: true})
		return err
	}); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	res := &omap{}
	// The writers' settings: Fluss's client defaults (client.writer.*), acks=all.
	writerOpts := []client.WriterOption{client.Acks(-1), client.BatchSize(batchSize), client.BatchTimeout(100 * time.Millisecond),
		client.BufferMemory(64 << 20), client.MaxInflight(5), client.Idempotent(true)}

	// (a) the log table "pruning": 20 columns, ~2 KB a row, ZSTD level 3
	logName := fmt.Sprintf("pruning_%d", time.Now().Unix())
	names := pruningColumnNames()
	schema := client.NewSchema()
	for i, nm := range names {
		schema.Column(nm, pruningTypes[i%4])
	}
	info, err := adm.Create(ctx, db, logName, client.NewTable(schema).DistributedBy(buckets).
		Property(record.OptLogFormat, "ARROW").
		Property(record.OptLogArrowCompressionType, "ZSTD").
		Property(record.OptLogArrowZstdLevel, "3"), false)
	if err != nil {
		return nil, fmt.Errorf("create table %s.%s: %w", db, logName, err)
	}
	strLen := pruningStrLen(rowBytes)
	rowPayload := pruningPayload(20, strLen)
	logf("generating %d pruning rows (%d B payload each, strings %d B) ...", n, rowPayload, strLen)
	rng := newSplittable(42)
	rows := make([]record.Row, n)
	for i := range rows {
		rows[i] = pruningRow(rng, strLen)
	}
	t, err := c.Table(ctx, db, logName)
	if err != nil {
		return nil, err
	}
	logf("produce: %d rows into %s.%s (%d buckets), AppendWriter, acks=-1, batch %d B", n, db, logName, buckets, batchSize)
	w, err := t.NewAppendWriter(ctx, writerOpts...)
	if err != nil {
		return nil, err
	}
	var firstErr error
	cpu := startCPU()
	t0 := time.Now()
	for _, r := range rows {
		if f := w.Append(ctx, r); firstErr == nil && isDone(f) && f.Err() != nil {
			firstErr = f.Err()
		}
	}
	err = w.Flush(ctx)
	secs := time.Since(t0).Seconds()
	if err = errors.Join(firstErr, err); err != nil {
		return nil, fmt.Errorf("append: %w", err)
	}
	if err := w.Close(ctx); err != nil {
		return nil, fmt.Errorf("close append writer: %w", err)
	}
	prod := cpu.put(rate(int64(n), int64(n)*rowPayload, secs), int64(n))
	if stored := storedLogBytes(env("DATA_DIR", ""), info.TableId); stored > 0 {
		prod.put("stored_mib", round(float64(stored)/1048576, 2))
		prod.put("stored_mib_s", round(float64(stored)/secs/1048576, 2))
		prod.put("zstd_ratio", round(float64(int64(n)*rowPayload)/float64(stored), 2))
	}
	res.put("produce", prod)
	logf("produce: %s", prod.json())
	rows = nil // let the generated rows go before the scans
	runtime.GC()

	end, err := t.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	var total int64
	for _, o := range end {
		total += o
	}
	if total != int64(n) {
		return nil, fmt.Errorf("log end offsets %v sum to %d, wrote %d", end, total, n)
	}
	logf("end offsets %v", end)
	for _, cols := range []int{20, 1, 5, 10} {
		key := "scan_all"
		var proj []string
		if cols != 20 {
			key = fmt.Sprintf("scan_%dcol", cols)
			proj = names[:cols]
		}
		r, err := scanAll(ctx, t, proj, scanWait, total, cols, pruningPayload(cols, strLen))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		res.put(key, r)
		logf("%s: %s", key, r.json())
	}

	// (b) the primary-key table: upserts, then a lookup of every distinct key
	kvName := fmt.Sprintf("kv_%d", time.Now().Unix())
	if _, err := adm.Create(ctx, db, kvName, client.NewTable(kvSchema()).DistributedBy(buckets, "id"), false); err != nil {
		return nil, fmt.Errorf("create table %s.%s: %w", db, kvName, err)
	}
	logf("generating %d kv rows (%.0f%% updates, strings %d B) ...", kvN, updateRatio*100, kvStr)
	kv := kvRows(kvN, kvStr, updateRatio, 7)
	kvPayload := int64(8 + 4 + 2*kvStr)
	kt, err := c.Table(ctx, db, kvName)
	if err != nil {
		return nil, err
	}
	logf("upsert: %d rows into %s.%s (%d buckets), UpsertWriter, acks=-1", kvN, db, kvName, buckets)
	up, err := upsertAll(ctx, kt, kv, kvPayload, writerOpts)
	if err != nil {
		return nil, fmt.Errorf("upsert: %w", err)
	}
	res.put("upsert", up)
	logf("upsert: %s", up.json())

	keys := lookupKeys(kv)
	kv = nil
	runtime.GC()
	lk, err := lookups(ctx, kt, keys, inflight, lookupBatch, lookupTimeout)
	if err != nil {
		return nil, fmt.Errorf("lookup: %w", err)
	}
	res.put("lookup", lk)
	logf("lookup: %s", lk.json())

	tables := []string{logName, kvName}
	wideN := intEnv("WIDE_N", 100000)
	wideBuckets := intEnv("WIDE_BUCKETS", 8)
	wideRowBytes := intEnv("WIDE_ROW_BYTES", 1024)
	wideBatch := intEnv("WIDE_LOOKUP_BATCH", 100)
	if wideN > 0 {
		// (c) the Fluss user's workload: 8 columns of ~1 KB a row in 8
		// buckets, upserted, then looked up with 100 keys a request
		wideName := fmt.Sprintf("wide_%d", time.Now().Unix())
		tables = append(tables, wideName)
		if _, err := adm.Create(ctx, db, wideName, client.NewTable(wideSchema()).DistributedBy(wideBuckets, "id"), false); err != nil {
			return nil, fmt.Errorf("create table %s.%s: %w", db, wideName, err)
		}
		strLen := wideStrLen(wideRowBytes)
		logf("generating %d wide rows (8 columns, strings %d B) ...", wideN, strLen)
		rows := wideRows(wideN, strLen, 11)
		wt, err := c.Table(ctx, db, wideName)
		if err != nil {
			return nil, err
		}
		logf("upsert_wide: %d rows into %s.%s (%d buckets), UpsertWriter, acks=-1", wideN, db, wideName, wideBuckets)
		up, err := upsertAll(ctx, wt, rows, int64(24+4*strLen), writerOpts)
		if err != nil {
			return nil, fmt.Errorf("upsert_wide: %w", err)
		}
		res.put("upsert_wide", up)
		logf("upsert_wide: %s", up.json())
		keys := lookupKeys(rows)
		rows = nil
		runtime.GC()
		lk, err := lookups(ctx, wt, keys, inflight, wideBatch, lookupTimeout)
		if err != nil {
			return nil, fmt.Errorf("lookup_wide: %w", err)
		}
		res.put("lookup_wide", lk)
		logf("lookup_wide: %s", lk.json())
	}

	if env("KEEP", "0") != "1" {
		for _, tb := range tables {
			if err := adm.DropTable(ctx, &stromv1.DropTableRequest{Database: db, Table: tb}); err != nil {
				logf("drop %s.%s: %v", db, tb, err)
			}
		}
	}
	out := &omap{}
	out.put("peer", "strom")
	out.put("version", env("STROM_VERSION", "?"))
	out.put("mode", "bench")
	out.put("cores", runtime.NumCPU())
	out.put("date", time.Now().UTC().Format("2006-01-02T15:04:05Z"))
	out.put("n", n)
	out.put("kv_n", kvN)
	out.put("buckets", buckets)
	out.put("row_bytes", rowPayload)
	out.put("kv_row_bytes", kvPayload)
	out.put("update_ratio", updateRatio)
	out.put("lookup_inflight", inflight)
	out.put("wide_n", wideN)
	out.put("wide_buckets", wideBuckets)
	out.put("wide_lookup_batch", wideBatch)
	out.put("compression", "ZSTD(3)")
	out.put("acks", "all")
	out.put("client", (&omap{}).put("batch_size", batchSize).put("lookup_batch", lookupBatch).
		put("lookup_batch_timeout_ms", lookupTimeout.Milliseconds()).put("scan_wait_ms", scanWait.Milliseconds()))
	out.kv = append(out.kv, res.kv...)
	out.put("ok", true)
	return out, nil
}

// upsertAll upserts rows through one UpsertWriter and times it until the
// Flush returns, as FlussBench does (payload bytes a row for the MiB/s).
func upsertAll(ctx context.Context, t *client.Table, rows []record.Row, payload int64, opts []client.WriterOption) (*omap, error) {
	uw, err := t.NewUpsertWriter(ctx, opts...)
	if err != nil {
		return nil, err
	}
	var firstErr error
	cpu := startCPU()
	t0 := time.Now()
	for _, r := range rows {
		if f := uw.Upsert(ctx, r); firstErr == nil && isDone(f) && f.Err() != nil {
			firstErr = f.Err()
		}
	}
	err = uw.Flush(ctx)
	secs := time.Since(t0).Seconds()
	if err = errors.Join(firstErr, err); err != nil {
		return nil, err
	}
	if err := uw.Close(ctx); err != nil {
		return nil, fmt.Errorf("close upsert writer: %w", err)
	}
	return cpu.put(rate(int64(len(rows)), int64(len(rows))*payload, secs), int64(len(rows))), nil
}

// retry runs f until it succeeds or returns a non-retriable error, for a
// minute at most: a node that just turned ready may still be electing.
func retry(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		var e *client.Error
		if err == nil || time.Now().After(deadline) || (errors.As(err, &e) && !e.Retriable) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func isDone(f *client.Future) bool {
	select {
	case <-f.Done():
		return true
	default:
		return false
	}
}

// storedLogBytes sums the *.log segment files of the table's buckets
// (DATA_DIR/tablets/<table id>/<bucket>/log/), 0 when not found.
func storedLogBytes(dataDir string, tableID int64) int64 {
	if dataDir == "" {
		return 0
	}
	dir := filepath.Join(dataDir, "tablets", strconv.FormatInt(tableID, 10))
	var sum int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".log") && filepath.Base(filepath.Dir(p)) == "log" {
			if fi, err := d.Info(); err == nil {
				sum += fi.Size()
			}
		}
		return nil
	})
	return sum
}

func rate(records, bytes int64, secs float64) *omap {
	return (&omap{}).put("records", records).put("seconds", round(secs, 3)).
		put("records_s", int64(float64(records)/secs+0.5)).put("mib_s", round(float64(bytes)/secs/1048576, 2))
}

// scanAll subscribes every bucket from the beginning and polls until total
// records have come, as FlussBench.scanAll does. A record is counted per row
// of the decoded Arrow batches (FlussBench counts ScanRecords, row views into
// its decoded batches); the columns of each batch are checked.
// With SCAN_ROWS=records (an experiment, not the paired workload) it goes
// through Fetches.Records() instead, which builds a record.Row per row.
func scanAll(ctx context.Context, t *client.Table, proj []string, wait time.Duration, total int64, cols int, payload int64) (*omap, error) {
	rowsAPI := env("SCAN_ROWS", "batches") == "records"
	opts := []client.ScanOption{client.MaxWait(wait), client.FetchMaxBytes(16<<20, 1<<20)}
	if proj != nil {
		opts = append(opts, client.Columns(proj...))
	}
	sc, err := t.NewLogScanner(opts...)
	if err != nil {
		return nil, err
	}
	for b := int32(0); b < t.Buckets(); b++ {
		if err := sc.Subscribe(ctx, b, client.Earliest()); err != nil {
			return nil, err
		}
	}
	var got, checksum int64
	deadline := time.Now().Add(getTimeout)
	cpu := startCPU()
	t0 := time.Now()
	for got < total {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("scan of %d columns: %d of %d records in %s", cols, got, total, getTimeout)
		}
		fs, err := sc.Poll(ctx)
		if err != nil {
			return nil, err
		}
		if err := fs.Errors(); err != nil {
			fs.Release()
			return nil, err
		}
		if rowsAPI { // the row-level API: a ScanRecord with a materialized record.Row per row
			for _, rec := range fs.Records() {
				got++
				checksum += int64(len(rec.Row))
			}
			fs.Release()
			continue
		}
		for _, f := range fs {
			for i, b := range f.Batches {
				nc := b.Record().NumCols()
				for r := 0; r < b.Len(); r++ {
					if f.Offsets[i]+int64(r) < f.From {
						continue
					}
					got++
					checksum += nc
				}
			}
		}
		fs.Release()
	}
	secs := time.Since(t0).Seconds()
	if checksum != got*int64(cols) {
		return nil, fmt.Errorf("projected rows have %d fields, want %d", checksum/max(1, got), cols)
	}
	return cpu.put(rate(got, got*payload, secs).put("columns", cols), got), nil
}

// lookups looks every key up with Lookuper.Get, inflight calls outstanding
// at all times (the Lookuper batches concurrent Gets itself), as
// FlussBench.lookups does with Fluss's Lookuper. Latency is per key.
func lookups(ctx context.Context, t *client.Table, keys []int64, inflight, batch int, timeout time.Duration) (*omap, error) {
	l, err := t.NewLookuper(client.LookupBatchSize(batch), client.LookupBatchTimeout(timeout))
	if err != nil {
		return nil, err
	}
	defer l.Close()
	n := len(keys)
	lat := make([]time.Duration, n)
	var next, missing atomic.Int64
	var failed atomic.Pointer[error]
	logf("lookup: %d distinct keys, %d in flight (Get; batches of up to %d, batch timeout %s)", n, inflight, batch, timeout)
	cctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	var wg sync.WaitGroup
	cpu := startCPU()
	t0 := time.Now()
	for w := 0; w < min(inflight, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || failed.Load() != nil {
					return
				}
				s := time.Now()
				row, err := l.Get(cctx, record.Row{keys[i]})
				lat[i] = time.Since(s)
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				if row == nil {
					missing.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(t0).Seconds()
	if e := failed.Load(); e != nil {
		return nil, *e
	}
	if m := missing.Load(); m > 0 {
		return nil, fmt.Errorf("%d upserted keys not found by lookup", m)
	}
	slices.Sort(lat)
	return cpu.put((&omap{}).put("keys", n).put("inflight", inflight).put("seconds", round(secs, 3)).
		put("ops_s", int64(float64(n)/secs+0.5)).
		put("p50_ms", round(float64(lat[n/2])/1e6, 3)).
		put("p99_ms", round(float64(lat[min(n-1, int(float64(n)*0.99))])/1e6, 3)), int64(n)), nil
}
