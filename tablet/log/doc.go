// Package log is the log tablet: one bucket replica's log on local disk
// (Fluss's LogTablet, Kafka's UnifiedLog and LocalLog).
//
// A Tablet owns one directory holding the log's segments (record batches
// back to back, exactly as record.Batch stores them), each with a sparse
// offset index and a time index; the writer state of idempotent writers
// and its snapshots; the leader epoch cache (Kafka KIP-101); and the high
// watermark checkpoint. It assigns offsets and commit timestamps on the
// leader path (AppendAsLeader), checks the offsets of replicated batches
// on the follower path (AppendAsFollower), serves reads of whole batches
// bounded by a caller-given maximum offset (the high watermark), looks up
// offsets by timestamp, truncates to a point of divergence, deletes old
// segments (time-to-live, or below a tiered offset), fsyncs in a
// goroutine of its own (rolled segments, and the active one as Config's
// flush policy says, holding the high watermark below what is not yet
// fsynced), and recovers after a crash by cutting a torn tail off the
// segments not known to be fsynced and reporting it.
//
// It does not own replication, the high watermark's computation,
// scheduling of retention or checkpoints, remote storage, or the meaning
// of the records inside batches (it never looks past a batch's header).
// The caller (tablet/replica) drives all of those.
//
// All methods are safe for concurrent use; reads run in parallel with
// appends without holding locks during file I/O. DESIGN.md has the file
// formats, the recovery procedure, the invariants and the lock order.
package log
