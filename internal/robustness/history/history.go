// Package history is the record of a robustness run: every operation a
// client invoked with what it answered, and every fault the harness
// injected, as JSON Lines a checker (internal/robustness/check) reads back.
//
// One history is one file. Each line is one record, {"op":{...}} or
// {"fault":{...}}. Times are nanoseconds on one monotonic clock since the
// run started (Clock), so records from all clients compare. An operation is
// written once, when it returns (or when its client gives up on it), so
// lines are in return order, not invoke order; an operation's index is its
// position among the operations of the file, counted from 0, and checkers
// name operations by that index.
package history

import (
	"time"
)

// Kind names what an operation did.
type Kind string

// The kinds of operation. Each field of Op says what it means per kind.
const (
	// LogAppend appends one row to a log table (or a primary-key table's
	// log, never read as such).
	LogAppend Kind = "log_append"
	// LogRead is one fetch of one bucket of a log table: the records it
	// returned, in offset order.
	LogRead Kind = "log_read"
	// KVPut upserts one key of a primary-key table.
	KVPut Kind = "kv_put"
	// KVDelete deletes one key of a primary-key table.
	KVDelete Kind = "kv_delete"
	// KVGet looks one key of a primary-key table up.
	KVGet Kind = "kv_get"
	// CreateTable creates a table (metadata).
	CreateTable Kind = "create_table"
	// DropTable drops a table (metadata).
	DropTable Kind = "drop_table"
	// TableExists asks whether a table exists (metadata: GetTable).
	TableExists Kind = "table_exists"
	// ListTables lists the tables of a database (metadata).
	ListTables Kind = "list_tables"
)

// Outcome says what is known about an operation's effect.
type Outcome string

const (
	// OK: the system answered. A write took effect exactly as its fields
	// say; a read saw what its fields say.
	OK Outcome = "ok"
	// Fail: the operation definitely did not take effect and its answer
	// says nothing about the state (a refused request: not the leader,
	// bad request, connection refused before sending). Checkers drop it.
	Fail Outcome = "fail"
	// Unknown: the operation may or may not have taken effect, at any time
	// after it was invoked, even after it "returned" (a timeout, a lost
	// reply, a broken connection after sending). Checkers treat a write as
	// maybe applied and ignore a read's answer.
	Unknown Outcome = "unknown"
)

// Record is one record a LogRead returned.
type Record struct {
	// Offset is the record's offset in its bucket.
	Offset int64 `json:"offset"`
	// Value is the record's value (the value column of the row appended).
	Value string `json:"value"`
}

// Op is one operation a client invoked. Fields a kind does not mention are
// zero and omitted from the JSON.
type Op struct {
	// Client identifies the logical client, a single-threaded process
	// invoking one operation at a time: operations of one client never
	// overlap in time. A client that restarts a read sequence from an
	// earlier point (a new scanner) may keep its id; one that skips ahead
	// takes a new id (see Offset for LogRead).
	Client int `json:"client"`
	// Kind says what the operation did.
	Kind Kind `json:"kind"`
	// Table names the table as "database.table", for every kind but
	// ListTables, where it names the database alone.
	Table string `json:"table,omitempty"`
	// Bucket is the bucket: for LogRead the bucket read; for LogAppend
	// the bucket the append was acknowledged in (OK only); unused by the
	// other kinds.
	Bucket int32 `json:"bucket,omitempty"`
	// Key is the primary key for KVPut, KVDelete and KVGet; the optional
	// bucket key for LogAppend; unused by the other kinds.
	Key string `json:"key,omitempty"`
	// Value is, for LogAppend, the value appended: unique in the run, so a
	// checker can tell records apart. For KVPut the value written; for
	// KVGet the value read (OK and Found only). Unused by the other kinds.
	Value string `json:"value,omitempty"`
	// Found is, for KVGet, whether the key was present (Value is its
	// value); for TableExists, whether the table exists. For CreateTable,
	// whether the table already existed, so nothing was created (an OK
	// "already exists" answer); false means it was created. For DropTable,
	// whether the table existed and was dropped; false is an OK "not
	// found" answer. Meaningful with OK only.
	Found bool `json:"found,omitempty"`
	// Offset is, for LogAppend, the offset the append was acknowledged at
	// (OK only). For LogRead, the offset the fetch started from: its
	// records must start there and be dense. A client's consecutive
	// LogReads of one bucket start where the previous one ended, or
	// earlier (a rewind); later is a gap.
	Offset int64 `json:"offset,omitempty"`
	// HighWatermark is, for LogRead, the bucket's high watermark the fetch
	// reported; no record it returned may be at or above it.
	HighWatermark int64 `json:"hw,omitempty"`
	// Records is, for LogRead, the records the fetch returned (OK only),
	// possibly none.
	Records []Record `json:"records,omitempty"`
	// Final marks a LogRead as part of the run's final drain, taken after
	// the faults healed: the final reads of a bucket together cover it
	// from its first offset to its end, so every acknowledged append must
	// be found in them.
	Final bool `json:"final,omitempty"`
	// Tables is, for ListTables, the names returned (as "database.table",
	// any order; OK only).
	Tables []string `json:"tables,omitempty"`
	// Invoke is when the client invoked the operation, Return when it got
	// the answer (or gave up, for Unknown), in nanoseconds since the run
	// started (Clock.Now). Invoke <= Return.
	Invoke int64 `json:"invoke"`
	Return int64 `json:"return"`
	// Outcome says what is known about the operation's effect.
	Outcome Outcome `json:"outcome"`
	// Error is the error text for Fail and Unknown, for people reading
	// the history; checkers never look at it.
	Error string `json:"error,omitempty"`
}

// Fault is one fault the harness injected.
type Fault struct {
	// Kind names the fault, for example "partition", "partition_one_way",
	// "latency", "drop_connections", "kill", "pause", "restart",
	// "power_off", "corrupt"; checkers do not interpret it.
	Kind string `json:"kind"`
	// Nodes are the nodes it targets (for a partition, the side cut off;
	// for a one-way partition, From then To in Detail).
	Nodes []string `json:"nodes,omitempty"`
	// Detail says anything more, for people: the latency, the file
	// corrupted, the direction of a one-way cut.
	Detail string `json:"detail,omitempty"`
	// Start and End bound the fault, in nanoseconds since the run started;
	// End equals Start for an instant fault (a SIGKILL).
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Seed is the seed of the schedule that chose this fault: rerunning
	// with it reproduces the schedule.
	Seed int64 `json:"seed"`
}

// History is a whole run, as Read returns it.
type History struct {
	// Ops are the operations in the order written; an operation's index
	// here is how checkers name it.
	Ops []Op
	// Faults are the faults in the order written.
	Faults []Fault
}

// Clock gives the times of a run: nanoseconds since it started, on the
// monotonic clock (never stepped by NTP). Safe for concurrent use.
type Clock struct{ start time.Time }

// NewClock starts a run's clock at 0 now.
func NewClock() Clock { return Clock{start: time.Now()} }

// Now is the time since the clock started, in nanoseconds.
func (c Clock) Now() int64 { return int64(time.Since(c.start)) }
