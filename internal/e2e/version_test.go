package e2e

import (
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A binary built with a version and commit (-ldflags -X) says them in
// `strom version`, in each node's row of `strom cluster describe` (through
// the gossip), and in strom_build_info on /metrics.
func TestVersionEverywhere(t *testing.T) {
	const version, commit = "v9.9.9-e2e", "0123abc"
	bin := filepath.Join(t.TempDir(), "strom")
	cmd := exec.Command("go", "build", "-o", bin, "-ldflags",
		"-X strom/internal/buildinfo.version="+version+" -X strom/internal/buildinfo.commit="+commit, ".")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	var v struct{ Version, Commit, GoVersion string }
	mustJSON(t, strom(t, bin, "", "version", "--output", "json"), &v)
	if v.Version != version || v.Commit != commit || v.GoVersion != runtime.Version() {
		t.Fatalf("strom version: %+v, want %s, %s, %s", v, version, commit, runtime.Version())
	}

	dir := t.TempDir()
	addr := freeAddr(t)
	startNode(t, bin, dir, addr, "--data-dir", dir, "--listen", addr, "--raft-listen", freeAddr(t), "--gossip-listen", freeAddr(t))
	var cl struct {
		Version string
		Nodes   []struct {
			ID      int32
			Version string
		}
	}
	mustJSON(t, strom(t, bin, addr, "cluster", "describe", "--output", "json"), &cl)
	if cl.Version != version || len(cl.Nodes) != 1 || cl.Nodes[0].Version != version {
		t.Fatalf("cluster describe: %+v, want version %s for the cluster and its one node", cl, version)
	}
	if table := strom(t, bin, addr, "cluster", "describe"); !strings.Contains(table, version) {
		t.Fatalf("cluster describe does not show %s:\n%s", version, table)
	}

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := `strom_build_info{commit="` + commit + `",goversion="` + runtime.Version() + `",version="` + version + `"} 1`
	if !strings.Contains(string(body), want) {
		t.Fatalf("/metrics has no %s", want)
	}
}
