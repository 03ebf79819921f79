package main

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// statCPU reads utime and stime after the command name, which may hold
// spaces and parentheses.
func TestStatCPU(t *testing.T) {
	line := "4242 (java (main) x) S 1 4242 4242 0 -1 4194560 9000 0 12 0 350 125 0 0 20 0 40 0 1234 5678 910\n"
	d, err := statCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 475 * serverClockTick; d != want {
		t.Fatalf("statCPU = %v, want %v (utime 350 + stime 125 ticks)", d, want)
	}
	if _, err := statCPU("4242 (x) S 1 2"); err == nil {
		t.Fatal("a short line parsed")
	}
}

// The meter counts this process's CPU as the client's, and a server pid's
// from /proc (here this process again, so both see the spin).
func TestCPUMeter(t *testing.T) {
	t.Setenv("SERVER_PIDS", strconv.Itoa(os.Getpid()))
	m := startCPU()
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	o := m.put(&omap{}, 1000)
	got := map[string]float64{}
	for _, kv := range o.kv {
		got[kv.k], _ = kv.v.(float64)
	}
	if got["client_cpu_s"] <= 0 || got["client_cpu_us"] <= 0 {
		t.Fatalf("client CPU not measured: %s", o.json())
	}
	if _, ok := got["server_cpu_s"]; !ok || got["server_cpu_s"] <= 0 {
		t.Fatalf("server CPU not measured: %s", o.json())
	}
	t.Setenv("SERVER_PIDS", "")
	if o := startCPU().put(&omap{}, 1); len(o.kv) != 2 {
		t.Fatalf("without SERVER_PIDS: %s, want the client's figures only", o.json())
	}
}
