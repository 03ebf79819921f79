package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// zkCli is the real ZooKeeper client from Debian's zookeeper package, which
// scripts/test.sh installs.
const zkCli = "/usr/share/zookeeper/bin/zkCli.sh"

// TestZooKeeperShimWithZkCli runs `strom server --zookeeper-listen` and drives
// it with the real zkCli.sh: create, read, watch and delete nodes, and read
// Strom's own tables under /strom/metadata.
func TestZooKeeperShimWithZkCli(t *testing.T) {
	if _, err := os.Stat(zkCli); err != nil {
		t.Fatalf("%s is missing: scripts/test.sh installs Debian's zookeeper package (scripts/zookeeper.sh start): %v", zkCli, err)
	}
	bin := buildStrom(t)
	dir := t.TempDir()
	addr, zkAddr := freeAddr(t), freeAddr(t)
	startNode(t, bin, dir, addr, "--data-dir", dir, "--listen", addr, "--raft-listen", freeAddr(t), "--zookeeper-listen", zkAddr)
	strom(t, bin, addr, "db", "create", "zkdemo")
	strom(t, bin, addr, "table", "create", "zkdemo.events", "--schema", "id BIGINT")

	script := strings.Join([]string{
		"create /app hello",
		"get /app",
		"set /app world",
		"ls -w /app",
		"create /app/child c",
		"delete /app/child",
		"delete /app",
		"ls /strom/metadata/databases",
		"create /strom/nope x",
		"ls /strom/metadata/databases/zkdemo/tables",
		"quit",
	}, "\n") + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, zkCli, "-server", zkAddr)
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), "ZOO_LOG4J_PROP=ERROR,CONSOLE")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("zkCli.sh: %v\n%s", err, text)
	}
	for _, want := range []string{
		"Created /app",
		"hello",
		"WatchedEvent state:SyncConnected type:NodeChildrenChanged path:/app",
		"[zkdemo]",
		"[events]",
		"Insufficient permission : /strom/nope",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("zkCli.sh output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("zkCli.sh output:\n%s", text)
	}
}
