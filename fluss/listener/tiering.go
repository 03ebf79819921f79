package listener

import (
	"fmt"
	"sync"
	"time"

	"strom/fluss/protocol"
)

// tieringTimeout is how long a table being tiered may go without a
// heartbeat before it is offered again (Fluss's TIERING_SERVICE_TIMEOUT_MS).
const tieringTimeout = 2 * time.Minute

// tieringState is a lake table's state in the tiering schedule, Fluss's
// LakeTableTieringManager.TieringState (New and Initialized are the entry
// to scheduled; Tiered and Failed pass at once to scheduled or pending).
type tieringState int

const (
	tieringScheduled tieringState = iota // waiting for its freshness to pass
	tieringPending                       // queued for a tiering service
	tieringActive                        // taken by a tiering service
)

// LakeTableInfo is what the tiering schedule knows of a table with
// table.datalake.enabled.
type LakeTableInfo struct {
	ID        int64
	Database  string
	Name      string
	Freshness time.Duration
	// LastTiered is when its last lake snapshot was committed; zero when
	// it has none, which schedules it a freshness after it is first seen.
	LastTiered time.Time
}

type tieringTable struct {
	info          LakeTableInfo
	state         tieringState
	epoch         int64 // tiering epoch: grows each time it becomes pending
	lastTiered    time.Time
	lastHeartbeat time.Time
}

// tieringSchedule is the coordinator's lake tiering schedule (Fluss's
// LakeTableTieringManager): each lake table waits its freshness after its
// last tiering, then is offered to the next tiering service that asks;
// the service heartbeats it while it tiers and reports it finished or
// failed, fenced by the tiering epoch the offer carried. It is in memory,
// as in Fluss: a new coordinator term starts a new schedule (reset), its
// tables scheduled from their last committed lake snapshot.
type tieringSchedule struct {
	now func() time.Time

	mu      sync.Mutex
	term    int32 // the coordinator epoch the schedule belongs to
	tables  map[int64]*tieringTable
	pending []int64
}

func newTieringSchedule(now func() time.Time) *tieringSchedule {
	return &tieringSchedule{now: now, tables: map[int64]*tieringTable{}}
}

// update brings the schedule to coordinator epoch term and the lake tables
// the catalog has now: a new term starts afresh, new tables are scheduled,
// dropped ones forgotten; then every table whose freshness has passed is
// queued, and every table whose service went silent is queued again.
func (s *tieringSchedule) update(term int32, lake []LakeTableInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if term != s.term {
		s.term, s.tables, s.pending = term, map[int64]*tieringTable{}, nil
	}
	seen := map[int64]bool{}
	for _, info := range lake {
		seen[info.ID] = true
		t, ok := s.tables[info.ID]
		if !ok {
			last := info.LastTiered
			if last.IsZero() {
				last = now
			}
			s.tables[info.ID] = &tieringTable{info: info, state: tieringScheduled, lastTiered: last}
			continue
		}
		t.info.Freshness = info.Freshness
	}
	for id := range s.tables {
		if !seen[id] {
			delete(s.tables, id)
		}
	}
	for id, t := range s.tables {
		switch {
		case t.state == tieringScheduled && now.Sub(t.lastTiered) >= t.info.Freshness:
			s.makePending(id, t)
		case t.state == tieringActive && now.Sub(t.lastHeartbeat) >= tieringTimeout:
			s.makePending(id, t)
		}
	}
}

func (s *tieringSchedule) makePending(id int64, t *tieringTable) {
	t.state = tieringPending
	t.epoch++
	s.pending = append(s.pending, id)
}

// request hands out the next pending table and its tiering epoch; ok is
// false when none is pending.
func (s *tieringSchedule) request() (info LakeTableInfo, epoch int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.pending) > 0 {
		id := s.pending[0]
		s.pending = s.pending[1:]
		t, live := s.tables[id]
		if !live || t.state != tieringPending {
			continue
		}
		t.state, t.lastHeartbeat = tieringActive, s.now()
		return t.info, t.epoch, true
	}
	return LakeTableInfo{}, 0, false
}

// check is Fluss's validateTieringServiceRequest: the table is scheduled
// and epoch is its current tiering epoch.
func (s *tieringSchedule) check(id, epoch int64) (*tieringTable, error) {
	t, ok := s.tables[id]
	if !ok {
		return nil, &Error{protocol.TableNotExist, fmt.Sprintf("The table %d doesn't exist (or has no table.datalake.enabled).", id)}
	}
	if t.epoch != epoch {
		return nil, &Error{protocol.FencedTieringEpochException, fmt.Sprintf("The tiering epoch %d is not match current epoch %d in coordinator for table %d.", epoch, t.epoch, id)}
	}
	return t, nil
}

// heartbeat renews a table being tiered.
func (s *tieringSchedule) heartbeat(id, epoch int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.check(id, epoch)
	if err != nil {
		return err
	}
	if t.state != tieringActive {
		return &Error{protocol.UnknownServerError, fmt.Sprintf("The table %d to renew tiering heartbeat must in Tiering state, but is not.", id)}
	}
	t.lastHeartbeat = s.now()
	return nil
}

// finish ends a tiering round: the table waits its freshness again, or,
// forced (the round hit its time limit), is queued at once.
func (s *tieringSchedule) finish(id, epoch int64, forced bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.check(id, epoch)
	if err != nil {
		return err
	}
	if t.state != tieringActive {
		return nil // Fluss logs the invalid transition and leaves the state
	}
	t.lastTiered = s.now()
	if forced {
		s.makePending(id, t)
	} else {
		t.state = tieringScheduled
	}
	return nil
}

// fail queues a table whose round failed again.
func (s *tieringSchedule) fail(id, epoch int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.check(id, epoch)
	if err != nil {
		return err
	}
	if t.state == tieringActive {
		s.makePending(id, t)
	}
	return nil
}
