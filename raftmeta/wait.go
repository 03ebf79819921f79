package raftmeta

import (
	"errors"
	"sync"
)

// errLeadershipChanged fails the waits of a leader that lost leadership: the
// entries may or may not commit under the next leader.
var errLeadershipChanged = errors.New("raftmeta: leadership lost while waiting")

// waitOutcome is what a proposer waits for: the FSM's result for its entry,
// or err when the wait was abandoned (leadership lost, node stopped).
type waitOutcome struct {
	res applyResult
	err error
}

// waits is the etcd-style registry of proposals awaiting their apply: a
// proposer registers a nonce, puts it in its command and proposes; the FSM
// delivers the result by nonce as it applies the entry. The registry, not
// raft's futures, carries results because a future whose entry is still
// queued for the FSM when raft shuts down is never answered.
//
// Registration is only allowed while the node's leadership monitor says it
// leads; losing leadership fails every pending wait. Because raft notifies
// the loss before it starts rejecting proposals, every proposal that will
// never be applied here is failed by that notification.
type waits struct {
	mu struct {
		sync.Mutex
		leader  bool
		stopped bool
		pending map[uint64]chan waitOutcome
	}
}

func newWaits() *waits {
	w := &waits{}
	w.mu.pending = make(map[uint64]chan waitOutcome)
	return w
}

// register returns the channel the outcome for nonce will arrive on, or
// ErrStopped, or ErrNotLeader.
func (w *waits) register(nonce uint64) (<-chan waitOutcome, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.mu.stopped:
		return nil, ErrStopped
	case !w.mu.leader:
		return nil, ErrNotLeader
	}
	ch := make(chan waitOutcome, 1)
	w.mu.pending[nonce] = ch
	return ch, nil
}

func (w *waits) cancel(nonce uint64) {
	w.mu.Lock()
	delete(w.mu.pending, nonce)
	w.mu.Unlock()
}

// deliver hands an applied entry's result to its proposer, if it is waiting
// on this node.
func (w *waits) deliver(nonce uint64, res applyResult) {
	w.mu.Lock()
	ch, ok := w.mu.pending[nonce]
	delete(w.mu.pending, nonce)
	w.mu.Unlock()
	if ok {
		ch <- waitOutcome{res: res}
	}
}

func (w *waits) isLeader() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.leader
}

// setLeader records the monitor's view; losing leadership fails all waits.
func (w *waits) setLeader(leader bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.leader = leader
	if !leader {
		w.failAllLocked(errLeadershipChanged)
	}
}

// stop fails all waits with ErrStopped and refuses new ones.
func (w *waits) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.stopped = true
	w.mu.leader = false
	w.failAllLocked(ErrStopped)
}

func (w *waits) failAllLocked(err error) {
	for nonce, ch := range w.mu.pending {
		ch <- waitOutcome{err: err}
		delete(w.mu.pending, nonce)
	}
}
