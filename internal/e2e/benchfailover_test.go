package e2e

import (
	"os/exec"
	"regexp"
	"testing"
)

// TestBenchFailoverRuns: `strom bench failover --kills 1` with a small
// primary-key table starts its own three nodes, kills a leader of each
// table once and prints a median for each. A smoke test of the benchmark,
// not a measurement: no time is checked.
func TestBenchFailoverRuns(t *testing.T) {
	bin := buildStrom(t)
	cmd := exec.Command(bin, "bench", "failover", "--kills", "1", "--pk-bytes", "200000", "--dir", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench failover: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	for _, table := range []string{"log", "pk"} {
		re := regexp.MustCompile(`bench.failover_` + table + ` table: median [0-9.]+s from SIGKILL of the leader to the next acknowledged write, over 1 kills`)
		if !re.Match(out) {
			t.Errorf("no median for the %s table in:\n%s", table, out)
		}
	}
}
