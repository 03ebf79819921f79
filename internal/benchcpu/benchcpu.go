// Package benchcpu runs benchmarks that report the process's CPU time per
// operation, which a busy shared machine inflates far less than wall time.
package benchcpu

import (
	"testing"

	"strom/internal/proccpu"
)

// Run runs fn as the sub-benchmark name, one caller at a time, and as
// name-parallel with 8 callers per GOMAXPROCS, each reporting allocations
// and "cpu-ns/op": the process's user and system CPU time per call.
func Run(b *testing.B, name string, fn func() error) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		start := processCPU(b)
		for b.Loop() {
			if err := fn(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
	})
	b.Run(name+"-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8)
		start := processCPU(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := fn(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
	})
}

// processCPU is the process's user and system CPU time in nanoseconds.
func processCPU(*testing.B) int64 { return int64(proccpu.Self()) }
