// Package e2e tests the real strom binary as a user runs it: built from this
// module, started as a process, killed with SIGKILL, restarted.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the module root, two levels up from this package.
var repoRoot, _ = filepath.Abs(filepath.Join("..", ".."))

// buildStrom builds the binary once per test binary run.
func buildStrom(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "strom")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// node is a running strom server process.
type node struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	logs *logBuffer
	done chan error
}

// logBuffer collects a process's output; tests may read it while the
// process writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startNode runs `strom server args...` in dir and waits for /readyz at addr.
func startNode(t *testing.T, bin, dir, addr string, args ...string) *node {
	t.Helper()
	n := launchNode(t, bin, dir, addr, args...)
	n.waitReady()
	return n
}

// launchNode runs `strom server args...` in dir, serving at addr, without
// waiting for it.
func launchNode(t *testing.T, bin, dir, addr string, args ...string) *node {
	t.Helper()
	n := &node{t: t, addr: addr, logs: new(logBuffer), done: make(chan error, 1)}
	n.cmd = exec.Command(bin, append([]string{"server"}, args...)...)
	n.cmd.Dir = dir
	n.cmd.Stdout = n.logs
	n.cmd.Stderr = n.logs
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.done <- n.cmd.Wait() }()
	t.Cleanup(func() {
		if n.cmd.ProcessState == nil {
			_ = n.cmd.Process.Kill()
			<-n.done
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", n.logs)
		}
	})
	return n
}

// waitReady waits for the node's /readyz.
func (n *node) waitReady() {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-n.done:
			n.t.Fatalf("server exited before it was ready: %v\n%s", err, n.logs)
		default:
		}
		resp, err := http.Get("http://" + n.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.t.Fatalf("server not ready at %s within 60s\n%s", n.addr, n.logs)
}

// kill sends sig and waits for the process to exit.
func (n *node) kill(sig syscall.Signal) error {
	if err := n.cmd.Process.Signal(sig); err != nil {
		n.t.Fatal(err)
	}
	select {
	case err := <-n.done:
		return err
	case <-time.After(60 * time.Second):
		n.t.Fatalf("server did not exit on %v", sig)
		return nil
	}
}

// handedOut holds every address freeAddr returned in this test binary: a
// port picked free and closed may be picked again, and two nodes given the
// same port fail to start.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// freeAddr returns a loopback address with a port free right now, never one
// it returned before in this test binary.
func freeAddr(t *testing.T) string {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := ln.Addr().String()
		ln.Close()
		handedOut.Lock()
		fresh := !handedOut.addrs[a]
		handedOut.addrs[a] = true
		handedOut.Unlock()
		if fresh {
			return a
		}
	}
}

// strom runs the CLI against addr and returns stdout, failing the test on a
// non-zero exit.
func strom(t *testing.T, bin, addr string, args ...string) string {
	t.Helper()
	out, errOut, err := stromResult(bin, addr, args...)
	if err != nil {
		t.Fatalf("strom %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func stromResult(bin, addr string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "STROM_SERVER="+addr)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// walkthrough returns the command lines of the README's walk-through.
func walkthrough(t *testing.T) []string {
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- walkthrough:start -->")
	block, _, ok2 := strings.Cut(rest, "<!-- walkthrough:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no walkthrough:start/end markers")
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "```") || strings.HasPrefix(line, "#") {
			continue
		}
		lines = append(lines, line)
	}
	if len(lines) < 5 {
		t.Fatalf("walk-through has %d commands, expected more", len(lines))
	}
	return lines
}

type readmeError struct{ cmd, want string }

// readmeErrors returns the README's examples of mistakes: a "$ command" line
// followed by the one line it prints.
func readmeErrors(t *testing.T) []readmeError {
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- errors:start -->")
	block, _, ok2 := strings.Cut(rest, "<!-- errors:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no errors:start/end markers")
	}
	var out []readmeError
	lines := strings.Split(block, "\n")
	for i, l := range lines {
		if cmd, ok := strings.CutPrefix(l, "$ "); ok && i+1 < len(lines) {
			out = append(out, readmeError{cmd: cmd, want: strings.TrimSpace(lines[i+1])})
		}
	}
	if len(out) == 0 {
		t.Fatal("no examples between the errors markers")
	}
	return out
}

// TestReadmeWalkthrough starts the server exactly as the README's quick start
// does (no flags, in an empty directory, default ports) and runs every line
// of the README's walk-through unchanged, from the repository root with the
// freshly built binary as ./strom.
func TestReadmeWalkthrough(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:9123", "127.0.0.1:9124"} {
		if ln, err := net.Listen("tcp", addr); err != nil {
			t.Fatalf("the quick start needs port %s free (is a strom server already running?): %v", addr, err)
		} else {
			ln.Close()
		}
	}
	work := t.TempDir()
	bin := buildStrom(t)
	n := startNode(t, bin, work, "localhost:9123")
	if _, err := os.Stat(filepath.Join(work, "strom-data", "node.json")); err != nil {
		t.Fatalf("no-flag server did not use ./strom-data: %v", err)
	}

	// ./strom in the walk-through is the binary `go build -o strom .` makes;
	// the test runs in a scratch copy of that name so as not to write into the
	// repository.
	shell := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(shell, "strom")); err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{}
	for _, line := range walkthrough(t) {
		cmdline := line
		dir := repoRoot
		if strings.HasPrefix(line, "go build ") {
			continue // built above, into a temporary directory
		}
		if strings.Contains(line, "./strom ") {
			dir = shell
		}
		cmd := exec.Command("bash", "-c", cmdline)
		cmd.Dir = dir
		cmd.Env = os.Environ()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("walk-through line failed: %s\n%v\n%s", line, err, out)
		}
		outputs[line] += string(out) // a line run twice keeps both outputs
		t.Logf("$ %s\n%s", line, out)
	}
	expect := func(prefix, want string) {
		t.Helper()
		for line, out := range outputs {
			if strings.HasPrefix(line, prefix) {
				if !strings.Contains(out, want) {
					t.Errorf("%s: output lacks %q:\n%s", line, want, out)
				}
				return
			}
		}
		t.Errorf("no walk-through line starts with %q", prefix)
	}
	expect("./strom table list demo", "orders")
	expect("./strom table describe demo.orders", "order_id  BIGINT NOT NULL")
	expect("./strom table describe demo.clicks --output json", `"tableId"`)
	expect("./strom cluster describe", "coordinator")
	expect(`printf '{"user_id"`, "produced 2 rows to demo.clicks")
	expect(`printf '{"cust_key"`, "put 2 rows into demo.fluss_customer")
	expect("./strom consume demo.clicks --from earliest", "/cart")
	expect("./strom consume demo.clicks --columns", `{"user_id":2,"url":"/cart","_change_type":"+A","_offset":`)
	expect("./strom offsets demo.clicks", "LATEST")
	expect("./strom lookup demo.fluss_customer --key cust_key=1", "Customer#1")
	expect("./strom scan demo.fluss_customer", `"cust_key":2`)
	// The second lookup of cust_key 1 (after the delete) prints nothing.
	if out := outputs["./strom lookup demo.fluss_customer --key cust_key=1"]; strings.Count(out, "Customer") != 1 {
		t.Errorf("lookup output %q: want the row once, then nothing after the delete", out)
	}
	var changes []string
	for _, line := range strings.Split(outputs["./strom consume demo.fluss_customer --output json"], "\n") {
		if strings.Contains(line, `"cust_key":1,`) {
			var row struct {
				Change string `json:"_change_type"`
			}
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatal(err)
			}
			changes = append(changes, row.Change)
		}
	}
	if got := strings.Join(changes, " "); got != "+I -U +U -D" {
		t.Errorf("changelog of cust_key 1: %q, want +I -U +U -D", got)
	}
	expect("curl ", `"tables"`)
	expect("curl ", `"orders"`)
	expect("go tool grpcurl", "strom.v1.AdminService")
	expect("go tool buf curl", `"schemaId": 1`) // found the method through reflection

	// The README's examples of mistakes print exactly what it shows.
	for _, ex := range readmeErrors(t) {
		cmd := exec.Command("bash", "-c", ex.cmd)
		cmd.Dir = shell
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil {
			t.Errorf("%s: exit 0, the README shows a failure", ex.cmd)
		}
		if got := strings.TrimSpace(stderr.String()); got != ex.want {
			t.Errorf("%s:\n got %s\nwant %s (as the README shows)", ex.cmd, got, ex.want)
		}
	}

	// SIGTERM stops cleanly with exit status 0.
	if err := n.kill(syscall.SIGTERM); err != nil {
		t.Fatalf("server exit after SIGTERM: %v\n%s", err, n.logs)
	}
	if !strings.Contains(n.logs.String(), "node stopped") {
		t.Errorf("no clean-stop log line:\n%s", n.logs)
	}
}

type tableJSON struct {
	TableID  string `json:"tableId"` // int64 travels as a JSON string
	SchemaID int    `json:"schemaId"`
	Buckets  []struct {
		Leader int `json:"leader"`
	} `json:"buckets"`
}

// TestSurvivesSIGKILL creates a database, a primary-key table and a log
// table, kills the server with SIGKILL, restarts it on the same directory,
// and finds everything with the same ids.
func TestSurvivesSIGKILL(t *testing.T) {
	bin := buildStrom(t)
	dir := t.TempDir()
	addr, raft := freeAddr(t), freeAddr(t)
	args := []string{"--data-dir", dir, "--listen", addr, "--raft-listen", raft, "--log-format", "json"}
	n := startNode(t, bin, dir, addr, args...)

	strom(t, bin, addr, "db", "create", "shop")
	var pk, lg tableJSON
	mustJSON(t, strom(t, bin, addr, "table", "create", "shop.customers", "--output", "json",
		"--schema", "cust_key BIGINT, name STRING, balance DECIMAL(12, 2)", "--primary-key", "cust_key", "--buckets", "3"), &pk)
	mustJSON(t, strom(t, bin, addr, "table", "create", "shop.events", "--output", "json",
		"--schema", "id BIGINT, payload BYTES, at TIMESTAMP_LTZ(3)"), &lg)
	if pk.TableID == lg.TableID {
		t.Fatalf("two tables share id %s", pk.TableID)
	}

	if err := n.kill(syscall.SIGKILL); err == nil {
		t.Fatal("SIGKILL: want a non-zero exit")
	}
	startNode(t, bin, dir, addr, args...)

	var pk2, lg2 tableJSON
	mustJSON(t, strom(t, bin, addr, "table", "describe", "shop.customers", "--output", "json"), &pk2)
	mustJSON(t, strom(t, bin, addr, "table", "describe", "shop.events", "--output", "json"), &lg2)
	if pk2.TableID != pk.TableID || lg2.TableID != lg.TableID || pk2.SchemaID != 1 || len(pk2.Buckets) != 3 {
		t.Fatalf("after SIGKILL: customers %+v (was %+v), events %+v (was %+v)", pk2, pk, lg2, lg)
	}
	if got := strom(t, bin, addr, "table", "list", "shop"); got != "customers\nevents\n" {
		t.Fatalf("tables after restart = %q", got)
	}
	// The node re-registered under a new session: cluster describe shows it.
	if got := strom(t, bin, addr, "cluster", "describe"); !strings.Contains(got, "tablet-server") {
		t.Fatalf("node not registered after restart:\n%s", got)
	}
	// A new table after the restart gets a fresh id.
	var next tableJSON
	mustJSON(t, strom(t, bin, addr, "table", "create", "shop.more", "--output", "json", "--schema", "a INT"), &next)
	if next.TableID == pk.TableID || next.TableID == lg.TableID {
		t.Fatalf("new table reused id %s", next.TableID)
	}
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}

// TestCLIErrors checks that mistakes give one line naming what is wrong and
// a non-zero exit.
func TestCLIErrors(t *testing.T) {
	bin := buildStrom(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	startNode(t, bin, dir, addr, "--data-dir", dir, "--listen", addr, "--raft-listen", freeAddr(t))
	strom(t, bin, addr, "db", "create", "demo")

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"table", "create", "demo.t", "--schema", "id BIGINT, id STRING"}, []string{"duplicate", "id"}},
		{[]string{"table", "create", "demo.t", "--schema", "id BIGINTEGER"}, []string{"BIGINTEGER"}},
		{[]string{"table", "create", "demo.t", "--schema", "a INT", "--primary-key", "b"}, []string{"primary", "b", "INVALID_TABLE_EXCEPTION"}},
		{[]string{"table", "create", "demo.t", "--schema", "a INT, b INT", "--primary-key", "a", "--bucket-key", "b"}, []string{"bucket", "b"}},
		{[]string{"table", "create", "demo.t", "--schema", "a INT", "--option", "table.log.tll=1d"}, []string{"table.log.tll", "table.log.ttl"}},
		{[]string{"table", "create", "nodb.t", "--schema", "a INT"}, []string{"nodb", "DATABASE_NOT_EXIST"}},
		{[]string{"table", "create", "demo.t"}, []string{"--schema"}},
		{[]string{"table", "create", "nodot", "--schema", "a INT"}, []string{"nodot"}},
		{[]string{"table", "describe", "demo.missing"}, []string{"demo.missing", "TABLE_NOT_EXIST"}},
		{[]string{"db", "create", "demo"}, []string{"demo", "DATABASE_ALREADY_EXIST"}},
		{[]string{"db", "create", "bad name"}, []string{"bad name"}},
		{[]string{"db", "create"}, []string{"NAME"}},
		{[]string{"db", "list", "--output", "yaml"}, []string{"--output", "yaml"}},
		{[]string{"db", "list", "--server", "127.0.0.1:1", "--timeout", "1s"}, []string{"cannot reach", "127.0.0.1:1"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, err := stromResult(bin, addr, tc.args...)
			if err == nil {
				t.Fatalf("exit 0, want failure; stdout %q", out)
			}
			if !strings.HasPrefix(errOut, "strom: ") || strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr %q: want one line starting with \"strom: \"", errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not mention %q", errOut, w)
				}
			}
		})
	}
	// Nothing was created by the failures.
	if got := strom(t, bin, addr, "table", "list", "demo"); got != "" {
		t.Fatalf("tables after failed creates: %q", got)
	}
}

// TestCLIWaitsForStartingNode: a command given right after `strom server &`
// works without the user retrying (the client retries while nothing listens
// and while the node answers NODE_NOT_READY), and SIGTERM stops the node
// cleanly.
func TestCLIWaitsForStartingNode(t *testing.T) {
	bin := buildStrom(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	n := launchNode(t, bin, dir, addr, "--data-dir", dir, "--listen", addr, "--raft-listen", freeAddr(t))
	strom(t, bin, addr, "db", "create", "early")
	if got := strom(t, bin, addr, "db", "list"); !strings.Contains(got, "early") {
		t.Fatalf("db list = %q", got)
	}
	if err := n.kill(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
}

// TestServerRefusesOtherNodesDirectory checks the data directory's identity.
func TestServerRefusesOtherNodesDirectory(t *testing.T) {
	bin := buildStrom(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	args := []string{"--data-dir", dir, "--listen", addr, "--raft-listen", freeAddr(t)}
	n := startNode(t, bin, dir, addr, args...)
	if err := n.kill(syscall.SIGTERM); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--node-id", "2")...)
	cmd.Args = append([]string{bin, "server"}, append(args, "--node-id", "2")...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "belongs to node 1") {
		t.Fatalf("start as node 2 on node 1's directory: %v\n%s", err, out)
	}
}

// TestBenchProduce runs `strom bench produce` as the benchmarks page does,
// small: it reports what it measured, and the node holds every row it sent
// (the warm-up round and the counted ones), each once.
func TestBenchProduce(t *testing.T) {
	bin := buildStrom(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	startNode(t, bin, dir, addr, "--data-dir", dir, "--listen", addr, "--raft-listen", freeAddr(t))
	strom(t, bin, addr, "db", "create", "b")
	strom(t, bin, addr, "table", "create", "b.p", "--schema", "id BIGINT, a INT, s1 STRING, s2 STRING, s3 STRING", "--buckets", "2")
	const rows, rounds = 20000, 2
	var res struct {
		Rows        int       `json:"rows"`
		Batches     int       `json:"batches"`
		Inflight    int       `json:"inflight"`
		MBPerSec    float64   `json:"mb_per_sec"`
		FileMBPerS  float64   `json:"baseline_file_mb_per_sec"`
		Ratio       float64   `json:"ratio_to_file"`
		RoundRatios []float64 `json:"round_ratios"`
	}
	mustJSON(t, strom(t, bin, addr, "bench", "produce", "b.p", "--rows", fmt.Sprint(rows), "--rounds", fmt.Sprint(rounds),
		"--batch-bytes", "65536", "--output", "json"), &res)
	if res.Rows != rows || res.Batches < 4 || res.Inflight != 5 || len(res.RoundRatios) != rounds ||
		res.MBPerSec <= 0 || res.FileMBPerS <= 0 || res.Ratio <= 0 {
		t.Fatalf("bench produce reported %+v", res)
	}
	total := int64(0)
	for _, line := range strings.Split(strings.TrimSpace(strom(t, bin, addr, "offsets", "b.p", "--output", "json")), "\n") {
		var o struct{ Earliest, Latest int64 }
		mustJSON(t, line, &o)
		total += o.Latest - o.Earliest
	}
	if want := int64(rows * (rounds + 1)); total != want {
		t.Fatalf("the table holds %d rows, want %d (%d rounds and a warm-up of %d rows)", total, want, rounds, rows)
	}
}
