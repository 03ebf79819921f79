package server

import (
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"strom/internal/buildinfo"
	"strom/metrics"
	"strom/raftmeta/catalog"
	"strom/tablet/replica"

	_ "strom/rpc/gen/strom/v1" // registers the API's proto files, read by apiProcedures
)

// nodeMetrics is what the node counts for /metrics beyond the state the
// collector reads at scrape time (metrics.Collector over metricsSnapshot).
type nodeMetrics struct {
	rpc *metrics.RPC
	// traffic is the node's total of client rows and bytes, over every
	// replica it has hosted (a replica's own counters go with it).
	traffic metrics.Traffic
	// leaderChanges counts the metadata leaders this node has seen elected.
	leaderChanges atomic.Uint64
	// replicationIn and replicationOut count the batch bytes this node's
	// followers fetched from leaders and its leaders served to followers.
	replicationIn, replicationOut atomic.Int64
}

func newNodeMetrics() *nodeMetrics {
	return &nodeMetrics{rpc: metrics.NewRPC(apiProcedures())}
}

// apiProcedures lists every procedure of the strom.v1 services
// ("/strom.v1.TabletService/ProduceLog"), so that their request metrics
// are resolved once.
func apiProcedures() []string {
	var out []string
	protoregistry.GlobalFiles.RangeFilesByPackage("strom.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			svc := fd.Services().Get(i)
			for j := range svc.Methods().Len() {
				out = append(out, "/"+string(svc.FullName())+"/"+string(svc.Methods().Get(j).Name()))
			}
		}
		return true
	})
	return out
}

// countIn counts a client write of rows and bytes to r's bucket. It takes
// no lock and allocates nothing (the data path calls it).
func (s *Server) countIn(r *replica.Replica, rows, bytes int) {
	r.Traffic().In(rows, bytes)
	s.metrics.traffic.In(rows, bytes)
}

// countOut counts a client fetch of rows and bytes from r's bucket, as
// countIn.
func (s *Server) countOut(r *replica.Replica, rows, bytes int) {
	r.Traffic().Out(rows, bytes)
	s.metrics.traffic.Out(rows, bytes)
}

// countServed counts what the passes of a fetch's response served.
func (s *Server) countServed(pass []served) {
	for _, sv := range pass {
		if sv.r != nil {
			s.countOut(sv.r, sv.rows, sv.bytes)
		}
	}
}

// countReplicated adds the batch bytes of a follower fetch's results to
// counter (replicationIn or replicationOut).
func (s *Server) countReplicated(counter *atomic.Int64, results []replica.BucketFetchResult) {
	n := 0
	for i := range results {
		n += len(results[i].Batches)
	}
	counter.Add(int64(n))
}

// watchLeaderChanges counts, from raft's observations, the metadata
// leaders this node sees elected. The filter counts and drops every
// observation, so the observer needs no channel nor goroutine.
func (s *Server) watchLeaderChanges() {
	s.meta.Raft().RegisterObserver(raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if l, ok := o.Data.(raft.LeaderObservation); ok && l.LeaderID != "" {
			s.metrics.leaderChanges.Add(1)
		}
		return false
	}))
}

// metricsHandler serves /metrics.
func (s *Server) metricsHandler() http.Handler {
	return metrics.Handler(metrics.Build{Version: Version, Commit: buildinfo.Commit(), GoVersion: runtime.Version()},
		s.metrics.rpc, metrics.NewCollector(s.metricsSnapshot))
}

// metricsSnapshot reads the node's state for a scrape: the Raft group's,
// the gossip's, the cluster's bucket counts on the coordinator's node, and
// each hosted replica's, from the local metadata and the replicas (no
// remote call).
func (s *Server) metricsSnapshot() metrics.Snapshot {
	snap := metrics.Snapshot{Traffic: s.metrics.traffic.Counts(), Raft: s.raftMetrics(),
		ReplicationBytesIn: s.metrics.replicationIn.Load(), ReplicationBytesOut: s.metrics.replicationOut.Load()}
	for _, m := range s.Members() {
		if m.Alive {
			snap.GossipMembers++
		}
	}
	tables, err := s.cat.AllTables()
	if err != nil {
		s.lg.Warn("metrics: cannot read the tables", "err", err)
	}
	byID := make(map[int64]catalog.Table, len(tables))
	for _, t := range tables {
		byID[t.Registration.TableID] = t
	}
	if s.IsCoordinator() {
		servers, _ := s.cat.TabletServers()
		c := &metrics.Coordinator{TabletServers: len(servers), Tables: len(tables)}
		total, under, offline := countBuckets(tables)
		c.Buckets, c.UnderReplicated, c.OfflineBuckets = int(total), int(under), int(offline)
		snap.Coordinator = c
	}
	for _, r := range s.replicas.Replicas() {
		snap.Buckets = append(snap.Buckets, s.bucketMetrics(r, byID))
	}
	return snap
}

func (s *Server) raftMetrics() metrics.Raft {
	rf := s.meta.Raft()
	st := rf.Stats()
	num := func(k string) uint64 { n, _ := strconv.ParseUint(st[k], 10, 64); return n }
	return metrics.Raft{
		State: rf.State().String(), Term: num("term"), CommitIndex: rf.CommitIndex(), AppliedIndex: rf.AppliedIndex(),
		LastIndex: rf.LastIndex(), LeaderChanges: s.metrics.leaderChanges.Load(),
	}
}

// bucketMetrics reads one replica for a scrape. A replica of a table the
// metadata no longer has (being dropped) is named by its table id.
func (s *Server) bucketMetrics(r *replica.Replica, byID map[int64]catalog.Table) metrics.Bucket {
	tb := r.TableBucket()
	st := r.State()
	b := metrics.Bucket{
		Table: "id:" + strconv.FormatInt(tb.TableID, 10), Bucket: tb.Bucket,
		Leader: st.Leader == s.cfg.NodeID, Traffic: r.Traffic().Counts(),
		LogStartOffset: st.LogStartOffset, LogEndOffset: st.LogEndOffset, HighWatermark: st.HighWatermark,
		ISR: len(st.ISR), MinISR: s.cfg.MinInSyncReplicas,
		CorruptBatches: st.CorruptBatches, CorruptRefetched: st.CorruptRefetched, CorruptRepaired: st.CorruptRepaired, RemoteLogLag: -1,
	}
	if t, ok := byID[tb.TableID]; ok {
		b.Table = t.Database + "." + t.Name
		b.Replicas = len(t.Assignment.Buckets[tb.Bucket])
	}
	for _, seg := range r.Log().Segments() {
		b.LogSegments++
		b.LogSizeBytes += seg.Size
	}
	if b.Leader {
		b.FollowerLag = make(map[int32]int64, len(st.Followers))
		for id, f := range st.Followers {
			b.FollowerLag[id] = max(0, st.LogEndOffset-f.LogEnd)
		}
		if s.remote != nil {
			if m, err := s.cat.RemoteLogs(tb.TableID, tb.Bucket); err == nil {
				tiered := st.LogStartOffset
				if n := len(m.Segments); n > 0 {
					tiered = m.Segments[n-1].EndOffset
				}
				b.RemoteLogLag = max(0, st.LogEndOffset-tiered)
			}
		}
	}
	if kt := r.LocalKV(); kt != nil {
		ks := kt.Stats()
		k := &metrics.KV{BufferedBytes: ks.BufferedBytes, BufferedEntries: ks.BufferedEntries, FlushedOffset: ks.FlushedOffset}
		if pm, err := kt.PebbleMetrics(); err == nil {
			k.SizeBytes, k.MemtableBytes = pm.DiskSpaceUsage(), pm.MemTable.Size
			k.L0Files, k.L0Sublevels = pm.Levels[0].TablesCount, int64(pm.Levels[0].Sublevels)
			k.Compactions, k.Flushes = pm.Compact.Count, pm.Flush.Count
		}
		if b.Leader {
			if snaps, err := s.cat.KvSnapshots(tb.TableID, tb.Bucket); err == nil {
				if l, ok := snaps.Latest(); ok {
					k.Snapshot = &metrics.KVSnapshot{AgeSeconds: time.Since(time.UnixMilli(l.CreatedAt)).Seconds(), Bytes: l.Size(), LogOffset: l.LogOffset}
				}
			}
		}
		b.KV = k
	}
	return b
}
