// Package kv is the KV tablet: one bucket replica's primary-key store
// (Fluss's KvTablet), rows in a Pebble database keyed by compacted primary
// key, with the bucket's log tablet as its write-ahead log.
//
// The leader's PutKv reads each key's current row (the pre-write buffer of
// uncommitted rows first, then Pebble), applies the table's merge engine
// (default, first_row, versioned, aggregation; partial updates; delete
// behaviour), builds one Arrow changelog batch (+I, -U/+U, -D), appends it
// to the log, and buffers the new rows. FlushTo moves the rows below the
// high watermark into Pebble, together with the flushed offset, so Pebble
// only ever holds committed rows; Lookup, PrefixLookup, LimitScan and
// Snapshot read Pebble alone. Followers feed the changelog their log
// replicated to ApplyChangelog, which buffers it the same way (hot
// standby: a promoted follower serves at once). Open recovers by replaying
// the log from the flushed offset.
//
// It does not own the log (the caller opens, recovers and closes it), the
// high watermark's computation, replication, snapshots to remote storage,
// or the mapping of errors to the wire. All methods are safe for concurrent
// use. DESIGN.md has the key space, the write path, recovery, the
// invariants and the lock order.
package kv
