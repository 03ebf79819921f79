package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestClusterScriptStartsThreeNodes runs `scripts/cluster.sh start 3` as
// the README does, on a fresh directory: every node starts with the
// cluster's secret and the three form one cluster. (Each node's secret was
// read in the background with the node: the first node's wrote the secret
// file while the second's read it, often empty, and the second node
// refused to start: "cluster.secret: must be set".)
func TestClusterScriptStartsThreeNodes(t *testing.T) {
	for i := 1; i <= 3; i++ {
		for p := 9113 + 10*i; p <= 9115+10*i; p++ {
			a := fmt.Sprintf("127.0.0.1:%d", p)
			ln, err := net.Listen("tcp", a)
			if err != nil {
				t.Fatalf("scripts/cluster.sh needs port %s free (is a local cluster running?): %v", a, err)
			}
			ln.Close()
		}
	}
	dir := filepath.Join(t.TempDir(), "cluster")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(repoRoot, "scripts", "cluster.sh"), args...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "STROM_CLUSTER_DIR="+dir, "STROM_CLUSTER_SECRET=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := run("clean"); err != nil {
			t.Errorf("cluster.sh clean: %v\n%s", err, out)
		}
	})
	out, err := run("start", "3")
	if err != nil {
		var logs []string
		for i := 1; i <= 3; i++ {
			b, _ := os.ReadFile(filepath.Join(dir, "n"+strconv.Itoa(i), "log"))
			if s := string(b); strings.Contains(s, "must be set") || len(s) < 2000 {
				logs = append(logs, "node "+strconv.Itoa(i)+": "+s)
			}
		}
		t.Fatalf("cluster.sh start 3: %v\n%s\n%s", err, out, strings.Join(logs, "\n"))
	}
	if !regexp.MustCompile(`Voters:\s+\[1,2,3\]`).MatchString(out) || !strings.Contains(out, "coordinator") {
		t.Errorf("cluster.sh start 3 printed no cluster of voters [1,2,3] with a coordinator:\n%s", out)
	}
}
