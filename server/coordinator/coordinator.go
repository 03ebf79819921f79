// Package coordinator runs on the metadata (Raft) leader only. It takes
// office with a new coordinator epoch, then carries out every catalog change
// (databases, tables, bucket assignment) on one goroutine, each change a
// single multi that checks the epoch, so a deposed coordinator cannot write.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/record"
)

// Errors returned by the coordinator.
var (
	// ErrNotCoordinator: this node is not (or no longer) the coordinator.
	// Retriable: the caller should find the leader and ask again.
	ErrNotCoordinator = errors.New("coordinator: this node is not the coordinator")
	// ErrNotEnoughServers: fewer live tablet servers than a table's
	// replication factor.
	ErrNotEnoughServers = errors.New("coordinator: not enough live tablet servers")
)

// Meta is what the coordinator needs from the metadata node.
type Meta interface {
	WatchedTree
	IsLeader() bool
	Leader() (id, addr string)
	Leadership() <-chan bool
	Barrier(ctx context.Context) error
	Multi(ctx context.Context, session int64, ops ...raftmeta.Op) ([]raftmeta.OpResult, error)
	// Servers is the metadata group's configuration: the members whose
	// feature levels bound the cluster's (features.go).
	Servers() ([]raftmeta.Server, error)
}

// Config configures a Coordinator.
type Config struct {
	// NodeID is this node's id, written to /coordinators/active.
	NodeID int32
	// APIAddress is the address clients reach this node's API on.
	APIAddress string
	// ClusterID is recorded in the tree by the first coordinator.
	ClusterID string
	// DefaultBucketNumber is a table's bucket count when it names none
	// (default.bucket.number).
	DefaultBucketNumber int
	// DefaultReplicationFactor is a table's replication factor when it names
	// none (default.replication.factor).
	DefaultReplicationFactor int
	// MinInSyncReplicas is log.replica.min-in-sync-replicas-number: a
	// replica leaving an ISR left smaller joins the bucket's eligible
	// leader replicas (election.go). 0 counts as 1.
	MinInSyncReplicas int
	// Logger receives the coordinator's logs.
	Logger *slog.Logger
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// RemoteStorage says the cluster keeps objects in remote storage
	// (remote.data.dir): dropping a table then records a
	// catalog.RemoteDeletion for the remote cleaner (server's).
	RemoteStorage bool
}

// Coordinator owns catalog changes while this node leads the metadata group.
// Its methods are safe for concurrent use; they return ErrNotCoordinator on
// any other node.
type Coordinator struct {
	cfg  Config
	meta Meta
	cat  *catalog.Catalog
	lg   *slog.Logger

	mu struct {
		sync.Mutex
		term *term // nil when not in office
	}
}

// term is one tenure in office: the requests it serves and the epoch that
// fences its writes.
type term struct {
	epoch        int32
	epochVersion int32 // version of /coordinators/epoch this term's writes check
	requests     chan request
	done         chan struct{} // closed when the term ends
}

type request struct {
	fn    func(t *term) error
	reply chan error
}

// New returns a coordinator; Run puts it to work.
func New(cfg Config, meta Meta) *Coordinator {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Coordinator{
		cfg:  cfg,
		meta: meta,
		cat:  catalog.New(meta),
		lg:   cfg.Logger.With("component", "coordinator"),
	}
}

// Run follows this node's metadata leadership: it takes office when the node
// becomes leader and leaves it when the node loses leadership. It blocks
// until ctx is done.
func (c *Coordinator) Run(ctx context.Context) {
	var (
		cancel context.CancelFunc = func() {}
		ended  chan struct{}
	)
	stop := func() {
		cancel()
		if ended != nil {
			<-ended
			ended = nil
		}
	}
	start := func() {
		if ended != nil {
			return // already in (or taking) office
		}
		var lctx context.Context
		lctx, cancel = context.WithCancel(ctx)
		ended = make(chan struct{})
		go func(done chan struct{}) {
			defer close(done)
			c.lead(lctx)
		}(ended)
	}
	if c.meta.IsLeader() {
		start()
	}
	for {
		select {
		case <-ctx.Done():
			stop()
			return
		case leader := <-c.meta.Leadership():
			if leader {
				start()
			} else {
				stop()
			}
		case <-endedOrNil(ended):
			ended = nil // deposed or failed to take office; wait for the next change
			if c.meta.IsLeader() {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
					start() // still leader: try again
				}
			}
		}
	}
}

func endedOrNil(ch chan struct{}) <-chan struct{} {
	if ch == nil {
		return nil
	}
	return ch
}

// electionCheckInterval is how often a term checks the buckets' leaders
// against the live nodes even when no registration changed, for what fires
// no watch.
const electionCheckInterval = 5 * time.Second

// lead takes office and serves requests until ctx is done or the term is
// fenced off. The term's goroutine also elects bucket leaders and raises the
// cluster's feature level: at once, whenever a tablet server's registration
// appears or disappears, and every electionCheckInterval.
func (c *Coordinator) lead(ctx context.Context) {
	// Watch before the first election, so no change between the two is
	// missed.
	w := c.meta.NewWatcher()
	defer w.Close()
	if err := c.meta.AddWatch(catalog.TabletServersRoot(), w, raftmeta.WatchPersistent); err != nil {
		c.lg.Warn("cannot watch tablet server registrations; checking every "+electionCheckInterval.String(), "err", err)
	}
	t, err := c.takeOffice(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.lg.Warn("could not take office", "err", err)
		}
		return
	}
	c.lg.Info("took office", "epoch", t.epoch)
	c.mu.Lock()
	c.mu.term = t
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.mu.term = nil
		c.mu.Unlock()
		close(t.done)
		c.lg.Info("left office", "epoch", t.epoch)
	}()
	check := time.NewTicker(electionCheckInterval)
	defer check.Stop()
	elect := func() error {
		err := c.electLeaders(t)
		if err != nil && ctx.Err() == nil {
			c.lg.Warn("elect bucket leaders", "err", err)
		}
		if deposed(err) {
			return err
		}
		// The registrations that move leaders also move the feature level.
		if ferr := c.raiseFeatureLevel(t); ferr != nil {
			if ctx.Err() == nil {
				c.lg.Warn("raise the cluster feature level", "err", ferr)
			}
			if deposed(ferr) {
				return ferr
			}
		}
		return err
	}
	events := w.Events()
	err = elect()
	for !deposed(err) {
		select {
		case <-ctx.Done():
			return
		case req := <-t.requests:
			err = req.fn(t)
			req.reply <- err
		case _, ok := <-events:
			if !ok {
				events = nil // the metadata replica is closing
				continue
			}
			err = elect() // with nothing to change, an election writes nothing
		case <-check.C:
			err = elect()
		}
	}
}

// deposed reports whether err means the term is over.
func deposed(err error) bool {
	return errors.Is(err, raftmeta.ErrNotLeader) || errors.Is(err, ErrNotCoordinator) || errors.Is(err, raftmeta.ErrStopped)
}

func (c *Coordinator) takeOffice(ctx context.Context) (*term, error) {
	if err := c.meta.Barrier(ctx); err != nil {
		return nil, fmt.Errorf("barrier: %w", err)
	}
	ops, epoch, version, err := c.cat.ElectOps(c.cfg.NodeID, c.cfg.APIAddress)
	if err != nil {
		return nil, err
	}
	// The fixed znodes a new cluster lacks are created in the same multi,
	// fenced, as every write under the root, by the epoch's create or bump
	// (catalog.CheckWrite).
	ops = append(c.cat.BootstrapOps(c.cfg.ClusterID), ops...)
	if _, err := c.meta.Multi(ctx, 0, ops...); err != nil {
		return nil, fmt.Errorf("take office (create fixed znodes, bump the coordinator epoch): %w", err)
	}
	return &term{epoch: epoch, epochVersion: version, requests: make(chan request), done: make(chan struct{})}, nil
}

// isFenced reports whether err is the epoch check of a multi failing: another
// coordinator has taken office since.
func isFenced(err error) bool {
	var me *raftmeta.MultiError
	return errors.As(err, &me) && me.Index == 0 && errors.Is(err, raftmeta.ErrBadVersion)
}

// Epoch returns the epoch of the current term, 0 when not in office.
func (c *Coordinator) Epoch() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.term == nil {
		return 0
	}
	return c.mu.term.epoch
}

// do runs fn on the coordinator goroutine and returns its error.
func (c *Coordinator) do(ctx context.Context, fn func(t *term) error) error {
	c.mu.Lock()
	t := c.mu.term
	c.mu.Unlock()
	if t == nil {
		id, _ := c.meta.Leader()
		if id == "" {
			return fmt.Errorf("%w (no metadata leader is known yet)", ErrNotCoordinator)
		}
		return fmt.Errorf("%w (the coordinator is node %s)", ErrNotCoordinator, id)
	}
	req := request{fn: fn, reply: make(chan error, 1)}
	select {
	case t.requests <- req:
	case <-t.done:
		return ErrNotCoordinator
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		// The change may still be applied; the caller cannot know.
		return ctx.Err()
	}
}

// write runs ops as one multi fenced by the term's epoch.
func (c *Coordinator) write(t *term, ops []raftmeta.Op) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all := append([]raftmeta.Op{catalog.EpochCheck(t.epochVersion)}, ops...)
	_, err := c.meta.Multi(ctx, 0, all...)
	if isFenced(err) {
		return fmt.Errorf("%w (a newer coordinator took office)", ErrNotCoordinator)
	}
	return err
}

// CreateDatabase registers a database. With ignoreIfExists an existing
// database is not an error.
func (c *Coordinator) CreateDatabase(ctx context.Context, db, comment string, custom map[string]string, ignoreIfExists bool) error {
	if err := record.ValidateDatabaseName(db); err != nil {
		return err
	}
	now := c.cfg.Now().UnixMilli()
	return c.do(ctx, func(t *term) error {
		ops, err := c.cat.CreateDatabaseOps(db, catalog.DatabaseRegistration{
			Comment: comment, CustomProperties: custom, CreatedTime: now, ModifiedTime: now,
		})
		if errors.Is(err, catalog.ErrDatabaseExists) && ignoreIfExists {
			return nil
		}
		if err != nil {
			return err
		}
		return c.write(t, ops)
	})
}

// DropDatabase removes a database; cascade drops its tables too.
func (c *Coordinator) DropDatabase(ctx context.Context, db string, ignoreIfNotExists, cascade bool) error {
	return c.do(ctx, func(t *term) error {
		ops, err := c.cat.DropDatabaseOps(db, cascade)
		if errors.Is(err, catalog.ErrDatabaseNotExist) && ignoreIfNotExists {
			return nil
		}
		if err != nil {
			return err
		}
		if c.cfg.RemoteStorage {
			tables, err := c.cat.Tables(db)
			if err != nil {
				return err
			}
			if ops, err = c.cat.AppendRemoteDeletions(ops, db, tables, c.cfg.Now()); err != nil {
				return err
			}
		}
		return c.write(t, ops)
	})
}

// CreateTable validates and normalizes desc, then registers the table and
// assigns its buckets to live tablet servers. With ignoreIfExists an
// existing table is returned as it is.
func (c *Coordinator) CreateTable(ctx context.Context, db, name string, desc record.TableDescriptor, ignoreIfExists bool) (catalog.Table, error) {
	var problems []error
	if err := record.ValidateDatabaseName(db); err != nil {
		problems = append(problems, err)
	}
	if err := record.ValidateTableName(name); err != nil {
		problems = append(problems, err)
	}
	// Partitions have no buckets yet: a partitioned table would take
	// writes that no bucket can ever accept.
	if desc.IsPartitioned() {
		problems = append(problems, &record.InvalidError{
			Field:  "partition_keys",
			Reason: "partitioned tables are not supported yet; create the table without partition keys",
		})
	}
	desc, err := desc.Normalize(c.cfg.DefaultBucketNumber)
	if err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return catalog.Table{}, errors.Join(problems...)
	}
	replication, rfKey, err := c.replicationFactor(desc)
	if err != nil {
		return catalog.Table{}, err
	}
	now := c.cfg.Now().UnixMilli()
	var out catalog.Table
	err = c.do(ctx, func(t *term) error {
		if existing, err := c.cat.Table(db, name); err == nil {
			if ignoreIfExists {
				out = existing
				return nil
			}
			return fmt.Errorf("table %q: %w", db+"."+name, catalog.ErrTableExists)
		}
		id, claim, err := c.cat.NextTableID()
		if err != nil {
			return err
		}
		nt := catalog.NewTable{
			Database: db,
			Name:     name,
			Schema:   desc.Schema,
			Registration: catalog.TableRegistration{
				TableID:          id,
				Comment:          desc.Comment,
				PartitionKeys:    desc.PartitionKeys,
				BucketKeys:       desc.BucketKeys,
				BucketCount:      int32(desc.BucketCount),
				Properties:       desc.Properties,
				CustomProperties: desc.CustomProperties,
				CreatedTime:      now,
				ModifiedTime:     now,
			},
		}
		servers, err := c.cat.TabletServers()
		if err != nil {
			return err
		}
		if len(servers) < replication {
			return fmt.Errorf("%w: replication factor %d (%s) needs %d live tablet servers, %d are registered; lower %s or start more nodes",
				ErrNotEnoughServers, replication, rfKey, replication, len(servers), rfKey)
		}
		assignment := place(id, desc.BucketCount, replication, servers)
		nt.Assignment = &assignment
		nt.LeaderISR = initialLeaders(assignment, t.epoch)
		ops, err := c.cat.CreateTableOps(nt)
		if err != nil {
			return err
		}
		if err := c.write(t, append([]raftmeta.Op{claim}, ops...)); err != nil {
			return err
		}
		out, err = c.cat.Table(db, name)
		return err
	})
	return out, err
}

// NewWriterID allocates a writer id, unique in the cluster, for an
// idempotent writer.
func (c *Coordinator) NewWriterID(ctx context.Context) (int64, error) {
	var id int64
	err := c.do(ctx, func(t *term) error {
		next, claim, err := c.cat.NextWriterID()
		if err != nil {
			return err
		}
		if err := c.write(t, []raftmeta.Op{claim}); err != nil {
			return err
		}
		id = next
		return nil
	})
	return id, err
}

// DropTable removes a table with its schemas and bucket assignment.
func (c *Coordinator) DropTable(ctx context.Context, db, name string, ignoreIfNotExists bool) error {
	return c.do(ctx, func(t *term) error {
		ops, err := c.cat.DropTableOps(db, name)
		if ignoreIfNotExists && (errors.Is(err, catalog.ErrTableNotExist) || errors.Is(err, catalog.ErrDatabaseNotExist)) {
			return nil
		}
		if err != nil {
			return err
		}
		if c.cfg.RemoteStorage {
			if ops, err = c.cat.AppendRemoteDeletions(ops, db, []string{name}, c.cfg.Now()); err != nil {
				return err
			}
		}
		return c.write(t, ops)
	})
}

// RemoteDeletionDone removes a dropped table's catalog.RemoteDeletion once
// its remote objects are gone; one already removed is no error.
func (c *Coordinator) RemoteDeletionDone(ctx context.Context, tableID int64) error {
	return c.do(ctx, func(t *term) error {
		ops := c.cat.RemoteDeletionDoneOps(tableID)
		if len(ops) == 0 {
			return nil
		}
		return c.write(t, ops)
	})
}

// replicationFactor returns a table's replication factor and the key it
// comes from: the table's option, or the node's default.
func (c *Coordinator) replicationFactor(desc record.TableDescriptor) (int, string, error) {
	v, ok := desc.Properties[record.OptReplicationFactor]
	if !ok {
		return c.cfg.DefaultReplicationFactor, "default.replication.factor", nil
	}
	var rf int
	if _, err := fmt.Sscan(v, &rf); err != nil || rf < 1 {
		return 0, "", errors.Join(&record.InvalidError{
			Field:  "properties." + record.OptReplicationFactor,
			Reason: fmt.Sprintf("must be a whole number ≥ 1, got %q", v),
		})
	}
	return rf, record.OptReplicationFactor, nil
}

// initialLeaders makes each bucket's first replica its leader at epoch 0,
// with every replica in sync (they are all empty).
func initialLeaders(a catalog.TableAssignment, coordinatorEpoch int32) map[int32]catalog.LeaderAndISR {
	out := make(map[int32]catalog.LeaderAndISR, len(a.Buckets))
	for b, replicas := range a.Buckets {
		out[b] = catalog.LeaderAndISR{
			Leader:           replicas[0],
			LeaderEpoch:      0,
			ISR:              append([]int32(nil), replicas...),
			CoordinatorEpoch: coordinatorEpoch,
			StandbyReplicas:  []int32{},
			ISSR:             []int32{},
		}
	}
	return out
}
