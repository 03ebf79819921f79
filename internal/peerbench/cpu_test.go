package main

import (
	"os"
	"strconv"
	"testing"
	"time"
)

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
