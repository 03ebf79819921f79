package history

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// Records written by concurrent clients come back whole, each client's in
// its own order, with every field as written.
func TestWriteReadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const clients, perClient = 8, 500
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				op := Op{Client: c, Kind: LogRead, Table: "db.t", Bucket: 2, Offset: int64(i),
					HighWatermark: int64(i + 1), Records: []Record{{Offset: int64(i), Value: "v"}},
					Invoke: int64(i), Return: int64(i + 1), Outcome: OK}
				if err := w.Op(op); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	fault := Fault{Kind: "partition", Nodes: []string{"n1"}, Start: 5, End: 9, Seed: 42}
	if err := w.Fault(fault); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Op(Op{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Op after Close = %v, want ErrClosed", err)
	}
	h, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) != clients*perClient {
		t.Fatalf("read %d ops, want %d", len(h.Ops), clients*perClient)
	}
	if !reflect.DeepEqual(h.Faults, []Fault{fault}) {
		t.Fatalf("faults = %+v, want %+v", h.Faults, fault)
	}
	next := make([]int64, clients)
	for _, op := range h.Ops {
		want := Op{Client: op.Client, Kind: LogRead, Table: "db.t", Bucket: 2, Offset: next[op.Client],
			HighWatermark: next[op.Client] + 1, Records: []Record{{Offset: next[op.Client], Value: "v"}},
			Invoke: next[op.Client], Return: next[op.Client] + 1, Outcome: OK}
		if !reflect.DeepEqual(op, want) {
			t.Fatalf("op = %+v, want %+v", op, want)
		}
		next[op.Client]++
	}
}

// A last line cut short (the writer died) is dropped; a bad line anywhere
// else is an error naming it.
func TestReadTornAndBadLines(t *testing.T) {
	good := `{"op":{"client":1,"kind":"kv_put","table":"db.t","key":"k","value":"v","invoke":1,"return":2,"outcome":"ok"}}` + "\n"
	h, err := Read(strings.NewReader(good + `{"op":{"client":2,"ki`))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) != 1 || h.Ops[0].Key != "k" {
		t.Fatalf("ops = %+v, want the one whole line", h.Ops)
	}
	for name, bad := range map[string]string{
		"json":    good + "{not json}\n" + good,
		"neither": good + "{}\n",
		"both":    good + `{"op":{},"fault":{}}` + "\n",
	} {
		if _, err := Read(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: Read = %v, want an error naming line 2", name, err)
		}
	}
}

// Close reports the error of the file; a second Close is ErrClosed.
func TestCloseErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Op(Op{Kind: KVGet}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	if _, err := Create(filepath.Join(path, "under-a-file")); err == nil {
		t.Fatal("Create under a file: no error")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	w = NewWriter(f) // closed: the flush fails
	if err := w.Op(Op{Kind: KVGet}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close over a closed file: no error")
	}
}

// Clock counts up from zero.
func TestClock(t *testing.T) {
	c := NewClock()
	a := c.Now()
	b := c.Now()
	if a < 0 || b < a {
		t.Fatalf("Now = %d then %d, want 0 <= first <= second", a, b)
	}
}
