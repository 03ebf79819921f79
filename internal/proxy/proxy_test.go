package proxy

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// echo serves TCP connections on ip, answering each line with itself.
func echo(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// dialFrom connects to addr from the given source IP.
func dialFrom(ip, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
	return d.Dial("tcp", addr)
}

// roundTrip sends a line on c and reads it back.
func roundTrip(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

func newNetwork(t *testing.T) *Network {
	n := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	n.AddNode("a", "127.0.0.11")
	n.AddNode("b", "127.0.0.12")
	t.Cleanup(func() { n.Close() })
	return n
}

func TestTCPCutAndHeal(t *testing.T) {
	n := newNetwork(t)
	target := echo(t, "127.0.0.12")
	addr, err := n.ForwardTCP("b", "127.0.0.12:0", target)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dialFrom("127.0.0.11", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c); err != nil {
		t.Fatalf("before the cut: %v", err)
	}

	n.Cut("a", "b")
	if err := roundTrip(c); err == nil {
		t.Fatal("an open connection from a to b still works after the cut")
	}
	if c2, err := dialFrom("127.0.0.11", addr); err == nil {
		if roundTrip(c2) == nil {
			t.Fatal("a new connection from a to b works while cut")
		}
		c2.Close()
	}
	// The cut is one way: a client that is not a, and b itself, still pass.
	for _, ip := range []string{"127.0.0.1", "127.0.0.12"} {
		c3, err := dialFrom(ip, addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := roundTrip(c3); err != nil {
			t.Fatalf("from %s during a cut of a→b: %v", ip, err)
		}
		c3.Close()
	}

	n.Heal()
	c4, err := dialFrom("127.0.0.11", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if err := roundTrip(c4); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}

func TestPartitionCutsBothWays(t *testing.T) {
	n := newNetwork(t)
	n.AddNode("c", "127.0.0.13")
	toA, _ := n.ForwardTCP("a", "127.0.0.11:0", echo(t, "127.0.0.11"))
	toB, _ := n.ForwardTCP("b", "127.0.0.12:0", echo(t, "127.0.0.12"))
	n.Partition([]string{"a"}, []string{"b", "c"})
	works := func(fromIP, addr string) bool {
		c, err := dialFrom(fromIP, addr)
		if err != nil {
			return false
		}
		defer c.Close()
		return roundTrip(c) == nil
	}
	if works("127.0.0.11", toB) || works("127.0.0.12", toA) || works("127.0.0.13", toA) {
		t.Fatal("traffic crosses the partition")
	}
	if !works("127.0.0.13", toB) {
		t.Fatal("traffic within a side is cut")
	}
}

func TestDropClosesButDoesNotCut(t *testing.T) {
	n := newNetwork(t)
	addr, _ := n.ForwardTCP("b", "127.0.0.12:0", echo(t, "127.0.0.12"))
	c, err := dialFrom("127.0.0.11", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(c); err != nil {
		t.Fatal(err)
	}
	n.Drop("a", "b")
	if roundTrip(c) == nil {
		t.Fatal("a dropped connection still works")
	}
	c2, err := dialFrom("127.0.0.11", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := roundTrip(c2); err != nil {
		t.Fatalf("a new connection after a drop: %v", err)
	}
}

func TestUDPForwardAndCut(t *testing.T) {
	n := newNetwork(t)
	recv, err := net.ListenPacket("udp", "127.0.0.12:0")
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	addr, err := n.ForwardUDP("b", "127.0.0.12:0", recv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	send, err := net.ListenPacket("udp", "127.0.0.11:0")
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	dst, _ := net.ResolveUDPAddr("udp", addr)
	got := func(msg string) bool {
		if _, err := send.WriteTo([]byte(msg), dst); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		_ = recv.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		m, _, err := recv.ReadFrom(buf)
		return err == nil && string(buf[:m]) == msg
	}
	if !got("one") {
		t.Fatal("datagram not forwarded")
	}
	n.Cut("a", "b")
	if got("two") {
		t.Fatal("datagram forwarded across a cut")
	}
	n.Heal()
	if !got("three") {
		t.Fatal("datagram not forwarded after heal")
	}
}
