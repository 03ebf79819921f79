package storetest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// RequireEnv returns the values of the environment variables names. One
// that is not set skips the test loudly, or fails it under CI=true: the
// tests against a real S3-compatible server need the variables
// scripts/versitygw.sh exports (eval "$(scripts/versitygw.sh start)").
func RequireEnv(t testing.TB, names ...string) []string {
	t.Helper()
	vals := make([]string, len(names))
	for i, n := range names {
		vals[i] = os.Getenv(n)
		if vals[i] != "" {
			continue
		}
		msg := n + " is not set: the tests against a real S3-compatible server did not run " +
			`(eval "$(scripts/versitygw.sh start)")`
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		fmt.Fprintf(os.Stderr, "\n!!!!!!!!!!\n!!!! %s: SKIPPED. %s\n!!!!!!!!!!\n\n", t.Name(), msg)
		t.Skip(msg)
	}
	return vals
}

// Versitygw is a versitygw process of a test's own (the binary
// STROM_VERSITYGW), which it can stop and start again on the same port and
// directory.
type Versitygw struct {
	t              *testing.T
	bin, dir       string
	Addr           string // host:port
	Access, Secret string // its root credentials
	cmd            *exec.Cmd
}

// StartVersitygw starts versitygw on a free loopback port with fresh
// credentials, stopped when t ends (RequireEnv's rules without the
// binary).
func StartVersitygw(t *testing.T) *Versitygw {
	bin := RequireEnv(t, "STROM_VERSITYGW")[0]
	// The port is picked once, and the process that takes it is started
	// at once; the test restarts it on the same port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	key := make([]byte, 20)
	rand.Read(key)
	g := &Versitygw{t: t, bin: bin, dir: t.TempDir(), Addr: addr, Access: hex.EncodeToString(key[:10]), Secret: hex.EncodeToString(key[10:])}
	g.Start()
	t.Cleanup(g.Stop)
	return g
}

// Endpoint is the server's URL.
func (g *Versitygw) Endpoint() string { return "http://" + g.Addr }

// Start starts the server (again) and waits until it listens.
func (g *Versitygw) Start() {
	g.t.Helper()
	g.cmd = exec.Command(g.bin, "--port", g.Addr, "--quiet", "--access", g.Access, "--secret", g.Secret, "posix", g.dir)
	g.cmd.Stdout, g.cmd.Stderr = os.Stderr, os.Stderr
	if err := g.cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", g.Addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("versitygw did not listen on %s: %v", g.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (a no-op when it is not running).
func (g *Versitygw) Stop() {
	if g.cmd == nil {
		return
	}
	g.cmd.Process.Signal(syscall.SIGKILL)
	g.cmd.Wait()
	g.cmd = nil
}
