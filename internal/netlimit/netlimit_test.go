package netlimit

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer collects log lines from the accept goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// server accepts on l and echoes bytes on every accepted connection until
// its client closes it.
func server(l *Listener) {
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var b [1]byte
				for {
					if _, err := c.Read(b[:]); err != nil {
						return
					}
					if _, err := c.Write(b[:]); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// dial connects from the loopback address from and reports whether the
// server serves the connection (echoes a byte) or closed it.
func dial(t *testing.T, addr, from string) (net.Conn, bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte{1}); err != nil {
		return c, false
	}
	var b [1]byte
	_, err = c.Read(b[:])
	if err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("read: %v", err)
	}
	return c, err == nil
}

func TestListenerCapsTotalAndPerIP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	l := Wrap(ln, Limits{Total: 3, PerIP: 2, TotalKey: "total.key", PerIPKey: "per.ip.key"},
		slog.New(slog.NewTextHandler(&logs, nil)))
	defer l.Close()
	server(l)
	addr := ln.Addr().String()

	first, ok := dial(t, addr, "127.0.0.1")
	if !ok {
		t.Fatal("first connection refused")
	}
	if _, ok := dial(t, addr, "127.0.0.1"); !ok {
		t.Fatal("second connection refused")
	}
	if _, ok := dial(t, addr, "127.0.0.1"); ok {
		t.Fatal("third connection from one IP served; the per-IP limit is 2")
	}
	if !strings.Contains(logs.String(), "key=per.ip.key") {
		t.Fatalf("refusal not logged with its key: %q", logs.String())
	}
	if _, ok := dial(t, addr, "127.0.0.2"); !ok {
		t.Fatal("connection from another IP refused")
	}
	if _, ok := dial(t, addr, "127.0.0.3"); ok {
		t.Fatal("fourth connection served; the total limit is 3")
	}
	// A closed connection frees its place.
	first.Close()
	deadline := time.Now().Add(10 * time.Second)
	for l.Open() > 2 {
		if time.Now().After(deadline) {
			t.Fatal("closed connection still counted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := dial(t, addr, "127.0.0.1"); !ok {
		t.Fatal("connection refused after one closed")
	}
}
