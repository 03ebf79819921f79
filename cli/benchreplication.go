package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"strom/client"
	"strom/internal/proccpu"
	stromv1 "strom/rpc/gen/strom/v1"
)

type replicationSide struct {
	ReplicationFactor int       `json:"replication_factor"`
	MBPerSec          float64   `json:"mb_per_sec"`
	RecordsPerSec     float64   `json:"records_per_sec"`
	P50Millis         float64   `json:"p50_ms"`
	P99Millis         float64   `json:"p99_ms"`
	Rounds            []float64 `json:"round_seconds"`
	// NodeCPUPerMB is the CPU time the three nodes took, in milliseconds
	// per MB sent, over the counted rounds: unlike throughput, hardly
	// changed by other load on the machine.
	NodeCPUPerMB float64 `json:"node_cpu_ms_per_mb"`
}

type replicationResult struct {
	Rows        int               `json:"rows"`
	Bytes       int               `json:"bytes"`
	Buckets     int               `json:"buckets"`
	Sides       []replicationSide `json:"sides"`
	Ratio       float64           `json:"ratio_rf3_to_rf1"`
	RoundRatios []float64         `json:"round_ratios"`
}

func newBenchReplicationCmd(g *globals) *cobra.Command {
	var (
		cf                                           clusterFlags
		rows, rowBytes, batchBytes, rounds, inflight int
		buckets                                      int
	)
	cmd := &cobra.Command{
		Use:   "replication",
		Short: "Start a 3-node cluster and compare acks=-1 produce to tables of replication factor 3 and 1",
		Long: `Starts a cluster of three real nodes (as bench failover does), creates two log tables of
--buckets buckets, one of replication factor 1 and one of 3 (each node leads as many buckets of
each), and builds --rows rows into batches as bench produce does (not timed). In each of --rounds
rounds it produces the batches to each table as bench produce does (acks=-1, an idempotent writer
per bucket, --inflight requests in flight per bucket), after a sync, the order swapped every
round; a first round warms up and is not counted. Prints each side's median throughput and its
request latencies (p50, p99 over the counted rounds), and the median of the rounds' ratios of
replication factor 3 to 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rounds < 1 || rows < 1 || rowBytes < 1 || batchBytes < 1 || inflight < 1 || buckets < 1 {
				return fmt.Errorf("--rounds, --rows, --row-bytes, --batch-bytes, --inflight and --buckets must be ≥ 1")
			}
			return g.callLong(cmd, func(ctx context.Context, _ *client.Client) error {
				bc, c, err := startBenchClusterFor(ctx, cmd, cf)
				if err != nil {
					return err
				}
				defer bc.close(cf.keep)
				type side struct {
					rf      int
					t       *client.Table
					batches map[int32][][]byte
					secs    []float64
					lats    []time.Duration
					cpu     time.Duration
				}
				var sides []*side
				res := replicationResult{Rows: rows, Buckets: buckets}
				for _, rf := range []int{1, 3} {
					name := fmt.Sprintf("replication_rf%d", rf)
					cols, err := columnsOf("id BIGINT, a INT, s1 STRING, s2 STRING, s3 STRING")
					if err != nil {
						return err
					}
					if _, err := c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "bench", Table: name, Descriptor_: &stromv1.TableDescriptor{
						Schema: &stromv1.Schema{Columns: cols}, BucketCount: int32(buckets),
						Properties: map[string]string{"table.replication.factor": fmt.Sprint(rf)},
					}}); err != nil {
						return err
					}
					for b := range int32(buckets) {
						if _, err := waitBucket(ctx, c, "bench", name, b, fmt.Sprintf("%d in-sync replicas", rf), func(a *stromv1.BucketAssignment) bool {
							return a.Leader > 0 && len(a.Isr) == rf
						}); err != nil {
							return err
						}
					}
					t, err := c.Table(ctx, "bench", name)
					if err != nil {
						return err
					}
					batches, total, err := buildBatches(t, rows, rowBytes, batchBytes, true, uint64(time.Now().UnixNano()), nil)
					if err != nil {
						return err
					}
					res.Bytes = total
					sides = append(sides, &side{rf: rf, t: t, batches: batches})
				}
				produce := func(s *side) (float64, []time.Duration, error) {
					if err := stampWriters(ctx, c, s.batches); err != nil {
						return 0, nil, err
					}
					syscall.Sync()
					start, cpu := time.Now(), bc.cpu()
					lats, err := produceBatches(ctx, s.t, s.batches, -1, inflight)
					s.cpu += bc.cpu() - cpu
					return time.Since(start).Seconds(), lats, err
				}
				// Round -1 warms up and is not counted; rounds swap which
				// table goes first, so neither always follows the other's
				// write-back.
				for r := -1; r < rounds; r++ {
					order := []*side{sides[0], sides[1]}
					if r%2 != 0 {
						order[0], order[1] = order[1], order[0]
					}
					for _, s := range order {
						secs, lats, err := produce(s)
						if err != nil {
							return fmt.Errorf("replication factor %d: %w", s.rf, err)
						}
						if r >= 0 {
							s.secs, s.lats = append(s.secs, secs), append(s.lats, lats...)
						} else {
							s.cpu = 0
						}
					}
					if r >= 0 {
						// Throughput ratio: the inverse of the times'.
						res.RoundRatios = append(res.RoundRatios, sides[0].secs[r]/sides[1].secs[r])
					}
				}
				res.Ratio = median(res.RoundRatios)
				for _, s := range sides {
					secs := median(s.secs)
					res.Sides = append(res.Sides, replicationSide{ReplicationFactor: s.rf, MBPerSec: float64(res.Bytes) / secs / 1e6,
						RecordsPerSec: float64(rows) / secs, P50Millis: millis(percentile(s.lats, 50)), P99Millis: millis(percentile(s.lats, 99)), Rounds: s.secs,
						NodeCPUPerMB: millis(s.cpu) / (float64(res.Bytes) * float64(rounds) / 1e6)})
				}
				if g.output == "json" {
					return json.NewEncoder(g.out).Encode(res)
				}
				fmt.Fprintf(g.out, "%d rows (%.1f MB as sent) into %d buckets on 3 nodes, acks=-1, %d in flight per bucket, medians of %d rounds:\n",
					rows, float64(res.Bytes)/1e6, buckets, inflight, rounds)
				tw := newTable(g.out)
				tw.row("REPLICATION", "MB/S", "RECORDS/S", "P50 MS", "P99 MS", "NODE CPU MS/MB")
				for _, s := range res.Sides {
					tw.row(s.ReplicationFactor, fmt.Sprintf("%.1f", s.MBPerSec), fmt.Sprintf("%.0f", s.RecordsPerSec), fmt.Sprintf("%.1f", s.P50Millis), fmt.Sprintf("%.1f", s.P99Millis),
						fmt.Sprintf("%.2f", s.NodeCPUPerMB))
				}
				if err := tw.flush(); err != nil {
					return err
				}
				fmt.Fprintf(g.out, "throughput ratio RF 3 / RF 1: %.2f (median of the rounds' ratios %.2f)\n", res.Ratio, res.RoundRatios)
				return nil
			})
		},
	}
	cf.register(cmd)
	cmd.Flags().IntVar(&rows, "rows", 200000, "rows produced to each table per round")
	cmd.Flags().IntVar(&rowBytes, "row-bytes", 1024, "approximate bytes per row")
	cmd.Flags().IntVar(&batchBytes, "batch-bytes", 1<<20, "approximate bytes per batch as sent")
	cmd.Flags().IntVar(&rounds, "rounds", 5, "counted rounds")
	cmd.Flags().IntVar(&inflight, "inflight", 5, "requests in flight per bucket (1 to 5)")
	cmd.Flags().IntVar(&buckets, "buckets", 3, "buckets per table")
	return cmd
}

// cpu is the CPU time (user and system) the cluster's running nodes have
// taken so far, from /proc (zero where it cannot be read).
func (c *benchCluster) cpu() time.Duration {
	var total time.Duration
	for _, nd := range c.nodes {
		if nd.cmd == nil || nd.cmd.Process == nil {
			continue
		}
		if d, err := proccpu.Of(nd.cmd.Process.Pid); err == nil {
			total += d
		}
	}
	return total
}
