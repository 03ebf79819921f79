package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce, consume, column pruning, upsert and lookup throughput against a running node",
	}
	var cpuProfile string
	cmd.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this command (the client side) to the file")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		return pprof.StartCPUProfile(f)
	}
	cmd.PersistentPostRun = func(*cobra.Command, []string) {
		if cpuProfile != "" {
			pprof.StopCPUProfile()
		}
	}
	cmd.AddCommand(newBenchProduceCmd(g), newBenchConsumeCmd(g), newBenchPruningCmd(g),
		newBenchUpsertCmd(g), newBenchLookupCmd(g), newBenchZKCmd(), newBenchFailoverCmd(g), newBenchReplicationCmd(g))
	return cmd
}

// words is the vocabulary of generated strings: text-like values compress
// the way real payloads do, unlike random bytes.
var words = strings.Fields(`stream table bucket offset leader replica commit arrow column pruning
changelog snapshot segment index watermark writer reader fetch produce schema partition lake tier
remote merge engine lookup prefix scan upsert delete insert update coordinator tablet server node
cluster metadata session watch epoch fence quorum batch record compress decompress zstd frame`)

// genString returns a text-like string of about n bytes.
func genString(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()[:n]
}

// genRow returns a row of random values for s, its strings and bytes about
// strLen long.
func genRow(rng *rand.Rand, s record.Schema, strLen int) record.Row {
	row := make(record.Row, len(s.Columns))
	for i, c := range s.Columns {
		t := c.Type
		switch t.Root {
		case record.Boolean:
			row[i] = rng.IntN(2) == 0
		case record.TinyInt:
			row[i] = int8(rng.IntN(256) - 128)
		case record.SmallInt:
			row[i] = int16(rng.IntN(1 << 16))
		case record.Int: // counts, codes: small numbers, as in real rows
			row[i] = rng.Int32N(100000)
		case record.BigInt: // ids
			row[i] = rng.Int64N(1_000_000_000)
		case record.Float:
			row[i] = rng.Float32()
		case record.Double:
			row[i] = rng.Float64()
		case record.Char:
			row[i] = genString(rng, t.Length)
		case record.String:
			row[i] = genString(rng, strLen)
		case record.Binary:
			b := make([]byte, t.Length)
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			row[i] = b
		case record.Bytes:
			row[i] = []byte(genString(rng, strLen))
		case record.Decimal:
			d, _ := record.DecimalFromInt64(rng.Int64N(1000000), int32(t.Precision), int32(t.Scale))
			if t.Precision < 7 {
				d, _ = record.DecimalFromInt64(rng.Int64N(10), int32(t.Precision), int32(t.Scale))
			}
			row[i] = d
		case record.Date:
			row[i] = record.DateValue(19000 + rng.IntN(2000))
		case record.Time:
			row[i] = record.TimeOfDay(rng.IntN(86400000))
		case record.Timestamp:
			row[i] = record.TimestampNTZ{Millis: 1.7e12 + rng.Int64N(1e10)}
		case record.TimestampLTZ:
			row[i] = record.Instant{EpochMillis: 1.7e12 + rng.Int64N(1e10)}
		}
	}
	return row
}

// buildBatches encodes rows into batches of about batchBytes, spread over
// buckets round-robin, compressed as the table says (or as comp, if set).
// With sent set, batchBytes bounds a batch as sent (compressed), as the
// client's batch size does, by the ratio the previous batch compressed by;
// otherwise it bounds the batch's uncompressed size.
func buildBatches(t *client.Table, rows, rowBytes, batchBytes int, sent bool, seed uint64, comp *record.ArrowCompression) (map[int32][][]byte, int, error) {
	s := t.Schema()
	strCols := 0
	fixed := 0
	for _, c := range s.Columns {
		if c.Type.Root == record.String || c.Type.Root == record.Bytes {
			strCols++
		} else {
			fixed += 8
		}
	}
	strLen := 16
	if strCols > 0 {
		strLen = max(1, (rowBytes-fixed)/strCols)
	}
	if comp == nil {
		c, err := record.CompressionOf(tableDescriptor(t))
		if err != nil {
			return nil, 0, err
		}
		comp = &c
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	out := map[int32][][]byte{}
	total := 0
	b, err := record.NewArrowBuilder(s, memory.DefaultAllocator)
	if err != nil {
		return nil, 0, err
	}
	bucket := int32(0)
	ratio := 1.0
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		estimated := b.EstimatedSize()
		buf, _, err := b.Build(nil, record.BatchHeader{SchemaID: int16(t.Info().SchemaId), AppendOnly: true,
			WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence}, *comp)
		if err != nil {
			return err
		}
		if sent {
			ratio = float64(len(buf)) / float64(estimated)
		}
		out[bucket] = append(out[bucket], buf)
		total += len(buf)
		b.Reset()
		bucket = (bucket + 1) % t.Buckets()
		return nil
	}
	for i := 0; i < rows; i++ {
		if err := b.Append(genRow(rng, s, strLen), record.AppendOnly); err != nil {
			return nil, 0, err
		}
		if float64(b.EstimatedSize())*ratio >= float64(batchBytes) {
			if err := flush(); err != nil {
				return nil, 0, err
			}
		}
	}
	return out, total, flush()
}

func tableDescriptor(t *client.Table) record.TableDescriptor {
	d := t.Info().GetDescriptor_()
	return record.TableDescriptor{Schema: t.Schema(), Properties: d.GetProperties(), BucketCount: int(d.GetBucketCount())}
}

type produceResult struct {
	Rows            int       `json:"rows"`
	Bytes           int       `json:"bytes"`
	Seconds         float64   `json:"seconds"`
	RecordsPerSec   float64   `json:"records_per_sec"`
	MBPerSec        float64   `json:"mb_per_sec"`
	FileMBPerSec    float64   `json:"baseline_file_mb_per_sec"`
	RatioToFile     float64   `json:"ratio_to_file"`
	Acks            int       `json:"acks"`
	BatchBytes      int       `json:"batch_bytes"`
	BatchesProduced int       `json:"batches"`
	Inflight        int       `json:"inflight"`
	ClientCores     float64   `json:"client_cpu_cores"`
	RoundRatios     []float64 `json:"round_ratios"`
	P50Millis       float64   `json:"p50_ms"`
	P99Millis       float64   `json:"p99_ms"`
}

func newBenchProduceCmd(g *globals) *cobra.Command {
	var rows, rowBytes, batchBytes, acks, rounds, inflight int
	cmd := &cobra.Command{
		Use:   "produce DB.TABLE",
		Short: "Produce pre-built batches and compare with appending the same bytes to a plain file",
		Long: `Builds --rows rows of about --row-bytes bytes into batches of about --batch-bytes as sent (not
timed), then, in each of --rounds rounds, writes the batches' bytes to a plain file from this
process (the baseline) and sends them with ProduceLog as the Go client does: an idempotent writer
per bucket, --inflight requests in flight per bucket, acks as given. Rounds swap which phase goes
first, and every phase starts after a sync, so neither pays for the other's write-back; a first
round warms up and is not counted. Prints the medians and the median of the rounds' ratios.`,
		Args: exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			if rounds < 1 || rows < 1 || rowBytes < 1 || batchBytes < 1 || inflight < 1 {
				return fmt.Errorf("--rounds, --rows, --row-bytes, --batch-bytes and --inflight must be ≥ 1")
			}
			return g.callLong(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Table(ctx, db, name)
				if err != nil {
					return err
				}
				batches, total, err := buildBatches(t, rows, rowBytes, batchBytes, true, uint64(time.Now().UnixNano()), nil)
				if err != nil {
					return err
				}
				n := 0
				for _, bs := range batches {
					n += len(bs)
				}
				f, err := os.CreateTemp("", "strom-bench-*")
				if err != nil {
					return err
				}
				defer os.Remove(f.Name())
				defer f.Close()
				// Rounds alternate the baseline and the real thing, so that
				// both see the same machine (page cache, other load), and
				// swap which goes first, so that neither always finds the
				// memory the other just freed or used. Each phase starts
				// after a sync: neither pays for the other's write-back.
				var fileRuns, runs, ratios []float64
				var cpu, wall float64
				var lats []time.Duration
				baseline := func() (float64, error) {
					syscall.Sync()
					return fileBaseline(f, batches)
				}
				produce := func() (float64, error) {
					if err := stampWriters(ctx, c, batches); err != nil {
						return 0, err
					}
					syscall.Sync()
					cpu0, start := cpuSeconds(), time.Now()
					l, err := produceBatches(ctx, t, batches, acks, inflight)
					if err != nil {
						return 0, err
					}
					lats = append(lats, l...)
					secs := time.Since(start).Seconds()
					cpu += cpuSeconds() - cpu0
					wall += secs
					return secs, nil
				}
				// Round -1 warms up (connections, the server's buffers, the
				// files) and is not counted.
				for r := -1; r < rounds; r++ {
					var fs, ps float64
					var err error
					if r%2 == 0 {
						if fs, err = baseline(); err == nil {
							ps, err = produce()
						}
					} else {
						if ps, err = produce(); err == nil {
							fs, err = baseline()
						}
					}
					if err != nil {
						return err
					}
					if r < 0 {
						cpu, wall, lats = 0, 0, nil
						continue
					}
					fileRuns, runs, ratios = append(fileRuns, fs), append(runs, ps), append(ratios, fs/ps)
				}
				secs := median(runs)
				res := produceResult{Rows: rows, Bytes: total, Seconds: secs, RecordsPerSec: float64(rows) / secs,
					MBPerSec: float64(total) / secs / 1e6, FileMBPerSec: float64(total) / median(fileRuns) / 1e6,
					RatioToFile: median(ratios), Acks: acks, BatchBytes: batchBytes, BatchesProduced: n,
					Inflight: inflight, ClientCores: cpu / wall, RoundRatios: ratios,
					P50Millis: millis(percentile(lats, 50)), P99Millis: millis(percentile(lats, 99))}
				if g.output == "json" {
					return json.NewEncoder(g.out).Encode(res)
				}
				fmt.Fprintf(g.out, "produced %d rows (%.1f MB in %d batches, acks=%d, %d in flight per bucket) in %.3fs (median of %d rounds): %.0f records/s, %.1f MB/s; the client used %.2f cores\n",
					rows, float64(total)/1e6, n, acks, inflight, secs, rounds, res.RecordsPerSec, res.MBPerSec, res.ClientCores)
				fmt.Fprintf(g.out, "request latency: p50 %.1f ms, p99 %.1f ms (%d requests)\n", res.P50Millis, res.P99Millis, len(lats))
				fmt.Fprintf(g.out, "baseline: the same bytes to a plain file: %.1f MB/s; ratio %.2f (median of the rounds' ratios)\n", res.FileMBPerSec, res.RatioToFile)
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&rows, "rows", 500000, "rows to produce")
	cmd.Flags().IntVar(&rowBytes, "row-bytes", 1024, "approximate bytes per row")
	cmd.Flags().IntVar(&batchBytes, "batch-bytes", 1<<20, "approximate bytes per batch as sent (the Go client's default client.writer.batch-size for log tables)")
	cmd.Flags().IntVar(&acks, "acks", -1, "-1, 1 or 0")
	cmd.Flags().IntVar(&rounds, "rounds", 5, "rounds of (baseline, produce); medians are reported")
	cmd.Flags().IntVar(&inflight, "inflight", 5, "requests in flight per bucket (the client's client.writer.max-inflight-requests-per-bucket, 1 to 5)")
	return cmd
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// cpuSeconds is the CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// fileBaseline appends the batches' bytes to f and returns the seconds it
// took (no fsync: the server does not fsync either). f is one file for the
// whole benchmark, like a log segment: a fresh file per round whose dirty
// pages are dropped by deleting it would not pay the write-back the server
// pays for the data it keeps.
func fileBaseline(f *os.File, batches map[int32][][]byte) (float64, error) {
	start := time.Now()
	for _, bs := range batches {
		for _, b := range bs {
			if _, err := f.Write(b); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start).Seconds(), nil
}

// stampWriters gives each bucket's batches a new idempotent writer id and
// the sequences 0, 1, ... (as the client's writer does; not timed: it
// rewrites each batch's CRC).
func stampWriters(ctx context.Context, c *client.Client, batches map[int32][][]byte) error {
	for _, bs := range batches {
		id, err := c.InitWriter(ctx)
		if err != nil {
			return err
		}
		for i, b := range bs {
			record.Batch(b).SetWriter(id, int32(i))
		}
	}
	return nil
}

// produceBatches sends each bucket's batches with up to inflight requests
// in flight per bucket; the server appends them in sequence order. It
// returns each request's latency, in no order.
func produceBatches(ctx context.Context, t *client.Table, batches map[int32][][]byte, acks, inflight int) ([]time.Duration, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lats []time.Duration
	errs := make(chan error, 1)
	for bucket, bs := range batches {
		slots := make(chan struct{}, inflight)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sending sync.WaitGroup
			defer sending.Wait()
			for _, b := range bs {
				slots <- struct{}{}
				sending.Add(1)
				go func() {
					defer sending.Done()
					defer func() { <-slots }()
					start := time.Now()
					if err := t.ProduceBatches(ctx, bucket, b, acks); err != nil {
						select {
						case errs <- err:
						default:
						}
					}
					lat := time.Since(start)
					mu.Lock()
					lats = append(lats, lat)
					mu.Unlock()
				}()
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
		return lats, nil
	}
}

// percentile returns the p-th percentile (0 < p ≤ 100) of ds, the
// nearest-rank one; 0 when ds is empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// millis renders d in milliseconds, for JSON results.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type consumeResult struct {
	Columns       int     `json:"columns"`
	Rows          int     `json:"rows"`
	Bytes         int     `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	Ratio         float64 `json:"ratio,omitempty"`
}

// consumeAll reads every bucket from earliest to the current end, decoding
// the Arrow batches (as a consumer would) without turning them into rows.
func consumeAll(ctx context.Context, t *client.Table, columns []string) (consumeResult, error) {
	sc, err := t.NewLogScanner(client.Columns(columns...), client.MaxWait(0))
	if err != nil {
		return consumeResult{}, err
	}
	end, err := t.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
	if err != nil {
		return consumeResult{}, err
	}
	for b := int32(0); b < t.Buckets(); b++ {
		if err := sc.Subscribe(ctx, b, client.Earliest()); err != nil {
			return consumeResult{}, err
		}
	}
	res := consumeResult{Columns: len(sc.Schema().Columns)}
	start := time.Now()
	for !caughtUp(sc.Position(), end) {
		fs, err := sc.Poll(ctx)
		if err != nil {
			return res, err
		}
		if err := fs.Errors(); err != nil {
			return res, err
		}
		for _, f := range fs {
			for _, b := range f.Batches {
				res.Rows += b.Len()
			}
			res.Bytes += f.Bytes
		}
		fs.Release()
	}
	res.Seconds = time.Since(start).Seconds()
	res.RecordsPerSec = float64(res.Rows) / res.Seconds
	res.MBPerSec = float64(res.Bytes) / res.Seconds / 1e6
	return res, nil
}

func newBenchConsumeCmd(g *globals) *cobra.Command {
	var columns []string
	cmd := &cobra.Command{
		Use:   "consume DB.TABLE",
		Short: "Read a whole table (optionally some columns) and report records/s",
		Args:  exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			return g.callLong(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Table(ctx, db, name)
				if err != nil {
					return err
				}
				res, err := consumeAll(ctx, t, columns)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return json.NewEncoder(g.out).Encode(res)
				}
				fmt.Fprintf(g.out, "consumed %d rows, %d columns (%.1f MB) in %.2fs: %.0f records/s, %.1f MB/s\n",
					res.Rows, res.Columns, float64(res.Bytes)/1e6, res.Seconds, res.RecordsPerSec, res.MBPerSec)
				return nil
			})
		},
	}
	cmd.Flags().StringSliceVar(&columns, "columns", nil, "read only these columns")
	return cmd
}

// pruningSchema is the OpenMessaging-Benchmark-like dataset Fluss used for
// its column-pruning figures: 20 columns of INT, BIGINT and STRING.
func pruningSchema() string {
	var cols []string
	types := []string{"INT", "BIGINT", "STRING", "STRING"}
	for i := 0; i < 20; i++ {
		cols = append(cols, fmt.Sprintf("c%02d %s", i, types[i%len(types)]))
	}
	return strings.Join(cols, ", ")
}

func newBenchPruningCmd(g *globals) *cobra.Command {
	var rows int
	var keep bool
	cmd := &cobra.Command{
		Use:   "pruning",
		Short: "Load a 20-column table (about 2 KB a row), then fetch 1, 5, 10 and 20 columns",
		Long: `Creates the database "bench" (if missing) and a new table of 20 columns of INT, BIGINT and STRING
(about 2 KB a row, text-like strings), loads --rows rows, then reads the whole table fetching the
first 1, 5, 10 and 20 columns, and prints records/s of each and the ratio to the full fetch.`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.callLong(cmd, func(ctx context.Context, c *client.Client) error {
				if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "bench", IgnoreIfExists: true}); err != nil {
					return err
				}
				name := fmt.Sprintf("pruning_%d", time.Now().Unix())
				if err := createPruningTable(ctx, c, name); err != nil {
					return err
				}
				if !keep {
					defer c.Admin().DropTable(context.WithoutCancel(ctx), &stromv1.DropTableRequest{Database: "bench", Table: name})
				}
				t, err := c.Table(ctx, "bench", name)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "loading %d rows into bench.%s ...\n", rows, name)
				batches, total, err := buildBatches(t, rows, 2048, 2<<20, false, 42, nil)
				if err != nil {
					return err
				}
				// The same rows uncompressed, for the compression ratio.
				_, raw, err := buildBatches(t, rows, 2048, 2<<20, false, 42, &record.ArrowCompression{Type: record.CompressionNone})
				if err != nil {
					return err
				}
				if _, err := produceBatches(ctx, t, batches, -1, 1); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "loaded %.1f MB (%.1f MB uncompressed: ZSTD ratio %.2f×); fetching ...\n",
					float64(total)/1e6, float64(raw)/1e6, float64(raw)/float64(total))
				names := t.Schema().ColumnNames()
				var results []consumeResult
				for _, n := range []int{20, 1, 5, 10} {
					cols := names[:n]
					if n == 20 {
						cols = nil
					}
					res, err := consumeAll(ctx, t, cols)
					if err != nil {
						return err
					}
					res.Columns = n
					results = append(results, res)
				}
				full := results[0].RecordsPerSec
				ordered := append(results[1:], results[0])
				for i := range ordered {
					ordered[i].Ratio = ordered[i].RecordsPerSec / full
				}
				if g.output == "json" {
					return json.NewEncoder(g.out).Encode(ordered)
				}
				tw := newTable(g.out)
				tw.row("COLUMNS", "RECORDS/S", "MB/S", "RATIO TO FULL")
				for _, r := range ordered {
					tw.row(r.Columns, fmt.Sprintf("%.0f", r.RecordsPerSec), fmt.Sprintf("%.1f", r.MBPerSec), fmt.Sprintf("%.1f×", r.Ratio))
				}
				return tw.flush()
			})
		},
	}
	cmd.Flags().IntVar(&rows, "rows", 50000, "rows to load")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the table afterwards")
	return cmd
}

func createPruningTable(ctx context.Context, c *client.Client, name string) error {
	cols, err := columnsOf(pruningSchema())
	if err != nil {
		return err
	}
	desc := &stromv1.TableDescriptor{Schema: &stromv1.Schema{Columns: cols}, BucketCount: 2}
	_, err = c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "bench", Table: name, Descriptor_: desc})
	return err
}

// columnsOf returns the columns of a "name TYPE, ..." list for a
// TableDescriptor.
func columnsOf(ddl string) ([]*stromv1.Column, error) {
	cols, err := record.ParseColumns(ddl)
	if err != nil {
		return nil, err
	}
	var out []*stromv1.Column
	for _, col := range cols {
		out = append(out, &stromv1.Column{Name: col.Name, Type: col.Type.String()})
	}
	return out, nil
}
