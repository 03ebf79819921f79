package replica

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/internal/metatest"
	"strom/tablet/log"
)

// checkingPeer is a fakePeer that also checks every fetch offset the
// follower sends against what the follower has fsynced.
type checkingPeer struct {
	*fakePeer
	follower *Replica

	above chan struct{} // one value on the first fetch offset above the flushed one

	mu       sync.Mutex
	unsynced []string // the last fetch offsets sent above the follower's flushed offset (at most 3)
}

func (p *checkingPeer) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.unsynced)
}

func (p *checkingPeer) FetchReplica(ctx context.Context, node int32, req FetchRequest) ([]BucketFetchResult, error) {
	for _, b := range req.Buckets {
		if flushed := p.follower.log.FlushedOffset(); b.FetchOffset > flushed {
			p.mu.Lock()
			p.unsynced = append(p.unsynced[:min(len(p.unsynced), 2)], fmt.Sprintf("fetch offset %d with %d flushed", b.FetchOffset, flushed))
			p.mu.Unlock()
			select {
			case p.above <- struct{}{}:
			default:
			}
		}
	}
	return p.fakePeer.FetchReplica(ctx, node, req)
}

// TestFollowerFetchesOnlyWhatItFsynced: with a flush policy the high
// watermark may pass only what every in-sync replica has on disk, or a
// power cut of all of them could lose an acknowledged write (a follower
// without it elected). A follower's fetch offset is what the leader counts
// as replicated, so a follower fsyncs what it appended before it fetches
// again. Here the follower's policy is log.flush.interval-ms of an hour, so
// its own flusher never fsyncs the batch: either the fetcher does (and is
// held) or it fetches above its flushed offset. Before the fix it did the
// latter, and the leader acknowledged an acks=-1 write only its own disk
// held.
func TestFollowerFetchesOnlyWhatItFsynced(t *testing.T) {
	tb := TableBucket{TableID: 1}
	held, proceed := make(chan struct{}, 100), make(chan struct{})
	var release sync.Once
	var armed atomic.Bool
	open := func(node int32, cfg func(*log.Config)) *Replica {
		lc := log.DefaultConfig()
		lc.Dir, lc.Logger = filepath.Join(t.TempDir(), "log"), metatest.Logger(t)
		cfg(&lc)
		var r *Replica
		lc.OnFlush = func() { r.logFlushed() }
		lt, err := log.Open(lc)
		if err != nil {
			t.Fatal(err)
		}
		r = newReplica(tb, node, lt, nil, lc.Logger, new(broadcast))
		t.Cleanup(func() { _ = r.close() })
		t.Cleanup(func() { release.Do(func() { close(proceed) }) }) // before the close
		if err := r.setLeaderAndISR(1, 1, []int32{1, 2}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	leader := open(1, func(c *log.Config) { c.FlushMessages = 1 })
	follower := open(2, func(c *log.Config) {
		c.FlushInterval = time.Hour
		c.SyncFile = func(name string, f vfs.File) error {
			if armed.Load() && strings.HasSuffix(name, ".log") {
				held <- struct{}{}
				<-proceed
			}
			return nil
		}
	})
	armed.Store(true)
	peer := &checkingPeer{fakePeer: &fakePeer{leaders: map[TableBucket]*Replica{tb: leader}, fetches: map[TableBucket]int{}},
		follower: follower, above: make(chan struct{}, 1)}
	m := NewManager(Config{NodeID: 2, Logger: metatest.Logger(t), Fetch: FetchConfig{
		Peer: peer, MaxBytes: 1 << 20, MaxBytesForBucket: 1 << 20, MaxWait: 10 * time.Millisecond, Backoff: time.Hour,
	}}, nil)
	m.mu.replicas[tb] = follower
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := m.startFetcher(ctx, 1)
	defer f.stop()
	f.set(map[TableBucket]*Replica{tb: follower})

	acked := make(chan error, 1)
	go func() {
		_, err := leader.Append(ctx, batch(1), -1)
		acked <- err
	}()
	select {
	case <-held: // the fetcher fsyncs the batch before it fetches again
	case <-peer.above:
		t.Fatalf("the follower fetched above what it fsynced: %v", peer.seen())
	case err := <-acked:
		t.Fatalf("the acks=-1 write was acknowledged (%v) with the follower's copy not fsynced", err)
	case <-ctx.Done():
		t.Fatal("neither a fetch nor an fsync of the follower")
	}
	release.Do(func() { close(proceed) })
	if err := <-acked; err != nil {
		t.Fatalf("acks=-1 append after the follower's fsync: %v", err)
	}
	if bad := peer.seen(); len(bad) > 0 {
		t.Errorf("the follower fetched above what it fsynced: %v", bad)
	}
}
