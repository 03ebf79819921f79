// Package zkwire serves the ZooKeeper client protocol (jute over TCP) from a
// raftmeta.Node, so that ZooKeeper clients pointed at any Strom node get
// ZooKeeper's semantics over the replicated znode tree that also holds
// Strom's own metadata.
//
// Start (or Listen) runs a Server for one node; Close stops it and every
// goroutine it started. Sessions live in the Raft group, not in the
// connection: a client that loses its node reconnects to another with its
// session id and password and keeps its ephemerals; its watches come back
// through setWatches. Heartbeats become Node.Touch, which a follower
// forwards to the leader, where silent sessions expire.
//
// Clients may read Strom's tree under Config.ProtectedRoot (/strom) but not
// write it (NoAuth). ACLs are stored and returned, never enforced.
//
// It owns the wire format, the per-connection ordering of replies and watch
// events, the four-letter words, and the mapping of raftmeta's errors to
// ZooKeeper's codes (errCode). It does not own the tree's semantics
// (raftmeta) or forwarding (raftmeta). See DESIGN.md.
package zkwire
