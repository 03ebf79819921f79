// Package membership is a node's view of which nodes make up the cluster:
// gossip (hashicorp/memberlist) carrying each node's metadata (id, API,
// Raft and gossip addresses, roles, version, rack, cluster id, whether it
// holds metadata state), failure detection, encryption keyed by the
// cluster secret, and joining by any listed address. It decides nothing:
// the metadata group's bootstrap and autopilot (package raftmeta) and the
// server read Members and the events.
package membership
