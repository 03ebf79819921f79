// Package check holds the checkers of a robustness run's history
// (internal/robustness/history): the queue checker for log tables
// (CheckQueue), linearizability of primary-key tables (CheckKV) and of
// metadata (CheckMetadata) with porcupine, and the fold check of a
// primary-key bucket's changelog against its contents (CheckFold). Each
// returns a Result; a run's Results make its Verdict, written as JSON to
// the run directory. DESIGN.md says what each checker proves and what it
// does not.
//
// Checkers are pure functions of their input: safe for concurrent use, no
// state kept between calls.
package check

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"strom/internal/robustness/history"
)

// Anomaly is one violation a checker found.
type Anomaly struct {
	// Kind names the violation, one of the Anomaly* constants.
	Kind string `json:"kind"`
	// Ops are the indexes (in history.History.Ops) of the operations
	// involved, in history order.
	Ops []int `json:"ops,omitempty"`
	// Detail says what was seen, for people.
	Detail string `json:"detail"`
}

// The kinds of anomaly.
const (
	// AnomalyLost: an acknowledged append absent from the final reads.
	AnomalyLost = "lost"
	// AnomalyDuplicate: one appended value read at two offsets.
	AnomalyDuplicate = "duplicate"
	// AnomalyConflict: two reads disagree on the value at one offset.
	AnomalyConflict = "conflicting_offset"
	// AnomalyGap: offsets of a read sequence not dense and increasing.
	AnomalyGap = "gap"
	// AnomalyAboveHW: a record read at or above the high watermark its
	// read reported.
	AnomalyAboveHW = "above_high_watermark"
	// AnomalyPhantom: a value read that was never appended, or whose
	// append definitely failed.
	AnomalyPhantom = "phantom"
	// AnomalyOffsetMismatch: an append acknowledged at one offset, read
	// at another.
	AnomalyOffsetMismatch = "offset_mismatch"
	// AnomalyNonLinearizable: no order of a partition's operations
	// explains what they returned.
	AnomalyNonLinearizable = "non_linearizable"
	// AnomalyFold: a primary-key bucket's contents differ from the fold of
	// its changelog.
	AnomalyFold = "fold_mismatch"
	// AnomalyChangelog: a changelog row contradicts the rows before it
	// (+I of a present key, a -U or -D image that is not the key's row).
	AnomalyChangelog = "changelog_inconsistent"
	// AnomalyMalformed: the history breaks a recording rule
	// (history/DESIGN.md), so a property cannot be checked.
	AnomalyMalformed = "malformed_history"
)

// Result is one checker's finding.
type Result struct {
	// Checker names the checker: "queue", "kv", "metadata", "fold".
	Checker string `json:"checker"`
	// OK is true when the checker ran to the end and found nothing.
	OK bool `json:"ok"`
	// Ops is how many operations it looked at.
	Ops int `json:"ops"`
	// Anomalies are the first Options.MaxAnomalies anomalies found, in
	// the order found; Total counts them all.
	Anomalies []Anomaly `json:"anomalies,omitempty"`
	Total     int       `json:"total_anomalies,omitempty"`
	// Error says why the checker could not decide (a limit refused, a
	// timeout, a file not written); OK is false then.
	Error string `json:"error,omitempty"`
}

// add records an anomaly, keeping the first max; it sorts a.Ops and
// drops repeats.
func (r *Result) add(max int, a Anomaly) {
	slices.Sort(a.Ops)
	a.Ops = slices.Compact(a.Ops)
	r.Total++
	if len(r.Anomalies) < max {
		r.Anomalies = append(r.Anomalies, a)
	}
}

// finish sets OK from what was found.
func (r *Result) finish() Result {
	r.OK = r.Total == 0 && r.Error == ""
	return *r
}

// Verdict is a run's verdict: every checker's Result.
type Verdict struct {
	// Seed is the seed of the run's fault schedule, to reproduce it.
	Seed int64 `json:"seed"`
	// Results are the checkers' results.
	Results []Result `json:"results"`
}

// OK reports whether every checker passed.
func (v Verdict) OK() bool {
	for _, r := range v.Results {
		if !r.OK {
			return false
		}
	}
	return true
}

// CheckHistory runs every checker of a history on h: CheckQueue, CheckKV
// and CheckMetadata, in that order (a checker with no operations of its
// kinds passes with Ops 0). CheckFold needs the buckets' contents and
// changelogs, read from the nodes; its results are the caller's to add.
func CheckHistory(h *history.History, opts Options) []Result {
	return []Result{CheckQueue(h, opts), CheckKV(h, opts), CheckMetadata(h, opts)}
}

// VerdictFile is the name of the verdict in a run directory.
const VerdictFile = "verdict.json"

// WriteFile writes v as indented JSON to dir/verdict.json.
func (v Verdict) WriteFile(dir string) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("check: verdict: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, VerdictFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("check: verdict: %w", err)
	}
	return nil
}

// Options tune the checkers; the zero value of a field means its default.
type Options struct {
	// Dir is the run directory: on a linearizability failure, porcupine's
	// HTML visualisation of each failing partition is written there
	// (kv-N.html, metadata-N.html). Empty: none is written.
	Dir string
	// MaxOpsPerPartition bounds the operations porcupine checks in one
	// partition (one key of a table, or one table's metadata). Porcupine's
	// search is exponential in the operations pending at once, so a
	// partition above the bound is refused (Result.Error) rather than
	// left to run for hours: record fewer operations per key, or spread
	// them over more keys. Default 20000.
	MaxOpsPerPartition int
	// Timeout bounds porcupine's search in one partition; a partition not
	// decided in time makes the Result undecided (Result.Error). Default
	// 1 minute.
	Timeout time.Duration
	// MaxAnomalies is how many anomalies a Result lists (all are counted
	// in Total). Default 1000.
	MaxAnomalies int
	// MaxVisualizations is how many HTML files one checker writes to Dir.
	// Default 10.
	MaxVisualizations int
}

// withDefaults returns o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.MaxOpsPerPartition <= 0 {
		o.MaxOpsPerPartition = 20000
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	if o.MaxAnomalies <= 0 {
		o.MaxAnomalies = 1000
	}
	if o.MaxVisualizations <= 0 {
		o.MaxVisualizations = 10
	}
	return o
}
