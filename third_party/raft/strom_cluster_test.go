package raft

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// errStromCut is what a stromTransport hook returns for an append it drops.
var errStromCut = errors.New("strom test: link cut")

// appendHook decides the fate of an AppendEntries to target: it may call send
// (which delivers req and fills the response) or not, and returns what the
// transport returns to Raft. It is called from several goroutines at once (a
// leader's heartbeat and replication goroutines for each peer).
type appendHook func(target ServerAddress, req *AppendEntriesRequest, send func() error) error

// stromTransport is an in-memory transport whose AppendEntries go through a
// hook, so that a test can drop, hold or count a node's appends to one peer.
// It refuses pipelines, so that every append goes through AppendEntries.
type stromTransport struct {
	*InmemTransport

	mu   sync.Mutex
	hook appendHook
}

func (t *stromTransport) setHook(h appendHook) {
	t.mu.Lock()
	t.hook = h
	t.mu.Unlock()
}

func (t *stromTransport) AppendEntries(id ServerID, target ServerAddress, args *AppendEntriesRequest, resp *AppendEntriesResponse) error {
	t.mu.Lock()
	h := t.hook
	t.mu.Unlock()
	send := func() error { return t.InmemTransport.AppendEntries(id, target, args, resp) }
	if h == nil {
		return send()
	}
	return h(target, args, send)
}

func (t *stromTransport) AppendEntriesPipeline(ServerID, ServerAddress) (AppendPipeline, error) {
	return nil, ErrPipelineReplicationNotSupported
}

// isHeartbeat tells the heartbeat goroutine's appends from replicateTo's: a
// heartbeat carries no previous entry, no entries and no commit index, while
// replicateTo's appends after the bootstrap entry always carry a previous
// entry.
func isHeartbeat(req *AppendEntriesRequest) bool {
	return req.PrevLogEntry == 0 && len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

// stromCluster is a bootstrapped cluster of voters on stromTransports.
type stromCluster struct {
	rafts []*Raft
	fsms  []*MockFSM
	trans []*stromTransport
}

func newStromCluster(t *testing.T, n int, conf *Config) *stromCluster {
	t.Helper()
	c := &stromCluster{}
	var configuration Configuration
	for i := 0; i < n; i++ {
		addr, trans := NewInmemTransport("")
		c.trans = append(c.trans, &stromTransport{InmemTransport: trans})
		configuration.Servers = append(configuration.Servers, Server{
			Suffrage: Voter,
			ID:       ServerID(fmt.Sprintf("server-%d", i)),
			Address:  addr,
		})
	}
	for _, a := range c.trans {
		for _, b := range c.trans {
			a.Connect(b.LocalAddr(), b.InmemTransport)
		}
	}
	for i := 0; i < n; i++ {
		nodeConf := *conf
		nodeConf.LocalID = configuration.Servers[i].ID
		nodeConf.Logger = newTestLoggerWithPrefix(t, string(nodeConf.LocalID))
		store, snaps, fsm := NewInmemStore(), NewInmemSnapshotStore(), &MockFSM{}
		if err := BootstrapCluster(&nodeConf, store, store, snaps, c.trans[i], configuration); err != nil {
			t.Fatalf("BootstrapCluster: %v", err)
		}
		r, err := NewRaft(&nodeConf, fsm, store, store, snaps, c.trans[i])
		if err != nil {
			t.Fatalf("NewRaft: %v", err)
		}
		c.rafts = append(c.rafts, r)
		c.fsms = append(c.fsms, fsm)
	}
	t.Cleanup(func() {
		for _, r := range c.rafts {
			r.Shutdown().Error()
		}
	})
	return c
}

// leader waits for a leader and returns its index.
func (c *stromCluster) leader(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, r := range c.rafts {
			if r.State() == Leader {
				return i
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no leader elected in 10s")
	return -1
}

// other returns the index of a node other than the given ones.
func (c *stromCluster) other(not ...int) int {
	for i := range c.rafts {
		skip := false
		for _, n := range not {
			skip = skip || i == n
		}
		if !skip {
			return i
		}
	}
	return -1
}

// applied reports whether node i's FSM has applied the command data.
func (c *stromCluster) applied(i int, data string) bool {
	fsm := c.fsms[i]
	fsm.Lock()
	defer fsm.Unlock()
	for _, l := range fsm.logs {
		if string(l) == data {
			return true
		}
	}
	return false
}

// waitApplied polls until node i applied data, for at most limit, and
// returns how long that took (limit or more if it did not).
func (c *stromCluster) waitApplied(i int, data string, limit time.Duration) time.Duration {
	start := time.Now()
	for !c.applied(i, data) && time.Since(start) < limit {
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}
