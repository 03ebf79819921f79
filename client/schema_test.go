package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// TestTableBuilderCreatesTheTableDescribed creates a primary-key table
// through the builder and reads it back as the node stores it.
func TestTableBuilderCreatesTheTableDescribed(t *testing.T) {
	c := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "demo"}); err != nil {
		t.Fatal(err)
	}
	orders := client.NewTable(client.NewSchema().
		Column("order_id", client.BigInt()).
		Column("customer", client.String(), client.NotNull(), client.Comment("who")).
		Column("amount", client.Decimal(10, 2)).
		Column("ts", client.TimestampLTZ(3)).
		Column("code", client.Char(4)).
		PrimaryKey("order_id")).
		DistributedBy(4).
		Property(record.OptLogArrowZstdLevel, "3").
		Property("owner", "team-a").
		Comment("the orders")
	info, err := c.Admin().Create(ctx, "demo", "orders", orders, false)
	if err != nil {
		t.Fatal(err)
	}
	d := info.Descriptor_
	var cols []string
	for _, col := range d.Schema.Columns {
		cols = append(cols, col.Name+" "+col.Type+" "+col.Comment)
	}
	want := []string{"order_id BIGINT NOT NULL ", "customer STRING NOT NULL who", "amount DECIMAL(10, 2) ", "ts TIMESTAMP_LTZ(3) ", "code CHAR(4) "}
	if strings.Join(cols, "|") != strings.Join(want, "|") {
		t.Errorf("columns %q, want %q", cols, want)
	}
	if d.BucketCount != 4 || strings.Join(d.Schema.PrimaryKey, ",") != "order_id" || strings.Join(d.BucketKeys, ",") != "order_id" ||
		d.Comment != "the orders" || d.Properties[record.OptLogArrowZstdLevel] != "3" || d.CustomProperties["owner"] != "team-a" {
		t.Errorf("stored descriptor %v", d)
	}
	if _, err := c.Admin().Create(ctx, "demo", "orders", orders, true); err != nil {
		t.Errorf("ignoreIfExists: %v", err)
	}
	tbl, err := c.Table(ctx, "demo", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if !tbl.Schema().HasPrimaryKey() || tbl.Buckets() != 4 {
		t.Errorf("table %v with %d buckets", tbl.Schema(), tbl.Buckets())
	}
}

// TestTableBuilderReportsEveryProblem: the builder's mistakes come back
// together, each naming its field, before anything is sent.
func TestTableBuilderReportsEveryProblem(t *testing.T) {
	b := client.NewTable(client.NewSchema().
		Column("id", client.BigInt()).
		Column("id", client.String()).
		Column("price", client.Decimal(50, 2)).
		PrimaryKey("nope")).
		Property("table.log.tll", "1d")
	_, err := b.Descriptor()
	var inv *record.InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("got %v, want *record.InvalidError", err)
	}
	for _, want := range []string{`duplicate column name "id"`, "precision", `"nope" is not a column`, "table.log.tll"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// Nothing reaches a node: the client has none to reach.
	c, err := client.New("127.0.0.1:1", client.WithRetryTimeout(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().Create(context.Background(), "demo", "t", b, false); !errors.As(err, &inv) {
		t.Errorf("Create: %v, want the descriptor's problems", err)
	}
}
