package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"connectrpc.com/connect"

	"strom/raftmeta/catalog"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/tablet/kv"
)

// adminHandler serves AdminService: it decodes, calls the coordinator (for
// writes; on another node, through proxy) or the local catalog (for reads,
// after a Sync with the metadata leader), and returns domain errors that
// rpc.ErrorInterceptor maps to the wire.
type adminHandler struct {
	s     *Server
	proxy *coordinatorProxy
}

var _ stromv1connect.AdminServiceHandler = (*adminHandler)(nil)

func (h *adminHandler) CreateDatabase(ctx context.Context, req *connect.Request[stromv1.CreateDatabaseRequest]) (*connect.Response[stromv1.CreateDatabaseResponse], error) {
	return proxy(ctx, h.proxy, req, h.createDatabase, adminOf, stromv1connect.AdminServiceClient.CreateDatabase)
}

func (h *adminHandler) createDatabase(ctx context.Context, req *connect.Request[stromv1.CreateDatabaseRequest]) (*connect.Response[stromv1.CreateDatabaseResponse], error) {
	m := req.Msg
	if err := h.s.coord.CreateDatabase(ctx, m.Database, m.Comment, m.CustomProperties, m.IgnoreIfExists); err != nil {
		return nil, err
	}
	info, err := h.database(m.Database)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.CreateDatabaseResponse{Database: info}), nil
}

func (h *adminHandler) DropDatabase(ctx context.Context, req *connect.Request[stromv1.DropDatabaseRequest]) (*connect.Response[stromv1.DropDatabaseResponse], error) {
	return proxy(ctx, h.proxy, req, h.dropDatabase, adminOf, stromv1connect.AdminServiceClient.DropDatabase)
}

func (h *adminHandler) dropDatabase(ctx context.Context, req *connect.Request[stromv1.DropDatabaseRequest]) (*connect.Response[stromv1.DropDatabaseResponse], error) {
	m := req.Msg
	if err := record.ValidateDatabaseName(m.Database); err != nil {
		return nil, err
	}
	if err := h.s.coord.DropDatabase(ctx, m.Database, m.IgnoreIfNotExists, m.Cascade); err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.DropDatabaseResponse{}), nil
}

func (h *adminHandler) GetDatabase(ctx context.Context, req *connect.Request[stromv1.GetDatabaseRequest]) (*connect.Response[stromv1.GetDatabaseResponse], error) {
	if err := record.ValidateDatabaseName(req.Msg.Database); err != nil {
		return nil, err
	}
	if err := h.s.meta.Sync(ctx); err != nil {
		return nil, err
	}
	info, err := h.database(req.Msg.Database)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.GetDatabaseResponse{Database: info}), nil
}

func (h *adminHandler) database(name string) (*stromv1.DatabaseInfo, error) {
	reg, err := h.s.cat.Database(name)
	if err != nil {
		return nil, err
	}
	return &stromv1.DatabaseInfo{
		Name:             name,
		Comment:          reg.Comment,
		CustomProperties: reg.CustomProperties,
		CreatedTimeMs:    reg.CreatedTime,
		ModifiedTimeMs:   reg.ModifiedTime,
	}, nil
}

func (h *adminHandler) ListDatabases(ctx context.Context, _ *connect.Request[stromv1.ListDatabasesRequest]) (*connect.Response[stromv1.ListDatabasesResponse], error) {
	if err := h.s.meta.Sync(ctx); err != nil {
		return nil, err
	}
	names, err := h.s.cat.Databases()
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.ListDatabasesResponse{Databases: names}), nil
}

func (h *adminHandler) CreateTable(ctx context.Context, req *connect.Request[stromv1.CreateTableRequest]) (*connect.Response[stromv1.CreateTableResponse], error) {
	return proxy(ctx, h.proxy, req, h.createTable, adminOf, stromv1connect.AdminServiceClient.CreateTable)
}

func (h *adminHandler) createTable(ctx context.Context, req *connect.Request[stromv1.CreateTableRequest]) (*connect.Response[stromv1.CreateTableResponse], error) {
	m := req.Msg
	desc, err := descriptorFromProto(m.Descriptor_)
	if err != nil {
		return nil, err
	}
	desc = kvFormatDefault(desc)
	if desc, err = h.s.lakeTable(ctx, m.Database, m.Table, desc, m.IgnoreIfExists); err != nil {
		return nil, err
	}
	// A primary-key table's merge engine and aggregate functions must be
	// usable by its KV tablets: refuse them now rather than when a bucket
	// opens. (Other problems are the coordinator's to report.)
	if norm, err := desc.Normalize(h.s.cfg.DefaultBucketNumber); err == nil && norm.HasPrimaryKey() {
		if err := kv.CheckTable(norm); err != nil {
			return nil, err
		}
	}
	t, err := h.s.coord.CreateTable(ctx, m.Database, m.Table, desc, m.IgnoreIfExists)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.CreateTableResponse{Table: tableToProto(t)}), nil
}

func (h *adminHandler) GetTable(ctx context.Context, req *connect.Request[stromv1.GetTableRequest]) (*connect.Response[stromv1.GetTableResponse], error) {
	if err := validatePath(req.Msg.Database, req.Msg.Table); err != nil {
		return nil, err
	}
	if err := h.s.meta.Sync(ctx); err != nil {
		return nil, err
	}
	t, err := h.s.cat.Table(req.Msg.Database, req.Msg.Table)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.GetTableResponse{Table: tableToProto(t)}), nil
}

func (h *adminHandler) ListTables(ctx context.Context, req *connect.Request[stromv1.ListTablesRequest]) (*connect.Response[stromv1.ListTablesResponse], error) {
	if err := record.ValidateDatabaseName(req.Msg.Database); err != nil {
		return nil, err
	}
	if err := h.s.meta.Sync(ctx); err != nil {
		return nil, err
	}
	names, err := h.s.cat.Tables(req.Msg.Database)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.ListTablesResponse{Tables: names}), nil
}

func (h *adminHandler) DropTable(ctx context.Context, req *connect.Request[stromv1.DropTableRequest]) (*connect.Response[stromv1.DropTableResponse], error) {
	return proxy(ctx, h.proxy, req, h.dropTable, adminOf, stromv1connect.AdminServiceClient.DropTable)
}

func (h *adminHandler) dropTable(ctx context.Context, req *connect.Request[stromv1.DropTableRequest]) (*connect.Response[stromv1.DropTableResponse], error) {
	m := req.Msg
	if err := validatePath(m.Database, m.Table); err != nil {
		return nil, err
	}
	if err := h.s.coord.DropTable(ctx, m.Database, m.Table, m.IgnoreIfNotExists); err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.DropTableResponse{}), nil
}

func (h *adminHandler) DescribeCluster(context.Context, *connect.Request[stromv1.DescribeClusterRequest]) (*connect.Response[stromv1.DescribeClusterResponse], error) {
	s := h.s
	resp := &stromv1.DescribeClusterResponse{ClusterId: s.id.ClusterID, Version: Version}
	nodes := map[int32]*stromv1.Node{}
	node := func(id int32) *stromv1.Node {
		if n, ok := nodes[id]; ok {
			return n
		}
		n := &stromv1.Node{Id: id}
		nodes[id] = n
		return n
	}
	servers, err := s.meta.Servers()
	if err != nil {
		return nil, err
	}
	for _, srv := range servers {
		id, err := strconv.ParseInt(srv.ID, 10, 32)
		if err != nil {
			continue // not a Strom node id
		}
		n := node(int32(id))
		n.RaftAddress = srv.Address
		if srv.Voter {
			n.Roles = append(n.Roles, "raft-voter")
			resp.Voters = append(resp.Voters, int32(id))
		} else {
			n.Roles = append(n.Roles, "raft-nonvoter")
		}
		if srv.Leader {
			n.Roles = append(n.Roles, "raft-leader")
			resp.RaftLeader = int32(id)
		}
	}
	coord, epoch, _, err := s.cat.Coordinator()
	if err != nil {
		return nil, err
	}
	resp.CoordinatorEpoch = epoch
	if id, err := strconv.ParseInt(coord.ID, 10, 32); err == nil && int32(id) == resp.RaftLeader {
		node(int32(id)).Roles = append(node(int32(id)).Roles, "coordinator")
	}
	tservers, err := s.cat.TabletServers()
	if err != nil {
		return nil, err
	}
	for _, ts := range tservers {
		n := node(ts.ID)
		n.ApiAddress = apiAddress(ts.Registration)
		n.Roles = append(n.Roles, "tablet-server")
		n.Rack = ts.Registration.Rack
		n.FeatureLevel = int32(ts.Registration.FeatureLevel)
	}
	level, _, err := s.cat.FeatureLevel()
	if err != nil {
		return nil, err
	}
	resp.ActiveFeatureLevel = int32(level)
	// The gossip knows every node seen, alive or not, with its addresses,
	// version and rack (without gossip, this node alone).
	for _, m := range s.Members() {
		n := node(m.ID)
		n.ApiAddress = cmp.Or(n.ApiAddress, m.API)
		n.RaftAddress = cmp.Or(n.RaftAddress, m.Raft)
		n.GossipAddress, n.Alive, n.Version, n.Rack = m.Gossip, m.Alive, m.Version, cmp.Or(m.Rack, n.Rack)
	}
	tables, err := s.cat.AllTables()
	if err != nil {
		return nil, err
	}
	resp.Buckets, resp.UnderReplicatedBuckets, resp.OfflineBuckets = countBuckets(tables)
	for _, n := range nodes {
		sort.Strings(n.Roles)
		resp.Nodes = append(resp.Nodes, n)
	}
	sort.Slice(resp.Nodes, func(i, j int) bool { return resp.Nodes[i].Id < resp.Nodes[j].Id })
	sort.Slice(resp.Voters, func(i, j int) bool { return resp.Voters[i] < resp.Voters[j] })
	return connect.NewResponse(resp), nil
}

// GetMetadata answers from the local catalog after a Sync with the
// metadata leader, so a client sees its own admin writes whichever node
// it made them through.
func (h *adminHandler) GetMetadata(ctx context.Context, req *connect.Request[stromv1.GetMetadataRequest]) (*connect.Response[stromv1.GetMetadataResponse], error) {
	var problems []error
	for i, p := range req.Msg.Tables {
		if err := validatePath(p.Database, p.Table); err != nil {
			problems = append(problems, fmt.Errorf("tables[%d]: %w", i, err))
		}
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}
	if err := h.s.meta.Sync(ctx); err != nil {
		return nil, err
	}
	resp := &stromv1.GetMetadataResponse{Coordinator: -1}
	servers, err := h.s.cat.TabletServers()
	if err != nil {
		return nil, err
	}
	for _, ts := range servers {
		resp.Nodes = append(resp.Nodes, &stromv1.Node{Id: ts.ID, ApiAddress: apiAddress(ts.Registration)})
	}
	coord, _, _, err := h.s.cat.Coordinator()
	if err != nil {
		return nil, err
	}
	if id, err := strconv.ParseInt(coord.ID, 10, 32); err == nil {
		resp.Coordinator = int32(id)
	}
	var tables []catalog.Table
	if len(req.Msg.Tables) == 0 {
		if tables, err = h.s.cat.AllTables(); err != nil {
			return nil, err
		}
	}
	for _, p := range req.Msg.Tables {
		t, err := h.s.cat.Table(p.Database, p.Table)
		if err != nil {
			return nil, err
		}
		tables = append(tables, t)
	}
	for _, t := range tables {
		resp.Tables = append(resp.Tables, tableToProto(t))
	}
	return connect.NewResponse(resp), nil
}

func validatePath(db, table string) error {
	return errors.Join(record.ValidateDatabaseName(db), record.ValidateTableName(table))
}

// descriptorFromProto parses the column types; every other check is
// Normalize's. All problems are reported at once.
func descriptorFromProto(d *stromv1.TableDescriptor) (record.TableDescriptor, error) {
	if d == nil {
		return record.TableDescriptor{}, &record.InvalidError{Field: "descriptor", Reason: "is required: give the table's schema"}
	}
	var out record.TableDescriptor
	var problems []error
	for i, c := range d.GetSchema().GetColumns() {
		t, err := record.ParseDataType(c.Type)
		if err != nil {
			problems = append(problems, &record.InvalidError{
				Field:  fmt.Sprintf("schema.columns[%d].type", i),
				Reason: fmt.Sprintf("column %q: %v", c.Name, err),
			})
		}
		out.Schema.Columns = append(out.Schema.Columns, record.Column{Name: c.Name, Type: t, Comment: c.Comment})
	}
	if len(problems) > 0 {
		return out, errors.Join(problems...)
	}
	out.Schema.PrimaryKey = d.GetSchema().GetPrimaryKey()
	out.Comment = d.Comment
	out.PartitionKeys = d.PartitionKeys
	out.BucketKeys = d.BucketKeys
	out.BucketCount = int(d.BucketCount)
	out.Properties = d.Properties
	out.CustomProperties = d.CustomProperties
	return out, nil
}

func descriptorToProto(d record.TableDescriptor) *stromv1.TableDescriptor {
	out := &stromv1.TableDescriptor{
		Schema:           &stromv1.Schema{PrimaryKey: d.Schema.PrimaryKey},
		Comment:          d.Comment,
		PartitionKeys:    d.PartitionKeys,
		BucketKeys:       d.BucketKeys,
		BucketCount:      int32(d.BucketCount),
		Properties:       d.Properties,
		CustomProperties: d.CustomProperties,
	}
	for _, c := range d.Schema.Columns {
		out.Schema.Columns = append(out.Schema.Columns, &stromv1.Column{Name: c.Name, Type: c.Type.String(), Comment: c.Comment})
	}
	return out
}

func tableToProto(t catalog.Table) *stromv1.TableInfo {
	out := &stromv1.TableInfo{
		Database:       t.Database,
		Table:          t.Name,
		TableId:        t.Registration.TableID,
		SchemaId:       t.SchemaID,
		Descriptor_:    descriptorToProto(t.Descriptor()),
		CreatedTimeMs:  t.Registration.CreatedTime,
		ModifiedTimeMs: t.Registration.ModifiedTime,
	}
	for _, b := range t.Assignment.BucketIDs() {
		ba := &stromv1.BucketAssignment{Bucket: b, Replicas: t.Assignment.Buckets[b], Leader: -1}
		if lisr, ok := t.LeaderISR[b]; ok {
			ba.Leader, ba.LeaderEpoch, ba.Isr, ba.BucketEpoch = lisr.Leader, lisr.LeaderEpoch, lisr.ISR, lisr.BucketEpoch
		}
		out.Buckets = append(out.Buckets, ba)
	}
	return out
}
