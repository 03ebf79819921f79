package kv

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentWritesFlushesReads runs PutKv, FlushTo (as the replica's
// high-watermark goroutine would), Lookup, LimitScan and snapshot scans at
// once, under -race, then checks the invariant.
func TestConcurrentWritesFlushesReads(t *testing.T) {
	f := newFixture(t, testTable(t, testSchema(), nil), nil)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the high watermark follows the log end
		for {
			select {
			case <-stop:
				return
			default:
			}
			hw := f.log.SetHighWatermark(f.log.LogEndOffset())
			if err := f.kv.FlushTo(hw); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for r := range 2 {
		wg.Go(func() {
			keys := [][]byte{{0x01}, {0x02}, {0x03}}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := f.kv.Lookup(keys); err != nil {
					t.Error(err)
					return
				}
				if r == 0 {
					if _, err := f.kv.LimitScan(10); err != nil {
						t.Error(err)
						return
					}
				} else {
					s, err := f.kv.Snapshot()
					if err != nil {
						t.Error(err)
						return
					}
					for {
						page, err := s.Next(7, 1<<20)
						if err != nil {
							t.Error(err)
						}
						if len(page) == 0 || err != nil {
							break
						}
					}
					s.Close()
				}
			}
		})
	}
	for i := range 300 {
		ops := []op{up(int32(i%17), fmt.Sprint(i), int64(i), nil, nil), del(int32((i*7)%17), nil, nil, nil, nil)}
		var target []int
		if i%3 == 0 {
			target = []int{0, 2}
		}
		if _, err := f.kv.PutKv(ctx, f.batch(ops...), target); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	f.commit()
	f.checkInvariant()
}
