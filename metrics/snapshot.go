package metrics

// Snapshot is a node's state as of one scrape, filled by the node.
type Snapshot struct {
	// Traffic is the node's total over every bucket it has hosted since
	// it started (a bucket's own counters go when the bucket goes).
	Traffic TrafficCounts
	// ReplicationBytesIn and ReplicationBytesOut are the bytes of record
	// batches the node's followers fetched from leaders and its leaders
	// served to followers (Fluss's replicationBytesIn and Out).
	ReplicationBytesIn, ReplicationBytesOut int64
	Raft                                    Raft
	// GossipMembers counts the members the node's gossip sees alive,
	// itself included.
	GossipMembers int
	// Coordinator is set on the node in office as the coordinator only,
	// so that a sum over the cluster counts each bucket once.
	Coordinator *Coordinator
	// Buckets are the bucket replicas the node hosts.
	Buckets []Bucket
}

// Raft is the node's view of the metadata group.
type Raft struct {
	// State is raft's: Follower, Candidate, Leader or Shutdown.
	State                                      string
	Term, CommitIndex, AppliedIndex, LastIndex uint64
	// LeaderChanges counts the leader changes this node has seen.
	LeaderChanges uint64
}

// Coordinator is the cluster-wide view of the coordinator's node.
type Coordinator struct {
	TabletServers                            int
	Tables                                   int
	Buckets, UnderReplicated, OfflineBuckets int
}

// Bucket is one bucket replica.
type Bucket struct {
	// Table is "db.name"; Bucket the bucket number.
	Table  string
	Bucket int32
	// Leader reports whether this node leads the bucket.
	Leader  bool
	Traffic TrafficCounts
	// LogStartOffset, LogEndOffset and HighWatermark are this replica's.
	LogStartOffset, LogEndOffset, HighWatermark int64
	// LogSegments and LogSizeBytes are the local log's segments and their bytes.
	LogSegments  int
	LogSizeBytes int64
	// ISR and Replicas count the in-sync and assigned replicas; MinISR is
	// log.replica.min-in-sync-replicas-number. Reported by the leader only.
	ISR, Replicas, MinISR int
	// FollowerLag is, on the leader, each follower's lag in rows behind
	// the leader's log end (node id to lag).
	FollowerLag map[int32]int64
	// CorruptBatches counts the damaged batches found in the log since it
	// opened; CorruptRefetched those repaired by fetching them again (as a
	// follower), CorruptRepaired those rewritten from a follower's copy (as
	// the leader).
	CorruptBatches, CorruptRefetched, CorruptRepaired int64
	// RemoteLogLag is, on the leader with log tiering on, the rows of the
	// log not yet in remote storage; -1 when not reported.
	RemoteLogLag int64
	// KV is set for a primary-key bucket.
	KV *KV
}

// KV is a primary-key bucket's Pebble database and pre-write buffer.
type KV struct {
	// SizeBytes is Pebble's disk space use.
	SizeBytes uint64
	// MemtableBytes is the size of Pebble's memtables.
	MemtableBytes uint64
	// L0Files and L0Sublevels are level 0's files and sublevels (Pebble's
	// read amplification comes mostly from them).
	L0Files, L0Sublevels int64
	// Compactions and Flushes are Pebble's since it opened.
	Compactions, Flushes int64
	// BufferedBytes and BufferedEntries are the pre-write buffer's changes
	// waiting for the high watermark; FlushedOffset is the offset below
	// which every change is in Pebble.
	BufferedBytes, BufferedEntries int
	FlushedOffset                  int64
	// Snapshot is, on the leader, the newest KV snapshot in remote storage;
	// nil when there is none (or on a follower).
	Snapshot *KVSnapshot
}

// KVSnapshot is a bucket's newest KV snapshot.
type KVSnapshot struct {
	// AgeSeconds is how long ago it was taken.
	AgeSeconds float64
	// Bytes is the size of its files; LogOffset the changelog offset it
	// holds every change below.
	Bytes, LogOffset int64
}
