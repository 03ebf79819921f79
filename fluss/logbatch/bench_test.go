package logbatch

import (
	"fmt"
	"hash/crc32"
	"syscall"
	"testing"

	"strom/record"
)

// benchBuffers returns a fetch answer's worth of Strom V2 ARROW batches
// (batches of rows each, back to back) and the same in 0.9.1's V1, as a
// produce request carries them.
func benchBuffers(b *testing.B, batches, rows int) (strom, fluss []byte) {
	s := arrowSchema(b)
	for range batches {
		strom = append(strom, arrowBatch(b, s, rows, record.DefaultArrowCompression)...)
	}
	fluss, err := ToFluss(nil, strom)
	if err != nil {
		b.Fatal(err)
	}
	return strom, fluss
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkConvert measures both conversions in bytes/s against two
// baselines on the same bytes in the same run: "copy" appends the buffer to
// a reused dst (the least any conversion that moves headers must do), and
// "crc" computes CRC-32C over it (what verifying or recomputing one CRC per
// batch costs). ToStrom verifies each CRC, so it should cost about copy+crc;
// ToFluss only copies, so about copy.
func BenchmarkConvert(b *testing.B) {
	for _, size := range []struct{ batches, rows int }{{1, 50000}, {64, 500}} {
		strom, fluss := benchBuffers(b, size.batches, size.rows)
		name := fmt.Sprintf("%dx%dKiB", size.batches, len(strom)/size.batches/1024)
		dst := make([]byte, 0, len(strom)+1024)
		run := func(op string, n int, f func()) {
			b.Run(name+"/"+op, func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				start := cpuTime(b)
				for b.Loop() {
					f()
				}
				// The process's CPU time, which a busy shared machine
				// inflates far less than wall time.
				b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
			})
		}
		run("copy", len(strom), func() { dst = append(dst[:0], strom...) })
		run("crc", len(strom), func() { _ = crc32.Checksum(strom, castagnoli) })
		run("ToFluss", len(strom), func() {
			var err error
			if dst, err = ToFluss(dst[:0], strom); err != nil {
				b.Fatal(err)
			}
		})
		run("ToStrom", len(fluss), func() {
			var err error
			if dst, err = ToStrom(dst[:0], fluss); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkToFlussOneByOne converts a fetch answer's 64 batches one at a
// time onto one answer, as the Fluss listener's projected FETCH_LOG does
// (projection.add), from an empty answer each time.
func BenchmarkToFlussOneByOne(b *testing.B) {
	strom, _ := benchBuffers(b, 1, 500)
	b.SetBytes(int64(64 * len(strom)))
	b.ReportAllocs()
	for b.Loop() {
		var out []byte
		for range 64 {
			var err error
			if out, err = ToFluss(out, strom); err != nil {
				b.Fatal(err)
			}
		}
	}
}
