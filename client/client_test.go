package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"strom/client"
	"strom/internal/metatest"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/server"
)

// startNode runs a real single-node server in-process.
func startNode(t testing.TB) *client.Client {
	t.Helper()
	return startNodeIn(t, t.TempDir())
}

// startNodeIn is startNode with its data in dir.
func startNodeIn(t testing.TB, dir string) *client.Client {
	t.Helper()
	s := startServer(t, dir, "127.0.0.1:0")
	c, err := client.New(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startServer runs a real single-node server in-process, its data in dir
// and its API on listen, and returns once it is ready. A benchmark's server
// logs only warnings and errors.
func startServer(t testing.TB, dir, listen string) *server.Server {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.Listen = listen
	// A port of its own, not the default gossip port 9125 that a local
	// cluster (scripts/cluster.sh) uses.
	cfg.GossipListen = "127.0.0.1:0"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.RaftListen = ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lg := metatest.Logger(t)
	if _, ok := t.(*testing.B); ok {
		lg = metatest.LoggerAt(t, slog.LevelWarn)
	}
	s, err := server.Start(ctx, cfg, lg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func createTable(t testing.TB, c *client.Client, db, name string, buckets int32, bucketKey []string, cols ...*stromv1.Column) *client.Table {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: db, IgnoreIfExists: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: db, Table: name, Descriptor_: &stromv1.TableDescriptor{
		Schema: &stromv1.Schema{Columns: cols}, BucketCount: buckets, BucketKeys: bucketKey,
	}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Table(ctx, db, name)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func TestWriteAndScan(t *testing.T) {
	c := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tbl := createTable(t, c, "demo", "orders", 4, []string{"user"},
		&stromv1.Column{Name: "user", Type: "STRING NOT NULL"}, &stromv1.Column{Name: "amount", Type: "BIGINT"}, &stromv1.Column{Name: "note", Type: "STRING"})
	before := time.Now()
	w, err := tbl.NewAppendWriter(ctx, client.BatchTimeout(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	var futures []*client.Future
	for i := 0; i < n; i++ {
		futures = append(futures, w.Append(ctx, record.Row{fmt.Sprintf("user-%d", i%37), int64(i), "note"}))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	key, err := record.NewKeyCodec(tbl.Schema().Columns, []string{"user"})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range futures {
		bucket, _, err := f.Wait(ctx)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		k, _ := key.AppendRow(nil, record.Row{fmt.Sprintf("user-%d", i%37), int64(i), "note"})
		if want := int32(record.BucketOf(k, 4)); bucket != want {
			t.Fatalf("row %d went to bucket %d, Fluss's bucketing says %d", i, bucket, want)
		}
	}
	// A row that does not fit the schema fails at once.
	if f := w.Append(ctx, record.Row{nil, int64(1), nil}); f.Err() == nil {
		t.Fatal("NULL in a NOT NULL column accepted")
	}

	sc, err := tbl.NewLogScanner(client.Columns("amount"), client.MaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for b := int32(0); b < 4; b++ {
		if err := sc.Subscribe(ctx, b, client.Earliest()); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int64]bool{}
	for len(seen) < n {
		fs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Errors(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			if len(r.Row) != 1 || r.ChangeType != record.AppendOnly || r.Timestamp.Before(before.Add(-time.Second)) {
				t.Fatalf("record %+v", r)
			}
			seen[r.Row[0].(int64)] = true
		}
		fs.Release()
	}

	// Latest sees only new rows; a timestamp in the future too.
	sc2, _ := tbl.NewLogScanner(client.MaxWait(50 * time.Millisecond))
	if err := sc2.Subscribe(ctx, 0, client.Latest()); err != nil {
		t.Fatal(err)
	}
	if err := sc2.Subscribe(ctx, 1, client.AtTimestamp(time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	fs, err := sc2.Poll(ctx)
	if err != nil || len(fs.Records()) != 0 {
		t.Fatalf("latest: %v records, %v", len(fs.Records()), err)
	}
	if _, err := tbl.NewLogScanner(client.Columns("nope")); err == nil {
		t.Fatal("unknown column accepted")
	}
}

func TestServerErrorsAreTyped(t *testing.T) {
	c := startNode(t)
	_, err := c.Table(context.Background(), "nodb", "t")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Name != "DATABASE_NOT_EXIST" || ce.Retriable {
		t.Fatalf("err = %#v", err)
	}
	dead, _ := client.New("127.0.0.1:1")
	_, err = dead.Admin().ListDatabases(context.Background())
	if !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("unreachable node: %v", err)
	}
}

func TestCloseWhileAppending(t *testing.T) {
	c := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tbl := createTable(t, c, "demo", "races", 3, nil, &stromv1.Column{Name: "v", Type: "BIGINT"})
	w, err := tbl.NewAppendWriter(ctx, client.BatchTimeout(time.Millisecond), client.BatchSize(256))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			for i := int64(0); ; i++ {
				select {
				case <-done:
					return
				default:
				}
				w.Append(ctx, record.Row{i})
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := w.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	close(done)
	if f := w.Append(ctx, record.Row{int64(1)}); f.Err() == nil {
		t.Fatal("append after close accepted")
	}
}

func TestUpsertLookupScan(t *testing.T) {
	c := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "shop"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "shop", Table: "orders", Descriptor_: &stromv1.TableDescriptor{
		Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "region", Type: "STRING"}, {Name: "id", Type: "BIGINT"}, {Name: "amount", Type: "BIGINT"}, {Name: "note", Type: "STRING"}},
			PrimaryKey: []string{"region", "id"}},
		BucketKeys: []string{"region"}, BucketCount: 3,
	}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Table(ctx, "shop", "orders")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewUpsertWriter(ctx, client.BatchTimeout(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	regions := []string{"eu", "us", "ap"}
	for i := int64(0); i < 300; i++ {
		w.Upsert(ctx, record.Row{regions[i%3], i, i * 10, "first"})
	}
	for i := int64(0); i < 300; i += 2 {
		w.Upsert(ctx, record.Row{regions[i%3], i, i * 100, "second"})
	}
	for i := int64(0); i < 300; i += 3 {
		w.Delete(ctx, record.Row{regions[i%3], i, nil, nil})
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Partial update of the note only.
	pw, err := tbl.NewUpsertWriter(ctx, client.TargetColumns("region", "id", "note"))
	if err != nil {
		t.Fatal(err)
	}
	pw.Upsert(ctx, record.Row{"us", int64(1), nil, "partial"})
	if err := pw.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.NewUpsertWriter(ctx, client.TargetColumns("note")); err == nil {
		t.Fatal("a partial update without the key was accepted")
	}

	l, err := tbl.NewLookuper()
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Lookup(ctx, record.Row{"us", int64(1)}, record.Row{"eu", int64(3)}, record.Row{"ap", int64(2)}, record.Row{"us", int64(4)})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] == nil || got[0][2] != int64(10) || got[0][3] != "partial" {
		t.Fatalf("us/1 = %v, want amount 10 and the partial note", got[0])
	}
	if got[1] != nil {
		t.Fatalf("eu/3 was deleted, got %v", got[1])
	}
	if got[2] == nil || got[2][2] != int64(200) || got[2][3] != "second" {
		t.Fatalf("ap/2 = %v", got[2])
	}
	if got[3] == nil || got[3][2] != int64(400) {
		t.Fatalf("us/4 = %v", got[3])
	}
	// "us" rows are ids ≡ 1 (mod 3): none deleted; "eu" ones (≡ 0) all were.
	us, err := l.PrefixLookup(ctx, record.Row{"us"})
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 100 {
		t.Fatalf("prefix us: %d rows, want 100", len(us))
	}
	ids := map[int64]bool{}
	for _, r := range us {
		if r[0] != "us" || ids[r[1].(int64)] {
			t.Fatalf("prefix row %v: not us, or twice", r)
		}
		ids[r[1].(int64)] = true
	}
	if eu, err := l.PrefixLookup(ctx, record.Row{"eu"}); err != nil || len(eu) != 0 {
		t.Fatalf("prefix eu: %d rows, %v; want none", len(eu), err)
	}
	total := 0
	for b := int32(0); b < 3; b++ {
		rows, err := tbl.Scan(ctx, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		total += len(rows)
	}
	if total != 200 {
		t.Fatalf("scan: %d rows, want 200 (300 less 100 deleted)", total)
	}
}

func TestLookuperBatchesConcurrentGets(t *testing.T) {
	c := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "demo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "demo", Table: "kv", Descriptor_: &stromv1.TableDescriptor{
		Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "k", Type: "BIGINT"}, {Name: "v", Type: "STRING"}}, PrimaryKey: []string{"k"}}, BucketCount: 2,
	}}); err != nil {
		t.Fatal(err)
	}
	// Count Lookup requests with a client whose transport counts them.
	var lookups atomic.Int64
	counting, err := client.New(c.Address(), client.WithHTTPClient(&http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/Lookup") {
			lookups.Add(1)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := counting.Table(ctx, "demo", "kv")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewUpsertWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := int64(0); k < 100; k++ {
		w.Upsert(ctx, record.Row{k, fmt.Sprint("v", k)})
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.NewLookuper(client.LookupBatchTimeout(20 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for k := int64(0); k < 200; k++ {
		wg.Add(1)
		go func(k int64) {
			defer wg.Done()
			row, err := l.Get(ctx, record.Row{k})
			switch {
			case err != nil:
				errs <- err
			case k < 100 && (row == nil || row[1] != fmt.Sprint("v", k)):
				errs <- fmt.Errorf("key %d: %v", k, row)
			case k >= 100 && row != nil:
				errs <- fmt.Errorf("absent key %d: %v", k, row)
			}
		}(k)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := lookups.Load(); n >= 200 || n < 2 {
		t.Fatalf("200 concurrent Gets made %d Lookup requests; want them batched (≤ 128 keys each)", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
