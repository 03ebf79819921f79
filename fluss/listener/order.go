package listener

import (
	"context"
	"fmt"
	"sync"

	"strom/tablet/log"
)

// writeOrder sequences one connection's write requests (PRODUCE_LOG,
// PUT_KV) so that they are appended in the order the connection sent
// them, as Fluss's and Kafka's servers take a connection's requests in
// order. Each request is answered in a goroutine of its own (serve), so
// without it a client's pipelined batches of one bucket, sent in sequence
// order, could reach the log in any order, and an idempotent writer's
// later batch be refused with OUT_OF_ORDER_SEQUENCE (the 0.9.1 Java client
// does not retry it). Only the appends are ordered: decoding and the
// node's checks run before them, and the waits for their acknowledgement
// (acks=-1) after them, concurrently, so pipelining still pays. Reads take
// no ticket and are never held up by writes.
//
// A ticket is taken by the connection's reader, in arrival order (take);
// the request's appends wait until every earlier ticket's appends are done
// (writeTurn.wait), and the request says when its own are (appended) or
// that it is answered (done).
type writeOrder struct {
	mu struct {
		sync.Mutex
		issued uint64
		// appendedBelow: every ticket below has its appends done (in the
		// log, or refused).
		appendedBelow uint64
		// marks are the tickets above appendedBelow done out of order.
		marks map[uint64]bool
		// changed is closed and replaced whenever appendedBelow moves.
		changed chan struct{}
	}
}

func newWriteOrder() *writeOrder {
	o := &writeOrder{}
	o.mu.marks = map[uint64]bool{}
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

// mark records that ticket n's appends are done, and moves appendedBelow
// past it.
func (o *writeOrder) mark(n uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n < o.mu.appendedBelow {
		return
	}
	o.mu.marks[n] = true
	moved := false
	for o.mu.marks[o.mu.appendedBelow] {
		delete(o.mu.marks, o.mu.appendedBelow)
		o.mu.appendedBelow++
		moved = true
	}
	if moved {
		close(o.mu.changed)
		o.mu.changed = make(chan struct{})
	}
}

// writeTurn is one write request's ticket. A nil *writeTurn (a request
// served without a connection, as in unit tests) orders nothing. Its
// methods may be called from any of the request's goroutines.
type writeTurn struct {
	o *writeOrder
	n uint64
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

// wait blocks until every earlier write request of the connection has its
// appends done (or was answered without any): nil, or an error wrapping
// ctx's when ctx ends first.
func (t *writeTurn) wait(ctx context.Context) error {
	if t == nil {
		return nil
	}
	o := t.o
	for {
		o.mu.Lock()
		ok, changed := o.mu.appendedBelow >= t.n, o.mu.changed
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the connection's earlier writes: %w", ctx.Err())
		}
	}
}

// appended says t's request has its appends done: the next write request
// of the connection may append. done says it is answered, which implies
// appended (a request refused before its appends must not hold up the
// next). Either may come more than once.
func (t *writeTurn) appended() {
	if t != nil {
		t.o.mark(t.n)
	}
}

func (t *writeTurn) done() { t.appended() }

// Pending is a write the node has appended, whose acknowledgement (acks=-1:
// the high watermark past it, confirmed with the metadata; acks 0 or 1: at
// once) Wait waits for. The server's is replica.Pending's.
type Pending interface {
	Wait(ctx context.Context) (log.AppendInfo, error)
}

// write runs the appends of t's request, n buckets, each in a goroutine of
// its own, and waits for their acknowledgements: appendFn(i, inTurn) checks
// bucket i's write, calls inTurn (its error fails the write unappended)
// and appends it, returning once it is in the log or refused; answer(i,
// ...) gets the acknowledged result (or the error). Once every bucket's
// appendFn has returned the connection's next write request may append,
// while these wait for their acks.
func (t *writeTurn) write(ctx context.Context, n int, appendFn func(i int, inTurn func(context.Context) error) (Pending, error), answer func(i int, info log.AppendInfo, err error)) {
	var wg, appending sync.WaitGroup
	appending.Add(n)
	for i := range n {
		wg.Go(func() {
			p, err := appendFn(i, t.wait)
			appending.Done() // in the log, or refused
			var info log.AppendInfo
			if err == nil {
				info, err = p.Wait(ctx)
			}
			answer(i, info, err)
		})
	}
	appending.Wait()
	t.appended()
	wg.Wait()
}
