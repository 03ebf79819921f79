package robustness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"strom/internal/robustness/check"
	"strom/internal/robustness/history"
)

// The flags of a run, given by scripts/robustness.sh after -args.
var (
	flagSeed     = flag.Int64("robustness.seed", 0, "seed of the schedule (0: a random one)")
	flagDuration = flag.Duration("robustness.duration", 0, "how long to inject faults (0: no run, unless STROM_ROBUSTNESS=ci)")
	flagFaults   = flag.String("robustness.faults", "all", "fault kinds, comma-separated, or all")
	flagNodes    = flag.Int("robustness.nodes", 3, "nodes of the cluster: 3 or 5")
	flagDir      = flag.String("robustness.dir", "", "directory for the run directories (default: a new one under the system's temp dir)")
)

// ciSeeds are the fixed seeds of the CI short mode: each a run of every
// fault kind.
var ciSeeds = []int64{1, 2}

// ciDuration is how long each CI run injects faults: enough for one round
// of every kind (TestScheduleCoversEveryKind holds it).
const ciDuration = 110 * time.Second

// TestRobustness runs a cluster of real strom processes under faults and
// checks the history. With -robustness.duration (scripts/robustness.sh) it
// is one run of the flags' options; with STROM_ROBUSTNESS=ci (scripts/robustness.sh
// --ci, from scripts/test.sh) it is the CI short mode, a run of every kind
// per seed of ciSeeds; else there is nothing to run.
func TestRobustness(t *testing.T) {
	var runs []Options
	kinds, err := ParseKinds(*flagFaults)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case *flagDuration > 0:
		seed := *flagSeed
		if seed == 0 {
			seed = rand.Int64N(1 << 31)
		}
		runs = append(runs, Options{Seed: seed, Kinds: kinds, Duration: *flagDuration, Nodes: *flagNodes})
	case os.Getenv("STROM_ROBUSTNESS") == "ci":
		for _, s := range ciSeeds {
			runs = append(runs, Options{Seed: s, Kinds: Kinds, Duration: ciDuration, Nodes: 3})
		}
	default:
		t.Skip("a robustness run takes minutes: run scripts/robustness.sh (or STROM_ROBUSTNESS=ci for the CI short mode)")
	}
	root := *flagDir
	if root == "" {
		var err error
		if root, err = os.MkdirTemp("", "strom-robustness-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if !t.Failed() { // a failed run's directory is kept for its report
				os.RemoveAll(root)
			}
		})
	}
	bin := filepath.Join(root, "strom")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, o := range runs {
		o.Bin = bin
		o.Dir = filepath.Join(root, fmt.Sprintf("%s-seed%d", time.Now().UTC().Format("20060102T150405"), o.Seed))
		t.Run(fmt.Sprintf("seed%d", o.Seed), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), o.Duration+10*time.Minute)
			defer cancel()
			t.Logf("run directory %s\n%s", o.Dir, NewSchedule(uint64(o.Seed), o.Kinds, o.Duration))
			v, err := Run(ctx, o)
			if err != nil {
				t.Fatalf("%v\nrun directory %s\nreproduce: %s", err, o.Dir, o.Command())
			}
			t.Log(v.String())
			if !v.OK {
				t.Fatalf("the run found a problem: seed %d; reproduce with: %s", o.Seed, o.Command())
			}
		})
	}
}

// TestScheduleFromSeed: the same seed gives the same schedule, another
// seed another one.
func TestScheduleFromSeed(t *testing.T) {
	a := NewSchedule(7, Kinds, 5*time.Minute)
	b := NewSchedule(7, Kinds, 5*time.Minute)
	if a.String() != b.String() {
		t.Fatalf("seed 7 gave two schedules:\n%s\n%s", a, b)
	}
	if c := NewSchedule(8, Kinds, 5*time.Minute); c.String() == a.String() {
		t.Fatalf("seeds 7 and 8 gave the same schedule:\n%s", a)
	}
	for i, st := range a.Steps {
		if st.At+st.Hold > a.Duration {
			t.Errorf("step %d (%v) ends after the run's %v", i, st, a.Duration)
		}
		if i > 0 && st.At < a.Steps[i-1].At+a.Steps[i-1].Hold+minGap {
			t.Errorf("step %d (%v) starts before step %d has ended and the gap passed", i, st, i-1)
		}
	}
}

// TestScheduleCoversEveryKind: a CI run's schedule has every fault kind.
func TestScheduleCoversEveryKind(t *testing.T) {
	for _, seed := range ciSeeds {
		s := NewSchedule(uint64(seed), Kinds, ciDuration)
		for _, k := range Kinds {
			if !slices.ContainsFunc(s.Steps, func(st Step) bool { return st.Kind == k }) {
				t.Errorf("seed %d: no %s fault in %v:\n%s", seed, k, ciDuration, s)
			}
		}
	}
}

// TestSplit: a split's minority is less than half the nodes, and the two
// sides together are every node once.
func TestSplit(t *testing.T) {
	for _, n := range []int{3, 5} {
		in := &injector{c: &Cluster{nodes: make([]*Node, n)}}
		for pick := range uint64(50) {
			minority, majority := in.split(pick * 0x9e3779b97f4a7c15)
			all := slices.Sorted(slices.Values(append(slices.Clone(minority), majority...)))
			want := make([]int, n)
			for i := range want {
				want[i] = i + 1
			}
			if len(minority) != (n-1)/2 || !slices.Equal(all, want) {
				t.Fatalf("%d nodes, pick %d: minority %v, majority %v", n, pick, minority, majority)
			}
		}
	}
}

// TestVerdictOfALostAppend: a history whose acknowledged append is missing
// from the final reads fails the run's verdict, which names the seed, the
// command reproducing it and the operation.
func TestVerdictOfALostAppend(t *testing.T) {
	h := &history.History{Ops: []history.Op{
		{Client: 1, Kind: history.LogAppend, Table: "robustness.events", Value: "c1.0", Offset: 0, Invoke: 1, Return: 2, Outcome: history.OK},
		{Client: 1, Kind: history.LogAppend, Table: "robustness.events", Value: "c1.1", Offset: 1, Invoke: 3, Return: 4, Outcome: history.OK},
		{Client: 2, Kind: history.LogRead, Table: "robustness.events", Final: true, HighWatermark: 1,
			Records: []history.Record{{Offset: 0, Value: "c1.0"}}, Invoke: 5, Return: 6, Outcome: history.OK},
	}}
	o := Options{Seed: 42, Kinds: []Kind{Kill}, Duration: time.Minute, Nodes: 3}
	v := &Verdict{Seed: o.Seed, Kinds: o.Kinds, Duration: o.Duration, Nodes: o.Nodes, Reproduce: o.Command()}
	v.judge(h, checkHistory(h, "", check.Result{Checker: "fold", OK: true}))
	if v.OK {
		t.Fatalf("a lost append passed:\n%s", v)
	}
	out := v.String()
	for _, want := range []string{"FAIL: seed 42", "lost", `"value":"c1.1"`, "scripts/robustness.sh --seed 42 --minutes 1 --faults kill --nodes 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("the verdict does not say %q:\n%s", want, out)
		}
	}
	// The same history with the append read back passes.
	h.Ops[2].Records = append(h.Ops[2].Records, history.Record{Offset: 1, Value: "c1.1"})
	h.Ops[2].HighWatermark = 2
	v = &Verdict{}
	if v.judge(h, checkHistory(h, "", check.Result{Checker: "fold", OK: true})); !v.OK {
		t.Fatalf("a complete history failed:\n%s", v)
	}
}

// TestWaitServed: after the heal, the run waits until every workload has
// succeeded again, and names those that never do.
func TestWaitServed(t *testing.T) {
	var buf strings.Builder
	rec := &recorder{w: history.NewWriter(&buf), clock: history.NewClock()}
	for _, k := range served {
		rec.record(history.Op{Kind: k, Invoke: 10}, nil, history.Fail)
	}
	if err := rec.waitServed(context.Background(), 5); err != nil {
		t.Fatalf("every kind succeeded after 5: %v", err)
	}
	rec.record(history.Op{Kind: history.KVPut, Invoke: 30}, nil, history.Fail)
	rec.record(history.Op{Kind: history.LogAppend, Invoke: 40}, errors.New("timeout"), history.Unknown)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := rec.waitServed(ctx, 20)
	if err == nil || !strings.Contains(err.Error(), "log_append") || strings.Contains(err.Error(), "kv_put") {
		t.Fatalf("since 20 only kv_put succeeded; got %v", err)
	}
}

// TestRunStepsLeavesOutLateFaults: faults that take longer than the gaps
// between them (a rolling restart on a loaded machine) fall behind; once
// the window of faults has closed the rest are left out, not injected
// until the run's deadline cuts one short.
func TestRunStepsLeavesOutLateFaults(t *testing.T) {
	var steps []Step
	for i := range 20 {
		steps = append(steps, Step{At: time.Duration(i) * 50 * time.Millisecond, Kind: RollingRestart})
	}
	clock := history.NewClock()
	injected, skipped := runSteps(context.Background(), steps, time.Second, clock, func(Step) { time.Sleep(400 * time.Millisecond) })
	// Each injection takes 400 ms, so at most 3 start within 1 s (at 0,
	// 0.4 and 0.8 s, or fewer if the machine is slow).
	if injected > 3 || injected+skipped != len(steps) {
		t.Fatalf("injected %d, skipped %d of %d steps; want at most 3 injected, the rest skipped", injected, skipped, len(steps))
	}
	// Steps on time are all injected.
	injected, skipped = runSteps(context.Background(), steps[:3], time.Minute, history.NewClock(), func(Step) {})
	if injected != 3 || skipped != 0 {
		t.Fatalf("on time: injected %d, skipped %d; want 3, 0", injected, skipped)
	}
}
