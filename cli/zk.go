package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/spf13/cobra"
)

// newBenchZKCmd is `strom bench zk`: getData and create+delete throughput
// of a ZooKeeper ensemble (a real ZooKeeper, or Strom's shim) measured with
// the go-zookeeper client. Run it against both on one machine to compare.
func newBenchZKCmd() *cobra.Command {
	var (
		servers     string
		ops         int
		clients     int
		concurrency int
		size        int
		timeout     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "zk --servers HOST:PORT[,HOST:PORT...]",
		Short: "Measure getData and create+delete ops/s of a ZooKeeper ensemble (real or Strom's shim)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs := splitServers(servers)
			switch {
			case len(addrs) == 0:
				return errors.New("--servers is required")
			case ops < 1 || clients < 1 || concurrency < 1 || size < 0:
				return errors.New("--ops, --clients and --concurrency must be positive, --size not negative")
			}
			return benchZK(cmd.OutOrStdout(), zkBenchOptions{
				servers: addrs, ops: ops, clients: clients,
				concurrency: max(concurrency, clients), size: size, timeout: timeout,
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&servers, "servers", "", "comma-separated ZooKeeper addresses (host:port)")
	f.IntVar(&ops, "ops", 20000, "operations per phase (getData; create+delete pairs count as one)")
	f.IntVar(&clients, "clients", 4, "ZooKeeper sessions (TCP connections)")
	f.IntVar(&concurrency, "concurrency", 32, "requests in flight, spread over the sessions")
	f.IntVar(&size, "size", 100, "data bytes per znode")
	f.DurationVar(&timeout, "session-timeout", 10*time.Second, "session timeout asked for")
	return cmd
}

type zkBenchOptions struct {
	servers                   []string
	ops, clients, concurrency int
	size                      int
	timeout                   time.Duration
}

func splitServers(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

type zkNopLogger struct{}

func (zkNopLogger) Printf(string, ...any) {}

// benchZK runs the two phases and prints one line per phase.
func benchZK(out io.Writer, o zkBenchOptions) error {
	conns := make([]*zk.Conn, 0, o.clients)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range o.clients {
		c, _, err := zk.Connect(o.servers, o.timeout, zk.WithLogger(zkNopLogger{}))
		if err != nil {
			return fmt.Errorf("connect to %v: %w", o.servers, err)
		}
		conns = append(conns, c)
	}
	// The first request waits for the session.
	root := fmt.Sprintf("/strom-bench-zk-%d", time.Now().UnixNano())
	data := []byte(strings.Repeat("z", o.size))
	acl := zk.WorldACL(zk.PermAll)
	if _, err := conns[0].Create(root, data, 0, acl); err != nil {
		return fmt.Errorf("create %s: %w", root, err)
	}
	defer func() { _ = conns[0].Delete(root, -1) }()
	fmt.Fprintf(out, "servers %s, %d sessions, %d in flight, %d-byte znodes, %d ops per phase\n",
		strings.Join(o.servers, ","), o.clients, o.concurrency, o.size, o.ops)

	phases := []struct {
		name string
		op   func(c *zk.Conn, i int64) error
	}{
		{"getData", func(c *zk.Conn, _ int64) error {
			_, _, err := c.Get(root)
			return err
		}},
		{"create+delete", func(c *zk.Conn, i int64) error {
			p := fmt.Sprintf("%s/n%d", root, i)
			if _, err := c.Create(p, data, 0, acl); err != nil {
				return err
			}
			return c.Delete(p, -1)
		}},
	}
	for _, ph := range phases {
		res, err := runZKPhase(conns, o, ph.op)
		if err != nil {
			return fmt.Errorf("%s: %w", ph.name, err)
		}
		fmt.Fprintf(out, "%-14s %10.0f ops/s  p50 %-9s p99 %-9s max %s\n", ph.name,
			float64(o.ops)/res.elapsed.Seconds(), res.p50, res.p99, res.max)
	}
	return nil
}

type zkPhaseResult struct {
	elapsed, p50, p99, max time.Duration
}

func runZKPhase(conns []*zk.Conn, o zkBenchOptions, op func(c *zk.Conn, i int64) error) (zkPhaseResult, error) {
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	lats := make([][]time.Duration, o.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := conns[w%len(conns)]
			for {
				i := next.Add(1)
				if i > int64(o.ops) {
					return
				}
				t0 := time.Now()
				if err := op(c, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return zkPhaseResult{}, firstErr
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))].Round(time.Microsecond)
	}
	return zkPhaseResult{elapsed: elapsed, p50: pct(0.5), p99: pct(0.99), max: pct(1)}, nil
}
