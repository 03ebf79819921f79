package server

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"strom/fluss/listener"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
)

// flussListenerName names the Fluss listener in a registration's listeners
// string, after the API's (catalog.ListenerName).
const flussListenerName = "FLUSS"

// flussCatalog is listener.Catalog over the node: the AdminService handler
// the Connect API serves (the same validation, and writes sent on to the
// coordinator's node by its proxy), and the local catalog after a Sync for
// what AdminService answers in other shapes. Errors come back as domain
// errors (a proxied call's through rpc.RemoteErrorOf).
type flussCatalog struct {
	s     *Server
	admin *adminHandler
}

var _ listener.Catalog = flussCatalog{}

func (c flussCatalog) Cluster(ctx context.Context) (listener.Cluster, error) {
	if err := c.s.meta.Sync(ctx); err != nil {
		return listener.Cluster{}, err
	}
	out := listener.Cluster{Coordinator: -1}
	coord, _, _, err := c.s.cat.Coordinator()
	if err != nil {
		return out, err
	}
	if id, err := strconv.ParseInt(coord.ID, 10, 32); err == nil {
		out.Coordinator = int32(id)
	}
	servers, err := c.s.cat.TabletServers()
	if err != nil {
		return out, err
	}
	for _, ts := range servers {
		host, port, ok := splitHostPort(namedListener(ts.Registration.Listeners, flussListenerName))
		if !ok {
			continue // a node without fluss.listen is no Fluss tablet server
		}
		out.Servers = append(out.Servers, listener.ServerNode{ID: ts.ID, Host: host, Port: port, Rack: ts.Registration.Rack})
	}
	return out, nil
}

func splitHostPort(addr string) (string, int32, bool) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, false
	}
	return host, int32(port), true
}

func (c flussCatalog) Databases(ctx context.Context) ([]string, error) {
	resp, err := c.admin.ListDatabases(ctx, connect.NewRequest(&stromv1.ListDatabasesRequest{}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.Databases, nil
}

func (c flussCatalog) Database(ctx context.Context, name string) error {
	_, err := c.admin.GetDatabase(ctx, connect.NewRequest(&stromv1.GetDatabaseRequest{Database: name}))
	return err
}

func (c flussCatalog) Tables(ctx context.Context, db string) ([]string, error) {
	resp, err := c.admin.ListTables(ctx, connect.NewRequest(&stromv1.ListTablesRequest{Database: db}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.Tables, nil
}

// Table is GetTable's, answering the catalog's own entry, whose descriptor
// the listener writes as Fluss's JSON.
func (c flussCatalog) Table(ctx context.Context, db, name string) (catalog.Table, error) {
	if err := validatePath(db, name); err != nil {
		return catalog.Table{}, err
	}
	if err := c.s.meta.Sync(ctx); err != nil {
		return catalog.Table{}, err
	}
	return c.s.cat.Table(db, name)
}

func (c flussCatalog) CreateDatabase(ctx context.Context, name, comment string, props map[string]string, ignoreIfExists bool) error {
	_, err := c.admin.CreateDatabase(ctx, connect.NewRequest(&stromv1.CreateDatabaseRequest{
		Database: name, Comment: comment, CustomProperties: props, IgnoreIfExists: ignoreIfExists}))
	return rpc.RemoteErrorOf(err)
}

func (c flussCatalog) DropDatabase(ctx context.Context, name string, ignoreIfNotExists, cascade bool) error {
	_, err := c.admin.DropDatabase(ctx, connect.NewRequest(&stromv1.DropDatabaseRequest{
		Database: name, IgnoreIfNotExists: ignoreIfNotExists, Cascade: cascade}))
	return rpc.RemoteErrorOf(err)
}

func (c flussCatalog) CreateTable(ctx context.Context, db, name string, d record.TableDescriptor, ignoreIfExists bool) error {
	_, err := c.admin.CreateTable(ctx, connect.NewRequest(&stromv1.CreateTableRequest{
		Database: db, Table: name, Descriptor_: descriptorToProto(d), IgnoreIfExists: ignoreIfExists}))
	return rpc.RemoteErrorOf(err)
}

func (c flussCatalog) DropTable(ctx context.Context, db, name string, ignoreIfNotExists bool) error {
	_, err := c.admin.DropTable(ctx, connect.NewRequest(&stromv1.DropTableRequest{
		Database: db, Table: name, IgnoreIfNotExists: ignoreIfNotExists}))
	return rpc.RemoteErrorOf(err)
}

// namedListener is the address of listener name in a registration's
// listeners string ("CLIENT://host:port,FLUSS://host:port", Fluss's
// format); "" when it has none.
func namedListener(listeners, name string) string {
	for l := range strings.SplitSeq(listeners, ",") {
		if addr, ok := strings.CutPrefix(strings.TrimSpace(l), name+"://"); ok {
			return addr
		}
	}
	return ""
}

// listeners is the node's registration's listeners string: the API's
// address, and the Fluss listener's when fluss.listen is set.
func (s *Server) listeners() string {
	l := catalog.Listeners(s.apiAddr)
	if s.flussAddr != "" {
		l += "," + flussListenerName + "://" + s.flussAddr
	}
	return l
}

// flussDatabase is Fluss's default database, which a Fluss cluster
// creates at start and Flink's catalog expects.
const flussDatabase = "fluss"

// createFlussDatabase creates the database "fluss" if it does not exist,
// as a Fluss coordinator does when it starts, retrying until it is there
// or ctx ends (the coordinator may not be in office yet).
// openFluss opens the Fluss port (listener.Config.Open) once the database
// fluss exists, so a Fluss client that connects while the node starts waits
// for its first answer instead of getting NODE_NOT_READY or
// DATABASE_NOT_EXIST, neither of which the 0.9.1 client retries when it
// connects. Called once the node is ready.
func (s *Server) openFluss(ctx context.Context) {
	s.createFlussDatabase(ctx)
	close(s.flussOpen)
	s.lg.Info("serving the Fluss protocol", "addr", s.fluss.Addr().String(), "advertise", s.flussAddr)
}

func (s *Server) createFlussDatabase(ctx context.Context) {
	c := flussCatalog{s: s, admin: s.adminH}
	for {
		err := c.CreateDatabase(ctx, flussDatabase, "", nil, true)
		if err == nil {
			return
		}
		s.lg.Debug("create the database fluss", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(registerRetry):
		}
	}
}
