package client

import (
	"context"

	stromv1 "strom/rpc/gen/strom/v1"
)

// Admin manages databases and tables. Its messages are the API's own
// (package strom/rpc/gen/strom/v1).
type Admin struct {
	c *Client
}

// CreateDatabase registers a database.
func (a *Admin) CreateDatabase(ctx context.Context, req *stromv1.CreateDatabaseRequest) (*stromv1.DatabaseInfo, error) {
	resp, err := callSeed(ctx, a.c, viaAdmin(adminAPI.CreateDatabase), req)
	if err != nil {
		return nil, err
	}
	return resp.Database, nil
}

// DropDatabase removes a database (with its tables when req.Cascade).
func (a *Admin) DropDatabase(ctx context.Context, req *stromv1.DropDatabaseRequest) error {
	_, err := callSeed(ctx, a.c, viaAdmin(adminAPI.DropDatabase), req)
	return err
}

// GetDatabase describes a database.
func (a *Admin) GetDatabase(ctx context.Context, name string) (*stromv1.DatabaseInfo, error) {
	resp, err := callSeed(ctx, a.c, viaAdmin(adminAPI.GetDatabase), &stromv1.GetDatabaseRequest{Database: name})
	if err != nil {
		return nil, err
	}
	return resp.Database, nil
}

// ListDatabases returns the database names in lexical order.
func (a *Admin) ListDatabases(ctx context.Context) ([]string, error) {
	resp, err := callSeed(ctx, a.c, viaAdmin(adminAPI.ListDatabases), &stromv1.ListDatabasesRequest{})
	if err != nil {
		return nil, err
	}
	return resp.Databases, nil
}

// CreateTable registers a table and returns it as stored.
func (a *Admin) CreateTable(ctx context.Context, req *stromv1.CreateTableRequest) (*stromv1.TableInfo, error) {
	resp, err := callSeed(ctx, a.c, viaAdmin(adminAPI.CreateTable), req)
	if err != nil {
		return nil, err
	}
	return resp.Table, nil
}

// GetTable describes a table.
func (a *Admin) GetTable(ctx context.Context, db, table string) (*stromv1.TableInfo, error) {
	resp, err := callSeed(ctx, a.c, viaAdmin(adminAPI.GetTable), &stromv1.GetTableRequest{Database: db, Table: table})
	if err != nil {
		return nil, err
	}
	return resp.Table, nil
}

// ListTables returns the table names of a database in lexical order.
func (a *Admin) ListTables(ctx context.Context, db string) ([]string, error) {
	resp, err := callSeed(ctx, a.c, viaAdmin(adminAPI.ListTables), &stromv1.ListTablesRequest{Database: db})
	if err != nil {
		return nil, err
	}
	return resp.Tables, nil
}

// DropTable removes a table.
func (a *Admin) DropTable(ctx context.Context, req *stromv1.DropTableRequest) error {
	_, err := callSeed(ctx, a.c, viaAdmin(adminAPI.DropTable), req)
	return err
}

// DescribeCluster lists the nodes and the metadata group.
func (a *Admin) DescribeCluster(ctx context.Context) (*stromv1.DescribeClusterResponse, error) {
	return callSeed(ctx, a.c, viaAdmin(adminAPI.DescribeCluster), &stromv1.DescribeClusterRequest{})
}
