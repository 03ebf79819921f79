package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"strom/raftmeta"
	"strom/record"
)

// Errors returned by the catalog's reads and op builders, wrapped with the
// name they concern.
var (
	ErrDatabaseNotExist = errors.New("catalog: database does not exist")
	ErrDatabaseExists   = errors.New("catalog: database already exists")
	ErrDatabaseNotEmpty = errors.New("catalog: database is not empty")
	ErrTableNotExist    = errors.New("catalog: table does not exist")
	ErrTableExists      = errors.New("catalog: table already exists")
	ErrSchemaNotExist   = errors.New("catalog: schema does not exist")
	// ErrUnfencedWrite: a write under Root that CheckWrite refuses.
	ErrUnfencedWrite = errors.New("catalog: write under " + Root + " is not fenced by the coordinator epoch nor a node's own registration")
	// ErrCorrupt marks a znode whose bytes cannot be decoded.
	ErrCorrupt = errors.New("catalog: corrupt metadata")
)

// Tree is the part of the metadata tree the catalog reads: raftmeta.Node
// satisfies it.
type Tree interface {
	Get(path string) ([]byte, raftmeta.Stat, error)
	Children(path string) ([]string, raftmeta.Stat, error)
}

// Catalog reads the metadata tree through typed accessors and builds the
// operations that change it. It holds no state of its own and is safe for
// concurrent use.
type Catalog struct {
	tree Tree
}

// New returns a catalog over tree.
func New(tree Tree) *Catalog { return &Catalog{tree: tree} }

// Table is a registered table as the catalog stores it.
type Table struct {
	Database, Name string
	Registration   TableRegistration
	SchemaID       int32
	Schema         record.Schema
	// Assignment is empty for a partitioned table (partitions have their own).
	Assignment TableAssignment
	// LeaderISR holds the leader and ISR of each assigned bucket.
	LeaderISR map[int32]LeaderAndISR
}

// Descriptor returns the table's descriptor as stored (normalized).
func (t Table) Descriptor() record.TableDescriptor {
	r := t.Registration
	return record.TableDescriptor{
		Schema:           t.Schema,
		Comment:          r.Comment,
		PartitionKeys:    r.PartitionKeys,
		BucketKeys:       r.BucketKeys,
		BucketCount:      int(r.BucketCount),
		Properties:       r.Properties,
		CustomProperties: r.CustomProperties,
	}
}

// ClusterID returns the id the cluster was created with, or "" before the
// first coordinator wrote it.
func (c *Catalog) ClusterID() (string, error) {
	data, _, err := c.tree.Get(clusterIDPath)
	if errors.Is(err, raftmeta.ErrNoNode) {
		return "", nil
	}
	return string(data), err
}

// Database returns a database's registration.
func (c *Catalog) Database(db string) (DatabaseRegistration, error) {
	var reg DatabaseRegistration
	data, _, err := c.tree.Get(databasePath(db))
	if errors.Is(err, raftmeta.ErrNoNode) {
		return reg, fmt.Errorf("database %q: %w", db, ErrDatabaseNotExist)
	}
	if err != nil {
		return reg, err
	}
	return reg, decode(databasePath(db), data, &reg)
}

// Databases returns the database names in lexical order.
func (c *Catalog) Databases() ([]string, error) {
	names, _, err := c.tree.Children(databasesPath)
	if errors.Is(err, raftmeta.ErrNoNode) {
		return nil, nil
	}
	return names, err
}

// Tables returns the table names of db in lexical order.
func (c *Catalog) Tables(db string) ([]string, error) {
	names, _, err := c.tree.Children(tablesPath(db))
	if errors.Is(err, raftmeta.ErrNoNode) {
		if _, err := c.Database(db); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return names, err
}

// Table returns a table with its latest schema, assignment and leaders.
func (c *Catalog) Table(db, table string) (Table, error) {
	t := Table{Database: db, Name: table}
	data, _, err := c.tree.Get(tablePath(db, table))
	if errors.Is(err, raftmeta.ErrNoNode) {
		if _, err := c.Database(db); err != nil {
			return t, err
		}
		return t, fmt.Errorf("table %q: %w", db+"."+table, ErrTableNotExist)
	}
	if err != nil {
		return t, err
	}
	if err := decode(tablePath(db, table), data, &t.Registration); err != nil {
		return t, err
	}
	t.SchemaID, t.Schema, err = c.latestSchema(db, table)
	if errors.Is(err, raftmeta.ErrNoNode) {
		// Each read is atomic, the table's reads together are not: a drop
		// applied since the registration was read. Answer as if read after it.
		return t, fmt.Errorf("table %q: %w", db+"."+table, ErrTableNotExist)
	}
	if err != nil {
		return t, err
	}
	t.LeaderISR = map[int32]LeaderAndISR{}
	data, _, err = c.tree.Get(assignmentPath(t.Registration.TableID))
	if errors.Is(err, raftmeta.ErrNoNode) {
		return t, nil // partitioned: buckets belong to partitions
	}
	if err != nil {
		return t, err
	}
	if err := decode(assignmentPath(t.Registration.TableID), data, &t.Assignment); err != nil {
		return t, err
	}
	for _, b := range t.Assignment.BucketIDs() {
		p := leaderISRPath(t.Registration.TableID, b)
		data, _, err := c.tree.Get(p)
		if errors.Is(err, raftmeta.ErrNoNode) {
			continue // not elected yet
		}
		if err != nil {
			return t, err
		}
		var lisr LeaderAndISR
		if err := decode(p, data, &lisr); err != nil {
			return t, err
		}
		t.LeaderISR[b] = lisr
	}
	return t, nil
}

func (c *Catalog) latestSchema(db, table string) (int32, record.Schema, error) {
	var schema record.Schema
	ids, _, err := c.tree.Children(schemasPath(db, table))
	if err != nil {
		return 0, schema, fmt.Errorf("schemas of %s.%s: %w", db, table, err)
	}
	latest := int32(-1)
	for _, name := range ids {
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil {
			return 0, schema, fmt.Errorf("%w: schema znode %q of %s.%s", ErrCorrupt, name, db, table)
		}
		latest = max(latest, int32(id))
	}
	if latest < 0 {
		return 0, schema, fmt.Errorf("%w: table %s.%s has no schema", ErrCorrupt, db, table)
	}
	p := schemaPath(db, table, latest)
	data, _, err := c.tree.Get(p)
	if err != nil {
		return 0, schema, err
	}
	return latest, schema, decode(p, data, &schema)
}

// AllTables returns every registered table, ordered by database and name.
func (c *Catalog) AllTables() ([]Table, error) {
	dbs, err := c.Databases()
	if err != nil {
		return nil, err
	}
	var out []Table
	for _, db := range dbs {
		names, err := c.Tables(db)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			t, err := c.Table(db, name)
			if errors.Is(err, ErrTableNotExist) || errors.Is(err, ErrDatabaseNotExist) {
				continue // dropped between the reads
			}
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// AssignmentsRoot is the znode under which every change to bucket
// assignments and leaders happens: watch it (recursively) to follow them.
func AssignmentsRoot() string { return assignmentsPath }

// TabletServersRoot is the znode whose children are the registrations of
// the live tablet servers: watch it to follow nodes coming and going.
func TabletServersRoot() string { return tabletServerIDsPath }

// TabletServerPath returns the znode of node id's registration.
func TabletServerPath(id int32) string { return tabletServerIDPath(id) }

// TabletServer is a registered (live) tablet server.
type TabletServer struct {
	ID           int32
	Registration TabletServerRegistration
	// Session is the metadata session that owns the registration.
	Session int64
}

// TabletServers returns the registered tablet servers ordered by id.
func (c *Catalog) TabletServers() ([]TabletServer, error) {
	names, _, err := c.tree.Children(tabletServerIDsPath)
	if errors.Is(err, raftmeta.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []TabletServer
	for _, name := range names {
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil {
			continue // not ours: ignore foreign znodes
		}
		data, stat, err := c.tree.Get(tabletServerIDPath(int32(id)))
		if errors.Is(err, raftmeta.ErrNoNode) {
			continue // went away between the two reads
		}
		if err != nil {
			return nil, err
		}
		ts := TabletServer{ID: int32(id), Session: stat.EphemeralOwner}
		if err := decode(tabletServerIDPath(int32(id)), data, &ts.Registration); err != nil {
			return nil, err
		}
		out = append(out, ts)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Coordinator returns the active coordinator's address and the current
// coordinator epoch with the version of its znode (for epoch checks).
func (c *Catalog) Coordinator() (addr CoordinatorAddress, epoch, version int32, err error) {
	data, stat, err := c.tree.Get(coordinatorEpochPath)
	if errors.Is(err, raftmeta.ErrNoNode) {
		return addr, 0, -1, nil
	}
	if err != nil {
		return addr, 0, 0, err
	}
	e, err := strconv.ParseInt(string(data), 10, 32)
	if err != nil {
		return addr, 0, 0, fmt.Errorf("%w: %s holds %q", ErrCorrupt, coordinatorEpochPath, data)
	}
	data, _, err = c.tree.Get(coordinatorActivePath)
	if err == nil {
		err = decode(coordinatorActivePath, data, &addr)
	} else if errors.Is(err, raftmeta.ErrNoNode) {
		err = nil
	}
	return addr, int32(e), stat.Version, err
}

func decode(path string, data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return nil
}

// Bucket returns a bucket's replicas (in assignment order) and its
// leader_isr, for a change to one bucket (an ISR change). A table or
// bucket that does not exist, or has no leader_isr yet, is ErrTableNotExist.
func (c *Catalog) Bucket(tableID int64, bucket int32) ([]int32, LeaderAndISR, error) {
	var a TableAssignment
	var lisr LeaderAndISR
	for _, z := range []struct {
		path string
		v    any
	}{{assignmentPath(tableID), &a}, {leaderISRPath(tableID, bucket), &lisr}} {
		data, _, err := c.tree.Get(z.path)
		if errors.Is(err, raftmeta.ErrNoNode) {
			return nil, lisr, fmt.Errorf("table id %d bucket %d: %w", tableID, bucket, ErrTableNotExist)
		}
		if err != nil {
			return nil, lisr, err
		}
		if err := decode(z.path, data, z.v); err != nil {
			return nil, lisr, err
		}
	}
	replicas, ok := a.Buckets[bucket]
	if !ok {
		return nil, lisr, fmt.Errorf("table id %d bucket %d: %w", tableID, bucket, ErrTableNotExist)
	}
	return replicas, lisr, nil
}

// LeaderISR returns a bucket's leader_isr alone (one znode read), for the
// leadership check of a read (server's lookups). A bucket without one is
// ErrTableNotExist.
func (c *Catalog) LeaderISR(tableID int64, bucket int32) (LeaderAndISR, error) {
	var lisr LeaderAndISR
	path := leaderISRPath(tableID, bucket)
	data, _, err := c.tree.Get(path)
	if errors.Is(err, raftmeta.ErrNoNode) {
		return lisr, fmt.Errorf("table id %d bucket %d: %w", tableID, bucket, ErrTableNotExist)
	}
	if err != nil {
		return lisr, err
	}
	return lisr, decode(path, data, &lisr)
}
