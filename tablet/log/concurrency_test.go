package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentReadersAndChanges runs readers against a log that is being
// appended to, rolled, truncated and trimmed by retention, and checks that
// every read returns whole, valid, dense batches that were written at the
// offsets they carry (never a mix of old and new bytes), and nothing at or
// above the high watermark passed in. With a flush policy the flusher
// races all of that, and the high watermark never passes the flushed
// offset.
func TestConcurrentReadersAndChanges(t *testing.T) {
	for _, messages := range []int64{math.MaxInt64, 3} {
		t.Run(fmt.Sprintf("log.flush.interval-messages=%d", messages), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.SegmentBytes = 3000
			cfg.FlushMessages = messages
			testConcurrentReadersAndChanges(t, cfg)
		})
	}
}

func testConcurrentReadersAndChanges(t *testing.T, cfg Config) {
	tb := openT(t, cfg)
	const gen = 1_000_000 // batch id = generation*gen + base offset
	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
		done.Store(true)
	}

	wg.Add(1)
	go func() { // the writer
		defer wg.Done()
		defer done.Store(true)
		r := rand.New(rand.NewPCG(10, 11))
		g := int64(1)
		for i := 0; i < 1500 && !done.Load(); i++ {
			end := tb.LogEndOffset()
			s := batchSpec{id: g*gen + end, records: 1 + r.IntN(4), size: 8 + r.IntN(600)}
			if _, err := tb.AppendAsLeader(s.bytes(), 1, t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
				fail(err)
				return
			}
			if hw := tb.SetHighWatermark(tb.LogEndOffset() - int64(r.IntN(5))); cfg.flushPolicy() && hw > tb.FlushedOffset() {
				fail(fmt.Errorf("high watermark %d above the flushed offset %d", hw, tb.FlushedOffset()))
				return
			}
			switch {
			case i%97 == 0 && i > 0:
				to := max(tb.LogStartOffset(), tb.LogEndOffset()-int64(r.IntN(200)))
				if err := tb.TruncateTo(to); err != nil {
					fail(err)
					return
				}
				g++
			case i%131 == 0:
				if _, err := tb.DeleteSegmentsBefore(tb.HighWatermark() - 300); err != nil {
					fail(err)
					return
				}
			case i%53 == 0:
				if err := tb.Flush(); err != nil {
					fail(err)
					return
				}
				if err := tb.CheckpointHighWatermark(); err != nil {
					fail(err)
					return
				}
			}
		}
	}()

	for k := range 3 {
		wg.Add(1)
		go func() { // a reader
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(k), 12))
			for !done.Load() {
				start, end, hw := tb.LogStartOffset(), tb.LogEndOffset(), tb.HighWatermark()
				if end == start {
					continue
				}
				o := start + r.Int64N(end-start+1)
				info, err := tb.Read(o, r.IntN(4000), hw)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // the log moved under us
				}
				if err != nil {
					fail(err)
					return
				}
				if err := checkConcurrentRead(info.Batches, o, hw, gen); err != nil {
					fail(err)
					return
				}
				if r.IntN(50) == 0 {
					if _, _, err := tb.OffsetForTimestamp(t0.UnixMilli() + r.Int64N(1500)); err != nil {
						fail(err)
						return
					}
				}
				if r.IntN(500) == 0 {
					if err := tb.Verify(); err != nil {
						fail(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if err := tb.Verify(); err != nil {
		t.Fatal(err)
	}
	if err := tb.Flush(); err != nil || tb.FlushedOffset() != tb.LogEndOffset() {
		t.Fatalf("after Flush: flushed offset %d, log end %d, %v", tb.FlushedOffset(), tb.LogEndOffset(), err)
	}
}

func checkConcurrentRead(buf []byte, offset, hw, gen int64) error {
	want := int64(-1)
	for len(buf) > 0 {
		b, rest, err := nextBatchChecked(buf)
		if err != nil {
			return err
		}
		if want < 0 && (b.BaseOffset() > offset || b.LastOffset() < offset) {
			return errors.New("the first batch read does not hold the offset asked for")
		}
		if want >= 0 && b.BaseOffset() != want {
			return errors.New("batches read are not dense")
		}
		if b.LastOffset() >= hw {
			return errors.New("read returned a batch at or above the high watermark passed in")
		}
		rec := b.Records()
		id := int64(binary.LittleEndian.Uint64(rec))
		if id%gen != b.BaseOffset() || !bytes.Equal(rec, payload(id, len(rec))) {
			return errors.New("a batch read is not the one written at its offset")
		}
		want = b.NextOffset()
		buf = rest
	}
	return nil
}

// TestReadRacingTruncation makes a truncation and a rewrite of the same
// offsets happen between a read's file I/O and its return: the read must
// start over and return the new batch, never the bytes it read before.
func TestReadRacingTruncation(t *testing.T) {
	tb := openT(t, testConfig(t))
	m := &model{}
	for i := range 10 {
		appendLeader(t, tb, m, 1, t0, batchSpec{id: int64(i), records: 2, size: 100})
	}
	tb.SetHighWatermark(tb.LogEndOffset())
	calls := 0
	tb.testHookReadIO = func() {
		calls++
		if calls > 1 {
			return
		}
		if err := tb.TruncateTo(10); err != nil {
			t.Error(err)
		}
		m.truncate(10)
		appendLeader(t, tb, m, 1, t0, batchSpec{id: 500, records: 2, size: 100})
	}
	info, err := tb.Read(10, 1<<20, tb.HighWatermark())
	if err != nil {
		t.Fatal(err)
	}
	bs := decode(t, info.Batches)
	if calls != 2 || len(bs) != 1 {
		t.Fatalf("%d reads, %d batches; want a second read returning the one new batch", calls, len(bs))
	}
	checkBatch(t, bs[0], m.batches[len(m.batches)-1])
}
