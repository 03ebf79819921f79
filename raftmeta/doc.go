// Package raftmeta holds Strom's metadata: a ZooKeeper-style znode tree
// replicated by hashicorp/raft (log and stable store in raft-boltdb/v2,
// snapshots in a raft.FileSnapshotStore).
//
// It owns the tree and its semantics (ZooKeeper's: paths, create modes,
// versions, stats, sequential names, multi, ephemerals, containers, TTL
// nodes), client sessions and their expiry, node-local watches, the Raft
// command and snapshot formats, and Raft membership changes. Writes go
// through the leader's Raft log; reads are served from the local replica
// (ZooKeeper's sequential consistency, with Sync to catch up).
//
// Followers forward writes, session commands, heartbeats and Sync to the
// leader over a small HTTP call (forward.go) when Config.ForwardAddr is set,
// signed with the cluster secret (Config.ForwardSecret); Config.CheckWrite
// lets the caller refuse writes before they are proposed.
//
// It does not own the ZooKeeper wire protocol (package zkwire), the znode
// layout of Strom's catalog, or membership discovery (who maps a leader's
// NodeID to its forwarding address). See DESIGN.md for the formats,
// invariants and lock order.
package raftmeta
