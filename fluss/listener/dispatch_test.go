package listener

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/fluss/wire"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/rpc"
	"strom/server/coordinator"
)

// blockingCatalog is a unit-test Catalog: Databases waits for release;
// Database answers at once. It records the most calls in flight at once.
type blockingCatalog struct {
	Catalog // the other methods are not called
	release chan struct{}
	entered chan struct{}

	mu       sync.Mutex
	inFlight int
	most     int
}

func (b *blockingCatalog) enter() func() {
	b.mu.Lock()
	b.inFlight++
	b.most = max(b.most, b.inFlight)
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.inFlight--
		b.mu.Unlock()
	}
}

func (b *blockingCatalog) Databases(ctx context.Context) ([]string, error) {
	defer b.enter()()
	b.entered <- struct{}{}
	select {
	case <-b.release:
		return []string{"fluss"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *blockingCatalog) Database(ctx context.Context, name string) error {
	defer b.enter()()
	return nil
}

func startWith(t *testing.T, cfg Config) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxRequestBytes = 1024
	s, err := Start(ln, cfg)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var (
	listReq   = &flusspb.ListDatabasesRequest{}
	existsReq = &flusspb.DatabaseExistsRequest{DatabaseName: proto.String("fluss")}
)

// Pipelined requests are answered concurrently: a request whose handler
// waits does not hold up the one behind it, whose response comes first,
// each with its own request id.
func TestPipelinedOutOfOrder(t *testing.T) {
	cat := &blockingCatalog{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	s := startWith(t, Config{Catalog: cat})
	c, r := dial(t, s)
	out := request(t, protocol.ListDatabases, 0, 1, listReq)
	out = append(out, request(t, protocol.DatabaseExists, 0, 2, existsReq)...)
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	if resp := response(t, r); resp.Type != wire.SuccessResponse || resp.RequestID != 2 {
		t.Fatalf("first response %+v, want DATABASE_EXISTS's (2) while LIST_DATABASES waits", resp)
	}
	close(cat.release)
	resp := response(t, r)
	var l flusspb.ListDatabasesResponse
	if resp.Type != wire.SuccessResponse || resp.RequestID != 1 || proto.Unmarshal(resp.Body, &l) != nil || len(l.GetDatabaseName()) != 1 {
		t.Fatalf("second response %+v, want LIST_DATABASES's (1)", resp)
	}
}

// With MaxInFlight 1 the connection is not read while a request is being
// answered: the second request's handler starts only after the first's
// ended, and the responses come in order.
func TestMaxInFlight(t *testing.T) {
	cat := &blockingCatalog{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	s := startWith(t, Config{Catalog: cat, MaxInFlight: 1})
	c, r := dial(t, s)
	out := request(t, protocol.ListDatabases, 0, 1, listReq)
	out = append(out, request(t, protocol.DatabaseExists, 0, 2, existsReq)...)
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	<-cat.entered
	close(cat.release)
	for _, id := range []int32{1, 2} {
		if resp := response(t, r); resp.Type != wire.SuccessResponse || resp.RequestID != id {
			t.Fatalf("response %+v, want request %d's", resp, id)
		}
	}
	cat.mu.Lock()
	most := cat.most
	cat.mu.Unlock()
	if most != 1 {
		t.Fatalf("%d handlers ran at once, want 1 (MaxInFlight)", most)
	}
}

// The request budget: requests wait while MaxInFlight are in flight, or
// while their bytes would go over the budget, except when alone.
func TestBudget(t *testing.T) {
	b := newBudget(2, 100)
	ctx := context.Background()
	if !b.acquire(ctx, 150) { // alone: fits although over the bytes
		t.Fatal("a lone request over the budget must fit")
	}
	b.release(150)
	b.acquire(ctx, 60)
	got := make(chan bool)
	go func() { got <- b.acquire(ctx, 50) }() // 110 > 100: waits
	b.release(60)
	if !<-got {
		t.Fatal("the waiting request was not let in after the release")
	}
	cctx, cancel := context.WithCancel(ctx)
	b.acquire(ctx, 10) // two in flight now: the most
	go func() { got <- b.acquire(cctx, 1) }()
	cancel()
	if <-got {
		t.Fatal("acquire returned true after its context ended while full")
	}
}

// Until the node is ready every key but API_VERSIONS answers
// LEADER_NOT_AVAILABLE (retriable in Fluss's client) naming NODE_NOT_READY.
func TestNotReady(t *testing.T) {
	cat := &blockingCatalog{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	s := startWith(t, Config{Catalog: cat, Ready: func() bool { return false }})
	c, r := dial(t, s)
	if _, err := c.Write(request(t, protocol.DatabaseExists, 0, 1, existsReq)); err != nil {
		t.Fatal(err)
	}
	resp := response(t, r)
	e, err := wire.DecodeError(resp.Body)
	if resp.Type != wire.ErrorResponse || err != nil || protocol.ErrorCode(e.GetErrorCode()) != protocol.LeaderNotAvailableException ||
		!strings.Contains(e.GetErrorMessage(), "NODE_NOT_READY") {
		t.Fatalf("%+v %v %v, want LEADER_NOT_AVAILABLE naming NODE_NOT_READY", resp, e, err)
	}
	if _, err := c.Write(request(t, protocol.ApiVersions, 0, 2, versionsReq)); err != nil {
		t.Fatal(err)
	}
	if resp := response(t, r); resp.Type != wire.SuccessResponse {
		t.Fatalf("API_VERSIONS while not ready: %+v", resp)
	}
}

// With Config.Open the port is bound from Start but accepts nothing until
// Open closes: a client that connects while the node starts has its first
// request answered once the node is ready, not with NODE_NOT_READY (which
// the 0.9.1 client does not retry at bootstrap). Close works before Open.
func TestOpenHoldsConnectionsUntilReady(t *testing.T) {
	var ready atomic.Bool
	open := make(chan struct{})
	s := startWith(t, Config{Catalog: &blockingCatalog{}, Ready: ready.Load, Open: open})
	c, _ := dial(t, s)
	if _, err := c.Write(request(t, protocol.DatabaseExists, 0, 1, existsReq)); err != nil {
		t.Fatal(err)
	}
	// Not answered while not open (without the gate the answer,
	// NODE_NOT_READY, comes at once).
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read before Open: %v, want no answer yet", err)
	}
	c.SetReadDeadline(time.Now().Add(time.Minute))
	ready.Store(true)
	close(open)
	resp := response(t, wire.NewReader(c, 1<<20, "test"))
	var out flusspb.DatabaseExistsResponse
	if resp.Type != wire.SuccessResponse || proto.Unmarshal(resp.Body, &out) != nil || !out.GetExists() {
		t.Fatalf("DATABASE_EXISTS after Open: %+v", resp)
	}

	never := startWith(t, Config{Open: make(chan struct{})})
	dial(t, never)
	if err := never.Close(); err != nil {
		t.Fatalf("Close before Open: %v", err)
	}
}

// errorCode maps Strom's errors to Fluss's codes: sentinels by rpc.CodeOf's
// numbers (wrapped or rebuilt from another node's answer), Strom codes
// Fluss lacks through overrides, the rest UNKNOWN_SERVER_ERROR; the
// message keeps the error's text.
func TestErrorCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		code protocol.ErrorCode
		text string
	}{
		{fmt.Errorf("table fluss.x: %w", catalog.ErrTableNotExist), protocol.TableNotExist, "table fluss.x"},
		{catalog.ErrDatabaseNotExist, protocol.DatabaseNotExist, ""},
		{catalog.ErrDatabaseNotEmpty, protocol.DatabaseNotEmpty, ""},
		{catalog.ErrTableExists, protocol.TableAlreadyExist, ""},
		{&record.InvalidError{Field: "schema.columns[0].type", Reason: "bad"}, protocol.InvalidTableException, "bad"},
		{&record.InvalidError{Field: "database", Reason: "bad name"}, protocol.InvalidDatabaseException, "bad name"},
		{coordinator.ErrNotCoordinator, protocol.InvalidCoordinatorException, "NOT_COORDINATOR_LEADER_EXCEPTION"},
		{rpc.ErrNotReady, protocol.LeaderNotAvailableException, "NODE_NOT_READY"},
		{rpc.Error(fmt.Errorf("proxied: %w", catalog.ErrTableNotExist)), protocol.TableNotExist, "proxied"},
		{errors.New("boom"), protocol.UnknownServerError, "boom"},
		{&Error{protocol.PartitionNotExists, "no partitions"}, protocol.PartitionNotExists, "no partitions"},
	} {
		code, msg := errorCode(c.err)
		if code != c.code || !strings.Contains(msg, c.text) {
			t.Errorf("errorCode(%v) = %s %q, want %s containing %q", c.err, code, msg, c.code, c.text)
		}
	}
}

// Every key with a handler is in Served: a Fluss client calls only the keys
// API_VERSIONS lists ("The server does not support ...").
func TestHandledKeysServed(t *testing.T) {
	for k := range handlers {
		if !slices.Contains(Served, k) {
			t.Errorf("%s has a handler but is not in Served", k)
		}
	}
}
