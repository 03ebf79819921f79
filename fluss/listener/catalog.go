package listener

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/raftmeta/catalog"
	"strom/record"
)

// Catalog is what the catalog keys need of the node: Strom's catalog as the
// Connect API's AdminService serves it, so that a table made through either
// API is the same table. Reads answer from the node's catalog after a Sync
// with the metadata leader (a client sees its own writes whichever node it
// made them through); writes go through the coordinator, on whichever node
// it runs. Errors are Strom's domain errors (catalog.ErrTableNotExist,
// *record.InvalidError, ...), which errorCode maps to Fluss's codes.
type Catalog interface {
	// Cluster is the coordinator's node and every live tablet server, with
	// the addresses Fluss clients reach them at.
	Cluster(ctx context.Context) (Cluster, error)
	// Databases lists the databases.
	Databases(ctx context.Context) ([]string, error)
	// Database returns catalog.ErrDatabaseNotExist when name does not exist.
	Database(ctx context.Context, name string) error
	// Tables lists db's tables.
	Tables(ctx context.Context, db string) ([]string, error)
	// Table returns db.name.
	Table(ctx context.Context, db, name string) (catalog.Table, error)
	// CreateDatabase creates name, or does nothing when it exists and
	// ignoreIfExists.
	CreateDatabase(ctx context.Context, name, comment string, customProperties map[string]string, ignoreIfExists bool) error
	// DropDatabase drops name (with its tables when cascade), or does
	// nothing when it does not exist and ignoreIfNotExists.
	DropDatabase(ctx context.Context, name string, ignoreIfNotExists, cascade bool) error
	// CreateTable creates db.name from d as given (not normalized), or does
	// nothing when it exists and ignoreIfExists.
	CreateTable(ctx context.Context, db, name string, d record.TableDescriptor, ignoreIfExists bool) error
	// DropTable drops db.name, or does nothing when it does not exist and
	// ignoreIfNotExists.
	DropTable(ctx context.Context, db, name string, ignoreIfNotExists bool) error
}

// Cluster is the nodes a Fluss client is told about (MetadataResponse).
type Cluster struct {
	// Coordinator is the node holding Strom's coordinator role; -1 when
	// none is known.
	Coordinator int32
	// Servers are the live nodes, each a Fluss tablet server.
	Servers []ServerNode
}

// ServerNode is one node as Fluss clients reach it.
type ServerNode struct {
	ID   int32
	Host string
	Port int32
	Rack string
}

// catalogHandlers are the catalog keys' handlers.
var catalogHandlers = map[protocol.APIKey]handler{
	protocol.GetMetadata:    typed(hasCatalog, (*Server).getMetadata),
	protocol.DatabaseExists: typed(hasCatalog, (*Server).databaseExists),
	protocol.ListDatabases:  typed(hasCatalog, (*Server).listDatabases),
	protocol.ListTables:     typed(hasCatalog, (*Server).listTables),
	protocol.TableExists:    typed(hasCatalog, (*Server).tableExists),
	protocol.GetTableInfo:   typed(hasCatalog, (*Server).getTableInfo),
	protocol.GetTableSchema: typed(hasCatalog, (*Server).getTableSchema),
	protocol.CreateDatabase: typed(hasCatalog, (*Server).createDatabase),
	protocol.DropDatabase:   typed(hasCatalog, (*Server).dropDatabase),
	protocol.CreateTable:    typed(hasCatalog, (*Server).createTable),
	protocol.DropTable:      typed(hasCatalog, (*Server).dropTable),
}

// getMetadata answers the cluster (the coordinator and every tablet
// server) and each table asked for: its descriptor and each bucket's
// leader and replicas from Strom's assignment. A table that does not exist
// fails the request (TABLE_NOT_EXIST), as Fluss's does; partitions are not
// served yet.
func (s *Server) getMetadata(ctx context.Context, _ int16, req *flusspb.MetadataRequest) (proto.Message, error) {
	if len(req.GetPartitionsPath()) > 0 || len(req.GetPartitionsId()) > 0 {
		return nil, &Error{protocol.PartitionNotExists, "Strom's Fluss listener does not serve partitions yet (partitions_path, partitions_id)"}
	}
	cl, err := s.cfg.Catalog.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	resp := &flusspb.MetadataResponse{}
	for _, n := range cl.Servers {
		pb := serverNode(n)
		resp.TabletServers = append(resp.TabletServers, pb)
		if n.ID == cl.Coordinator {
			resp.CoordinatorServer = pb
		}
	}
	if resp.CoordinatorServer == nil && len(cl.Servers) > 0 {
		// The coordinator's node has no Fluss listener (or none is in
		// office): every node sends admin writes on to the coordinator,
		// so any one will do.
		resp.CoordinatorServer = serverNode(cl.Servers[0])
	}
	for _, p := range req.GetTablePath() {
		t, err := s.cfg.Catalog.Table(ctx, p.GetDatabaseName(), p.GetTableName())
		if err != nil {
			return nil, err
		}
		tm, err := tableMetadata(t, s.cfg.LakeTableOptions)
		if err != nil {
			return nil, err
		}
		resp.TableMetadata = append(resp.TableMetadata, tm)
	}
	return resp, nil
}

func serverNode(n ServerNode) *flusspb.PbServerNode {
	pb := &flusspb.PbServerNode{NodeId: proto.Int32(n.ID), Host: proto.String(n.Host), Port: proto.Int32(n.Port)}
	if n.Rack != "" {
		pb.Rack = proto.String(n.Rack)
	}
	return pb
}

// tableMetadata is a table's PbTableMetadata; a lake table's properties
// get lakeOptions (Config.LakeTableOptions).
func tableMetadata(t catalog.Table, lakeOptions map[string]string) (*flusspb.PbTableMetadata, error) {
	d := t.Descriptor()
	if len(lakeOptions) > 0 && strings.EqualFold(d.Properties[record.OptDatalakeEnabled], "true") {
		props := maps.Clone(d.Properties)
		maps.Copy(props, lakeOptions)
		d.Properties = props
	}
	js, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("table %s.%s: descriptor as JSON: %w", t.Database, t.Name, err)
	}
	tm := &flusspb.PbTableMetadata{
		TablePath:    tablePath(t.Database, t.Name),
		TableId:      proto.Int64(t.Registration.TableID),
		SchemaId:     proto.Int32(t.SchemaID),
		TableJson:    js,
		CreatedTime:  proto.Int64(t.Registration.CreatedTime),
		ModifiedTime: proto.Int64(t.Registration.ModifiedTime),
	}
	for _, b := range t.Assignment.BucketIDs() {
		bm := &flusspb.PbBucketMetadata{BucketId: proto.Int32(b), ReplicaId: t.Assignment.Buckets[b]}
		if l, ok := t.LeaderISR[b]; ok && l.Leader >= 0 {
			bm.LeaderId, bm.LeaderEpoch = proto.Int32(l.Leader), proto.Int32(l.LeaderEpoch)
		}
		tm.BucketMetadata = append(tm.BucketMetadata, bm)
	}
	return tm, nil
}

func tablePath(db, table string) *flusspb.PbTablePath {
	return &flusspb.PbTablePath{DatabaseName: proto.String(db), TableName: proto.String(table)}
}

func (s *Server) databaseExists(ctx context.Context, _ int16, req *flusspb.DatabaseExistsRequest) (proto.Message, error) {
	exists, err := notExist(s.cfg.Catalog.Database(ctx, req.GetDatabaseName()))
	if err != nil {
		return nil, err
	}
	return &flusspb.DatabaseExistsResponse{Exists: proto.Bool(exists)}, nil
}

// notExist turns a lookup's error into an answer to "does it exist?": a
// name that is not there, or not valid (Fluss's probes ask for names such
// as "default_catalog"), does not exist; other errors stay errors.
func notExist(err error) (bool, error) {
	var inv *record.InvalidError
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, catalog.ErrDatabaseNotExist), errors.Is(err, catalog.ErrTableNotExist), errors.As(err, &inv):
		return false, nil
	}
	return false, err
}

func (s *Server) listDatabases(ctx context.Context, _ int16, _ *flusspb.ListDatabasesRequest) (proto.Message, error) {
	names, err := s.cfg.Catalog.Databases(ctx)
	if err != nil {
		return nil, err
	}
	return &flusspb.ListDatabasesResponse{DatabaseName: names}, nil
}

func (s *Server) listTables(ctx context.Context, _ int16, req *flusspb.ListTablesRequest) (proto.Message, error) {
	names, err := s.cfg.Catalog.Tables(ctx, req.GetDatabaseName())
	if err != nil {
		return nil, err
	}
	return &flusspb.ListTablesResponse{TableName: names}, nil
}

func (s *Server) tableExists(ctx context.Context, _ int16, req *flusspb.TableExistsRequest) (proto.Message, error) {
	p := req.GetTablePath()
	_, err := s.cfg.Catalog.Table(ctx, p.GetDatabaseName(), p.GetTableName())
	exists, err := notExist(err)
	if err != nil {
		return nil, err
	}
	return &flusspb.TableExistsResponse{Exists: proto.Bool(exists)}, nil
}

func (s *Server) getTableInfo(ctx context.Context, _ int16, req *flusspb.GetTableInfoRequest) (proto.Message, error) {
	p := req.GetTablePath()
	t, err := s.cfg.Catalog.Table(ctx, p.GetDatabaseName(), p.GetTableName())
	if err != nil {
		return nil, err
	}
	tm, err := tableMetadata(t, s.cfg.LakeTableOptions)
	if err != nil {
		return nil, err
	}
	return &flusspb.GetTableInfoResponse{TableId: tm.TableId, SchemaId: tm.SchemaId, TableJson: tm.TableJson,
		CreatedTime: tm.CreatedTime, ModifiedTime: tm.ModifiedTime}, nil
}

// getTableSchema answers the table's schema. Strom keeps one schema per
// table (no ALTER yet), so a schema_id other than the table's is
// SCHEMA_NOT_EXIST.
func (s *Server) getTableSchema(ctx context.Context, _ int16, req *flusspb.GetTableSchemaRequest) (proto.Message, error) {
	p := req.GetTablePath()
	t, err := s.cfg.Catalog.Table(ctx, p.GetDatabaseName(), p.GetTableName())
	if err != nil {
		return nil, err
	}
	if req.SchemaId != nil && req.GetSchemaId() != t.SchemaID {
		return nil, fmt.Errorf("table %s.%s has schema %d only, not %d: %w", t.Database, t.Name, t.SchemaID, req.GetSchemaId(), catalog.ErrSchemaNotExist)
	}
	js, err := t.Schema.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return &flusspb.GetTableSchemaResponse{SchemaId: proto.Int32(t.SchemaID), SchemaJson: js}, nil
}

// databaseJSON is the part of Fluss's DatabaseDescriptor JSON
// (DatabaseDescriptorJsonSerde) Strom keeps.
type databaseJSON struct {
	Version          *int              `json:"version"`
	Comment          *string           `json:"comment"`
	CustomProperties map[string]string `json:"custom_properties"`
}

func (s *Server) createDatabase(ctx context.Context, _ int16, req *flusspb.CreateDatabaseRequest) (proto.Message, error) {
	var d databaseJSON
	if js := req.GetDatabaseJson(); len(js) > 0 {
		if err := json.Unmarshal(js, &d); err != nil {
			return nil, &Error{protocol.InvalidDatabaseException, fmt.Sprintf("database_json is not Fluss's database descriptor JSON: %v", err)}
		}
		if d.Version != nil && *d.Version != 1 {
			return nil, &Error{protocol.InvalidDatabaseException, fmt.Sprintf("database_json has version %d; Strom reads version 1", *d.Version)}
		}
	}
	comment := ""
	if d.Comment != nil {
		comment = *d.Comment
	}
	if err := s.cfg.Catalog.CreateDatabase(ctx, req.GetDatabaseName(), comment, d.CustomProperties, req.GetIgnoreIfExists()); err != nil {
		return nil, err
	}
	return &flusspb.CreateDatabaseResponse{}, nil
}

func (s *Server) dropDatabase(ctx context.Context, _ int16, req *flusspb.DropDatabaseRequest) (proto.Message, error) {
	if err := s.cfg.Catalog.DropDatabase(ctx, req.GetDatabaseName(), req.GetIgnoreIfNotExists(), req.GetCascade()); err != nil {
		return nil, err
	}
	return &flusspb.DropDatabaseResponse{}, nil
}

// createTable creates the table Fluss's table_json (TableDescriptor JSON)
// describes, read by record's Fluss-compatible serde; Strom's own checks
// (Normalize, on the coordinator) report what it cannot take.
func (s *Server) createTable(ctx context.Context, _ int16, req *flusspb.CreateTableRequest) (proto.Message, error) {
	var d record.TableDescriptor
	if err := json.Unmarshal(req.GetTableJson(), &d); err != nil {
		return nil, &record.InvalidError{Field: "table_json", Reason: err.Error()}
	}
	p := req.GetTablePath()
	if err := s.cfg.Catalog.CreateTable(ctx, p.GetDatabaseName(), p.GetTableName(), d, req.GetIgnoreIfExists()); err != nil {
		return nil, err
	}
	return &flusspb.CreateTableResponse{}, nil
}

func (s *Server) dropTable(ctx context.Context, _ int16, req *flusspb.DropTableRequest) (proto.Message, error) {
	p := req.GetTablePath()
	if err := s.cfg.Catalog.DropTable(ctx, p.GetDatabaseName(), p.GetTableName(), req.GetIgnoreIfNotExists()); err != nil {
		return nil, err
	}
	return &flusspb.DropTableResponse{}, nil
}

func hasCatalog(s *Server) bool { return s.cfg.Catalog != nil }
