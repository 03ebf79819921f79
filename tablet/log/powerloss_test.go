package log

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/internal/strictfs"
)

// powerLossConfig is testConfig on a strict in-memory file system, with
// the fsyncs on.
func powerLossConfig(t *testing.T, fs *strictfs.FS) Config {
	cfg := testConfig(t)
	cfg.Dir = "/data/tablets/1/0/log"
	cfg.FS = fs
	cfg.NoSync = false
	return cfg
}

// TestPowerLoss loses power at a random moment of a log being appended to
// (segments rolling, some rounds flushed), with only the fsynced data kept,
// or (torn) a random part of the rest too, in 4 KiB blocks: the log
// reopens, dense, every batch whole and as written, and nothing below the
// offset flushed before the power cut is missing.
func TestPowerLoss(t *testing.T) {
	for _, torn := range []bool{false, true} {
		for seed := range uint64(20) {
			rng := rand.New(rand.NewPCG(seed, 7))
			fs := strictfs.New()
			cfg := powerLossConfig(t, fs)
			cfg.FlushMessages = int64(1 + rng.IntN(40)) // the flusher runs on its own, too
			tb, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var m model
			for j := range 20 + rng.IntN(60) {
				appendLeader(t, tb, &m, 1, t0, batchSpec{id: int64(j), records: 1 + rng.IntN(4), size: 10 + rng.IntN(700), writer: 7, seq: int32(j)})
				if rng.IntN(10) == 0 {
					if err := tb.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			flushed := tb.FlushedOffset()
			cc := vfs.CrashCloneCfg{}
			if torn {
				cc = vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rng}
			}
			after := fs.Crash(cc) // the power cut
			tb.crash()

			cfg.FS = after
			tb2, err := Open(cfg)
			if err != nil {
				t.Fatalf("seed %d torn %v: Open after the power cut: %v", seed, torn, err)
			}
			end := tb2.LogEndOffset()
			if end < flushed {
				t.Fatalf("seed %d torn %v: log end %d after the power cut, below the %d flushed before it", seed, torn, end, flushed)
			}
			m.truncate(end)
			readAll(t, tb2, &m, 1<<20)
			// The recovered log takes appends and survives another cut.
			appendLeader(t, tb2, &m, 2, t0, batchSpec{id: 1000, records: 2, size: 100, writer: 8, seq: 0})
			if err := tb2.Flush(); err != nil {
				t.Fatal(err)
			}
			cfg.FS = after.Crash(vfs.CrashCloneCfg{})
			tb2.crash()
			tb3 := openT(t, cfg)
			readAll(t, tb3, &m, 1<<20)
		}
	}
}
