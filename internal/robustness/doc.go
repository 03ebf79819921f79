// Package robustness is a Jepsen-style harness: a cluster of real strom
// processes (the built binary) behind proxies it controls
// (internal/proxy), workloads whose every operation is recorded in a
// history (internal/robustness/history), faults from a schedule that a
// seed fixes, and the history checked at the end
// (internal/robustness/check).
//
// A run is Options: a seed, fault kinds, a duration, 3 or 5 nodes. Run
// starts the cluster, the workloads and the schedule, heals every fault
// at the end, lets the cluster settle (the quiet period), stops the
// workloads, reads every log bucket back from its start, checks the
// history, and writes everything to the run directory. scripts/robustness.sh
// drives it through TestRobustness; DESIGN.md has the file map and what a
// run directory holds.
package robustness
