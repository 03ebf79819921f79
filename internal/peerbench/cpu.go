package main

import (
	"strconv"
	"strings"
	"time"

	"strom/internal/proccpu"
)

// A workload's CPU cost, the client's and the servers', measured from the
// kernel's accounting rather than the clock: on a shared 2-core box
// throughput swings with what else runs, but what a record costs in CPU
// seconds moves far less, and the split says which side bounds a workload.
// FlussBench.java measures the same way (its CpuMeter), so the figures of
// the two harnesses compare.

// cpuMeter is the CPU time used so far by this process (the client) and by
// the server processes named in SERVER_PIDS (space- or comma-separated).
type cpuMeter struct {
	client, server time.Duration
	serverOK       bool
}

// startCPU reads the meters at the start of a workload.
func startCPU() cpuMeter {
	m := cpuMeter{client: proccpu.Self()}
	m.server, m.serverOK = serversCPU(env("SERVER_PIDS", ""))
	return m
}

// put adds to o what the workload cost since m was read: client_cpu_s and
// client_cpu_us (per record), and server_cpu_s and server_cpu_us when
// SERVER_PIDS could be read at both ends.
func (m cpuMeter) put(o *omap, records int64) *omap {
	c := proccpu.Self() - m.client
	o.put("client_cpu_s", round(c.Seconds(), 3)).put("client_cpu_us", perRecord(c, records))
	if s, ok := serversCPU(env("SERVER_PIDS", "")); ok && m.serverOK {
		d := s - m.server
		o.put("server_cpu_s", round(d.Seconds(), 3)).put("server_cpu_us", perRecord(d, records))
	}
	return o
}

func perRecord(d time.Duration, records int64) float64 {
	if records <= 0 {
		return 0
	}
	return round(float64(d.Microseconds())/float64(records), 3)
}

// serversCPU sums the CPU time of the processes in pids; false when pids
// is empty or one of them cannot be read (a server that died: the workload
// fails anyway).
func serversCPU(pids string) (time.Duration, bool) {
	fields := strings.FieldsFunc(pids, func(r rune) bool { return r == ' ' || r == ',' })
	if len(fields) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, f := range fields {
		pid, err := strconv.Atoi(f)
		if err != nil {
			logf("SERVER_PIDS: %q is not a pid", f)
			return 0, false
		}
		d, err := proccpu.Of(pid)
		if err != nil {
			return 0, false
		}
		sum += d
	}
	return sum, true
}
