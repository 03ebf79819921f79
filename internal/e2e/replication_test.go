package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// bucketState returns bucket 0's leader and ISR size as the cluster says.
func bucketState(ctx context.Context, c *client.Client, db, table string) (leader int32, isr int, err error) {
	ti, err := c.Admin().GetTable(ctx, db, table)
	if err != nil {
		return 0, 0, err
	}
	for _, b := range ti.Buckets {
		if b.Bucket == 0 {
			return b.Leader, len(b.Isr), nil
		}
	}
	return 0, 0, fmt.Errorf("no bucket 0 in %v", ti.Buckets)
}

// TestReplicatedProduceThroughLeaderSIGKILL: three real processes, a table
// of replication factor 3 and min ISR 2, an idempotent writer with acks=-1.
// The bucket's leader is SIGKILLed five times in a row (three with -short)
// while the writer runs, and restarted each time; before the next kill the
// restarted node is back in the ISR. Every acknowledged row is read back
// exactly once, offsets dense.
func TestReplicatedProduceThroughLeaderSIGKILL(t *testing.T) {
	bin := buildStrom(t)
	kills := 5
	if testing.Short() {
		kills = 3
	}
	t.Setenv("STROM_LOG_REPLICA_MIN_IN_SYNC_REPLICAS_NUMBER", "2")
	t.Setenv("STROM_LOG_REPLICA_MAX_LAG_TIME", "4s")
	pc := newProcCluster(t, bin, 3)
	pc.start(3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pc.waitFormed(ctx, []int32{1, 2, 3})

	var servers []string
	for _, id := range pc.ids() {
		servers = append(servers, pc.nodes[id].api)
	}
	c, err := client.New(servers[0]+","+servers[1]+","+servers[2], client.WithRetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "e2e", IgnoreIfExists: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "e2e", Table: "events", Descriptor_: &stromv1.TableDescriptor{
		Schema:      &stromv1.Schema{Columns: []*stromv1.Column{{Name: "id", Type: "BIGINT NOT NULL"}, {Name: "payload", Type: "STRING"}}},
		BucketCount: 1,
		Properties:  map[string]string{"table.replication.factor": "3"},
	}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := c.Table(ctx, "e2e", "events")
	if err != nil {
		t.Fatal(err)
	}
	w, err := tbl.NewAppendWriter(ctx, client.Acks(-1), client.BatchSize(8<<10), client.BatchTimeout(5*time.Millisecond),
		client.DeliveryTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu       sync.Mutex
		acked    = map[int64]bool{}
		failures = map[string]int{}
		stop     = make(chan struct{})
		done     = make(chan struct{})
	)
	settle := func(id int64, f *client.Future) {
		if _, _, err := f.Wait(ctx); err == nil {
			mu.Lock()
			acked[id] = true
			mu.Unlock()
		} else {
			mu.Lock()
			failures[err.Error()]++
			mu.Unlock()
		}
	}
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		defer wg.Wait()
		for id := int64(0); ; id++ {
			select {
			case <-stop:
				_ = w.Flush(ctx)
				return
			default:
			}
			f := w.Append(ctx, record.Row{id, fmt.Sprintf("payload-%d", id)})
			wg.Add(1)
			go func() { defer wg.Done(); settle(id, f) }()
			if id%50 == 0 {
				time.Sleep(5 * time.Millisecond) // about 10k rows a second
			}
		}
	}()

	for k := 1; k <= kills; k++ {
		var leader int32
		for {
			l, isr, err := bucketState(ctx, c, "e2e", "events")
			if err == nil && l > 0 && isr == 3 {
				leader = l
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("bucket 0 did not get back 3 in-sync replicas before kill %d (leader %d, ISR %d, %v)", k, l, isr, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // writes in flight at the kill
		n := pc.nodes[int(leader)]
		if err := n.kill(syscall.SIGKILL); err == nil {
			t.Fatal("SIGKILL: the process exited cleanly")
		}
		n.node = nil
		t.Logf("kill %d: SIGKILLed node %d, the bucket's leader", k, leader)
		time.Sleep(time.Second) // writes go on against the others
		pc.launch(int(leader))
		pc.nodes[int(leader)].waitReady()
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	if err := w.Close(ctx); err != nil {
		t.Logf("writer close: %v", err)
	}
	mu.Lock()
	t.Logf("%d rows acknowledged; failed appends by error: %v", len(acked), failures)
	mu.Unlock()

	seen := map[int64]int{}
	var next int64
	readAll(ctx, t, tbl, func(r client.ScanRecord) {
		if r.Offset != next {
			t.Fatalf("offset %d after %d: offsets are not dense", r.Offset, next-1)
		}
		next++
		seen[r.Row[0].(int64)]++
	})
	for id, n := range seen {
		if n != 1 {
			t.Errorf("row %d read %d times", id, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no row was acknowledged")
	}
	lost := 0
	for id := range acked {
		if seen[id] != 1 {
			if lost++; lost < 10 {
				t.Errorf("acknowledged row %d read %d times", id, seen[id])
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged rows lost", lost, len(acked))
	}
	t.Logf("read back %d rows; all %d acknowledged rows exactly once", len(seen), len(acked))
}
