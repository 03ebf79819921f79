package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportTable: the report's markdown rows hold the medians of the
// rounds and the ratio of the medians, and its JSON says which runs failed.
func TestReportTable(t *testing.T) {
	dir := t.TempDir()
	var index strings.Builder
	for r, v := range [][2]float64{{100e3, 50e3}, {300e3, 100e3}, {200e3, 200e3}} {
		for i, sys := range []string{"strom", "fluss"} {
			f := filepath.Join(dir, fmt.Sprintf("r%d-%s.json", r+1, sys))
			body := fmt.Sprintf(`{"peer":%q,"version":"v","produce":{"records_s":%g},"lookup_wide":{"ops_s":%g},"ok":true}`, sys, v[i], 2*v[i])
			if err := os.WriteFile(f, []byte("progress\n"+body+"\n"), 0o644); err != nil {
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
	// medians: Strom 200k, Fluss 100k; per round 2, 3, 1
	for _, want := range []string{
		"| produce (records/s) | 200k (100k–300k) | 100k (50k–200k) | – | 2.00× | – |",
		"| lookup of those, 100 keys a request (keys/s) | 400k (200k–600k) | 200k (100k–400k) | – | 2.00× | – |",
		`"strom_fluss_per_round":[2,3,1]`,
		`"ok":true`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestReportSameClient: with strom-fluss in the rounds the table gets its
// column and the ratio to Fluss with the same client, per round too.
func TestReportSameClient(t *testing.T) {
	dir := t.TempDir()
	var index strings.Builder
	for r, v := range [][2]float64{{300e3, 100e3}, {100e3, 100e3}, {200e3, 100e3}} {
		for i, sys := range []string{"strom-fluss", "fluss"} {
			f := filepath.Join(dir, fmt.Sprintf("r%d-%s.json", r+1, sys))
			body := fmt.Sprintf(`{"peer":%q,"version":"v","lookup":{"ops_s":%g},"ok":true}`, sys, v[i])
			if err := os.WriteFile(f, []byte(body+"\n"), 0o644); err != nil {
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
	for _, want := range []string{
		"| case | Strom | Strom, Fluss client | Fluss | Kafka | Strom/Fluss | Strom/Kafka | Strom, Fluss client/Fluss |",
		"| lookup (keys/s, 1000 outstanding) | – | 200k (100k–300k) | 100k (100k–100k) | – | – | – | 2.00× |",
		`"strom_fluss_fluss_per_round":[3,1,2]`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
