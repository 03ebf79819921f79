package log

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/record"
)

// benchBatches are pre-built ~16 KB client batches (100 records each).
func benchBatches(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = batchSpec{id: int64(i), records: 100, size: 16<<10 - 56}.bytes()
	}
	return out
}

func benchConfig(b *testing.B) Config {
	cfg := DefaultConfig() // 1 GiB segments, fsync on roll
	cfg.Dir = b.TempDir()
	cfg.Logger, _ = testLogger(b)
	return cfg
}

// BenchmarkAppend appends one 16 KB batch per call on the leader path:
// validation (CRC), offset assignment, writer-state check, file write.
func BenchmarkAppend(b *testing.B) {
	for _, idempotent := range []bool{false, true} {
		name := "plain"
		if idempotent {
			name = "idempotent"
		}
		b.Run(name, func(b *testing.B) {
			tb, err := Open(benchConfig(b))
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				b.StopTimer() // Close fsyncs: not part of appending
				tb.Close()
			}()
			batches := benchBatches(16)
			if idempotent {
				for i := range batches {
					batches[i] = batchSpec{id: int64(i), records: 100, size: 16<<10 - 56, writer: 1, seq: 0}.bytes()
				}
			}
			b.SetBytes(int64(len(batches[0])))
			now := time.Now()
			b.ResetTimer()
			for i := range b.N {
				buf := batches[i%len(batches)]
				if idempotent {
					// The next sequence, as the client would set it (the
					// CRC covers it: this adds one CRC of 16 KB per op).
					binary.LittleEndian.PutUint32(buf[44:], uint32(i))
					record.Batch(buf).UpdateCRC()
				}
				if _, err := tb.AppendAsLeader(buf, 1, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPlainFileAppend writes the same bytes with os.File.Write: the
// baseline for BenchmarkAppend.
func BenchmarkPlainFileAppend(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "plain"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	batches := benchBatches(16)
	b.SetBytes(int64(len(batches[0])))
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.Write(batches[i%len(batches)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead reads a 64 MiB log: sequentially 1 MiB at a time, and one
// batch at random offsets (index lookups in sealed and active segments).
func BenchmarkRead(b *testing.B) {
	cfg := benchConfig(b)
	cfg.SegmentBytes = 8 << 20
	tb, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer tb.Close()
	batches := benchBatches(16)
	for i := range 4096 {
		if _, err := tb.AppendAsLeader(batches[i%16], 1, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	end := tb.LogEndOffset()
	b.Run("sequential-1MiB", func(b *testing.B) {
		first, err := tb.Read(0, 1<<20, math.MaxInt64)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(first.Batches)))
		b.ResetTimer()
		o := int64(0)
		for range b.N {
			info, err := tb.Read(o, 1<<20, math.MaxInt64)
			if err != nil {
				b.Fatal(err)
			}
			o += int64(len(info.Batches) / len(batches[0]) * 100)
			if o >= end {
				o = 0
			}
		}
	})
	b.Run("random-batch", func(b *testing.B) {
		r := rand.New(rand.NewPCG(1, 1))
		b.SetBytes(int64(len(batches[0])))
		b.ResetTimer()
		for range b.N {
			if _, err := tb.Read(r.Int64N(end), 1, math.MaxInt64); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAppendFlushEach appends 1 KB batches with
// log.flush.interval-messages = 1 and real fsyncs, each appender waiting
// until its batch is flushed (as acks=-1 does): the appends waiting on one
// fsync share the next (fsyncs/op below 1 with more appenders).
func BenchmarkAppendFlushEach(b *testing.B) {
	for _, par := range []int{1, 8} {
		b.Run(fmt.Sprintf("appenders=%dxGOMAXPROCS", par), func(b *testing.B) {
			cfg := benchConfig(b)
			cfg.FlushMessages = 1
			var fsyncs atomic.Int64
			cfg.SyncFile = func(name string, f vfs.File) error { fsyncs.Add(1); return f.Sync() }
			var mu sync.Mutex
			flushed := make(chan struct{})
			cfg.OnFlush = func() {
				mu.Lock()
				close(flushed)
				flushed = make(chan struct{})
				mu.Unlock()
			}
			tb, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer tb.Close()
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				buf := batchSpec{id: 1, records: 1, size: 1 << 10}.bytes()
				for pb.Next() {
					info, err := tb.AppendAsLeader(buf, 1, time.Now())
					if err != nil {
						b.Error(err)
						return
					}
					for {
						mu.Lock()
						wait := flushed
						mu.Unlock()
						if tb.FlushedOffset() > info.LastOffset {
							break
						}
						<-wait
					}
				}
			})
			b.ReportMetric(float64(fsyncs.Load())/float64(b.N), "fsyncs/op")
		})
	}
}
