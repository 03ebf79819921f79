package zkwire

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// zkCliPath is the real Java client from Debian's zookeeper package.
const zkCliPath = "/usr/share/zookeeper/bin/zkCli.sh"

// TestZkCliSession drives the shim with the real zkCli.sh: create, get,
// set, ls, stat, delete, and an `ls -w` watch that sees an event. It needs
// the zookeeper package, so it runs under the same rule as the
// differential test (STROM_ZK_ADDR set; required when CI=true).
func TestZkCliSession(t *testing.T) {
	realZooKeeper(t)
	if _, err := os.Stat(zkCliPath); err != nil {
		t.Fatalf("%s missing (scripts/zookeeper.sh start installs it): %v", zkCliPath, err)
	}
	n, s := newShim(t)
	if _, err := n.Create(t.Context(), "/strom", []byte("ours"), 0); err != nil {
		t.Fatal(err)
	}
	script := strings.Join([]string{
		"create /cli hello",
		"get /cli",
		"set /cli world",
		"get /cli",
		"create /cli/kid k",
		"ls /cli",
		"stat /cli",
		"ls -w /cli",
		"create /cli/kid2 k2",
		"delete /cli/kid",
		"delete /cli/kid2",
		"delete /cli",
		"get /strom",
		"create /strom/x nope",
		"ls /",
		"quit",
	}, "\n") + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, zkCliPath, "-server", s.Addr().String())
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), "ZOO_LOG4J_PROP=ERROR,CONSOLE")
	out, err := cmd.CombinedOutput()
	text := string(out)
	t.Logf("zkCli.sh output:\n%s", text)
	if err != nil {
		t.Fatalf("zkCli.sh: %v", err)
	}
	for _, want := range []string{
		"Created /cli",
		"hello",
		"world",
		"[kid]",
		"dataVersion = 1",
		"numChildren = 1",
		"WatchedEvent state:SyncConnected type:NodeChildrenChanged path:/cli",
		"[strom, zookeeper]",
		"ours",
		"Insufficient permission : /strom/x",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if _, err := n.Exists("/cli"); err == nil {
		t.Error("/cli still exists after delete")
	}
}
