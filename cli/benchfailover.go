package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

type failoverResult struct {
	Table          string    `json:"table"`
	PKBytes        int64     `json:"pk_bytes,omitempty"`
	LoadSeconds    float64   `json:"load_seconds,omitempty"`
	Seconds        []float64 `json:"seconds"`
	Median         float64   `json:"median_seconds"`
	FailedWrites   int       `json:"failed_writes"`
	CoordinatorHit []bool    `json:"killed_coordinator"`
}

func newBenchFailoverCmd(g *globals) *cobra.Command {
	var (
		cf       clusterFlags
		kills    int
		tables   string
		pkBytes  int64
		rowBytes int
		rate     int
	)
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Start a 3-node cluster, SIGKILL a bucket's leader under acks=-1 writes, time until the next acknowledged write",
		Long: `Starts a cluster of three real nodes (this binary as ` + "`strom server`" + `, default settings, data and
logs under --dir), creates a table of one bucket with replication factor 3 and writes to it
continuously with acks=-1 (--rate rows a second, an idempotent writer). --kills times: waits
until the bucket has 3 in-sync replicas and writes are being acknowledged, SIGKILLs the
bucket's leader, measures the time from the kill to the first acknowledged write appended after
it, restarts the node. Prints each time and the median. For a log table and for a primary-key
table first loaded with --pk-bytes of rows (upserts go to its existing keys).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kills < 1 || rowBytes < 16 || rate < 1 || pkBytes < 0 {
				return fmt.Errorf("--kills and --rate must be ≥ 1, --row-bytes ≥ 16, --pk-bytes ≥ 0")
			}
			var kinds []string
			switch tables {
			case "both":
				kinds = []string{"log", "pk"}
			case "log", "pk":
				kinds = []string{tables}
			default:
				return fmt.Errorf("--table: want log, pk or both, got %q", tables)
			}
			return g.callLong(cmd, func(ctx context.Context, _ *client.Client) error {
				bc, c, err := startBenchClusterFor(ctx, cmd, cf)
				if err != nil {
					return err
				}
				defer bc.close(cf.keep)
				f := &failover{g: g, bc: bc, c: c, kills: kills, rowBytes: rowBytes, rate: rate}
				var results []failoverResult
				for _, kind := range kinds {
					res, err := f.run(ctx, kind, pkBytes)
					if err != nil {
						return fmt.Errorf("%s table: %w", kind, err)
					}
					results = append(results, res)
				}
				if g.output == "json" {
					return json.NewEncoder(g.out).Encode(results)
				}
				for _, r := range results {
					fmt.Fprintf(g.out, "%s table: median %.2fs from SIGKILL of the leader to the next acknowledged write, over %d kills (%d writes failed)\n",
						r.Table, r.Median, len(r.Seconds), r.FailedWrites)
				}
				return nil
			})
		},
	}
	cf.register(cmd)
	cmd.Flags().IntVar(&kills, "kills", 5, "leaders to kill, one after another, per table")
	cmd.Flags().StringVar(&tables, "table", "both", "log, pk or both")
	cmd.Flags().Int64Var(&pkBytes, "pk-bytes", 1<<30, "bytes of rows loaded into the primary-key table before the kills")
	cmd.Flags().IntVar(&rowBytes, "row-bytes", 1024, "approximate bytes per row")
	cmd.Flags().IntVar(&rate, "rate", 1000, "rows a second written during the kills")
	return cmd
}

// failover runs the kills against one table of a benchCluster.
type failover struct {
	g        *globals
	bc       *benchCluster
	c        *client.Client
	kills    int
	rowBytes int
	rate     int
}

func (f *failover) run(ctx context.Context, kind string, pkBytes int64) (failoverResult, error) {
	name := "failover_" + kind
	res := failoverResult{Table: "bench." + name}
	desc := &stromv1.TableDescriptor{
		Schema:      &stromv1.Schema{Columns: []*stromv1.Column{{Name: "id", Type: "BIGINT NOT NULL"}, {Name: "payload", Type: "STRING"}}},
		BucketCount: 1,
		Properties:  map[string]string{"table.replication.factor": "3"},
	}
	if kind == "pk" {
		desc.Schema.PrimaryKey = []string{"id"}
	}
	if _, err := f.c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "bench", Table: name, Descriptor_: desc}); err != nil {
		return res, err
	}
	t, err := f.c.Table(ctx, "bench", name)
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	row := func(id int64) record.Row { return record.Row{id, genString(rng, f.rowBytes-8)} }
	opts := []client.WriterOption{client.Acks(-1), client.BatchTimeout(5 * time.Millisecond)}
	var write func(context.Context, record.Row) *client.Future
	var closeWriter func(context.Context) error
	keys := int64(0)
	if kind == "pk" {
		w, err := t.NewUpsertWriter(ctx, opts...)
		if err != nil {
			return res, err
		}
		write, closeWriter = w.Upsert, w.Close
		if pkBytes > 0 {
			keys = max(1, pkBytes/int64(f.rowBytes))
			start := time.Now()
			if err := load(ctx, t, keys, row); err != nil {
				return res, fmt.Errorf("load %d rows: %w", keys, err)
			}
			res.PKBytes, res.LoadSeconds = keys*int64(f.rowBytes), time.Since(start).Seconds()
			f.printf("%s: loaded %d rows (%.2f GB) with acks=-1 in %.1fs\n", res.Table, keys, float64(res.PKBytes)/1e9, res.LoadSeconds)
		}
	} else {
		w, err := t.NewAppendWriter(ctx, opts...)
		if err != nil {
			return res, err
		}
		write, closeWriter = w.Append, w.Close
	}

	p := &ackProbe{}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.pump(wctx, f.rate, func(i int64) *client.Future {
			id := i
			if keys > 0 {
				id = rng.Int64N(keys)
			}
			return write(wctx, row(id))
		})
	}()
	defer func() {
		stop()
		<-done
		_ = closeWriter(context.Background())
	}()

	for k := 1; k <= f.kills; k++ {
		b, err := waitBucket(ctx, f.c, "bench", name, 0, "3 in-sync replicas", func(b *stromv1.BucketAssignment) bool {
			return b.Leader > 0 && len(b.Isr) == 3
		})
		if err != nil {
			return res, err
		}
		// Writes flow before the kill: one appended now is acknowledged.
		if _, err := p.next(ctx, time.Now()); err != nil {
			return res, fmt.Errorf("before kill %d: %w", k, err)
		}
		nd := f.bc.node(b.Leader)
		if nd == nil {
			return res, fmt.Errorf("bucket 0's leader is node %d, not one of this cluster's", b.Leader)
		}
		coord := false
		if d, err := f.c.Admin().DescribeCluster(ctx); err == nil {
			coord = d.RaftLeader == b.Leader
		}
		killed := time.Now()
		wait := p.arm(killed)
		if err := f.bc.kill(nd); err != nil {
			return res, err
		}
		acked, err := p.wait(ctx, wait)
		if err != nil {
			return res, fmt.Errorf("after kill %d of node %d: %w", k, nd.id, err)
		}
		secs := acked.Sub(killed).Seconds()
		res.Seconds, res.CoordinatorHit = append(res.Seconds, secs), append(res.CoordinatorHit, coord)
		also := ""
		if coord {
			also = " (also the coordinator)"
		}
		f.printf("%s kill %d: SIGKILL of node %d, the bucket's leader%s: next acknowledged write after %.2fs\n", res.Table, k, nd.id, also, secs)
		if err := f.bc.restart(ctx, nd); err != nil {
			return res, err
		}
	}
	res.Median = median(res.Seconds)
	res.FailedWrites = p.failures()
	return res, nil
}

func (f *failover) printf(format string, args ...any) {
	if f.g.output != "json" {
		fmt.Fprintf(f.g.out, format, args...)
	}
}

// load upserts keys rows (ids 0..keys-1) with acks=-1 and waits for them.
func load(ctx context.Context, t *client.Table, keys int64, row func(int64) record.Row) error {
	w, err := t.NewUpsertWriter(ctx, client.Acks(-1))
	if err != nil {
		return err
	}
	var failed error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id := range keys {
		fut := w.Upsert(ctx, row(id))
		if id%1024 == 0 { // check now and then; the writer keeps the rest
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := fut.Wait(ctx); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}()
		}
	}
	err = w.Close(ctx)
	wg.Wait()
	if err != nil {
		return err
	}
	return failed
}

// ackProbe tells when the first write appended after a moment is
// acknowledged.
type ackProbe struct {
	mu struct {
		sync.Mutex
		since  time.Time
		got    chan time.Time // nil when not armed
		failed int
	}
}

// pump appends a row a 1/rate s apart until ctx ends; each future's outcome
// is reported to the probe.
func (p *ackProbe) pump(ctx context.Context, rate int, write func(i int64) *client.Future) {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := int64(0); ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		at := time.Now()
		fut := write(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := fut.Wait(ctx)
			p.settle(at, time.Now(), err)
		}()
	}
}

func (p *ackProbe) settle(appended, done time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			p.mu.failed++
		}
		return
	}
	if p.mu.got != nil && !appended.Before(p.mu.since) {
		p.mu.got <- done
		p.mu.got = nil
	}
}

// arm makes the probe watch for the first write appended at since or later.
func (p *ackProbe) arm(since time.Time) chan time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := make(chan time.Time, 1)
	p.mu.since, p.mu.got = since, got
	return got
}

// wait returns when the armed write was acknowledged (2 minutes at most).
func (p *ackProbe) wait(ctx context.Context, got chan time.Time) (time.Time, error) {
	select {
	case t := <-got:
		return t, nil
	case <-time.After(2 * time.Minute):
		return time.Time{}, fmt.Errorf("no write acknowledged in 2 minutes (%d failed)", p.failures())
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// next arms the probe at since and waits.
func (p *ackProbe) next(ctx context.Context, since time.Time) (time.Time, error) {
	return p.wait(ctx, p.arm(since))
}

func (p *ackProbe) failures() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.failed
}
