package listener_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/fluss/wire"
	"strom/raftmeta/membership"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/server"
)

// nodeID is the test node's id.
const nodeID = 7

// startNode starts a real single Strom node with fluss.listen on a port
// the kernel picks.
func startNode(t *testing.T) *server.Server {
	t.Helper()
	return startNodeWith(t, nodeConfig(t, t.TempDir()))
}

// nodeConfig is startNode's configuration over dataDir; starting it again
// after a stop restarts the same node.
func nodeConfig(t *testing.T, dataDir string) server.Config {
	cfg := server.DefaultConfig()
	cfg.DataDir = dataDir
	cfg.Listen = "127.0.0.1:0"
	cfg.RaftListen = freeAddr(t)
	cfg.GossipListen = "127.0.0.1:0"
	cfg.GossipTimings = membership.LocalTimings()
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.FlussListen = "127.0.0.1:0"
	cfg.DefaultBucketNumber = 2
	cfg.NodeID = nodeID
	return cfg
}

func startNodeWith(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := server.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// client speaks Fluss's protocol on one connection, one request at a time.
type client struct {
	t  *testing.T
	c  net.Conn
	r  *wire.Reader
	id int32
}

func dialFluss(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(2 * time.Minute)) // a hang fails the test instead of the suite
	cl := &client{t: t, c: c, r: wire.NewReader(c, 64<<20, "test")}
	cl.ok(protocol.ApiVersions, &flusspb.ApiVersionsRequest{ClientSoftwareName: proto.String("test"), ClientSoftwareVersion: proto.String("0.9.1")}, &flusspb.ApiVersionsResponse{})
	return cl
}

// call sends req and returns the response; an error response as its
// ErrorResponse.
func (cl *client) call(key protocol.APIKey, req proto.Message) (wire.Response, *flusspb.ErrorResponse) {
	cl.t.Helper()
	cl.id++
	out, err := wire.AppendRequest(nil, wire.RequestHeader{APIKey: key, RequestID: cl.id}, req)
	if err != nil {
		cl.t.Fatal(err)
	}
	if _, err := cl.c.Write(out); err != nil {
		cl.t.Fatal(err)
	}
	frame, err := cl.r.ReadFrame()
	if err != nil {
		cl.t.Fatalf("%s: %v", key, err)
	}
	resp, err := wire.ParseResponse(frame)
	if err != nil || resp.RequestID != cl.id {
		cl.t.Fatalf("%s: %+v, %v; want request id %d", key, resp, err, cl.id)
	}
	if resp.Type == wire.SuccessResponse {
		return resp, nil
	}
	e, err := wire.DecodeError(resp.Body)
	if err != nil {
		cl.t.Fatalf("%s: error body: %v", key, err)
	}
	return resp, e
}

// ok calls and decodes a success into into.
func (cl *client) ok(key protocol.APIKey, req, into proto.Message) {
	cl.t.Helper()
	resp, e := cl.call(key, req)
	if e != nil {
		cl.t.Fatalf("%s: error %s: %s", key, protocol.ErrorCode(e.GetErrorCode()), e.GetErrorMessage())
	}
	if err := proto.Unmarshal(resp.Body, into); err != nil {
		cl.t.Fatalf("%s: %v", key, err)
	}
}

// fails calls and wants an error response with code, its message
// containing text.
func (cl *client) fails(key protocol.APIKey, req proto.Message, code protocol.ErrorCode, text string) {
	cl.t.Helper()
	_, e := cl.call(key, req)
	if e == nil || protocol.ErrorCode(e.GetErrorCode()) != code || !strings.Contains(e.GetErrorMessage(), text) {
		cl.t.Fatalf("%s: %v, want %s containing %q", key, e, code, text)
	}
}

func path(db, table string) *flusspb.PbTablePath {
	return &flusspb.PbTablePath{DatabaseName: proto.String(db), TableName: proto.String(table)}
}

func dbExists(cl *client, db string) bool {
	var r flusspb.DatabaseExistsResponse
	cl.ok(protocol.DatabaseExists, &flusspb.DatabaseExistsRequest{DatabaseName: proto.String(db)}, &r)
	return r.GetExists()
}

func tableExists(cl *client, db, table string) bool {
	var r flusspb.TableExistsResponse
	cl.ok(protocol.TableExists, &flusspb.TableExistsRequest{TablePath: path(db, table)}, &r)
	return r.GetExists()
}

// Table JSON as the Fluss 0.9.1 client sends it (TableDescriptorJsonSerde).
const (
	logTableJSON = `{"version":1,"schema":{"version":1,"columns":[{"name":"id","data_type":{"type":"BIGINT"},"id":0},{"name":"name","data_type":{"type":"STRING"},"comment":"who","id":1}],"highest_field_id":1},"comment":"a log table","partition_key":[],"bucket_key":[],"bucket_count":3,"properties":{},"custom_properties":{"owner":"fluss"}}`
	pkTableJSON  = `{"version":1,"schema":{"version":1,"columns":[{"name":"k","data_type":{"type":"INTEGER","nullable":false},"id":0},{"name":"v","data_type":{"type":"STRING"},"id":1}],"primary_key":["k"],"highest_field_id":1},"partition_key":[],"bucket_key":["k"],"properties":{},"custom_properties":{}}`
)

// Every catalog key against a real node over TCP, with the answers Fluss's
// client and Flink's catalog depend on, the error answers, and one catalog
// shared with the Connect API: a table created through either is the same
// table to both.
func TestCatalogKeysOnNode(t *testing.T) {
	s := startNode(t)
	cl := dialFluss(t, s.FlussAddr())

	// The database fluss exists by default (made once the node is ready);
	// Flink's probes of fluss_catalog and default_catalog answer false.
	for deadline := time.Now().Add(time.Minute); !dbExists(cl, "fluss"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the database fluss never appeared")
		}
	}
	for _, db := range []string{"fluss_catalog", "default_catalog"} {
		if dbExists(cl, db) {
			t.Errorf("DATABASE_EXISTS %s = true, want false", db)
		}
	}
	cl.fails(protocol.GetTableInfo, &flusspb.GetTableInfoRequest{TablePath: path("fluss", "default_catalog")}, protocol.TableNotExist, "GET_TABLE_INFO")

	// GET_METADATA without tables: this node is the coordinator and the one
	// tablet server, at its Fluss address.
	var md flusspb.MetadataResponse
	cl.ok(protocol.GetMetadata, &flusspb.MetadataRequest{}, &md)
	host, port, _ := net.SplitHostPort(s.FlussAddr())
	ts := md.GetTabletServers()
	if len(ts) != 1 || ts[0].GetHost() != host || strconv.Itoa(int(ts[0].GetPort())) != port || ts[0].GetNodeId() != nodeID {
		t.Fatalf("tablet_servers %v, want node %d at %s", ts, nodeID, s.FlussAddr())
	}
	if c := md.GetCoordinatorServer(); c.GetNodeId() != nodeID || c.GetPort() != ts[0].GetPort() {
		t.Fatalf("coordinator_server %v, want node %d", c, nodeID)
	}

	// Databases.
	createDB := func(name string, ignore bool) *flusspb.CreateDatabaseRequest {
		return &flusspb.CreateDatabaseRequest{DatabaseName: proto.String(name), IgnoreIfExists: proto.Bool(ignore),
			DatabaseJson: []byte(`{"version":1,"comment":"test db","custom_properties":{"k":"v"}}`)}
	}
	cl.ok(protocol.CreateDatabase, createDB("shop", false), &flusspb.CreateDatabaseResponse{})
	cl.fails(protocol.CreateDatabase, createDB("shop", false), protocol.DatabaseAlreadyExist, "shop")
	cl.ok(protocol.CreateDatabase, createDB("shop", true), &flusspb.CreateDatabaseResponse{})
	cl.fails(protocol.CreateDatabase, createDB("bad name!", false), protocol.InvalidDatabaseException, "database")
	cl.fails(protocol.CreateDatabase, &flusspb.CreateDatabaseRequest{DatabaseName: proto.String("x"), IgnoreIfExists: proto.Bool(false), DatabaseJson: []byte("{")},
		protocol.InvalidDatabaseException, "database_json")
	var dbs flusspb.ListDatabasesResponse
	cl.ok(protocol.ListDatabases, &flusspb.ListDatabasesRequest{}, &dbs)
	if got := dbs.GetDatabaseName(); !slices.Contains(got, "fluss") || !slices.Contains(got, "shop") {
		t.Fatalf("LIST_DATABASES %v, want fluss and shop", got)
	}
	admin := stromv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+s.Addr())
	ctx := context.Background()
	db, err := admin.GetDatabase(ctx, connect.NewRequest(&stromv1.GetDatabaseRequest{Database: "shop"}))
	if err != nil || db.Msg.Database.Comment != "test db" || db.Msg.Database.CustomProperties["k"] != "v" {
		t.Fatalf("the Connect API's GetDatabase shop: %v, %v; want the comment and properties given in database_json", db, err)
	}

	// Tables.
	createTable := func(name, js string, ignore bool) *flusspb.CreateTableRequest {
		return &flusspb.CreateTableRequest{TablePath: path("shop", name), TableJson: []byte(js), IgnoreIfExists: proto.Bool(ignore)}
	}
	cl.ok(protocol.CreateTable, createTable("events", logTableJSON, false), &flusspb.CreateTableResponse{})
	cl.ok(protocol.CreateTable, createTable("users", pkTableJSON, false), &flusspb.CreateTableResponse{})
	cl.fails(protocol.CreateTable, createTable("events", logTableJSON, false), protocol.TableAlreadyExist, "events")
	cl.ok(protocol.CreateTable, createTable("events", logTableJSON, true), &flusspb.CreateTableResponse{})
	cl.fails(protocol.CreateTable, createTable("broken", `{"version":1}`, false), protocol.InvalidTableException, "table_json")
	cl.fails(protocol.CreateTable, createTable("broken", `{"version":1,"schema":{"version":1,"columns":[{"name":"k","data_type":{"type":"INTEGER"},"id":0}],"primary_key":["nope"],"highest_field_id":0}}`, false),
		protocol.InvalidTableException, "nope")
	cl.fails(protocol.CreateTable, &flusspb.CreateTableRequest{TablePath: path("nodb", "t"), TableJson: []byte(logTableJSON), IgnoreIfExists: proto.Bool(false)},
		protocol.DatabaseNotExist, "nodb")
	// One made through the Connect API.
	if _, err := admin.CreateTable(ctx, connect.NewRequest(&stromv1.CreateTableRequest{Database: "shop", Table: "orders",
		Descriptor_: &stromv1.TableDescriptor{Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "o", Type: "BIGINT"}}}, BucketCount: 1}})); err != nil {
		t.Fatal(err)
	}

	var tables flusspb.ListTablesResponse
	cl.ok(protocol.ListTables, &flusspb.ListTablesRequest{DatabaseName: proto.String("shop")}, &tables)
	if got := slices.Sorted(slices.Values(tables.GetTableName())); !slices.Equal(got, []string{"events", "orders", "users"}) {
		t.Fatalf("LIST_TABLES shop = %v", got)
	}
	cl.fails(protocol.ListTables, &flusspb.ListTablesRequest{DatabaseName: proto.String("nodb")}, protocol.DatabaseNotExist, "nodb")
	if !tableExists(cl, "shop", "users") || tableExists(cl, "shop", "nope") || tableExists(cl, "nodb", "users") {
		t.Fatal("TABLE_EXISTS: want true for shop.users only")
	}

	// GET_TABLE_INFO: the table the Connect API sees, its descriptor as
	// Fluss's JSON.
	for _, name := range []string{"events", "users", "orders"} {
		var info flusspb.GetTableInfoResponse
		cl.ok(protocol.GetTableInfo, &flusspb.GetTableInfoRequest{TablePath: path("shop", name)}, &info)
		ct, err := admin.GetTable(ctx, connect.NewRequest(&stromv1.GetTableRequest{Database: "shop", Table: name}))
		if err != nil {
			t.Fatal(err)
		}
		if info.GetTableId() != ct.Msg.Table.TableId || info.GetSchemaId() != ct.Msg.Table.SchemaId || info.GetCreatedTime() != ct.Msg.Table.CreatedTimeMs {
			t.Errorf("%s: GET_TABLE_INFO id %d schema %d created %d; the Connect API: %d %d %d", name,
				info.GetTableId(), info.GetSchemaId(), info.GetCreatedTime(), ct.Msg.Table.TableId, ct.Msg.Table.SchemaId, ct.Msg.Table.CreatedTimeMs)
		}
		var d record.TableDescriptor
		if err := json.Unmarshal(info.GetTableJson(), &d); err != nil {
			t.Fatalf("%s: table_json %s: %v", name, info.GetTableJson(), err)
		}
		var cols []string
		for _, c := range d.Schema.Columns {
			cols = append(cols, c.Name+" "+c.Type.String())
		}
		if got, want := strings.Join(cols, ", "), strings.Join(connectColumns(ct.Msg.Table), ", "); got != want || d.BucketCount != len(ct.Msg.Table.Buckets) {
			t.Errorf("%s: table_json columns %q, %d buckets; the Connect API: %q, %d", name, got, d.BucketCount, want, len(ct.Msg.Table.Buckets))
		}
	}
	var info flusspb.GetTableInfoResponse
	cl.ok(protocol.GetTableInfo, &flusspb.GetTableInfoRequest{TablePath: path("shop", "events")}, &info)
	var events record.TableDescriptor
	json.Unmarshal(info.GetTableJson(), &events)
	if events.Comment != "a log table" || events.CustomProperties["owner"] != "fluss" || events.BucketCount != 3 || events.Schema.Columns[1].Comment != "who" {
		t.Errorf("shop.events from table_json: %+v; want the comment, custom properties, 3 buckets and the column comment given", events)
	}
	var users record.TableDescriptor
	cl.ok(protocol.GetTableInfo, &flusspb.GetTableInfoRequest{TablePath: path("shop", "users")}, &info)
	json.Unmarshal(info.GetTableJson(), &users)
	if !slices.Equal(users.Schema.PrimaryKey, []string{"k"}) || users.BucketCount != 2 {
		t.Errorf("shop.users: primary key %v, %d buckets; want [k] and the default bucket count 2", users.Schema.PrimaryKey, users.BucketCount)
	}

	// GET_TABLE_SCHEMA.
	var sch flusspb.GetTableSchemaResponse
	cl.ok(protocol.GetTableSchema, &flusspb.GetTableSchemaRequest{TablePath: path("shop", "users")}, &sch)
	var schema record.Schema
	if err := json.Unmarshal(sch.GetSchemaJson(), &schema); err != nil || sch.GetSchemaId() != info.GetSchemaId() || len(schema.Columns) != 2 {
		t.Fatalf("GET_TABLE_SCHEMA: id %d %s, %v", sch.GetSchemaId(), sch.GetSchemaJson(), err)
	}
	cl.ok(protocol.GetTableSchema, &flusspb.GetTableSchemaRequest{TablePath: path("shop", "users"), SchemaId: proto.Int32(sch.GetSchemaId())}, &sch)
	cl.fails(protocol.GetTableSchema, &flusspb.GetTableSchemaRequest{TablePath: path("shop", "users"), SchemaId: proto.Int32(sch.GetSchemaId() + 1)},
		protocol.SchemaNotExist, "schema")
	cl.fails(protocol.GetTableSchema, &flusspb.GetTableSchemaRequest{TablePath: path("shop", "nope")}, protocol.TableNotExist, "nope")

	// GET_METADATA of tables: each bucket led by this node once elected.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		cl.ok(protocol.GetMetadata, &flusspb.MetadataRequest{TablePath: []*flusspb.PbTablePath{path("shop", "events"), path("shop", "users")}}, &md)
		if led(md.GetTableMetadata(), nodeID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET_METADATA: %v; want every bucket led by node %d", md.GetTableMetadata(), nodeID)
		}
	}
	if tm := md.GetTableMetadata(); len(tm) != 2 || len(tm[0].GetBucketMetadata()) != 3 || len(tm[1].GetBucketMetadata()) != 2 || tm[0].GetTableId() == tm[1].GetTableId() {
		t.Fatalf("GET_METADATA tables %v; want events with 3 buckets and users with 2", tm)
	}
	cl.fails(protocol.GetMetadata, &flusspb.MetadataRequest{TablePath: []*flusspb.PbTablePath{path("shop", "nope")}}, protocol.TableNotExist, "nope")
	cl.fails(protocol.GetMetadata, &flusspb.MetadataRequest{PartitionsId: []int64{1}}, protocol.PartitionNotExists, "partitions")

	// Drops, with Fluss's ignore and cascade semantics.
	dropDB := func(name string, ignore, cascade bool) *flusspb.DropDatabaseRequest {
		return &flusspb.DropDatabaseRequest{DatabaseName: proto.String(name), IgnoreIfNotExists: proto.Bool(ignore), Cascade: proto.Bool(cascade)}
	}
	dropTable := func(name string, ignore bool) *flusspb.DropTableRequest {
		return &flusspb.DropTableRequest{TablePath: path("shop", name), IgnoreIfNotExists: proto.Bool(ignore)}
	}
	cl.fails(protocol.DropDatabase, dropDB("shop", false, false), protocol.DatabaseNotEmpty, "shop")
	cl.ok(protocol.DropTable, dropTable("events", false), &flusspb.DropTableResponse{})
	cl.fails(protocol.DropTable, dropTable("events", false), protocol.TableNotExist, "events")
	cl.ok(protocol.DropTable, dropTable("events", true), &flusspb.DropTableResponse{})
	if tableExists(cl, "shop", "events") {
		t.Fatal("shop.events exists after DROP_TABLE")
	}
	if _, err := admin.GetTable(ctx, connect.NewRequest(&stromv1.GetTableRequest{Database: "shop", Table: "events"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("the Connect API's GetTable of the dropped table: %v, want not found", err)
	}
	cl.ok(protocol.DropDatabase, dropDB("shop", false, true), &flusspb.DropDatabaseResponse{})
	if dbExists(cl, "shop") {
		t.Fatal("shop exists after DROP_DATABASE cascade")
	}
	cl.fails(protocol.DropDatabase, dropDB("shop", false, false), protocol.DatabaseNotExist, "shop")
	cl.ok(protocol.DropDatabase, dropDB("shop", true, false), &flusspb.DropDatabaseResponse{})
}

func connectColumns(t *stromv1.TableInfo) []string {
	var out []string
	for _, c := range t.Descriptor_.Schema.Columns {
		out = append(out, fmt.Sprintf("%s %s", c.Name, c.Type))
	}
	return out
}

func led(tms []*flusspb.PbTableMetadata, node int32) bool {
	for _, tm := range tms {
		for _, b := range tm.GetBucketMetadata() {
			if b.LeaderId == nil || b.GetLeaderId() != node || !slices.Equal(b.GetReplicaId(), []int32{node}) {
				return false
			}
		}
	}
	return len(tms) > 0
}
