package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"strom/internal/robustness/check"
	"strom/internal/robustness/history"
)

// Options describe a run: a seed, the fault kinds, how long, how many
// nodes. The same options give the same schedule.
type Options struct {
	// Seed chooses the schedule.
	Seed int64
	// Kinds are the fault kinds the schedule takes in turn (default all).
	Kinds []Kind
	// Duration is how long faults are injected (the run takes longer: the
	// cluster's start, the quiet period, the final reads, the check).
	Duration time.Duration
	// Nodes is the cluster's size, 3 or 5 (default 3).
	Nodes int
	// Quiet is how long the workloads go on after every fault has healed
	// and each of them has succeeded again, before they stop and the final
	// reads (default 5s).
	Quiet time.Duration
	// Dir is the run directory, created if missing: the binary, the nodes'
	// data and logs, the history, the schedule, the verdict.
	Dir string
	// Bin is the strom binary to run.
	Bin string
}

// Validate reports every problem of o.
func (o Options) Validate() error {
	var errs []error
	if o.Duration <= 0 {
		errs = append(errs, fmt.Errorf("robustness: duration %v: want more than 0", o.Duration))
	}
	if o.Nodes != 3 && o.Nodes != 5 {
		errs = append(errs, fmt.Errorf("robustness: nodes %d: want 3 or 5", o.Nodes))
	}
	if o.Dir == "" || o.Bin == "" {
		errs = append(errs, errors.New("robustness: a run needs a directory and a binary"))
	}
	return errors.Join(errs...)
}

// Command is the command that runs these options again.
func (o Options) Command() string {
	var kinds []string
	for _, k := range o.Kinds {
		kinds = append(kinds, string(k))
	}
	return fmt.Sprintf("scripts/robustness.sh --seed %d --minutes %g --faults %s --nodes %d",
		o.Seed, o.Duration.Minutes(), strings.Join(kinds, ","), o.Nodes)
}

// Verdict is the outcome of a run, written to verdict.json in its
// directory.
type Verdict struct {
	// OK is true when the run found nothing wrong.
	OK       bool          `json:"ok"`
	Seed     int64         `json:"seed"`
	Kinds    []Kind        `json:"kinds"`
	Duration time.Duration `json:"duration_ns"`
	Nodes    int           `json:"nodes"`
	Dir      string        `json:"dir"`
	// Reproduce is the command that runs the same schedule.
	Reproduce string `json:"reproduce"`
	// Ops counts the operations recorded, Unknown and Failed those of
	// them with outcome unknown and fail; Faults the faults injected.
	Ops     int64 `json:"ops"`
	Unknown int64 `json:"unknown"`
	Failed  int64 `json:"failed"`
	Faults  int   `json:"faults"`
	// Skipped counts the schedule's faults left out because their time came
	// after the window of faults had closed (faults that fell behind).
	Skipped int `json:"skipped_faults,omitempty"`
	// Problems are what went wrong in the run itself: a node that did not
	// come back, a clean stop that hung, final reads that could not finish.
	Problems []string `json:"problems,omitempty"`
	// Results are the checkers' results.
	Results []check.Result `json:"results"`
	// Excerpts[i][j] are the history lines of the first operations of
	// anomaly j of Results[i], for the first few anomalies of each.
	Excerpts [][]string `json:"excerpts,omitempty"`
}

func (v *Verdict) String() string {
	var b strings.Builder
	status := "PASS"
	if !v.OK {
		status = "FAIL"
	}
	fmt.Fprintf(&b, "%s: seed %d, %v of faults %v on %d nodes: %d operations (%d unknown, %d failed), %d faults\n",
		status, v.Seed, v.Duration, v.Kinds, v.Nodes, v.Ops, v.Unknown, v.Failed, v.Faults)
	if v.Skipped > 0 {
		fmt.Fprintf(&b, "  %d faults of the schedule left out: their time came after the window had closed\n", v.Skipped)
	}
	for _, p := range v.Problems {
		fmt.Fprintf(&b, "  problem: %s\n", p)
	}
	for i, r := range v.Results {
		switch {
		case r.OK:
			fmt.Fprintf(&b, "  %s: ok, %d operations\n", r.Checker, r.Ops)
		case r.Error != "":
			fmt.Fprintf(&b, "  %s: undecided: %s\n", r.Checker, r.Error)
		default:
			fmt.Fprintf(&b, "  %s: %d anomalies in %d operations\n", r.Checker, r.Total, r.Ops)
		}
		for j, a := range r.Anomalies {
			if j == excerpted {
				fmt.Fprintf(&b, "    ... %d more in verdict.json\n", r.Total-j)
				break
			}
			fmt.Fprintf(&b, "    %s: %s\n", a.Kind, a.Detail)
			if i < len(v.Excerpts) && j < len(v.Excerpts[i]) {
				b.WriteString(v.Excerpts[i][j])
			}
		}
	}
	fmt.Fprintf(&b, "  run directory: %s\n", v.Dir)
	if !v.OK {
		fmt.Fprintf(&b, "  reproduce: %s\n", v.Reproduce)
	}
	return b.String()
}

// excerpted is how many anomalies of each checker the verdict shows with
// their operations.
const excerpted = 5

// Run runs a cluster of real processes under the workloads and the
// schedule of opts, heals every fault, lets the cluster settle, reads
// everything back, checks the history, and writes the verdict to
// opts.Dir. The error is for a run that could not be made at all (the
// cluster did not start); what goes wrong later is in the verdict.
func Run(ctx context.Context, opts Options) (*Verdict, error) {
	if len(opts.Kinds) == 0 {
		opts.Kinds = Kinds
	}
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.Quiet == 0 {
		opts.Quiet = 5 * time.Second
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(opts.Dir, "harness.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	lg := slog.New(slog.NewTextHandler(logf, nil))
	sched := NewSchedule(uint64(opts.Seed), opts.Kinds, opts.Duration)
	if err := os.WriteFile(filepath.Join(opts.Dir, "schedule.txt"), []byte(sched.String()), 0o644); err != nil {
		return nil, err
	}
	v := &Verdict{Seed: opts.Seed, Kinds: opts.Kinds, Duration: opts.Duration, Nodes: opts.Nodes, Dir: opts.Dir, Reproduce: opts.Command()}
	problem := func(err error) {
		if err != nil {
			lg.Error("problem", "err", err)
			v.Problems = append(v.Problems, err.Error())
		}
	}

	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := StartCluster(startCtx, ClusterOptions{Bin: opts.Bin, Dir: opts.Dir, Nodes: opts.Nodes, Logger: lg})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cl, err := c.Client(time.Minute)
	if err != nil {
		return nil, err
	}
	if err := setup(startCtx, cl); err != nil {
		return nil, err
	}
	hw, err := history.Create(filepath.Join(opts.Dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	rec := &recorder{w: hw, clock: history.NewClock()}
	w := &workloads{rec: rec, cl: cl, servers: c.Servers(), seed: opts.Seed, stop: make(chan struct{})}
	if err := w.start(ctx); err != nil { // the run's context: the clients live as long as it
		close(w.stop)
		w.wg.Wait()
		_ = hw.Close()
		return nil, err
	}
	lg.Info("workloads started", "schedule", sched.String())

	in := &injector{c: c, lg: lg, rec: rec, seed: opts.Seed, db: database, tables: []string{logTable, kvTable}, stopTimeout: 30 * time.Second}
	v.Faults, v.Skipped = runSteps(ctx, sched.Steps, opts.Duration, rec.clock, func(st Step) { problem(in.run(ctx, st)) })
	if v.Skipped > 0 {
		lg.Warn("fault window over: steps left out", "skipped", v.Skipped, "injected", v.Faults)
	}
	sleepUntil(ctx, rec.clock, opts.Duration)
	// What follows runs to the end even when ctx has ended: the faults
	// must be healed, the history closed and the verdict written.
	after := context.WithoutCancel(ctx)
	healCtx, cancel := context.WithTimeout(after, 2*time.Minute)
	defer cancel()
	problem(in.healAll(healCtx))
	healed := rec.clock.Now()
	serveCtx, cancel := context.WithTimeout(after, serveDeadline)
	defer cancel()
	if err := rec.waitServed(serveCtx, healed); err != nil {
		problem(err)
		c.DumpGoroutines(after, "not-served")
	}
	lg.Info("healed and served; quiet period", "quiet", opts.Quiet)
	sleepUntil(ctx, rec.clock, time.Duration(rec.clock.Now())+opts.Quiet)
	close(w.stop)
	w.wg.Wait()
	for _, err := range w.closeErrs {
		lg.Warn("closing a workload client", "err", err)
	}
	problem(w.finalReads(after))
	problem(w.finalGets(after))
	fold := w.foldCheck(after)
	problem(rec.err())
	problem(hw.Close())
	v.Unknown, v.Failed = rec.unknown.Load(), rec.failed.Load()

	h, err := history.ReadFile(filepath.Join(opts.Dir, "history.jsonl"))
	if err != nil {
		problem(err)
	} else {
		v.judge(h, checkHistory(h, opts.Dir, fold))
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	if err := os.WriteFile(filepath.Join(opts.Dir, "verdict.json"), b, 0o644); err != nil {
		return v, err
	}
	return v, os.WriteFile(filepath.Join(opts.Dir, "verdict.txt"), []byte(v.String()), 0o644)
}

// judge takes the checkers' results on h, with excerpts of h for the
// first anomalies, and decides the verdict: OK when the run had no
// problem and every checker passed.
func (v *Verdict) judge(h *history.History, results []check.Result) {
	v.Ops = int64(len(h.Ops))
	v.Results = results
	v.Excerpts = make([][]string, len(results))
	for i, r := range results {
		for _, a := range r.Anomalies[:min(len(r.Anomalies), excerpted)] {
			v.Excerpts[i] = append(v.Excerpts[i], excerpt(h, a, 10))
		}
	}
	v.OK = len(v.Problems) == 0 && len(results) > 0 && (check.Verdict{Results: results}).OK()
}

// runSteps injects the steps in order, each at its time, within the run's
// window of faults: a step whose time comes after the window has closed
// is left out (counted in skipped), as happens on a loaded machine where
// faults that take long (a rolling restart of every node) fall behind
// their schedule. Without this the run went on injecting until its
// context's deadline cut a restart short and failed the run for it.
func runSteps(ctx context.Context, steps []Step, window time.Duration, clock history.Clock, inject func(Step)) (injected, skipped int) {
	for i, st := range steps {
		if time.Duration(clock.Now()) >= window {
			return injected, len(steps) - i
		}
		if !sleepUntil(ctx, clock, st.At) {
			return injected, len(steps) - i
		}
		inject(st)
		injected++
	}
	return injected, 0
}

// sleepUntil waits until the run's clock reads at; false if ctx ended
// first. This is the schedule's own timing, not a wait for a condition.
func sleepUntil(ctx context.Context, clock history.Clock, at time.Duration) bool {
	d := at - time.Duration(clock.Now())
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}
