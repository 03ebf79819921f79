package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report reads bench-peers.sh's index of results (TSV: round, position in the
// round's order, system, CPU busy % before it started, load average, wall
// seconds, exit code, path of the system's JSON output), and prints the
// comparison table and then one JSON line with everything in it.

// strom-fluss is Strom behind the Fluss Java client (FlussBench.java against a
// node's fluss.listen): the same JSON as fluss, so the same paths.
var systems = []string{"strom", "strom-fluss", "fluss", "kafka"}

var systemLabel = map[string]string{"strom": "Strom", "strom-fluss": "Strom, Fluss client", "fluss": "Fluss", "kafka": "Kafka"}

// The ratios of the table: numerator, denominator.
var ratioPairs = [][2]string{{"strom", "fluss"}, {"strom", "kafka"}, {"strom-fluss", "fluss"}}

func init() {
	for _, cs := range [][]benchCase{cases, extras} {
		for _, c := range cs {
			if p, ok := c.path["fluss"]; ok {
				c.path["strom-fluss"] = p
			}
		}
	}
}

// A case of the table: where each system keeps its figure (nil: it has none).
type benchCase struct {
	key, label string
	path       map[string][]string
}

var cases = []benchCase{
	{"produce", "produce (records/s)", map[string][]string{
		"strom": {"produce", "records_s"}, "fluss": {"produce", "records_s"}, "kafka": {"produce", "msgs_s"}}},
	{"scan_all", "scan all 20 columns (records/s)", map[string][]string{
		"strom": {"scan_all", "records_s"}, "fluss": {"scan_all", "records_s"}, "kafka": {"consume", "fetch_msgs_s"}}},
	{"scan_1col", "scan 1 column", map[string][]string{"strom": {"scan_1col", "records_s"}, "fluss": {"scan_1col", "records_s"}}},
	{"scan_5col", "scan 5 columns", map[string][]string{"strom": {"scan_5col", "records_s"}, "fluss": {"scan_5col", "records_s"}}},
	{"scan_10col", "scan 10 columns", map[string][]string{"strom": {"scan_10col", "records_s"}, "fluss": {"scan_10col", "records_s"}}},
	{"upsert", "upsert (records/s)", map[string][]string{"strom": {"upsert", "records_s"}, "fluss": {"upsert", "records_s"}}},
	{"lookup", "lookup (keys/s, 1000 outstanding)", map[string][]string{"strom": {"lookup", "ops_s"}, "fluss": {"lookup", "ops_s"}}},
	{"upsert_wide", "upsert 1 KB rows of 8 columns, 8 buckets", map[string][]string{"strom": {"upsert_wide", "records_s"}, "fluss": {"upsert_wide", "records_s"}}},
	{"lookup_wide", "lookup of those, 100 keys a request (keys/s)", map[string][]string{"strom": {"lookup_wide", "ops_s"}, "fluss": {"lookup_wide", "ops_s"}}},
}

// Secondary figures, listed under the table.
var extras = []benchCase{
	{"produce_mib_s", "produce payload MiB/s", map[string][]string{
		"strom": {"produce", "mib_s"}, "fluss": {"produce", "mib_s"}, "kafka": {"produce", "mib_s"}}},
	{"stored_ratio", "stored ratio (payload/segments)", map[string][]string{
		"strom": {"produce", "zstd_ratio"}, "fluss": {"produce", "zstd_ratio"}, "kafka": {"stored", "ratio"}}},
	{"scan_all_mib_s", "scan all payload MiB/s", map[string][]string{
		"strom": {"scan_all", "mib_s"}, "fluss": {"scan_all", "mib_s"}, "kafka": {"consume", "fetch_mib_s"}}},
	{"scan_all_s", "scan all seconds", map[string][]string{
		"strom": {"scan_all", "seconds"}, "fluss": {"scan_all", "seconds"}}},
	{"scan_1col_s", "scan 1 column seconds", map[string][]string{
		"strom": {"scan_1col", "seconds"}, "fluss": {"scan_1col", "seconds"}}},
	{"lookup_p50_ms", "lookup p50 ms (per key)", map[string][]string{"strom": {"lookup", "p50_ms"}, "fluss": {"lookup", "p50_ms"}}},
	{"lookup_p99_ms", "lookup p99 ms (per key)", map[string][]string{"strom": {"lookup", "p99_ms"}, "fluss": {"lookup", "p99_ms"}}},
	{"lookup_wide_p50_ms", "lookup (100 keys a request) p50 ms", map[string][]string{"strom": {"lookup_wide", "p50_ms"}, "fluss": {"lookup_wide", "p50_ms"}}},
	{"kafka_produce_p99_ms", "Kafka produce p99 ms (queued in client)", map[string][]string{"kafka": {"produce", "p99_ms"}}},
}

// cpuCases are the workloads' CPU cost a record, the servers' and the
// client's (cpu.go, FlussBench's CpuMeter): a second table, with ratios,
// which a busy box moves far less than it moves the rates.
var cpuCases = func() []benchCase {
	workloads := []struct{ key, label string }{
		{"produce", "produce"}, {"scan_all", "scan all 20 columns"}, {"scan_1col", "scan 1 column"},
		{"scan_5col", "scan 5 columns"}, {"scan_10col", "scan 10 columns"}, {"upsert", "upsert"},
		{"lookup", "lookup"}, {"upsert_wide", "upsert 1 KB rows"}, {"lookup_wide", "lookup of those"},
	}
	var out []benchCase
	for _, side := range []string{"server", "client"} {
		for _, wl := range workloads {
			f := side + "_cpu_us"
			out = append(out, benchCase{wl.key + "_" + f, wl.label + ": " + side + " CPU µs a record", map[string][]string{
				"strom": {wl.key, f}, "strom-fluss": {wl.key, f}, "fluss": {wl.key, f}}})
		}
	}
	return out
}()

type run struct {
	round, pos int
	system     string
	busy       float64
	load       string
	wall       float64
	rc         int
	file       string
	res        map[string]any
	err        string
}

func report(args []string, w io.Writer) error {
	var in io.Reader = os.Stdin
	if len(args) > 0 {
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	var runs []*run
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 8 {
			return fmt.Errorf("index line %q: want 8 tab-separated fields", line)
		}
		r := &run{system: f[2], load: f[4], file: f[7]}
		r.round, _ = strconv.Atoi(f[0])
		r.pos, _ = strconv.Atoi(f[1])
		r.busy, _ = strconv.ParseFloat(f[3], 64)
		r.wall, _ = strconv.ParseFloat(f[5], 64)
		r.rc, _ = strconv.Atoi(f[6])
		r.res, r.err = readResult(r.file)
		if r.err == "" && r.rc != 0 {
			r.err = fmt.Sprintf("exit code %d", r.rc)
		}
		runs = append(runs, r)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("no results in the index")
	}
	rounds := 0
	ran := map[string]bool{} // systems that were run at all (SYSTEMS may name a subset)
	for _, r := range runs {
		rounds = max(rounds, r.round)
		ran[r.system] = true
	}
	// per system, per case: the values of the rounds that have one
	values := func(c benchCase, sys string) []float64 {
		p, ok := c.path[sys]
		if !ok {
			return nil
		}
		var v []float64
		for _, r := range runs {
			if r.system == sys && r.err == "" {
				if x, ok := lookupNum(r.res, p); ok {
					v = append(v, x)
				}
			}
		}
		return v
	}
	// the ratio num/den per round in which both have the case
	roundRatios := func(c benchCase, num, den string) []float64 {
		var out []float64
		for k := 1; k <= rounds; k++ {
			var s, p float64
			var hs, hp bool
			for _, r := range runs {
				if r.round != k || r.err != "" {
					continue
				}
				if sp, ok := c.path[num]; ok && r.system == num {
					s, hs = lookupNum(r.res, sp)
				}
				if pp, ok := c.path[den]; ok && r.system == den {
					p, hp = lookupNum(r.res, pp)
				}
			}
			if hs && hp && p > 0 {
				out = append(out, round(s/p, 3))
			}
		}
		return out
	}

	fmt.Fprintf(w, "Strom vs Apache Fluss %s vs Apache Kafka %s: %d round(s), serial, loopback, %s\n",
		versionOf(runs, "fluss", "0.9.1"), versionOf(runs, "kafka", "4.4.0"), rounds, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "Strom %s. Values: median of the rounds (min–max); ratios: median Strom ÷ median peer.\n", versionOf(runs, "strom", versionOf(runs, "strom-fluss", "?")))
	fmt.Fprintln(w, "Load before each system (CPU busy over 2 s; load average 1/5/15 min):")
	for k := 1; k <= rounds; k++ {
		var parts []string
		for _, r := range runs {
			if r.round == k {
				st := "ok"
				if r.err != "" {
					st = "FAILED: " + r.err
				}
				parts = append(parts, fmt.Sprintf("%s busy %.0f%% load %s, %.0f s, %s", r.system, r.busy, r.load, r.wall, st))
			}
		}
		fmt.Fprintf(w, "  round %d: %s\n", k, strings.Join(parts, "; "))
	}
	fmt.Fprintln(w)

	// the columns: Strom, Fluss and Kafka always, Strom behind the Fluss client when it ran
	var cols []string
	for _, sys := range systems {
		if sys != "strom-fluss" || ran[sys] {
			cols = append(cols, sys)
		}
	}
	var pairs [][2]string
	for _, pr := range ratioPairs {
		if slices.Contains(cols, pr[0]) && slices.Contains(cols, pr[1]) {
			pairs = append(pairs, pr)
		}
	}
	head := []string{"case"}
	for _, sys := range cols {
		head = append(head, systemLabel[sys])
	}
	for _, pr := range pairs {
		head = append(head, systemLabel[pr[0]]+"/"+systemLabel[pr[1]])
	}
	printHead := func() {
		fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
		fmt.Fprintln(w, "|"+strings.Repeat("---|", len(head)))
	}
	printHead()
	caseJSON := &omap{}
	// emit adds a case to the table and the JSON; ratios only with withRatios.
	emit := func(c benchCase, withRatios bool) {
		cj := &omap{}
		cells := []string{c.label}
		meds := map[string]float64{}
		for _, sys := range cols {
			v := values(c, sys)
			if _, has := c.path[sys]; !has || !ran[sys] {
				cells = append(cells, "–")
				continue
			}
			if len(v) == 0 {
				cells = append(cells, "n/a")
				cj.put(sys, nil)
				continue
			}
			m := median(v)
			meds[sys] = m
			cells = append(cells, cell(v, rounds > 1))
			runsAny := make([]any, len(v))
			for i, x := range v {
				runsAny[i] = x
			}
			cj.put(sys, (&omap{}).put("median", m).put("min", slices.Min(v)).put("max", slices.Max(v)).put("runs", runsAny))
		}
		for _, pr := range pairs {
			if !withRatios {
				cells = append(cells, "")
				continue
			}
			s, hs := meds[pr[0]]
			p, hp := meds[pr[1]]
			if hs && hp && p > 0 {
				cells = append(cells, fmt.Sprintf("%.2f×", s/p))
				rr := roundRatios(c, pr[0], pr[1])
				rrAny := make([]any, len(rr))
				for i, x := range rr {
					rrAny[i] = x
				}
				key := strings.ReplaceAll(pr[0], "-", "_") + "_" + pr[1]
				cj.put(key, round(s/p, 3)).put(key+"_per_round", rrAny)
			} else {
				cells = append(cells, "–")
			}
		}
		if withRatios || len(meds) > 0 {
			if !withRatios {
				cells[0] = "*" + cells[0] + "*"
			}
			fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
		}
		caseJSON.put(c.key, cj)
	}
	for _, c := range cases {
		emit(c, true)
	}
	for _, c := range extras {
		emit(c, false)
	}
	fmt.Fprintln(w)
	var measured []benchCase // results from before the CPU figures have none
	for _, c := range cpuCases {
		if slices.ContainsFunc(cols, func(sys string) bool { return len(values(c, sys)) > 0 }) {
			measured = append(measured, c)
		}
	}
	if len(measured) > 0 {
		fmt.Fprintln(w, "CPU time a record (µs; user + system from the kernel's accounting over each timed workload; ratios: lower is less CPU for Strom).")
		fmt.Fprintln(w, "Server: the node, or Fluss's ZooKeeper, CoordinatorServer and TabletServer; client: the benchmark's process (for Java, JIT and GC included).")
		printHead()
		for _, c := range measured {
			emit(c, true)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Same rows, seeds and client settings for Strom and Fluss (internal/peerbench ports scripts/peerbench/FlussBench.java); Kafka:")
	fmt.Fprintln(w, "produce = ProducerPerformance sending 2048-byte JSON rows from a pre-serialized pool (zstd-3 in the client),")
	fmt.Fprintln(w, "scan all = ConsumerPerformance's fetch rate (whole rows decompressed, not parsed; group join left out).")
	if ran["strom-fluss"] {
		fmt.Fprintln(w, "Strom, Fluss client = the very same FlussBench.java (Fluss's 0.9.1 Java client) as for Fluss, against a Strom node's fluss.listen.")
	}
	fmt.Fprintln(w)

	// the final JSON line
	out := &omap{}
	out.put("bench_peers", true)
	out.put("date", time.Now().UTC().Format("2006-01-02T15:04:05Z"))
	out.put("rounds", rounds)
	out.put("versions", (&omap{}).put("strom", versionOf(runs, "strom", versionOf(runs, "strom-fluss", "?"))).put("fluss", versionOf(runs, "fluss", "?")).put("kafka", versionOf(runs, "kafka", "?")))
	var runList []any
	failed := 0
	for _, r := range runs {
		e := (&omap{}).put("round", r.round).put("pos", r.pos).put("system", r.system).put("busy_pct", r.busy).
			put("loadavg", r.load).put("wall_s", r.wall).put("ok", r.err == "")
		if r.err != "" {
			e.put("error", r.err)
			failed++
		}
		e.put("file", r.file)
		runList = append(runList, e)
	}
	out.put("runs", runList)
	out.put("cases", caseJSON)
	out.put("ok", failed == 0)
	fmt.Fprintln(w, out.json())
	if failed > 0 {
		return fmt.Errorf("%d of %d system runs failed", failed, len(runs))
	}
	return nil
}

// readResult parses a system's output: its last line that starts with '{'.
func readResult(path string) (map[string]any, string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err.Error()
	}
	var last string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "{") {
			last = l
		}
	}
	if last == "" {
		return nil, "no JSON line in the output"
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(last), &m); err != nil {
		return nil, "bad JSON: " + err.Error()
	}
	if ok, _ := m["ok"].(bool); !ok {
		e, _ := m["error"].(string)
		if e == "" {
			e = "ok is not true"
		}
		return m, e
	}
	return m, ""
}

func lookupNum(m map[string]any, path []string) (float64, bool) {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return 0, false
		}
		cur = mm[p]
	}
	x, ok := cur.(float64)
	return x, ok && !math.IsNaN(x)
}

func versionOf(runs []*run, sys, def string) string {
	for _, r := range runs {
		if r.system == sys && r.res != nil {
			if v, ok := r.res["version"].(string); ok && v != "" {
				return v
			}
		}
	}
	return def
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// cell formats a median, with the range when there are several rounds.
func cell(v []float64, withRange bool) string {
	m := human(median(v))
	if withRange && len(v) > 1 {
		return fmt.Sprintf("%s (%s–%s)", m, human(slices.Min(v)), human(slices.Max(v)))
	}
	return m
}

// human: 1.67M, 101k, 195, 4.03, 0.023.
func human(x float64) string {
	a := math.Abs(x)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(x/1e6, 'f', 2, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(x/1e3, 'f', 0, 64) + "k"
	case a >= 1e3:
		return strconv.FormatFloat(x/1e3, 'f', 1, 64) + "k"
	case a >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	default:
		return strconv.FormatFloat(x, 'f', 3, 64)
	}
}
