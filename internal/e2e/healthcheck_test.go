package e2e

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestHealthcheck: `strom healthcheck`, the container image's HEALTHCHECK,
// finds the node from STROM_API_LISTEN alone (":port" is 127.0.0.1:port),
// exits 1 naming the URL while nothing serves there, and 0 once the node is
// ready.
func TestHealthcheck(t *testing.T) {
	bin := buildStrom(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	healthcheck := func() (string, error) {
		cmd := exec.Command(bin, "healthcheck", "--timeout", "5s")
		cmd.Env = append(os.Environ(), "STROM_API_LISTEN=:"+port)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	url := "http://127.0.0.1:" + port + "/readyz"

	out, err := healthcheck()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, url) {
		t.Fatalf("with no node: exit %v, output %q; want exit 1 naming %s", err, out, url)
	}

	n := startNode(t, bin, dir, addr, "--data-dir", dir, "--listen", addr, "--raft-listen", freeAddr(t))
	if out, err := healthcheck(); err != nil || !strings.Contains(out, "ready: "+url) {
		t.Fatalf("with a ready node: exit %v, output %q", err, out)
	}
	if err := n.kill(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
}
