package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// The README's Go example: a log table made with the schema and table
// builders, rows appended, and read back from the beginning.
func Example() {
	ctx := context.Background()
	c, err := client.New("localhost:9123")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "demo", IgnoreIfExists: true}); err != nil {
		log.Fatal(err)
	}
	clicks := client.NewTable(client.NewSchema().
		Column("user_id", client.BigInt(), client.NotNull()).
		Column("url", client.String()).
		Column("ts", client.Timestamp(3))).
		DistributedBy(4, "user_id").
		Property(record.OptLogTTL, "3d")
	if _, err := c.Admin().Create(ctx, "demo", "clicks", clicks, true); err != nil {
		log.Fatal(err)
	}
	t, err := c.Table(ctx, "demo", "clicks")
	if err != nil {
		log.Fatal(err)
	}

	w, err := t.NewAppendWriter(ctx)
	if err != nil {
		log.Fatal(err)
	}
	w.Append(ctx, record.Row{int64(1), "/home", nil})
	w.Append(ctx, record.Row{int64(2), "/cart", nil})
	if err := w.Close(ctx); err != nil { // flushes; an error says a row failed (its Future says which)
		log.Fatal(err)
	}

	sc, err := t.NewLogScanner(client.Columns("user_id", "url"))
	if err != nil {
		log.Fatal(err)
	}
	defer sc.Close()
	for b := range t.Buckets() {
		if err := sc.Subscribe(ctx, b, client.Earliest()); err != nil {
			log.Fatal(err)
		}
	}
	fs, err := sc.Poll(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for r := range fs.Rows() { // in place; r.String aliases the batch until Release
		fmt.Println(r.Int64(0), r.String(1))
	}
	fs.Release()
}

// TestREADMEShowsTheExample keeps the README's Go example the code of
// Example, which the tests compile.
func TestREADMEShowsTheExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	body := s[strings.Index(s, "func Example() {\n")+len("func Example() {\n"):]
	body = body[:strings.Index(body, "\n}\n")]
	body = strings.ReplaceAll("\n"+body, "\n\t", "\n")[1:]
	if !strings.Contains(string(readme), "```go\n"+body+"\n```") {
		t.Errorf("README.md's Go example is not Example's body:\n%s", body)
	}
}
