package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// A metric read from a snapshot: its description and how to read it.
// ok false leaves the series out of this scrape.
type nodeMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*Snapshot) (v float64, ok bool)
}

type bucketMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*Bucket) (v float64, ok bool)
}

var bucketLabels = []string{"table", "bucket"}

func node(name, help string, kind prometheus.ValueType, value func(*Snapshot) (float64, bool)) nodeMetric {
	return nodeMetric{prometheus.NewDesc(name, help, nil, nil), kind, value}
}

func bucket(name, help string, kind prometheus.ValueType, value func(*Bucket) (float64, bool)) bucketMetric {
	return bucketMetric{prometheus.NewDesc(name, help, bucketLabels, nil), kind, value}
}

func always(v float64) (float64, bool) { return v, true }

func leaderOnly(b *Bucket, v float64) (float64, bool) { return v, b.Leader }

func kvOnly(b *Bucket, v func(*KV) float64) (float64, bool) {
	if b.KV == nil {
		return 0, false
	}
	return v(b.KV), true
}

func snapshotOnly(b *Bucket, v func(*KVSnapshot) float64) (float64, bool) {
	if b.KV == nil || b.KV.Snapshot == nil {
		return 0, false
	}
	return v(b.KV.Snapshot), true
}

func coordinatorOnly(s *Snapshot, v func(*Coordinator) int) (float64, bool) {
	if s.Coordinator == nil {
		return 0, false
	}
	return float64(v(s.Coordinator)), true
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
)

// The bytes counted in and out are those of the log record batches: in,
// the batches (or KV batches) a write appended, as the client sent them;
// out, the batches a fetch returned, after column pruning (for a fetch
// answered with JSON rows, the stored batches the rows came from).
const (
	bytesInHelp  = "Bytes of record batches appended by client writes (ProduceLog batches, PutKv batches), as sent; retried duplicates are not counted."
	bytesOutHelp = "Bytes of record batches served by client fetches (FetchLog), after column pruning; for JSON rows, the stored batches they came from."
)

var nodeMetrics = []nodeMetric{
	node("strom_tabletserver_messages_in_total", "Rows appended by client writes on this node (Fluss's messagesIn).", counter,
		func(s *Snapshot) (float64, bool) { return always(float64(s.Traffic.MessagesIn)) }),
	node("strom_tabletserver_bytes_in_total", bytesInHelp, counter,
		func(s *Snapshot) (float64, bool) { return always(float64(s.Traffic.BytesIn)) }),
	node("strom_tabletserver_messages_out_total", "Rows served by client fetches on this node.", counter,
		func(s *Snapshot) (float64, bool) { return always(float64(s.Traffic.MessagesOut)) }),
	node("strom_tabletserver_bytes_out_total", bytesOutHelp, counter,
		func(s *Snapshot) (float64, bool) { return always(float64(s.Traffic.BytesOut)) }),
	node("strom_tabletserver_replication_bytes_in_total", "Bytes of record batches this node's follower replicas fetched from their leaders (Fluss's replicationBytesIn).", counter,
		func(s *Snapshot) (float64, bool) { return always(float64(s.ReplicationBytesIn)) }),
	node("strom_tabletserver_replication_bytes_out_total", "Bytes of record batches this node's leader replicas served to followers' fetches (Fluss's replicationBytesOut).", counter,
		func(s *Snapshot) (float64, bool) { return always(float64(s.ReplicationBytesOut)) }),
	node("strom_tabletserver_replicas", "Bucket replicas this node hosts.", gauge,
		func(s *Snapshot) (float64, bool) { return always(float64(len(s.Buckets))) }),
	node("strom_tabletserver_leaders", "Buckets this node leads.", gauge,
		func(s *Snapshot) (float64, bool) {
			n := 0
			for i := range s.Buckets {
				if s.Buckets[i].Leader {
					n++
				}
			}
			return always(float64(n))
		}),
	node("strom_raft_leader", "1 if this node leads the metadata group (and so is the coordinator's node), else 0.", gauge,
		func(s *Snapshot) (float64, bool) { return always(boolValue(s.Raft.State == "Leader")) }),
	node("strom_raft_term", "The metadata group's current Raft term as this node knows it.", gauge,
		func(s *Snapshot) (float64, bool) { return always(float64(s.Raft.Term)) }),
	node("strom_raft_commit_index", "The highest Raft log index this node knows committed.", gauge,
		func(s *Snapshot) (float64, bool) { return always(float64(s.Raft.CommitIndex)) }),
	node("strom_raft_applied_index", "The highest Raft log index applied to this node's metadata.", gauge,
		func(s *Snapshot) (float64, bool) { return always(float64(s.Raft.AppliedIndex)) }),
	node("strom_raft_last_log_index", "The last index in this node's Raft log.", gauge,
		func(s *Snapshot) (float64, bool) { return always(float64(s.Raft.LastIndex)) }),
	node("strom_raft_leader_changes_total", "Metadata leader changes this node has seen since it started.", counter,
		func(s *Snapshot) (float64, bool) { return always(float64(s.Raft.LeaderChanges)) }),
	node("strom_gossip_members", "Cluster members this node's gossip sees alive, itself included.", gauge,
		func(s *Snapshot) (float64, bool) { return always(float64(s.GossipMembers)) }),
	node("strom_coordinator_active_tablet_servers", "Registered live tablet servers (Fluss's activeTabletServerCount); reported by the coordinator's node only.", gauge,
		func(s *Snapshot) (float64, bool) {
			return coordinatorOnly(s, func(c *Coordinator) int { return c.TabletServers })
		}),
	node("strom_coordinator_tables", "Tables in the cluster (Fluss's tableCount); reported by the coordinator's node only.", gauge,
		func(s *Snapshot) (float64, bool) {
			return coordinatorOnly(s, func(c *Coordinator) int { return c.Tables })
		}),
	node("strom_coordinator_buckets", "Buckets in the cluster (Fluss's bucketCount); reported by the coordinator's node only.", gauge,
		func(s *Snapshot) (float64, bool) {
			return coordinatorOnly(s, func(c *Coordinator) int { return c.Buckets })
		}),
	node("strom_coordinator_under_replicated_buckets", "Buckets with a leader and an ISR smaller than their replicas; reported by the coordinator's node only.", gauge,
		func(s *Snapshot) (float64, bool) {
			return coordinatorOnly(s, func(c *Coordinator) int { return c.UnderReplicated })
		}),
	node("strom_coordinator_offline_buckets", "Buckets with no leader (Fluss's offlineBucketCount); reported by the coordinator's node only.", gauge,
		func(s *Snapshot) (float64, bool) {
			return coordinatorOnly(s, func(c *Coordinator) int { return c.OfflineBuckets })
		}),
}

var bucketMetrics = []bucketMetric{
	bucket("strom_tablet_messages_in_total", "Rows appended to the bucket by client writes on this node (Fluss's messagesIn); for PutKv, the KV records written.", counter,
		func(b *Bucket) (float64, bool) { return always(float64(b.Traffic.MessagesIn)) }),
	bucket("strom_tablet_bytes_in_total", bytesInHelp, counter,
		func(b *Bucket) (float64, bool) { return always(float64(b.Traffic.BytesIn)) }),
	bucket("strom_tablet_messages_out_total", "Rows of the bucket served by client fetches on this node.", counter,
		func(b *Bucket) (float64, bool) { return always(float64(b.Traffic.MessagesOut)) }),
	bucket("strom_tablet_bytes_out_total", bytesOutHelp, counter,
		func(b *Bucket) (float64, bool) { return always(float64(b.Traffic.BytesOut)) }),
	bucket("strom_tablet_leader", "1 if this node leads the bucket, 0 if it hosts a follower.", gauge,
		func(b *Bucket) (float64, bool) { return always(boolValue(b.Leader)) }),
	bucket("strom_tablet_log_start_offset", "The replica's log start offset.", gauge,
		func(b *Bucket) (float64, bool) { return always(float64(b.LogStartOffset)) }),
	bucket("strom_tablet_log_end_offset", "The replica's log end offset: the offset the next row gets (Fluss's endOffset).", gauge,
		func(b *Bucket) (float64, bool) { return always(float64(b.LogEndOffset)) }),
	bucket("strom_tablet_high_watermark", "The replica's high watermark: readers see the rows below it.", gauge,
		func(b *Bucket) (float64, bool) { return always(float64(b.HighWatermark)) }),
	bucket("strom_tablet_log_segments", "Segments of the replica's local log (Fluss's numSegments).", gauge,
		func(b *Bucket) (float64, bool) { return always(float64(b.LogSegments)) }),
	bucket("strom_tablet_log_size_bytes", "Bytes of the replica's local log segments (Fluss's size).", gauge,
		func(b *Bucket) (float64, bool) { return always(float64(b.LogSizeBytes)) }),
	bucket("strom_tablet_in_sync_replicas", "Replicas in the bucket's ISR (Fluss's inSyncReplicasCount); reported by the leader.", gauge,
		func(b *Bucket) (float64, bool) { return leaderOnly(b, float64(b.ISR)) }),
	bucket("strom_tablet_under_replicated", "1 if the bucket's ISR is smaller than its replicas (Fluss's underReplicated); reported by the leader.", gauge,
		func(b *Bucket) (float64, bool) { return leaderOnly(b, boolValue(b.ISR < b.Replicas)) }),
	bucket("strom_tablet_under_min_isr", "1 if the bucket's ISR is smaller than log.replica.min-in-sync-replicas-number, so acks=-1 writes fail (Fluss's underMinIsr); reported by the leader.", gauge,
		func(b *Bucket) (float64, bool) { return leaderOnly(b, boolValue(b.ISR < b.MinISR)) }),
	bucket("strom_tablet_corrupt_batches_total", "Damaged batches (or ranges) the background check of sealed segments found in the replica's log since it opened.", counter,
		func(b *Bucket) (float64, bool) { return always(float64(b.CorruptBatches)) }),
	bucket("strom_tablet_corrupt_refetched_total", "Damaged ranges this replica, as a follower, repaired by fetching them again from its leader.", counter,
		func(b *Bucket) (float64, bool) { return always(float64(b.CorruptRefetched)) }),
	bucket("strom_tablet_corrupt_repaired_total", "Damaged ranges this replica, as the leader, rewrote in place from an in-sync follower's copy.", counter,
		func(b *Bucket) (float64, bool) { return always(float64(b.CorruptRepaired)) }),
	bucket("strom_tablet_remote_log_lag", "Rows of the bucket's log above the end of its remote (tiered) segments; reported by the leader when remote.data.dir is set.", gauge,
		func(b *Bucket) (float64, bool) { return b.leaderValue(float64(b.RemoteLogLag), b.RemoteLogLag >= 0) }),
	bucket("strom_kv_size_bytes", "Disk space of the primary-key bucket's Pebble database.", gauge,
		func(b *Bucket) (float64, bool) { return kvOnly(b, func(k *KV) float64 { return float64(k.SizeBytes) }) }),
	bucket("strom_kv_memtable_bytes", "Bytes of the bucket's Pebble memtables.", gauge,
		func(b *Bucket) (float64, bool) {
			return kvOnly(b, func(k *KV) float64 { return float64(k.MemtableBytes) })
		}),
	bucket("strom_kv_l0_files", "Files in level 0 of the bucket's Pebble database.", gauge,
		func(b *Bucket) (float64, bool) { return kvOnly(b, func(k *KV) float64 { return float64(k.L0Files) }) }),
	bucket("strom_kv_l0_sublevels", "Sublevels of level 0 of the bucket's Pebble database (its read amplification there).", gauge,
		func(b *Bucket) (float64, bool) {
			return kvOnly(b, func(k *KV) float64 { return float64(k.L0Sublevels) })
		}),
	bucket("strom_kv_compactions_total", "Compactions of the bucket's Pebble database since it opened.", counter,
		func(b *Bucket) (float64, bool) {
			return kvOnly(b, func(k *KV) float64 { return float64(k.Compactions) })
		}),
	bucket("strom_kv_flushes_total", "Memtable flushes of the bucket's Pebble database since it opened.", counter,
		func(b *Bucket) (float64, bool) { return kvOnly(b, func(k *KV) float64 { return float64(k.Flushes) }) }),
	bucket("strom_kv_prewrite_buffer_bytes", "Key and value bytes of the changes in the pre-write buffer, waiting for the high watermark.", gauge,
		func(b *Bucket) (float64, bool) {
			return kvOnly(b, func(k *KV) float64 { return float64(k.BufferedBytes) })
		}),
	bucket("strom_kv_prewrite_buffer_entries", "Changes in the pre-write buffer, waiting for the high watermark.", gauge,
		func(b *Bucket) (float64, bool) {
			return kvOnly(b, func(k *KV) float64 { return float64(k.BufferedEntries) })
		}),
	bucket("strom_kv_flushed_offset", "The log offset below which every change of the bucket is in Pebble.", gauge,
		func(b *Bucket) (float64, bool) {
			return kvOnly(b, func(k *KV) float64 { return float64(k.FlushedOffset) })
		}),
	bucket("strom_kv_snapshot_age_seconds", "Seconds since the bucket's newest KV snapshot in remote storage was taken (kv.snapshot.interval); reported by the leader while one exists.", gauge,
		func(b *Bucket) (float64, bool) {
			return snapshotOnly(b, func(s *KVSnapshot) float64 { return s.AgeSeconds })
		}),
	bucket("strom_kv_snapshot_size_bytes", "Bytes of the files of the bucket's newest KV snapshot; reported by the leader while one exists.", gauge,
		func(b *Bucket) (float64, bool) {
			return snapshotOnly(b, func(s *KVSnapshot) float64 { return float64(s.Bytes) })
		}),
	bucket("strom_kv_snapshot_log_offset", "The changelog offset below which the bucket's newest KV snapshot holds every change; reported by the leader while one exists.", gauge,
		func(b *Bucket) (float64, bool) {
			return snapshotOnly(b, func(s *KVSnapshot) float64 { return float64(s.LogOffset) })
		}),
}

func (b *Bucket) leaderValue(v float64, ok bool) (float64, bool) { return v, ok && b.Leader }

var (
	raftStateDesc = prometheus.NewDesc("strom_raft_state",
		"1 for this node's Raft state in the metadata group (Follower, Candidate, Leader, Shutdown).", []string{"state"}, nil)
	followerLagDesc = prometheus.NewDesc("strom_tablet_follower_lag",
		"Rows a follower's log is behind the leader's log end, per follower; reported by the leader.", []string{"table", "bucket", "follower"}, nil)
)

// Collector is a prometheus.Collector that reads a node's state from a
// Snapshot taken at each scrape: state (offsets, ISR, Raft indexes) is read
// when asked for, not pushed, and a bucket's series go with the bucket.
type Collector struct {
	snapshot func() Snapshot
}

// NewCollector returns a Collector over snapshot, which is called once per
// scrape, possibly from several goroutines at once.
func NewCollector(snapshot func() Snapshot) *Collector { return &Collector{snapshot: snapshot} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range nodeMetrics {
		ch <- m.desc
	}
	for _, m := range bucketMetrics {
		ch <- m.desc
	}
	ch <- raftStateDesc
	ch <- followerLagDesc
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	for _, m := range nodeMetrics {
		if v, ok := m.value(&s); ok {
			ch <- prometheus.MustNewConstMetric(m.desc, m.kind, v)
		}
	}
	for _, st := range []string{"Follower", "Candidate", "Leader", "Shutdown"} {
		ch <- prometheus.MustNewConstMetric(raftStateDesc, gauge, boolValue(s.Raft.State == st), st)
	}
	for i := range s.Buckets {
		b := &s.Buckets[i]
		bn := strconv.Itoa(int(b.Bucket))
		for _, m := range bucketMetrics {
			if v, ok := m.value(b); ok {
				ch <- prometheus.MustNewConstMetric(m.desc, m.kind, v, b.Table, bn)
			}
		}
		for f, lag := range b.FollowerLag {
			ch <- prometheus.MustNewConstMetric(followerLagDesc, gauge, float64(lag), b.Table, bn, strconv.Itoa(int(f)))
		}
	}
}
