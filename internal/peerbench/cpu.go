package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A workload's CPU cost, the client's and the servers', measured from the
// kernel's accounting rather than the clock: on a shared 2-core box
// throughput swings with what else runs, but what a record costs in CPU
// seconds moves far less, and the split says which side bounds a workload.
// FlussBench.java measures the same way (its CpuMeter), so the figures of
// the two harnesses compare.

// serverClockTick is the unit of utime and stime in /proc/PID/stat
// (USER_HZ, 100 on Linux).
const serverClockTick = 10 * time.Millisecond

// cpuMeter is the CPU time used so far by this process (the client) and by
// the server processes named in SERVER_PIDS (space- or comma-separated).
type cpuMeter struct {
	client, server time.Duration
	serverOK       bool
}

// startCPU reads the meters at the start of a workload.
func startCPU() cpuMeter {
	m := cpuMeter{client: processCPU()}
	m.server, m.serverOK = serversCPU(env("SERVER_PIDS", ""))
	return m
}

// put adds to o what the workload cost since m was read: client_cpu_s and
// client_cpu_us (per record), and server_cpu_s and server_cpu_us when
// SERVER_PIDS could be read at both ends.
func (m cpuMeter) put(o *omap, records int64) *omap {
	c := processCPU() - m.client
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

// processCPU is this process's user and system time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serversCPU sums utime and stime of the processes in pids; false when
// pids is empty or one of them cannot be read (a server that died: the
// workload fails anyway).
func serversCPU(pids string) (time.Duration, bool) {
	fields := strings.FieldsFunc(pids, func(r rune) bool { return r == ' ' || r == ',' })
	if len(fields) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, p := range fields {
		data, err := os.ReadFile("/proc/" + p + "/stat")
		if err != nil {
			return 0, false
		}
		d, err := statCPU(string(data))
		if err != nil {
			logf("SERVER_PIDS: /proc/%s/stat: %v", p, err)
			return 0, false
		}
		sum += d
	}
	return sum, true
}

// statCPU parses utime + stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name (field 2, in parentheses) may hold spaces and
// parentheses itself, so the fields are counted after its last ')'.
func statCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no ')' in %q", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("utime/stime %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * serverClockTick, nil
}
