package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	"strom/raftmeta/membership"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// testLogger writes through t.Log, so each node's logs sit with its test.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// testConfig is a node in dir on loopback ports chosen by the kernel.
func testConfig(t testing.TB, dir string) Config {
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.Listen = "127.0.0.1:0"
	cfg.RaftListen = freeAddr(t)
	cfg.GossipListen = "127.0.0.1:0"
	cfg.GossipTimings = membership.LocalTimings()
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

// freeAddr returns a loopback address with a port free right now.
// handedOut holds every address freeAddr returned in this test binary: a
// port picked free and closed may be picked again, and two nodes of one
// test given the same port fail to start.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

func freeAddr(t testing.TB) string {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := ln.Addr().String()
		ln.Close()
		handedOut.Lock()
		fresh := !handedOut.addrs[a]
		handedOut.addrs[a] = true
		handedOut.Unlock()
		if fresh {
			return a
		}
	}
}

func startServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func h2cClient() *http.Client {
	tr := &http.Transport{}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// protocols are the wire protocols every handler must serve.
var protocols = []struct {
	name string
	opts []connect.ClientOption
}{
	{"connect-proto", nil},
	{"connect-json", []connect.ClientOption{connect.WithProtoJSON()}},
	{"grpc", []connect.ClientOption{connect.WithGRPC()}},
	{"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}},
}

func adminClient(s *Server, opts ...connect.ClientOption) stromv1connect.AdminServiceClient {
	return stromv1connect.NewAdminServiceClient(h2cClient(), "http://"+s.Addr(), opts...)
}

func TestAdminOverEveryProtocol(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	for i, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := adminClient(s, p.opts...)
			db := "db_" + strings.ReplaceAll(p.name, "-", "_")
			if _, err := c.CreateDatabase(ctx, connect.NewRequest(&stromv1.CreateDatabaseRequest{Database: db, Comment: "c"})); err != nil {
				t.Fatalf("create database: %v", err)
			}
			created, err := c.CreateTable(ctx, connect.NewRequest(&stromv1.CreateTableRequest{
				Database: db, Table: "orders",
				Descriptor_: &stromv1.TableDescriptor{
					Schema: &stromv1.Schema{
						Columns: []*stromv1.Column{
							{Name: "id", Type: "BIGINT"}, {Name: "item", Type: "STRING"}, {Name: "amount", Type: "DECIMAL(10, 2)"},
						},
						PrimaryKey: []string{"id"},
					},
					BucketCount: 3,
					Properties:  map[string]string{"table.log.ttl": "3 d"},
				},
			}))
			if err != nil {
				t.Fatalf("create table: %v", err)
			}
			tbl := created.Msg.Table
			if tbl.TableId != int64(i) {
				t.Errorf("table id = %d, want %d (ids are dense from 0)", tbl.TableId, i)
			}
			if tbl.SchemaId != 1 {
				t.Errorf("schema id = %d, want 1", tbl.SchemaId)
			}
			cols := tbl.Descriptor_.Schema.Columns
			if cols[0].Type != "BIGINT NOT NULL" {
				t.Errorf("primary-key column type = %q, want BIGINT NOT NULL", cols[0].Type)
			}
			if got := tbl.Descriptor_.BucketKeys; len(got) != 1 || got[0] != "id" {
				t.Errorf("bucket keys = %v, want [id]", got)
			}
			if len(tbl.Buckets) != 3 {
				t.Fatalf("buckets = %d, want 3", len(tbl.Buckets))
			}
			for _, b := range tbl.Buckets {
				if b.Leader != 1 || len(b.Isr) != 1 || b.Isr[0] != 1 {
					t.Errorf("bucket %d: leader %d isr %v, want leader 1 isr [1]", b.Bucket, b.Leader, b.Isr)
				}
			}
			got, err := c.GetTable(ctx, connect.NewRequest(&stromv1.GetTableRequest{Database: db, Table: "orders"}))
			if err != nil {
				t.Fatalf("get table: %v", err)
			}
			if got.Msg.Table.TableId != tbl.TableId || got.Msg.Table.Descriptor_.Properties["table.log.ttl"] != "3 d" {
				t.Errorf("get table = %v, want what create returned", got.Msg.Table)
			}
			list, err := c.ListTables(ctx, connect.NewRequest(&stromv1.ListTablesRequest{Database: db}))
			if err != nil || len(list.Msg.Tables) != 1 || list.Msg.Tables[0] != "orders" {
				t.Fatalf("list tables = %v, %v", list, err)
			}
			dbs, err := c.ListDatabases(ctx, connect.NewRequest(&stromv1.ListDatabasesRequest{}))
			if err != nil || !contains(dbs.Msg.Databases, db) {
				t.Fatalf("list databases = %v, %v", dbs, err)
			}
			cl, err := c.DescribeCluster(ctx, connect.NewRequest(&stromv1.DescribeClusterRequest{}))
			if err != nil {
				t.Fatalf("describe cluster: %v", err)
			}
			if cl.Msg.RaftLeader != 1 || len(cl.Msg.Nodes) != 1 || cl.Msg.ClusterId != s.ClusterID() || cl.Msg.CoordinatorEpoch < 1 {
				t.Errorf("describe cluster = %v", cl.Msg)
			}
			if roles := strings.Join(cl.Msg.Nodes[0].Roles, ","); roles != "coordinator,raft-leader,raft-voter,tablet-server" {
				t.Errorf("roles = %s", roles)
			}
			if _, err := c.DropTable(ctx, connect.NewRequest(&stromv1.DropTableRequest{Database: db, Table: "orders"})); err != nil {
				t.Fatalf("drop table: %v", err)
			}
			if _, err := c.GetTable(ctx, connect.NewRequest(&stromv1.GetTableRequest{Database: db, Table: "orders"})); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("get dropped table: %v, want NotFound", err)
			}
			if _, err := c.DropDatabase(ctx, connect.NewRequest(&stromv1.DropDatabaseRequest{Database: db})); err != nil {
				t.Fatalf("drop database: %v", err)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestDropDatabaseNeedsCascade(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	c := adminClient(s)
	ctx := context.Background()
	mustCreateDB(t, c, "demo")
	mustCreateLogTable(t, c, "demo", "t1")
	mustCreateLogTable(t, c, "demo", "t2")
	_, err := c.DropDatabase(ctx, connect.NewRequest(&stromv1.DropDatabaseRequest{Database: "demo"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || errDetail(err).GetName() != "DATABASE_NOT_EMPTY" {
		t.Fatalf("drop non-empty database: %v, want FailedPrecondition DATABASE_NOT_EMPTY", err)
	}
	if _, err := c.DropDatabase(ctx, connect.NewRequest(&stromv1.DropDatabaseRequest{Database: "demo", Cascade: true})); err != nil {
		t.Fatalf("drop cascade: %v", err)
	}
	if _, err := c.GetDatabase(ctx, connect.NewRequest(&stromv1.GetDatabaseRequest{Database: "demo"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("get dropped database: %v", err)
	}
	// The dropped tables' assignments are gone too: a new database can reuse the names.
	mustCreateDB(t, c, "demo")
	mustCreateLogTable(t, c, "demo", "t1")
	// ignore flags
	if _, err := c.DropDatabase(ctx, connect.NewRequest(&stromv1.DropDatabaseRequest{Database: "nope", IgnoreIfNotExists: true})); err != nil {
		t.Fatalf("drop missing with ignore: %v", err)
	}
	if _, err := c.CreateDatabase(ctx, connect.NewRequest(&stromv1.CreateDatabaseRequest{Database: "demo", IgnoreIfExists: true})); err != nil {
		t.Fatalf("create existing with ignore: %v", err)
	}
	if _, err := c.DropTable(ctx, connect.NewRequest(&stromv1.DropTableRequest{Database: "demo", Table: "nope", IgnoreIfNotExists: true})); err != nil {
		t.Fatalf("drop missing table with ignore: %v", err)
	}
}

func mustCreateDB(t *testing.T, c stromv1connect.AdminServiceClient, db string) {
	t.Helper()
	if _, err := c.CreateDatabase(context.Background(), connect.NewRequest(&stromv1.CreateDatabaseRequest{Database: db})); err != nil {
		t.Fatalf("create database %s: %v", db, err)
	}
}

func mustCreateLogTable(t *testing.T, c stromv1connect.AdminServiceClient, db, table string) *stromv1.TableInfo {
	t.Helper()
	resp, err := c.CreateTable(context.Background(), connect.NewRequest(&stromv1.CreateTableRequest{
		Database: db, Table: table,
		Descriptor_: &stromv1.TableDescriptor{Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "a", Type: "INT"}}}},
	}))
	if err != nil {
		t.Fatalf("create table %s.%s: %v", db, table, err)
	}
	return resp.Msg.Table
}

func errDetail(err error) *stromv1.ErrorDetail {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if ed, ok := v.(*stromv1.ErrorDetail); ok {
				return ed
			}
		}
	}
	return nil
}

func TestBadInputIsRejectedAndNothingWritten(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	c := adminClient(s)
	ctx := context.Background()
	mustCreateDB(t, c, "demo")
	first := mustCreateLogTable(t, c, "demo", "existing")

	cols := func(specs ...string) *stromv1.Schema {
		sc := &stromv1.Schema{}
		for _, sp := range specs {
			name, typ, _ := strings.Cut(sp, " ")
			sc.Columns = append(sc.Columns, &stromv1.Column{Name: name, Type: typ})
		}
		return sc
	}
	withPK := func(sc *stromv1.Schema, pk ...string) *stromv1.Schema { sc.PrimaryKey = pk; return sc }
	tests := []struct {
		name      string
		db, table string
		desc      *stromv1.TableDescriptor
		code      connect.Code
		field     string // substring of ErrorDetail.field
		msg       string // substring of the message
	}{
		{"invalid table name", "demo", "bad name!", &stromv1.TableDescriptor{Schema: cols("a INT")}, connect.CodeInvalidArgument, "table", "bad name!"},
		{"invalid database name", "bad/db", "t", &stromv1.TableDescriptor{Schema: cols("a INT")}, connect.CodeInvalidArgument, "database", "bad/db"},
		{"table name too long", "demo", strings.Repeat("x", 201), &stromv1.TableDescriptor{Schema: cols("a INT")}, connect.CodeInvalidArgument, "table", "200"},
		{"duplicate column", "demo", "t", &stromv1.TableDescriptor{Schema: cols("a INT", "a STRING")}, connect.CodeInvalidArgument, "columns", "a"},
		{"unknown type", "demo", "t", &stromv1.TableDescriptor{Schema: cols("a INTEGRAL")}, connect.CodeInvalidArgument, "columns[0].type", "INTEGRAL"},
		{"primary key names missing column", "demo", "t", &stromv1.TableDescriptor{Schema: withPK(cols("a INT"), "b")}, connect.CodeInvalidArgument, "primary", "b"},
		{"bucket key outside primary key", "demo", "t", &stromv1.TableDescriptor{Schema: withPK(cols("a INT", "b INT"), "a"), BucketKeys: []string{"b"}}, connect.CodeInvalidArgument, "bucket", "b"},
		{"unknown table option", "demo", "t", &stromv1.TableDescriptor{Schema: cols("a INT"), Properties: map[string]string{"table.log.tll": "1d"}}, connect.CodeInvalidArgument, "table.log.tll", "table.log.ttl"},
		{"no columns", "demo", "t", &stromv1.TableDescriptor{Schema: cols()}, connect.CodeInvalidArgument, "columns", "column"},
		{"no descriptor", "demo", "t", nil, connect.CodeInvalidArgument, "descriptor", "schema"},
		{"missing database", "nodb", "t", &stromv1.TableDescriptor{Schema: cols("a INT")}, connect.CodeNotFound, "", "nodb"},
		{"existing table", "demo", "existing", &stromv1.TableDescriptor{Schema: cols("a INT")}, connect.CodeAlreadyExists, "", "demo.existing"},
		{"partitioned table", "demo", "t", &stromv1.TableDescriptor{Schema: cols("a INT", "day STRING"), PartitionKeys: []string{"day"}}, connect.CodeInvalidArgument, "partition_keys", "partitioned tables are not supported yet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.CreateTable(ctx, connect.NewRequest(&stromv1.CreateTableRequest{Database: tc.db, Table: tc.table, Descriptor_: tc.desc}))
			if connect.CodeOf(err) != tc.code {
				t.Fatalf("err = %v, want code %v", err, tc.code)
			}
			if d := errDetail(err); d == nil || !strings.Contains(d.Field, tc.field) || d.Retriable {
				t.Errorf("error detail %v: want field containing %q, not retriable", d, tc.field)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %q does not mention %q", err.Error(), tc.msg)
			}
		})
	}
	if _, err := c.CreateDatabase(ctx, connect.NewRequest(&stromv1.CreateDatabaseRequest{Database: "demo"})); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Errorf("create existing database: %v, want AlreadyExists", err)
	}
	if _, err := c.CreateDatabase(ctx, connect.NewRequest(&stromv1.CreateDatabaseRequest{Database: ""})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("create database with empty name: %v, want InvalidArgument", err)
	}

	// Nothing was written: the only table is the one created before, and the
	// next table gets the next id.
	list, err := c.ListTables(ctx, connect.NewRequest(&stromv1.ListTablesRequest{Database: "demo"}))
	if err != nil || len(list.Msg.Tables) != 1 {
		t.Fatalf("tables after bad input = %v, %v; want only [existing]", list, err)
	}
	dbs, _ := c.ListDatabases(ctx, connect.NewRequest(&stromv1.ListDatabasesRequest{}))
	if len(dbs.Msg.Databases) != 1 {
		t.Fatalf("databases after bad input = %v", dbs.Msg.Databases)
	}
	if next := mustCreateLogTable(t, c, "demo", "next"); next.TableId != first.TableId+1 {
		t.Fatalf("next table id = %d, want %d: a rejected request consumed an id", next.TableId, first.TableId+1)
	}
}

func TestMalformedRequestsKeepNodeServing(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	base := "http://" + s.Addr() + "/strom.v1.AdminService/"
	for _, tc := range []struct {
		name, method, contentType string
		body                      []byte
	}{
		{"truncated json", "ListTables", "application/json", []byte(`{"database":`)},
		{"wrong json type", "ListTables", "application/json", []byte(`{"database": 5}`)},
		{"json array", "CreateTable", "application/json", []byte(`[1, 2]`)},
		{"garbage protobuf", "ListTables", "application/proto", []byte{0xff, 0xff, 0xff, 0x0f, 0x01}},
		{"truncated protobuf", "CreateTable", "application/proto", []byte{0x0a, 0x40, 'd', 'b'}},
		{"binary garbage as json", "CreateDatabase", "application/json", bytes.Repeat([]byte{0x00, 0x9f}, 64)},
		{"unknown content type", "ListTables", "text/plain", []byte(`hello`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(base+tc.method, tc.contentType, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 || resp.StatusCode >= 500 {
				t.Fatalf("status %d (%s), want a 4xx error", resp.StatusCode, body)
			}
		})
	}
	// The node still serves.
	resp, err := http.Post(base+"ListDatabases", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("valid request after malformed ones: status %d", resp.StatusCode)
	}
}

func TestJSONOverPlainHTTP(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	post := func(method, body string) (int, string) {
		resp, err := http.Post("http://"+s.Addr()+"/strom.v1.AdminService/"+method, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("CreateDatabase", `{"database":"demo"}`); code != 200 {
		t.Fatalf("create database: %d %s", code, body)
	}
	code, body := post("CreateTable", `{"database":"demo","table":"orders","descriptor":{"schema":{"columns":[{"name":"id","type":"BIGINT"},{"name":"v","type":"STRING"}],"primaryKey":["id"]},"bucketCount":2}}`)
	if code != 200 || !strings.Contains(body, `"tableId"`) && !strings.Contains(body, `"table"`) {
		t.Fatalf("create table: %d %s", code, body)
	}
	code, body = post("ListTables", `{"database":"demo"}`)
	var listed struct{ Tables []string }
	if err := json.Unmarshal([]byte(body), &listed); code != 200 || err != nil || len(listed.Tables) != 1 || listed.Tables[0] != "orders" {
		t.Fatalf("list tables: %d %s", code, body)
	}
	code, body = post("GetTable", `{"database":"demo","table":"missing"}`)
	if code != 404 || !strings.Contains(body, `"not_found"`) || !strings.Contains(body, "demo.missing") {
		t.Fatalf("get missing table: %d %s", code, body)
	}
}

func TestReflectionAndHealth(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	rc := grpcreflect.NewClient(h2cClient(), "http://"+s.Addr())
	stream := rc.NewStream(ctx)
	defer stream.Close()
	names, err := stream.ListServices()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	var got []string
	for _, n := range names {
		got = append(got, string(n))
	}
	if !contains(got, stromv1connect.AdminServiceName) {
		t.Fatalf("reflection lists %v, want %s", got, stromv1connect.AdminServiceName)
	}
	// grpchealth speaks the Connect protocol too: JSON over plain HTTP.
	resp, err := http.Post("http://"+s.Addr()+"/grpc.health.v1.Health/Check", "application/json",
		strings.NewReader(`{"service":"`+stromv1connect.AdminServiceName+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "SERVING") {
		t.Fatalf("health check = %d %s, want SERVING", resp.StatusCode, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s = %d, want 200", path, resp.StatusCode)
		}
	}
}

func TestRestartKeepsCatalogAndIdentity(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	s := startServer(t, cfg)
	c := adminClient(s)
	mustCreateDB(t, c, "demo")
	logT := mustCreateLogTable(t, c, "demo", "events")
	clusterID := s.ClusterID()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("stop: %v", err)
	}

	cfg.Listen = "127.0.0.1:0"
	s2 := startServer(t, cfg)
	if s2.ClusterID() != clusterID {
		t.Fatalf("cluster id changed across restart: %s → %s", clusterID, s2.ClusterID())
	}
	got, err := adminClient(s2).GetTable(context.Background(), connect.NewRequest(&stromv1.GetTableRequest{Database: "demo", Table: "events"}))
	if err != nil {
		t.Fatalf("get table after restart: %v", err)
	}
	if got.Msg.Table.TableId != logT.TableId {
		t.Fatalf("table id after restart = %d, want %d", got.Msg.Table.TableId, logT.TableId)
	}
	cl, err := adminClient(s2).DescribeCluster(context.Background(), connect.NewRequest(&stromv1.DescribeClusterRequest{}))
	if err != nil || cl.Msg.CoordinatorEpoch < 2 {
		t.Fatalf("coordinator epoch after restart = %v, %v; want ≥ 2 (a new term)", cl, err)
	}
	if err := s2.Stop(context.Background()); err != nil {
		t.Fatalf("stop: %v", err)
	}

	// The same directory under another node id is refused.
	cfg.NodeID = 2
	_, err = Start(context.Background(), cfg, testLogger(t))
	if !errors.Is(err, ErrIdentityMismatch) || !strings.Contains(err.Error(), "--node-id 1") {
		t.Fatalf("start with another node id: %v, want ErrIdentityMismatch naming --node-id 1", err)
	}
	// And under another cluster id.
	cfg.NodeID = 1
	cfg.ClusterID = "someothercluster"
	_, err = Start(context.Background(), cfg, testLogger(t))
	if !errors.Is(err, ErrIdentityMismatch) {
		t.Fatalf("start with another cluster id: %v, want ErrIdentityMismatch", err)
	}
}

func TestRegistrationCarriesTheRack(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Rack = "zone-a"
	s := startServer(t, cfg)
	servers, err := s.cat.TabletServers()
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 1 || servers[0].Registration.Rack != "zone-a" {
		t.Fatalf("registrations %+v, want one with rack zone-a (node.rack)", servers)
	}
}
