package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"strom/raftmeta"
	"strom/record"
)

// The builders below return the operations of one change; the coordinator
// runs them in a single multi behind EpochCheck, so a change is all or
// nothing and only the current coordinator can make it. They read the local
// tree to decide what to write, which is current on the coordinator: it is
// the only writer of these paths and waits for each of its writes to apply.

// EpochCheck is the operation that fails a multi unless the coordinator
// epoch znode still has version (the version seen when the coordinator took
// office).
func EpochCheck(version int32) raftmeta.Op { return raftmeta.CheckOp(coordinatorEpochPath, version) }

// CheckWrite is the raftmeta.Config.CheckWrite of a Strom node: it refuses
// any write under Root that is neither
//
//   - fenced by the coordinator epoch: a multi with a check or a versioned
//     setData of /strom/coordinators/epoch (EpochCheck, ElectOps), or its
//     create (the first coordinator's); the epoch znode itself is never
//     deleted, nor set without a version;
//   - nor node from's own registration: one ephemeral create of
//     /strom/tabletservers/ids/<from> in a session (RegisterTabletServerOp).
//
// Writes elsewhere in the tree (a ZooKeeper client's) are not its concern.
// The refusal wraps ErrUnfencedWrite and names the first offending op.
func CheckWrite(from string, session int64, ops []raftmeta.Op) error {
	fenced := false
	var write *raftmeta.Op // the first write under Root
	for i := range ops {
		op := &ops[i]
		if op.Path != Root && !strings.HasPrefix(op.Path, Root+"/") {
			continue
		}
		if op.Path == coordinatorEpochPath {
			switch {
			case op.Kind == raftmeta.OpCreate,
				(op.Kind == raftmeta.OpCheck || op.Kind == raftmeta.OpSetData) && op.Version >= 0:
				fenced = true
			case op.Kind != raftmeta.OpCheck:
				return fmt.Errorf("%w: %s of %s (the epoch is only created or bumped with its version)", ErrUnfencedWrite, op.Kind, op.Path)
			}
		}
		if op.Kind != raftmeta.OpCheck && write == nil {
			write = op
		}
	}
	switch {
	case write == nil, fenced:
		return nil
	case len(ops) == 1 && session != 0 && write.Kind == raftmeta.OpCreate &&
		write.Mode == raftmeta.Ephemeral && write.Path == tabletServerIDsPath+"/"+from:
		return nil
	}
	return fmt.Errorf("%w: %s of %s by node %s", ErrUnfencedWrite, write.Kind, write.Path, from)
}

// BootstrapOps creates the fixed znodes that do not exist yet, and records
// clusterID if the cluster has none.
func (c *Catalog) BootstrapOps(clusterID string) []raftmeta.Op {
	var ops []raftmeta.Op
	for _, p := range fixedPaths {
		if !c.exists(p) {
			ops = append(ops, raftmeta.CreateOp(p, nil, raftmeta.Persistent))
		}
	}
	if !c.exists(clusterIDPath) {
		ops = append(ops, raftmeta.CreateOp(clusterIDPath, []byte(clusterID), raftmeta.Persistent))
	}
	return ops
}

// ElectOps makes the caller the coordinator with the next epoch: it bumps
// /coordinators/epoch (failing if someone else bumped it first) and writes
// /coordinators/active. It returns the new epoch; after the multi applies,
// the epoch znode has version expectVersion+1 (or 0 when it was created).
func (c *Catalog) ElectOps(nodeID int32, apiAddr string) (ops []raftmeta.Op, epoch, newVersion int32, err error) {
	_, cur, version, err := c.Coordinator()
	if err != nil {
		return nil, 0, 0, err
	}
	epoch = cur + 1
	data := []byte(strconv.FormatInt(int64(epoch), 10))
	if version < 0 {
		ops = append(ops, raftmeta.CreateOp(coordinatorEpochPath, data, raftmeta.Persistent))
		newVersion = 0
	} else {
		ops = append(ops, raftmeta.SetDataOp(coordinatorEpochPath, data, version))
		newVersion = version + 1
	}
	active := marshal(CoordinatorAddress{Version: 3, ID: itoa(nodeID), Listeners: Listeners(apiAddr)})
	if c.exists(coordinatorActivePath) {
		ops = append(ops, raftmeta.SetDataOp(coordinatorActivePath, active, -1))
	} else {
		ops = append(ops, raftmeta.CreateOp(coordinatorActivePath, active, raftmeta.Persistent))
	}
	return ops, epoch, newVersion, nil
}

// CreateDatabaseOps registers a database.
func (c *Catalog) CreateDatabaseOps(db string, reg DatabaseRegistration) ([]raftmeta.Op, error) {
	if c.exists(databasePath(db)) {
		return nil, fmt.Errorf("database %q: %w", db, ErrDatabaseExists)
	}
	reg.Version = 1
	if reg.CustomProperties == nil {
		reg.CustomProperties = map[string]string{}
	}
	return []raftmeta.Op{
		raftmeta.CreateOp(databasePath(db), marshal(reg), raftmeta.Persistent),
		raftmeta.CreateOp(tablesPath(db), nil, raftmeta.Persistent),
	}, nil
}

// DropDatabaseOps removes a database; with cascade its tables too, otherwise
// ErrDatabaseNotEmpty when it has any.
func (c *Catalog) DropDatabaseOps(db string, cascade bool) ([]raftmeta.Op, error) {
	if _, err := c.Database(db); err != nil {
		return nil, err
	}
	tables, err := c.Tables(db)
	if err != nil {
		return nil, err
	}
	if len(tables) > 0 && !cascade {
		return nil, fmt.Errorf("database %q holds %d table(s); drop them first or use cascade: %w", db, len(tables), ErrDatabaseNotEmpty)
	}
	var ops []raftmeta.Op
	for _, t := range tables {
		if ops, err = c.appendDeleteAssignment(ops, db, t); err != nil {
			return nil, err
		}
	}
	return c.appendDeleteTree(ops, databasePath(db))
}

// NewTable is what CreateTableOps writes.
type NewTable struct {
	Database, Name string
	Registration   TableRegistration
	Schema         record.Schema
	// Assignment and LeaderISR are nil for a partitioned table.
	Assignment *TableAssignment
	LeaderISR  map[int32]LeaderAndISR
}

// NextTableID returns the id the next table gets and the operation that
// claims it (it fails the multi if another claim got there first). Ids come
// from the version of /metadata/table_seqid, as Fluss's ZkSequenceIDCounter.
func (c *Catalog) NextTableID() (int64, raftmeta.Op, error) {
	_, stat, err := c.tree.Get(tableSeqIDPath)
	if err != nil {
		return 0, raftmeta.Op{}, fmt.Errorf("table id sequence: %w", err)
	}
	return int64(stat.Version), raftmeta.SetDataOp(tableSeqIDPath, nil, stat.Version), nil
}

// NextWriterID returns a new writer id for idempotent writes and the
// operation that claims it, from the version of /metadata/writer_id.
func (c *Catalog) NextWriterID() (int64, raftmeta.Op, error) {
	_, stat, err := c.tree.Get(writerIDPath)
	if err != nil {
		return 0, raftmeta.Op{}, fmt.Errorf("writer id sequence: %w", err)
	}
	return int64(stat.Version), raftmeta.SetDataOp(writerIDPath, nil, stat.Version), nil
}

// CreateTableOps registers a table with schema id 1 and, unless partitioned,
// its bucket assignment and initial leaders.
func (c *Catalog) CreateTableOps(t NewTable) ([]raftmeta.Op, error) {
	if _, err := c.Database(t.Database); err != nil {
		return nil, err
	}
	if c.exists(tablePath(t.Database, t.Name)) {
		return nil, fmt.Errorf("table %q: %w", t.Database+"."+t.Name, ErrTableExists)
	}
	schema, err := json.Marshal(t.Schema)
	if err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	reg := t.Registration
	reg.Version = 1
	if reg.Properties == nil {
		reg.Properties = map[string]string{}
	}
	if reg.CustomProperties == nil {
		reg.CustomProperties = map[string]string{}
	}
	ops := []raftmeta.Op{
		raftmeta.CreateOp(tablePath(t.Database, t.Name), marshal(reg), raftmeta.Persistent),
		raftmeta.CreateOp(schemasPath(t.Database, t.Name), nil, raftmeta.Persistent),
		raftmeta.CreateOp(schemaPath(t.Database, t.Name, 1), schema, raftmeta.Persistent),
	}
	if len(reg.PartitionKeys) > 0 {
		ops = append(ops, raftmeta.CreateOp(partitionsPath(t.Database, t.Name), nil, raftmeta.Persistent))
	}
	if t.Assignment == nil {
		return ops, nil
	}
	id := reg.TableID
	ops = append(ops,
		raftmeta.CreateOp(assignmentPath(id), marshal(*t.Assignment), raftmeta.Persistent),
		raftmeta.CreateOp(bucketsPath(id), nil, raftmeta.Persistent))
	for _, b := range t.Assignment.BucketIDs() {
		ops = append(ops, raftmeta.CreateOp(bucketPath(id, b), nil, raftmeta.Persistent))
		if lisr, ok := t.LeaderISR[b]; ok {
			ops = append(ops, raftmeta.CreateOp(leaderISRPath(id, b), leaderISRData(lisr), raftmeta.Persistent))
		}
	}
	return ops, nil
}

// SetLeaderISROp replaces the leader_isr of a bucket of table tableID (an
// election or an ISR change).
func SetLeaderISROp(tableID int64, bucket int32, lisr LeaderAndISR) raftmeta.Op {
	return raftmeta.SetDataOp(leaderISRPath(tableID, bucket), leaderISRData(lisr), -1)
}

func leaderISRData(lisr LeaderAndISR) []byte {
	lisr.Version = 2
	return marshal(lisr)
}

// DropTableOps removes a table's registration, schemas, partitions and
// bucket assignment.
func (c *Catalog) DropTableOps(db, table string) ([]raftmeta.Op, error) {
	ops, err := c.appendDeleteAssignment(nil, db, table)
	if err != nil {
		return nil, err
	}
	return c.appendDeleteTree(ops, tablePath(db, table))
}

// appendDeleteAssignment appends deletes of a table's bucket assignment, if
// it has one (a partitioned table has none).
func (c *Catalog) appendDeleteAssignment(ops []raftmeta.Op, db, table string) ([]raftmeta.Op, error) {
	t, err := c.Table(db, table)
	if err != nil {
		return nil, err
	}
	if !c.exists(assignmentPath(t.Registration.TableID)) {
		return ops, nil
	}
	return c.appendDeleteTree(ops, assignmentPath(t.Registration.TableID))
}

// RegisterTabletServerOp registers node id as a live tablet server, owned by
// the session the op is run with (the znode is ephemeral).
func RegisterTabletServerOp(id int32, reg TabletServerRegistration) raftmeta.Op {
	reg.Version = 3
	return raftmeta.CreateOp(tabletServerIDPath(id), marshal(reg), raftmeta.Ephemeral)
}

// TabletServerOwner returns the session owning node id's registration, or 0
// when it is not registered.
func (c *Catalog) TabletServerOwner(id int32) (int64, error) {
	_, stat, err := c.tree.Get(tabletServerIDPath(id))
	if errors.Is(err, raftmeta.ErrNoNode) {
		return 0, nil
	}
	return stat.EphemeralOwner, err
}

// appendDeleteTree appends deletes of root and everything below it, children
// before parents, as ZooKeeper requires.
func (c *Catalog) appendDeleteTree(ops []raftmeta.Op, root string) ([]raftmeta.Op, error) {
	children, _, err := c.tree.Children(root)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", root, err)
	}
	for _, child := range children {
		if ops, err = c.appendDeleteTree(ops, root+"/"+child); err != nil {
			return nil, err
		}
	}
	return append(ops, raftmeta.DeleteOp(root, -1)), nil
}

func (c *Catalog) exists(path string) bool {
	_, _, err := c.tree.Get(path)
	return err == nil
}
