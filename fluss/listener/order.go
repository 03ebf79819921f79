package listener

import (
	"context"
	"errors"
	"sync"

	"strom/tablet/log"
)

// writeOrder sequences one connection's write requests (PRODUCE_LOG,
// PUT_KV) so that they enter the append in the order the connection sent
// them, as Fluss's and Kafka's servers take a connection's requests in
// order. Each request is answered in a goroutine of its own (serve), so
// without it a client's pipelined batches of one bucket, sent in sequence
// order, could reach the log in any order, and an idempotent writer's
// later batch be refused with OUT_OF_ORDER_SEQUENCE (the 0.9.1 Java client
// does not retry it). Only the entry is ordered: the appends themselves
// and the waits for their acknowledgement (acks=-1) overlap, so pipelining
// still pays. Reads take no ticket and are never held up by writes.
//
// A ticket is taken by the connection's reader, in arrival order (take);
// the request waits until every earlier ticket has entered its append
// (writeTurn.wait), starts its appends and says so (enter), and is done
// when its answer is written (done).
type writeOrder struct {
	mu struct {
		sync.Mutex
		issued uint64
		// enteredBelow and finishedBelow: every ticket below has entered
		// its append, resp. finished (finished implies entered, so
		// finishedBelow ≤ enteredBelow).
		enteredBelow, finishedBelow uint64
		// marks are the tickets at or above finishedBelow that have
		// entered or finished out of order.
		marks map[uint64]uint8
		// changed is closed and replaced whenever a prefix moves.
		changed chan struct{}
	}
}

const (
	markEntered uint8 = 1 << iota
	markFinished
)

func newWriteOrder() *writeOrder {
	o := &writeOrder{}
	o.mu.marks = map[uint64]uint8{}
	o.mu.changed = make(chan struct{})
	return o
}

// take hands out the next ticket. Called by the connection's reader only,
// in the order the requests arrive.
func (o *writeOrder) take() *writeTurn {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := &writeTurn{o: o, n: o.mu.issued}
	o.mu.issued++
	return t
}

// mark records that ticket n has entered or finished, and moves the
// prefixes past it.
func (o *writeOrder) mark(n uint64, m uint8) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mu.marks[n] |= m
	moved := false
	for o.mu.marks[o.mu.enteredBelow]&markEntered != 0 {
		o.mu.enteredBelow++
		moved = true
	}
	for o.mu.marks[o.mu.finishedBelow]&markFinished != 0 {
		delete(o.mu.marks, o.mu.finishedBelow)
		o.mu.finishedBelow++
		moved = true
	}
	if moved {
		close(o.mu.changed)
		o.mu.changed = make(chan struct{})
	}
}

// waitFor waits until cond (called under the lock) holds: nil, or ctx's
// error.
func (o *writeOrder) waitFor(ctx context.Context, cond func() bool) error {
	for {
		o.mu.Lock()
		ok, changed := cond(), o.mu.changed
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// writeTurn is one write request's ticket. A nil *writeTurn (a request
// served without a connection, as in unit tests) orders nothing. Its
// methods are called from the request's goroutine, but for waitEarlier,
// which any of its goroutines may call.
type writeTurn struct {
	o       *writeOrder
	n       uint64
	entered bool
}

type turnKey struct{}

// withTurn returns ctx carrying t, for the handler of t's request.
func withTurn(ctx context.Context, t *writeTurn) context.Context {
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, turnKey{}, t)
}

// turnOf returns the ticket ctx carries; nil when none.
func turnOf(ctx context.Context) *writeTurn {
	t, _ := ctx.Value(turnKey{}).(*writeTurn)
	return t
}

// wait blocks until every earlier write request of the connection has
// entered its append (or been answered without one): nil, or ctx's error
// when ctx ends first.
func (t *writeTurn) wait(ctx context.Context) error {
	if t == nil {
		return nil
	}
	o := t.o
	return o.waitFor(ctx, func() bool { return o.mu.enteredBelow >= t.n })
}

// enter says t's request has started its appends: the next write request
// of the connection may start its own.
func (t *writeTurn) enter() {
	if t == nil || t.entered {
		return
	}
	t.entered = true
	t.o.mark(t.n, markEntered)
}

// done says t's request is answered (it enters too, if it never did, so
// that a request refused before its append does not hold up the next).
func (t *writeTurn) done() {
	if t == nil {
		return
	}
	t.o.mark(t.n, markEntered|markFinished)
}

// retryOutOfOrder reports whether a bucket's append that failed with err
// is to be tried again: when err is OUT_OF_ORDER_SEQUENCE and an earlier
// write request of the connection was still unanswered, it waits for all
// of them to be answered and says yes. The entry order leaves a window
// (between a request's entry and its batches reaching the log's lock)
// where a later request's batch can overtake an earlier one's; the
// replica's own wait for early batches (replica.gapWait) covers a few
// batches for a few seconds, and this covers the rest: once every earlier
// request is answered their batches are in the log (or failed), so the
// second try meets the writer's true state. Nothing of an append that
// fails with OUT_OF_ORDER_SEQUENCE is written, so trying again is safe.
func (t *writeTurn) retryOutOfOrder(ctx context.Context, err error) bool {
	if t == nil || !errors.Is(err, log.ErrOutOfOrderSequence) {
		return false
	}
	o := t.o
	o.mu.Lock()
	earlier := o.mu.finishedBelow < t.n
	o.mu.Unlock()
	if !earlier {
		return false
	}
	return o.waitFor(ctx, func() bool { return o.mu.finishedBelow >= t.n }) == nil
}
