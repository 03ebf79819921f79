package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reportOf writes one result file per round and system (v[r][i] the
// figure of systems[i] in round r+1, body its JSON line) and an index of
// them, and returns the report built from that index.
func reportOf(t *testing.T, systems [2]string, v [][2]float64, body func(sys string, x float64) string) string {
	t.Helper()
	dir := t.TempDir()
	var index strings.Builder
	for r := range v {
		for i, sys := range systems {
			f := filepath.Join(dir, fmt.Sprintf("r%d-%s.json", r+1, sys))
			if err := os.WriteFile(f, []byte(body(sys, v[r][i])+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&index, "%d\t%d\t%s\t1.0\t0.1 0.2 0.3\t10\t0\t%s\n", r+1, i+1, sys, f)
		}
	}
	idx := filepath.Join(dir, "index.tsv")
	if err := os.WriteFile(idx, []byte(index.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := report([]string{idx}, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestReportTable: the report's markdown rows hold the medians of the
// rounds and the ratio of the medians, and its JSON says which runs failed.
func TestReportTable(t *testing.T) {
	out := reportOf(t, [2]string{"strom", "fluss"}, [][2]float64{{100e3, 50e3}, {300e3, 100e3}, {200e3, 200e3}}, func(sys string, x float64) string {
		return "progress\n" + fmt.Sprintf(`{"peer":%q,"version":"v","produce":{"records_s":%g},"lookup_wide":{"ops_s":%g},"ok":true}`, sys, x, 2*x)
	})
	// medians: Strom 200k, Fluss 100k; per round 2, 3, 1
	for _, want := range []string{
		"| produce (records/s) | 200k (100k–300k) | 100k (50k–200k) | – | 2.00× | – |",
		"| lookup of those, 100 keys a request (keys/s) | 400k (200k–600k) | 200k (100k–400k) | – | 2.00× | – |",
		`"strom_fluss_per_round":[2,3,1]`,
		`"ok":true`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestReportSameClient: with strom-fluss in the rounds the table gets its
// column and the ratio to Fluss with the same client, per round too.
func TestReportSameClient(t *testing.T) {
	out := reportOf(t, [2]string{"strom-fluss", "fluss"}, [][2]float64{{300e3, 100e3}, {100e3, 100e3}, {200e3, 100e3}}, func(sys string, x float64) string {
		return fmt.Sprintf(`{"peer":%q,"version":"v","lookup":{"ops_s":%g},"ok":true}`, sys, x)
	})
	for _, want := range []string{
		"| case | Strom | Strom, Fluss client | Fluss | Kafka | Strom/Fluss | Strom/Kafka | Strom, Fluss client/Fluss |",
		"| lookup (keys/s, 1000 outstanding) | – | 200k (100k–300k) | 100k (100k–100k) | – | – | – | 2.00× |",
		`"strom_fluss_fluss_per_round":[3,1,2]`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestReportCPU: the CPU figures a record get a table of their own, with
// the ratio of the medians; results without them get none.
func TestReportCPU(t *testing.T) {
	out := reportOf(t, [2]string{"strom", "fluss"}, [][2]float64{{2, 4}, {1, 4}, {3, 4}}, func(sys string, x float64) string {
		return fmt.Sprintf(`{"peer":%q,"version":"v","lookup":{"ops_s":1000,"server_cpu_us":%g,"client_cpu_us":%g},"ok":true}`, sys, x, 10*x)
	})
	for _, want := range []string{
		"CPU time a record",
		"| lookup: server CPU µs a record | 2.00 (1.00–3.00) | 4.00 (4.00–4.00) | – | 0.50× | – |",
		"| lookup: client CPU µs a record | 20.00 (10.00–30.00) | 40.00 (40.00–40.00) | – | 0.50× | – |",
		`"lookup_server_cpu_us":{"strom":{"median":2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "produce: server CPU") {
		t.Errorf("a CPU row for a workload without CPU figures:\n%s", out)
	}
	old := reportOf(t, [2]string{"strom", "fluss"}, [][2]float64{{2, 4}}, func(sys string, x float64) string {
		return fmt.Sprintf(`{"peer":%q,"version":"v","lookup":{"ops_s":%g},"ok":true}`, sys, x)
	})
	if strings.Contains(old, "CPU time a record") {
		t.Errorf("a CPU table for results without CPU figures:\n%s", old)
	}
}
