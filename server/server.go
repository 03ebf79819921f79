// Package server is one Strom node: configuration, wiring of the metadata
// group, coordinator and API, and the node's lifecycle (start, readiness,
// controlled shutdown).
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/cockroachdb/pebble/v2"

	"strom/fluss/listener"
	"strom/internal/buildinfo"
	"strom/internal/netlimit"
	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/raftmeta/membership"
	"strom/raftmeta/zkwire"
	"strom/remote"
	"strom/rpc"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/server/coordinator"
	"strom/tablet/log"
	"strom/tablet/replica"
	"strom/ui"
)

// kvCacheBytes is the size of the block cache the node's KV tablets share.
const kvCacheBytes = 64 << 20

// Version is the Strom version a node reports (buildinfo.Version: set at
// link time, else the build's own).
var Version = buildinfo.Version()

// maxSinglePut is S3's largest PutObject (5 GiB): the tiering store sends
// every segment in one.
const maxSinglePut = 5 << 30

// Server is one running node. Start brings it up; Stop takes it down.
type Server struct {
	cfg   Config
	lg    *slog.Logger
	id    identity
	meta  *raftmeta.Node
	cat   *catalog.Catalog
	coord *coordinator.Coordinator
	// replicas hosts this node's bucket replicas.
	replicas *replica.Manager
	// remote is remote.data.dir's store when log tiering is on.
	remote remote.Store
	// tables caches decoded tables for the data path.
	tables *tableCache
	// scanners holds open ScanKv snapshots.
	scanners scanners
	// kvCache is the block cache shared by the node's KV tablets.
	kvCache *pebble.Cache
	// secret is the cluster secret: node-to-node calls are signed with it.
	secret []byte

	apiLn   net.Listener
	apiAddr string // advertised API address
	http    *http.Server
	zk      *zkwire.Server   // nil unless zookeeper.listen is set
	fluss   *listener.Server // nil unless fluss.listen is set
	// flussAddr is the advertised Fluss address, "" without fluss.listen.
	flussAddr string
	// flussOpen closes once the node is ready and the database fluss
	// exists: the Fluss listener accepts connections from then on
	// (openFluss, server/fluss.go).
	flussOpen chan struct{}
	// adminH and tabletH are the Connect API's handlers, which the Fluss
	// listener's handlers call too (server/fluss.go).
	adminH  *adminHandler
	tabletH *tabletHandler

	// members is the node's gossip membership; nil without gossip (a
	// single node whose gossip port was taken). failures wakes
	// expireFailed when gossip declares a node dead (cluster.go).
	members  atomic.Pointer[membership.Membership]
	failures chan struct{}

	ready   atomic.Bool
	session atomic.Int64 // the node's metadata session, 0 before registration
	// coordCalls calls the coordinator (AdjustISR and the like, and
	// NodeStarting); started is set once NodeStarting was answered.
	coordCalls *isrChanger
	started    atomic.Bool
	// incarnation is this run's (catalog.TabletServerRegistration's), in
	// the registration and in every replica fetch; incarnations reads the
	// others' from the registrations.
	incarnation  int64
	incarnations incarnationCache

	// heartbeatStop ends the heartbeat loop, which closes heartbeatDone on
	// exit; nil before it starts. Stop ends it before closing the session,
	// which it would otherwise register again.
	heartbeatStop context.CancelFunc
	heartbeatDone chan struct{}

	cancel context.CancelFunc
	wg     sync.WaitGroup

	// stopping is closed when Stop begins: long waits in handlers (a
	// long-poll fetch) end then, so the API drains promptly.
	stopping chan struct{}
	// longPolls counts the fetches waiting for data.
	longPolls atomic.Int64
	// metrics is what /metrics reports beyond the state read at scrape
	// time (metrics.go).
	metrics *nodeMetrics

	stopOnce sync.Once
	stopErr  error
	// stopStage names what Stop waits for now ("" before Stop): Run logs
	// it when the stop overruns shutdown.timeout.
	stopStage atomic.Pointer[string]
}

// NewLogger returns the logger a node writes with, per format ("text" or
// "json") and level.
func NewLogger(w io.Writer, format, level string) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(level)) // Validate has checked it
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Start validates cfg, opens the data directory and the metadata replica,
// serves the API, and returns once the node is registered and ready (or ctx
// ends first). Stop must be called to release what Start acquired, even when
// Start fails.
func Start(ctx context.Context, cfg Config, lg *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, lg: lg.With("node", cfg.NodeID), stopping: make(chan struct{}), metrics: newNodeMetrics(),
		incarnation: time.Now().UnixNano()}
	s.scanners.ttl = cfg.ScannerTTL
	s.scanners.maxPerBucket, s.scanners.maxPerServer = cfg.ScannerMaxPerBucket, cfg.ScannerMaxPerServer
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if err := s.start(ctx, runCtx); err != nil {
		s.Stop(context.Background())
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx, runCtx context.Context) error {
	cfg := s.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data.dir: %w", err)
	}
	id, err := loadIdentity(cfg.DataDir, cfg.NodeID, cfg.ClusterID)
	if err != nil {
		return err
	}
	s.id = id
	secret, err := loadClusterSecret(cfg.DataDir, cfg.ClusterSecret)
	if err != nil {
		return err
	}
	s.secret = secret

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("api.listen (--listen): %w", err)
	}
	s.apiLn = netlimit.Wrap(ln, connLimits(cfg), s.lg.With("listener", "api"))
	s.apiAddr = advertised(s.apiLn.Addr().String(), cfg.Advertise)

	mcfg := raftmeta.DefaultConfig()
	mcfg.NodeID = strconv.Itoa(int(cfg.NodeID))
	mcfg.Dir = filepath.Join(cfg.DataDir, "raft")
	mcfg.BindAddr = cfg.RaftListen
	mcfg.AdvertiseAddr = advertised(cfg.RaftListen, cfg.RaftAdvertise)
	mcfg.SourceIP = cfg.SourceIP
	mcfg.Logger = s.lg
	// The group is bootstrapped (or joined) through the gossip, in
	// register; the leader's autopilot follows the gossip's view.
	mcfg.Autopilot = raftmeta.AutopilotConfig{
		Peers:             s.peers,
		Voters:            cfg.RaftVoters,
		StabilizationTime: cfg.ServerStabilizationTime,
		DeadVoterGrace:    cfg.DeadVoterGrace,
		DeadNodeCleanup:   cfg.DeadNodeCleanup,
	}
	// A follower forwards metadata writes and session heartbeats to the
	// leader's API port, found in the gossip or the leader's registration,
	// signed with the cluster secret.
	mcfg.ForwardAddr = s.apiAddrOf
	mcfg.ForwardSecret = secret
	// Writes under /strom are the coordinator's, fenced by its epoch, or a
	// node's own registration.
	mcfg.CheckWrite = catalog.CheckWrite
	// A Raft command of a later feature level waits until every node
	// speaks it (the coordinator's /strom/features).
	mcfg.FeatureLevel = s.featureLevel
	if s.meta, err = raftmeta.Open(mcfg); err != nil {
		return fmt.Errorf("open metadata replica: %w", err)
	}
	s.cat = catalog.New(s.meta)
	s.watchLeaderChanges()
	if err := s.startMembership(secret); err != nil {
		return err
	}
	if s.members.Load() != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.expireFailed(runCtx)
		}()
	}
	s.tables = newTableCache(s.cat, s.meta.LastZxid)
	s.coord = coordinator.New(coordinator.Config{
		NodeID:                   cfg.NodeID,
		APIAddress:               s.apiAddr,
		ClusterID:                id.ClusterID,
		DefaultBucketNumber:      cfg.DefaultBucketNumber,
		DefaultReplicationFactor: cfg.DefaultReplicationFactor,
		MinInSyncReplicas:        cfg.MinInSyncReplicas,
		RemoteStorage:            cfg.RemoteDataDir != "" && (cfg.RemoteLogTaskInterval > 0 || cfg.KvSnapshotInterval > 0),
		Logger:                   s.lg,
	}, s.meta)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.coord.Run(runCtx)
	}()

	lc := log.DefaultConfig()
	lc.SegmentBytes = cfg.SegmentBytes
	lc.FlushMessages, lc.FlushInterval = cfg.FlushIntervalMessages, cfg.flushInterval()
	lc.WriterExpiration = cfg.WriterIDExpirationTime
	s.kvCache = pebble.NewCache(kvCacheBytes)
	coordCalls := newISRChanger(s)
	s.coordCalls = coordCalls
	var tier replica.TierConfig
	var snap replica.SnapshotConfig
	if cfg.RemoteDataDir != "" && (cfg.RemoteLogTaskInterval > 0 || cfg.KvSnapshotInterval > 0) {
		opts := cfg.RemoteOptions()
		// A segment (at most 2 GiB, log.segment.file-size) goes up in one
		// PutObject streamed from its file: multipart costs a server-side
		// copy of every part on versitygw (tablet/replica/DESIGN.md, "Log tiering").
		opts.MultipartThreshold = maxSinglePut
		st, err := remote.Open(ctx, cfg.RemoteURL(), opts)
		if err != nil {
			return fmt.Errorf("remote.data.dir: %w", err)
		}
		s.remote = st
		if cfg.RemoteLogTaskInterval > 0 {
			tier = replica.TierConfig{Store: st, Interval: cfg.RemoteLogTaskInterval, Committer: coordCalls,
				CacheDir: filepath.Join(cfg.DataDir, "remote-log-cache"), CacheBytes: cfg.RemoteLogCacheSize}
		}
		if cfg.KvSnapshotInterval > 0 {
			snap = replica.SnapshotConfig{Store: st, Interval: cfg.KvSnapshotInterval, NumRetained: cfg.KvSnapshotNumRetained, Committer: coordCalls}
		}
		interval := cfg.RemoteLogTaskInterval
		if interval <= 0 || (cfg.KvSnapshotInterval > 0 && cfg.KvSnapshotInterval < interval) {
			interval = cfg.KvSnapshotInterval
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.cleanDroppedRemote(runCtx, interval)
		}()
	}
	s.replicas = replica.NewManager(replica.Config{
		NodeID:                   cfg.NodeID,
		Dir:                      filepath.Join(cfg.DataDir, "tablets"),
		FS:                       cfg.TabletFS,
		Log:                      lc,
		RetentionInterval:        5 * time.Minute,
		CheckpointInterval:       5 * time.Second,
		SegmentVerifyRate:        cfg.SegmentVerifyRate,
		WriterExpirationInterval: cfg.WriterIDExpirationCheckInterval,
		MaxLagTime:               cfg.ReplicaMaxLagTime,
		MinInSyncReplicas:        cfg.MinInSyncReplicas,
		Incarnation:              s.incarnation,
		Incarnations:             s.incarnationOf,
		ISR:                      coordCalls,
		ReadBarrier:              s.meta.ReadIndex,
		Tier:                     tier,
		Snapshot:                 snap,
		KVCache:                  s.kvCache,
		Fetch: replica.FetchConfig{
			Peer:              newReplicaPeers(s),
			MaxBytes:          int(cfg.ReplicaFetchMaxBytes),
			MaxBytesForBucket: int(cfg.ReplicaFetchMaxBytesForBucket),
			MaxWait:           cfg.ReplicaFetchWaitMaxTime,
			Backoff:           cfg.ReplicaFetchBackoff,
		},
		Logger: s.lg,
	}, s.meta)

	s.http = &http.Server{
		Handler:           limitRequests(s.handler(), cfg.MaxRequestBytes, cfg.ReadTimeout),
		ReadHeaderTimeout: cfg.ReadTimeout,
		IdleTimeout:       cfg.IdleTimeout,
	}
	s.http.Protocols = new(http.Protocols)
	s.http.Protocols.SetHTTP1(true)
	s.http.Protocols.SetUnencryptedHTTP2(true)
	s.http.HTTP2 = HTTP2Config()
	s.http.HTTP2.MaxConcurrentStreams = cfg.MaxConcurrentStreams
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(s.apiLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.lg.Error("api server stopped", "err", err)
		}
	}()
	s.lg.Info("serving api", "addr", s.apiLn.Addr().String(), "advertise", s.apiAddr)
	if cfg.ZooKeeperListen != "" {
		zc := zkwire.DefaultConfig()
		zc.Listen = cfg.ZooKeeperListen
		zc.MaxPacketSize = cfg.ZooKeeperMaxPacket
		zc.MaxClientConnections = cfg.ZooKeeperMaxClientCnxns
		zc.MaxConnections = cfg.ZooKeeperMaxCnxns
		zc.Logger = s.lg
		if s.zk, err = zkwire.Listen(s.meta, zc); err != nil {
			return fmt.Errorf("zookeeper.listen (--zookeeper-listen): %w", err)
		}
		s.lg.Info("serving the ZooKeeper protocol", "addr", cfg.ZooKeeperListen)
	}
	if cfg.FlussListen != "" {
		ln, err := net.Listen("tcp", cfg.FlussListen)
		if err != nil {
			return fmt.Errorf("fluss.listen (--fluss-listen): %w", err)
		}
		lln := netlimit.Wrap(ln, connLimits(cfg), s.lg.With("listener", "fluss"))
		s.flussAddr = advertised(ln.Addr().String(), cfg.FlussAdvertise)
		s.flussOpen = make(chan struct{})
		if s.fluss, err = listener.Start(lln, listener.Config{
			MaxRequestBytes: cfg.MaxRequestBytes, IdleTimeout: cfg.IdleTimeout, Logger: s.lg,
			Ready: s.ready.Load, Open: s.flussOpen, Catalog: flussCatalog{s: s, admin: s.adminH}, Log: flussLog{h: s.tabletH},
			KV:               flussKV{h: s.tabletH},
			Small:            flussSmall{h: s.tabletH, cat: flussCatalog{s: s, admin: s.adminH}},
			Lake:             flussLake{s: s, cat: flussCatalog{s: s, admin: s.adminH}},
			LakeTableOptions: s.lakeTableOptions(),
		}); err != nil {
			ln.Close()
			return fmt.Errorf("fluss.listen (--fluss-listen): %w", err)
		}
		s.lg.Info("Fluss protocol port bound; it accepts connections once the node is ready", "addr", ln.Addr().String(), "advertise", s.flussAddr)
	}

	if err := s.register(ctx); err != nil {
		return err
	}
	// Replicas follow the metadata once this node has caught up with it. A
	// leadership change under the Sync is retried, as registration is.
	if err := retryMeta(ctx, s.lg, "sync metadata", func() error { return s.meta.Sync(ctx) }); err != nil {
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.replicas.Run(runCtx); err != nil {
			s.lg.Error("replica manager stopped", "err", err)
		}
	}()
	hbCtx, hbStop := context.WithCancel(runCtx)
	s.heartbeatStop, s.heartbeatDone = hbStop, make(chan struct{})
	go func() {
		defer close(s.heartbeatDone)
		s.heartbeat(hbCtx)
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.scanners.run(runCtx)
	}()
	s.ready.Store(true)
	if s.fluss != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.openFluss(runCtx)
		}()
	}
	s.lg.Info("node ready", "cluster_id", s.ClusterID(), "data_dir", cfg.DataDir)
	return nil
}

// register joins or bootstraps the metadata group, waits for its leader and
// the coordinator, checks that the cluster is the one the data directory
// belongs to (a fresh node adopts it), and registers this node as a live
// tablet server under a new metadata session.
func (s *Server) register(ctx context.Context) error {
	if err := s.joinMetadataGroup(ctx); err != nil {
		return err
	}
	if err := s.meta.WaitLeader(ctx); err != nil {
		return fmt.Errorf("wait for a metadata leader: %w", err)
	}
	return retryMeta(ctx, s.lg, "register node", func() error { return s.tryRegister(ctx) })
}

// retryMeta calls f every 100 ms until it succeeds, fails for good (another
// cluster's data directory, or the metadata node closed), or ctx ends; the
// error then names what and the last failure. Anything else f meets while
// the metadata group elects or moves its leader is worth another try.
func retryMeta(ctx context.Context, lg *slog.Logger, what string, f func() error) error {
	for {
		err := f()
		if err == nil || errors.Is(err, ErrIdentityMismatch) || errors.Is(err, catalog.ErrFeatureLevel) || errors.Is(err, raftmeta.ErrStopped) {
			return err
		}
		lg.Debug(what+": not possible yet", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) tryRegister(ctx context.Context) error {
	clusterID, err := s.cat.ClusterID()
	if err != nil {
		return err
	}
	if clusterID == "" {
		return errors.New("the coordinator has not initialized the cluster yet")
	}
	if s.id.fresh {
		if err := s.adoptClusterID(clusterID); err != nil {
			return err
		}
	}
	if clusterID != s.id.ClusterID {
		return fmt.Errorf("%w: %s belongs to cluster %s, but the metadata group is cluster %s",
			ErrIdentityMismatch, s.cfg.DataDir, s.id.ClusterID, clusterID)
	}
	// A build older than the cluster's feature level would not understand
	// what the others send: refuse to join (a downgrade after the level
	// moved; docs/upgrading.md).
	level, _, err := s.cat.FeatureLevel()
	if err != nil {
		return err
	}
	if err := catalog.CheckFeatureLevel(level); err != nil {
		return err
	}
	// A registration left by an earlier run of this node (killed before it
	// could close its session) is replaced: close that session first.
	if old, err := s.cat.TabletServerOwner(s.cfg.NodeID); err != nil {
		return err
	} else if old != 0 && old != s.session.Load() {
		if err := s.meta.CloseSession(ctx, old); err != nil && !errors.Is(err, raftmeta.ErrSessionExpired) {
			return fmt.Errorf("close stale session %#x: %w", old, err)
		}
	}
	if s.session.Load() == 0 && !s.started.Load() {
		if err := s.nodeStarting(ctx); err != nil {
			return err
		}
		s.started.Store(true)
	}
	if _, live := s.meta.Session(s.session.Load()); !live {
		sess, err := s.meta.CreateSession(ctx, s.cfg.SessionTimeout)
		if err != nil {
			return err
		}
		s.session.Store(sess.ID)
	}
	_, err = s.meta.Do(ctx, s.session.Load(), catalog.RegisterTabletServerOp(s.cfg.NodeID, catalog.TabletServerRegistration{
		Listeners:         s.listeners(),
		RegisterTimestamp: time.Now().UnixMilli(),
		Rack:              s.cfg.Rack,
		FeatureLevel:      catalog.SupportedFeatureLevel,
		Incarnation:       s.incarnation,
	}))
	return err
}

// registerRetry is how long the heartbeat loop waits before it tries a
// failed registration again.
const registerRetry = 500 * time.Millisecond

// heartbeat keeps the node's metadata session alive and its registration in
// place: when the registration disappears (its session expired or was
// closed, or the znode was deleted), a watch wakes the loop, which
// registers again, under a new session if the old one is gone. A tick
// checks too, for what fires no watch (a snapshot installed over the tree).
func (s *Server) heartbeat(ctx context.Context) {
	t := time.NewTicker(s.cfg.SessionTimeout / 3)
	defer t.Stop()
	w := s.meta.NewWatcher()
	defer w.Close()
	events := w.Events()
	if err := s.meta.AddWatch(catalog.TabletServerPath(s.cfg.NodeID), w, raftmeta.WatchPersistent); err != nil {
		s.lg.Warn("cannot watch the node's registration; checking it every tick only", "err", err)
	}
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.meta.Touch(s.session.Load())
		case _, ok := <-events:
			if !ok {
				events = nil // the metadata replica is closing
			}
		case <-retry:
		}
		retry = nil
		if owner, err := s.cat.TabletServerOwner(s.cfg.NodeID); err == nil && owner != 0 && owner == s.session.Load() {
			continue
		}
		s.lg.Warn("node registration gone; registering again", "session", fmt.Sprintf("%#x", s.session.Load()))
		rctx, cancel := context.WithTimeout(ctx, s.cfg.SessionTimeout)
		err := s.tryRegister(rctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.lg.Warn("registration failed; retrying", "err", err)
				retry = time.After(registerRetry)
			}
			continue
		}
		s.lg.Info("node registered again", "session", fmt.Sprintf("%#x", s.session.Load()))
	}
}

// apiAddrOf returns the API address of a node (by its metadata id), from
// the gossip (so a node not registered yet can forward its registration),
// else from its registration, or "" when unknown.
func (s *Server) apiAddrOf(nodeID string) string {
	if a := s.gossipAPIAddr(nodeID); a != "" {
		return a
	}
	if s.cat == nil {
		return ""
	}
	servers, err := s.cat.TabletServers()
	if err != nil {
		return ""
	}
	for _, ts := range servers {
		if strconv.Itoa(int(ts.ID)) == nodeID {
			return apiAddress(ts.Registration)
		}
	}
	return ""
}

// IsCoordinator reports whether this node leads the metadata group and has
// taken office as the coordinator.
func (s *Server) IsCoordinator() bool {
	return s.meta != nil && s.meta.IsLeader() && s.coord.Epoch() > 0
}

// MetadataLeader returns the node id of the metadata group's leader as this
// node knows it, 0 when it knows none.
func (s *Server) MetadataLeader() int32 {
	if s.meta == nil {
		return 0
	}
	id, _ := s.meta.Leader()
	n, _ := strconv.ParseInt(id, 10, 32)
	return int32(n)
}

// peerDialer is how this node connects to other nodes: from node.source-ip
// when set.
func (s *Server) peerDialer() *net.Dialer {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if s.cfg.SourceIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(s.cfg.SourceIP)}
	}
	return d
}

// Metadata returns the node's metadata replica, for harnesses and tests
// that look at the cluster from inside.
func (s *Server) Metadata() *raftmeta.Node { return s.meta }

// Replicas returns the node's bucket replicas, for harnesses and tests
// that look at replication from inside.
func (s *Server) Replicas() *replica.Manager { return s.replicas }

// Addr returns the advertised API address.
func (s *Server) Addr() string { return s.apiAddr }

// FlussAddr is the address the Fluss listener is bound to ("" without
// fluss.listen).
func (s *Server) FlussAddr() string {
	if s.fluss == nil {
		return ""
	}
	return s.fluss.Addr().String()
}

// ClusterID returns the id of the cluster the node belongs to.
func (s *Server) ClusterID() string { return s.id.ClusterID }

// Stop takes the node down cleanly: it moves leadership of its buckets to
// other nodes (controlledShutdown), stops taking requests, lets those in
// flight finish, and closes the replicas and the metadata replica, all
// bounded by shutdown.timeout and ctx. Later calls return the first call's
// result.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

func (s *Server) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
	defer cancel()
	// The controlled shutdown may wait (for leaders to move) until its own
	// deadline; the stages after it need a little of the budget to close
	// the replicas and the metadata replica within shutdown.timeout.
	s.stageStarted("controlled shutdown")
	cctx, ccancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout-closeReserve(s.cfg.ShutdownTimeout))
	s.controlledShutdown(cctx)
	ccancel()
	s.ready.Store(false)
	close(s.stopping)
	var errs []error
	s.stageStarted("stop the API (requests in flight finish)")
	if s.http != nil {
		if err := s.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop api: %w", err))
		}
	} else if s.apiLn != nil {
		s.apiLn.Close()
	}
	if s.zk != nil {
		s.stageStarted("stop the ZooKeeper shim")
		if err := s.zk.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stop zookeeper shim: %w", err))
		}
	}
	if s.fluss != nil {
		s.stageStarted("stop the Fluss listener")
		if err := s.fluss.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("stop fluss listener: %w", err))
		}
	}
	s.stageStarted("close the replicas and background loops")
	s.scanners.closeAll()
	s.cancel()
	s.wg.Wait()
	if s.kvCache != nil {
		s.kvCache.Unref() // the KV tablets took their own references
	}
	if s.remote != nil {
		s.stageStarted("close remote.data.dir")
		if err := s.remote.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close remote.data.dir: %w", err))
		}
	}
	if m := s.members.Load(); m != nil {
		s.stageStarted("leave the gossip")
		if err := m.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stop gossip: %w", err))
		}
	}
	if s.meta != nil {
		s.stageStarted("close the metadata replica (raft shutdown)")
		if err := s.meta.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close metadata replica: %w", err))
		}
	}
	s.stageStarted("")
	s.lg.Info("node stopped")
	return errors.Join(errs...)
}

// closeReserve is the part of shutdown.timeout kept from the controlled
// shutdown for the stages after it: a fifth, at most 5 s.
func closeReserve(timeout time.Duration) time.Duration {
	return min(timeout/5, 5*time.Second)
}

// stageStarted records and logs the stage Stop now waits for.
func (s *Server) stageStarted(stage string) {
	s.stopStage.Store(&stage)
	if stage != "" {
		s.lg.Info("stopping: " + stage)
	}
}

// StopStage names what a running Stop waits for ("" when none runs or it
// has finished).
func (s *Server) StopStage() string {
	if p := s.stopStage.Load(); p != nil {
		return *p
	}
	return ""
}

// HTTP2Config is the HTTP/2 tuning of the API for bulk data: large frames
// and flow-control windows, so a batch of megabytes is not held up by
// window updates. Clients use the same.
func HTTP2Config() *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxReadFrameSize:              1 << 20,
		MaxReceiveBufferPerConnection: 4<<20 - 1,
		MaxReceiveBufferPerStream:     4<<20 - 1,
	}
}

// Run starts a node and serves until ctx is done, then stops it.
func Run(ctx context.Context, cfg Config, lg *slog.Logger) error {
	s, err := Start(ctx, cfg, lg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	lg.Info("stopping")
	return stopWithin(s, cfg.ShutdownTimeout, lg)
}

// stopper is what stopWithin stops: a *Server.
type stopper interface {
	Stop(ctx context.Context) error
	StopStage() string
}

// allStacks is every goroutine's stack, as a SIGQUIT prints them.
func allStacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 64<<20 {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// stopWithin stops s and returns within timeout (shutdown.timeout) even if
// a stage of the stop blocks: it then logs the stage and every goroutine's
// stack, and returns an error, so the process exits as after a crash
// (every acknowledged write is on disk already; the data directory
// recovers on restart) rather than outlive the supervisor's grace period.
func stopWithin(s stopper, timeout time.Duration, lg *slog.Logger) error {
	done := make(chan error, 1)
	go func() { done <- s.Stop(context.Background()) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	stage := s.StopStage()
	lg.Error("stop overran shutdown.timeout: exiting without finishing it", "timeout", timeout, "stage", stage, "goroutines", string(allStacks()))
	return fmt.Errorf("stop did not finish within shutdown.timeout (%s), still at %q: exiting without it", timeout, stage)
}

// connectOptions are the options of every Connect handler of the API.
func (s *Server) connectOptions() []connect.HandlerOption {
	return []connect.HandlerOption{
		// The error interceptor is outside the readiness check so it maps
		// ErrNotReady too; the metrics one outermost, to count the code the
		// client gets.
		connect.WithInterceptors(s.metrics.rpc.Interceptor(), rpc.ErrorInterceptor(), rpc.ReadyInterceptor(s.ready.Load)),
		// A message larger than this is refused before it is read (a body
		// of declared length is refused earlier, by limitRequests).
		connect.WithReadMaxBytes(int(s.cfg.MaxRequestBytes)),
		// No gzip: data travels as Arrow batches already compressed per
		// buffer (LZ4 or ZSTD); compressing them again only burns CPU.
		connect.WithCompression("gzip", nil, nil),
		// Produced record batches are decoded into pooled buffers.
		connect.WithCodec(rpc.Codec{}),
	}
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	opts := s.connectOptions()
	proxy := newCoordinatorProxy(s)
	s.adminH = &adminHandler{s: s, proxy: proxy}
	mux.Handle(stromv1connect.NewAdminServiceHandler(s.adminH, opts...))
	th := &tabletHandler{s: s, proxy: proxy}
	s.tabletH = th
	tabletPath, tablet := stromv1connect.NewTabletServiceHandler(th, opts...)
	mux.Handle(tabletPath, tablet)
	mux.Handle(produceLogPath, newProduceFastPath(th, s.ready.Load, tablet))
	// Node-to-node replication, signed with the cluster secret.
	rh := &replicaHandler{s: s}
	replicaPath, replicaService := stromv1connect.NewReplicaServiceHandler(rh, opts...)
	mux.Handle(replicaPath, s.signedOnly(replicaService))
	mux.Handle(fetchReplicaPath, s.signedOnly(newFetchFastPath(rh, s.ready.Load, replicaService)))
	coordPath, coordService := stromv1connect.NewCoordinatorInternalServiceHandler(&coordinatorInternalHandler{s: s}, opts...)
	mux.Handle(coordPath, s.signedOnly(coordService))

	services := []string{stromv1connect.AdminServiceName, stromv1connect.TabletServiceName}
	reflector := grpcreflect.NewStaticReflector(services...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker(services...)))

	if s.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle(raftmeta.ForwardPath, s.meta.ForwardHandler())
	// The web console (package ui): its assets, and its reads of other
	// nodes' buckets forwarded to them.
	mux.Handle(ui.Prefix, ui.Handler(ui.Config{
		NodeAddress: func(id int32) string { return s.apiAddrOf(strconv.Itoa(int(id))) },
		DialContext: s.peerDialer().DialContext,
	}))
	mux.Handle("GET /ui", http.RedirectHandler(ui.Prefix, http.StatusFound))
	mux.Handle("GET /metrics", s.metricsHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "not ready: starting or stopping", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// connLimits are the connection caps of the API port, which the Fluss port
// (fluss.listen) has too, counted separately.
func connLimits(cfg Config) netlimit.Limits {
	return netlimit.Limits{
		Total: cfg.MaxConnections, PerIP: cfg.MaxConnectionsPerIP,
		TotalKey: "max.connections", PerIPKey: "max.connections.per.ip",
	}
}

// featureLevel is the cluster's active feature level as the local replica
// holds it (FeatureLevelBase before the metadata replica is open or when it
// cannot be read). Anything that would send a Raft command or node-to-node
// message of a later level checks it first (raftmeta.Config.FeatureLevel
// does for Raft commands).
func (s *Server) featureLevel() int {
	if s.cat == nil {
		return catalog.FeatureLevelBase
	}
	level, _, err := s.cat.FeatureLevel()
	if err != nil {
		return catalog.FeatureLevelBase
	}
	return level
}
