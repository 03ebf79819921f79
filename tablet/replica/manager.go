package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/tablet/kv"
	"strom/tablet/log"
)

// Config configures a Manager.
type Config struct {
	// NodeID is this node's id: it hosts the buckets whose assignment names it.
	NodeID int32
	// Dir holds the replicas, one directory per bucket: <Dir>/<tableId>/<bucket>.
	Dir string
	// FS is the file system of Dir, every replica's log and KV tablet
	// included (their Log.FS and FS are set to it); nil means vfs.Default.
	FS vfs.FS
	// Log is the template for every replica's log tablet (Dir and FS are
	// filled in).
	Log log.Config
	// RetentionInterval is how often expired segments are deleted
	// (log.retention.check-interval).
	RetentionInterval time.Duration
	// CheckpointInterval is how often high watermarks are written to disk.
	CheckpointInterval time.Duration
	// WriterExpirationInterval is how often idempotent writers idle for
	// Log.WriterExpiration are forgotten
	// (server.writer-id.expiration-check-interval).
	WriterExpirationInterval time.Duration
	// SegmentVerifyRate bounds, in bytes per second, the background check of
	// the hosted replicas' sealed log segments (log.segment.verify-rate; see
	// verify.go); 0 turns it off.
	SegmentVerifyRate int64
	// KVCache is the Pebble block cache shared by the node's KV tablets
	// (nil: each gets a small private one).
	KVCache *pebble.Cache
	// ISR sends the ISR changes of the buckets this node leads to the
	// coordinator; nil: the node asks for none.
	ISR ISRChanger
	// MaxLagTime is how long a follower may go without catching up with
	// its leader's log end before it leaves the ISR
	// (log.replica.max-lag-time); the leaders check every half of it.
	MaxLagTime time.Duration
	// MinInSyncReplicas is the fewest in-sync replicas an acks=-1 write
	// needs (log.replica.min-in-sync-replicas-number); 0 counts as 1.
	MinInSyncReplicas int
	// Incarnation identifies this run of the node (a value chosen at its
	// start, in its registration): its fetches carry it, so a leader tells
	// them from fetches an earlier run sent (Kafka's broker epoch,
	// KIP-903). 0: none.
	Incarnation int64
	// Incarnations, on a leader, is a node's incarnation as this node's
	// metadata shows its registration (0: unknown, no registration or one
	// without). A follower's fetch counts (its log end recorded, it may
	// join the ISR or move the high watermark) only when it carries that
	// incarnation. nil: every fetch counts. It must not call into replicas.
	Incarnations func(node int32) int64
	// ReadBarrier is a linearizable metadata read barrier
	// (raftmeta.Node.ReadIndex): once it returns nil, the local metadata
	// holds every write committed before it began. An acks=-1 write is
	// acknowledged only after one, begun once the high watermark passed
	// it, shows this node still leading with every replica of the ISR
	// holding the write (Replica.confirmCommitted). nil: acknowledged on
	// the high watermark alone.
	ReadBarrier func(ctx context.Context) error
	// Fetch configures the fetching of the buckets this node follows.
	Fetch FetchConfig
	// Tier configures log tiering to remote storage (tier.go); a nil
	// Store turns it off.
	Tier TierConfig
	// Snapshot configures KV snapshots to remote storage (snapshot.go); a
	// nil Store turns them off.
	Snapshot SnapshotConfig
	// Logger receives the manager's logs.
	Logger *slog.Logger
}

// Meta is what the manager needs from the metadata node: reads and watches.
type Meta interface {
	catalog.Tree
	NewWatcher() *raftmeta.Watcher
	AddWatch(path string, w *raftmeta.Watcher, mode raftmeta.WatchMode) error
}

// Manager opens, closes and hands out the replicas this node hosts, as the
// metadata says. Its methods are safe for concurrent use.
type Manager struct {
	cfg  Config
	meta Meta
	cat  *catalog.Catalog
	lg   *slog.Logger
	// changed is notified whenever a replica appends, moves its high
	// watermark or changes role: FetchAsLeader's long polls wait on it.
	changed broadcast

	// isrWake has the ISR check run now (a follower may rejoin).
	isrWake chan struct{}
	// segCache holds downloaded remote segments (remoteread.go).
	segCache segmentCache
	// reconcileWake has Run reconcile now (a background restore ended).
	reconcileWake chan struct{}
	// restores counts the background restores running (restore.go).
	restores sync.WaitGroup

	mu struct {
		sync.RWMutex
		replicas map[TableBucket]*Replica
		tables   map[int64]catalog.Table // the tables of hosted replicas
		// restoring holds the buckets whose KV a background restore
		// rebuilds: not hosted (ErrRestoring) until it ends.
		restoring map[TableBucket]bool
		// runCtx is Run's context, which background restores run under.
		runCtx context.Context
	}
}

// NewManager returns a manager; Run makes it follow the metadata.
func NewManager(cfg Config, meta Meta) *Manager {
	m := &Manager{cfg: cfg, meta: meta, cat: catalog.New(meta), lg: cfg.Logger.With("component", "replica"), isrWake: make(chan struct{}, 1), reconcileWake: make(chan struct{}, 1)}
	m.mu.replicas = map[TableBucket]*Replica{}
	m.mu.tables = map[int64]catalog.Table{}
	m.mu.restoring = map[TableBucket]bool{}
	m.mu.runCtx = context.Background()
	m.segCache = segmentCache{dir: cfg.Tier.CacheDir, max: cfg.Tier.CacheBytes, files: map[string]*cachedSegment{}}
	return m
}

// Run reconciles the hosted replicas with the metadata now and whenever the
// assignments change, and runs retention, checkpoints and writer
// expiration, until ctx is done or the metadata replica closes (then it
// returns an error). It then closes every replica.
func (m *Manager) Run(ctx context.Context) error {
	w := m.meta.NewWatcher()
	defer w.Close()
	if err := m.meta.AddWatch(catalog.AssignmentsRoot(), w, raftmeta.WatchPersistentRecursive); err != nil {
		return fmt.Errorf("watch assignments: %w", err)
	}
	defer m.closeAll()
	defer m.restores.Wait() // before closeAll: a restore that ends publishes its replica
	m.mu.Lock()
	m.mu.runCtx = ctx
	m.mu.Unlock()
	var bg sync.WaitGroup
	defer bg.Wait() // before closeAll
	// The background tasks end when Run does, whichever way it returns.
	ctx, stopBG := context.WithCancel(ctx)
	defer stopBG() // before bg.Wait
	if m.cfg.SegmentVerifyRate > 0 {
		bg.Go(func() { m.verifySegments(ctx) })
	}
	bg.Go(func() { m.repairKVs(ctx) })
	if m.cfg.ISR != nil && m.cfg.MaxLagTime > 0 {
		bg.Go(func() { m.checkISRs(ctx) })
	}
	if m.cfg.Tier.Store != nil {
		// Downloads of an earlier run are not tracked: start empty.
		if err := os.RemoveAll(m.cfg.Tier.CacheDir); err != nil {
			return fmt.Errorf("empty the remote segment cache: %w", err)
		}
		if err := os.MkdirAll(m.cfg.Tier.CacheDir, 0o755); err != nil {
			return fmt.Errorf("remote segment cache: %w", err)
		}
		bg.Go(func() { every(ctx, m.cfg.Tier.Interval, func() { m.TierOnce(ctx, time.Now()) }) })
	}
	if m.cfg.Snapshot.Store != nil {
		bg.Go(func() { every(ctx, m.cfg.Snapshot.Interval, func() { m.SnapshotOnce(ctx, time.Now()) }) })
	}
	fetchers := map[int32]*fetcher{}
	defer func() {
		for _, f := range fetchers {
			f.stop()
		}
	}()
	reconcile := func() {
		if err := m.Reconcile(); err != nil {
			m.lg.Error("reconcile replicas", "err", err)
		}
		m.syncFetchers(ctx, fetchers)
	}
	reconcile()
	retention := time.NewTicker(m.cfg.RetentionInterval)
	defer retention.Stop()
	checkpoint := time.NewTicker(m.cfg.CheckpointInterval)
	defer checkpoint.Stop()
	writers := time.NewTicker(m.cfg.WriterExpirationInterval)
	defer writers.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events():
			if !ok {
				return errors.New("replica: the metadata replica closed; no longer following it")
			}
			drain(w.Events())
			reconcile()
		case <-m.reconcileWake:
			reconcile()
		case <-retention.C:
			m.enforceRetention(time.Now())
		case <-checkpoint.C:
			m.checkpoint()
		case <-writers.C:
			m.removeExpiredWriters()
		}
	}
}

// drain takes every event already queued: one reconcile covers them all.
func drain(ch <-chan raftmeta.Event) {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// Reconcile opens the replicas the metadata assigns to this node, applies
// their leaders, and closes and deletes the ones no longer assigned
// (dropped tables).
func (m *Manager) Reconcile() error {
	tables, err := m.cat.AllTables()
	if err != nil {
		return err
	}
	want := map[TableBucket]catalog.LeaderAndISR{}
	hosted := map[int64]catalog.Table{}
	tableOf := map[TableBucket]catalog.Table{}
	for _, t := range tables {
		for b, replicas := range t.Assignment.Buckets {
			if slices.Contains(replicas, m.cfg.NodeID) {
				tb := TableBucket{t.Registration.TableID, b}
				want[tb] = t.LeaderISR[b]
				tableOf[tb] = t
				hosted[t.Registration.TableID] = t
			}
		}
	}
	// A replica is published as it opens, so its table is published
	// first: whoever finds a replica (the snapshot, tiering and repair
	// rounds) finds its table too. The dropped tables' replicas keep
	// theirs until they are removed below.
	m.mu.Lock()
	both := maps.Clone(m.mu.tables)
	maps.Copy(both, hosted)
	m.mu.tables = both
	m.mu.Unlock()
	var errs []error
	for tb, lisr := range want {
		r, err := m.open(tb, tableOf[tb])
		if errors.Is(err, ErrRestoring) {
			continue // the restore reconciles again when it ends
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.setLeaderAndISR(lisr.Leader, lisr.LeaderEpoch, lisr.ISR); err != nil {
			errs = append(errs, err)
		}
		r.setBucketEpoch(lisr.BucketEpoch)
	}
	m.mu.Lock()
	m.mu.tables = hosted
	var gone []*Replica
	for tb, r := range m.mu.replicas {
		if _, ok := want[tb]; !ok {
			gone = append(gone, r)
			delete(m.mu.replicas, tb)
		}
	}
	m.mu.Unlock()
	for _, r := range gone {
		if err := r.close(); err != nil {
			errs = append(errs, err)
		}
		if err := m.remove(r.tb); err != nil {
			errs = append(errs, err)
		}
		m.lg.Info("deleted replica of dropped table", "bucket", r.tb.String())
	}
	errs = append(errs, m.removeStray(want))
	return errors.Join(errs...)
}

// removeStray deletes replica directories of tables that no longer exist
// (dropped while this node was down).
func (m *Manager) removeStray(want map[TableBucket]catalog.LeaderAndISR) error {
	fs := m.fs()
	tables, err := fs.List(m.cfg.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, td := range tables {
		id, err := strconv.ParseInt(td, 10, 64)
		if err != nil {
			continue
		}
		if st, err := fs.Stat(filepath.Join(m.cfg.Dir, td)); err != nil || !st.IsDir() {
			continue
		}
		buckets, err := fs.List(filepath.Join(m.cfg.Dir, td))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, bd := range buckets {
			b, err := strconv.ParseInt(bd, 10, 32)
			if err != nil {
				continue
			}
			tb := TableBucket{id, int32(b)}
			m.mu.RLock()
			restoring := m.mu.restoring[tb]
			m.mu.RUnlock()
			if _, ok := want[tb]; !ok && !restoring {
				m.lg.Info("deleting stray replica", "bucket", tb.String())
				errs = append(errs, m.remove(tb))
			}
		}
	}
	return errors.Join(errs...)
}

// remove deletes a replica's directory, and its table's directory once it
// holds no other replica.
func (m *Manager) remove(tb TableBucket) error {
	if err := m.fs().RemoveAll(m.dir(tb)); err != nil {
		return err
	}
	if err := m.fs().Remove(filepath.Dir(m.dir(tb))); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return err
	}
	return nil
}

func (m *Manager) fs() vfs.FS {
	if m.cfg.FS != nil {
		return m.cfg.FS
	}
	return vfs.Default
}

func (m *Manager) dir(tb TableBucket) string {
	return filepath.Join(m.cfg.Dir, strconv.FormatInt(tb.TableID, 10), strconv.Itoa(int(tb.Bucket)))
}

// open returns the replica for tb, opening its log tablet (and, for a
// primary-key table, its KV tablet) if needed. A KV that must be restored
// from its latest snapshot (kv.ErrAheadOfLog) is restored in the
// background (restoreInBackground): open returns ErrRestoring meanwhile.
func (m *Manager) open(tb TableBucket, t catalog.Table) (*Replica, error) {
	m.mu.RLock()
	r, ok := m.mu.replicas[tb]
	restoring := m.mu.restoring[tb]
	m.mu.RUnlock()
	if ok {
		return r, nil
	}
	if restoring {
		return nil, fmt.Errorf("bucket %s: %w", tb, ErrRestoring)
	}
	lc := m.cfg.Log
	lc.Dir, lc.FS = filepath.Join(m.dir(tb), "log"), m.fs()
	lc.Logger = m.lg.With("bucket", tb.String())
	// The log flushes only after appends, which come once r is published.
	lc.OnFlush = func() { r.logFlushed() }
	lt, err := log.Open(lc)
	if err != nil {
		return nil, fmt.Errorf("open replica %s: %w", tb, err)
	}
	var kt *kv.Tablet
	if len(t.Schema.PrimaryKey) > 0 {
		aggs, delims := kv.AggregationsOf(t.Descriptor())
		kc := kv.Config{
			Dir: filepath.Join(m.dir(tb), "kv"), FS: m.fs(), Log: lt, Table: t.Descriptor(), SchemaID: int16(t.SchemaID),
			Aggregations: aggs, ListaggDelimiters: delims,
			Cache: m.cfg.KVCache, Logger: lc.Logger,
		}
		kt, err = kv.Open(kc)
		if errors.Is(err, kv.ErrAheadOfLog) {
			if _, serr := m.latestSnapshot(tb); serr != nil {
				err = errors.Join(err, serr)
			} else {
				cause := err
				m.restoreInBackground(tb, func(ctx context.Context) error {
					kt, err := m.openRestored(ctx, tb, t, lt, kc, cause)
					if err != nil {
						lt.Close()
						return err
					}
					m.mu.Lock()
					r = m.newHosted(tb, lt, kt, lc.Logger)
					m.mu.replicas[tb] = r
					m.mu.Unlock()
					return nil
				})
				return nil, fmt.Errorf("bucket %s: %w", tb, ErrRestoring)
			}
		}
		if err != nil {
			lt.Close()
			return nil, fmt.Errorf("open KV of replica %s: %w", tb, err)
		}
	}
	m.mu.Lock()
	r = m.newHosted(tb, lt, kt, lc.Logger)
	m.mu.replicas[tb] = r
	m.mu.Unlock()
	return r, nil
}

// newHosted makes the replica of opened tablets.
func (m *Manager) newHosted(tb TableBucket, lt *log.Tablet, kt *kv.Tablet, lg *slog.Logger) *Replica {
	r := newReplica(tb, m.cfg.NodeID, lt, kt, lg, &m.changed)
	r.minISR, r.isrWake, r.incarnations = m.cfg.MinInSyncReplicas, m.isrWake, m.cfg.Incarnations
	if m.cfg.ReadBarrier != nil {
		r.confirm = m.leaderISRConfirmed
	}
	if m.cfg.Tier.Store != nil {
		r.remote = m
	}
	if m.cfg.Snapshot.Store != nil {
		r.snapshots = m
	}
	return r
}

// leaderISRConfirmed is tb's leader_isr as the metadata quorum holds it:
// read from the local metadata after Config.ReadBarrier, begun after the
// call, so that it holds every leader_isr committed before the call.
func (m *Manager) leaderISRConfirmed(ctx context.Context, tb TableBucket) (catalog.LeaderAndISR, error) {
	if err := m.cfg.ReadBarrier(ctx); err != nil {
		return catalog.LeaderAndISR{}, err
	}
	return m.cat.LeaderISR(tb.TableID, tb.Bucket)
}

// Replica returns the hosted replica of a bucket, or ErrUnknownBucket
// (ErrRestoring while its KV is restored from a snapshot).
func (m *Manager) Replica(tb TableBucket) (*Replica, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.mu.replicas[tb]
	if !ok && m.mu.restoring[tb] {
		return nil, fmt.Errorf("bucket %s: %w", tb, ErrRestoring)
	}
	if !ok {
		return nil, fmt.Errorf("bucket %s: %w", tb, ErrUnknownBucket)
	}
	return r, nil
}

// Replicas returns the replicas the node hosts now, in no order.
func (m *Manager) Replicas() []*Replica { return m.replicas() }

func (m *Manager) replicas() []*Replica {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Replica, 0, len(m.mu.replicas))
	for _, r := range m.mu.replicas {
		out = append(out, r)
	}
	return out
}

// enforceRetention deletes segments older than each table's table.log.ttl.
func (m *Manager) enforceRetention(now time.Time) {
	m.mu.RLock()
	tables := m.mu.tables
	m.mu.RUnlock()
	for _, r := range m.replicas() {
		t, ok := tables[r.tb.TableID]
		if !ok || r.kv != nil {
			// A primary-key table's changelog is its KV's write-ahead log:
			// until KV snapshots exist, it is kept whole.
			continue
		}
		v, ok := t.Descriptor().Option(record.OptLogTTL)
		if !ok {
			continue
		}
		ttl, err := record.ParseDuration(v)
		if err != nil || ttl <= 0 {
			continue
		}
		if _, err := r.log.DeleteExpiredSegments(now, ttl); err != nil {
			m.lg.Warn("retention", "bucket", r.tb.String(), "err", err)
		}
	}
}

func (m *Manager) checkpoint() {
	for _, r := range m.replicas() {
		if err := r.log.CheckpointHighWatermark(); err != nil {
			m.lg.Warn("checkpoint high watermark", "bucket", r.tb.String(), "err", err)
		}
	}
}

// removeExpiredWriters forgets, in every replica, the idempotent writers
// idle for longer than the log's WriterExpiration.
func (m *Manager) removeExpiredWriters() {
	for _, r := range m.replicas() {
		if n := r.log.RemoveExpiredWriters(); n > 0 {
			m.lg.Info("expired idle writers", "bucket", r.tb.String(), "writers", n)
		}
	}
}

func (m *Manager) closeAll() {
	m.mu.Lock()
	all := m.mu.replicas
	m.mu.replicas = map[TableBucket]*Replica{}
	m.mu.Unlock()
	for _, r := range all {
		if err := r.close(); err != nil {
			m.lg.Warn("close replica", "bucket", r.tb.String(), "err", err)
		}
	}
}
