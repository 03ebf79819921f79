package listener

import (
	"errors"
	"testing"
	"time"

	"strom/fluss/protocol"
)

// The tiering schedule on a fake clock, Fluss's LakeTableTieringManager
// transitions: scheduled until the freshness passes, pending, tiering with
// heartbeats, finished (scheduled again) or forced/failed/timed out
// (pending again, a new tiering epoch fencing the old service), and a new
// coordinator term starting afresh from the last committed snapshot.
func TestTieringSchedule(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newTieringSchedule(func() time.Time { return now })
	tables := []LakeTableInfo{{ID: 1, Database: "fluss", Name: "a", Freshness: 30 * time.Second}}
	code := func(err error) protocol.ErrorCode {
		if e, ok := errors.AsType[*Error](err); ok {
			return e.Code
		}
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		return protocol.None
	}

	s.update(1, tables)
	if _, _, ok := s.request(); ok {
		t.Fatal("offered before its freshness passed")
	}
	now = now.Add(30 * time.Second)
	s.update(1, tables)
	info, epoch, ok := s.request()
	if !ok || info.ID != 1 || epoch != 1 {
		t.Fatalf("request = %v %d %v, want table 1 at epoch 1", info, epoch, ok)
	}
	if _, _, ok := s.request(); ok {
		t.Fatal("offered twice")
	}
	if c := code(s.heartbeat(1, 2)); c != protocol.FencedTieringEpochException {
		t.Fatalf("heartbeat at a wrong epoch: %s", c)
	}
	if c := code(s.heartbeat(9, 1)); c != protocol.TableNotExist {
		t.Fatalf("heartbeat of an unknown table: %s", c)
	}
	code(s.heartbeat(1, 1))
	code(s.finish(1, 1, false))
	now = now.Add(29 * time.Second)
	s.update(1, tables)
	if _, _, ok := s.request(); ok {
		t.Fatal("offered again before a freshness after the finish")
	}
	now = now.Add(time.Second)
	s.update(1, tables)
	if _, epoch, ok = s.request(); !ok || epoch != 2 {
		t.Fatalf("second round: epoch %d %v, want 2", epoch, ok)
	}
	// A forced finish is offered again at once; a failure too.
	code(s.finish(1, 2, true))
	if _, epoch, ok = s.request(); !ok || epoch != 3 {
		t.Fatalf("after a forced finish: epoch %d %v, want 3 at once", epoch, ok)
	}
	code(s.fail(1, 3))
	if _, epoch, ok = s.request(); !ok || epoch != 4 {
		t.Fatalf("after a failure: epoch %d %v, want 4 at once", epoch, ok)
	}
	// A service silent for the timeout loses the table to the next one.
	now = now.Add(tieringTimeout)
	s.update(1, tables)
	if _, epoch, ok = s.request(); !ok || epoch != 5 {
		t.Fatalf("after the heartbeat timeout: epoch %d %v, want 5", epoch, ok)
	}
	if c := code(s.finish(1, 4, false)); c != protocol.FencedTieringEpochException {
		t.Fatalf("the timed-out service's finish: %s, want fenced", c)
	}
	// A new coordinator term: scheduled from the last commit, long ago.
	tables[0].LastTiered = now.Add(-time.Hour)
	s.update(2, tables)
	if _, epoch, ok = s.request(); !ok || epoch != 1 {
		t.Fatalf("new term: epoch %d %v, want 1 at once", epoch, ok)
	}
	// A dropped table is forgotten.
	s.update(2, nil)
	if c := code(s.heartbeat(1, 1)); c != protocol.TableNotExist {
		t.Fatalf("heartbeat of a dropped table: %s", c)
	}
}
