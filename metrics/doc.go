// Package metrics exposes a node's state to Prometheus: it owns the names,
// help texts and labels of every Strom metric, the per-bucket traffic
// counters the data path updates, the RPC counters a Connect interceptor
// updates, and a collector that reads everything else (offsets, ISR, Raft,
// gossip, KV) from a snapshot the node takes at scrape time.
//
// It imports nothing of Strom's: the node (package server) fills a Snapshot
// from its replicas and metadata, so the metric definitions stay in one
// place and the domain packages stay free of Prometheus.
package metrics
