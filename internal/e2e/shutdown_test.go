package e2e

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"strom/client"
	stromv1 "strom/rpc/gen/strom/v1"
)

// TestControlledShutdownOnSIGTERM: three processes, a table of 6 buckets at
// replication factor 3 (each node leads 2). SIGTERM to the Raft leader (the
// coordinator): by the time the process has exited, the metadata leadership
// has moved and the new coordinator has given the stopped node's buckets
// other leaders from their ISRs; nothing waited for the node's session to
// expire.
func TestControlledShutdownOnSIGTERM(t *testing.T) {
	bin := buildStrom(t)
	c := newProcCluster(t, bin, 3)
	c.start(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stopped := int(c.waitFormed(ctx, []int32{1, 2, 3}).RaftLeader)

	cl, err := client.New(c.nodes[stopped].api)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "db"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "db", Table: "t",
		Descriptor_: &stromv1.TableDescriptor{
			Schema:      &stromv1.Schema{Columns: []*stromv1.Column{{Name: "id", Type: "BIGINT"}}},
			BucketCount: 6,
			Properties:  map[string]string{"table.replication.factor": "3"},
		}}); err != nil {
		t.Fatal(err)
	}
	before, err := cl.Admin().GetTable(ctx, "db", "t")
	if err != nil {
		t.Fatal(err)
	}
	leads := map[int32]int{}
	for _, b := range before.Buckets {
		leads[b.Leader]++
	}
	if leads[1] != 2 || leads[2] != 2 || leads[3] != 2 {
		t.Fatalf("leaders per node %v, want 2 each", leads)
	}

	if err := c.nodes[stopped].kill(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, c.nodes[stopped].logs)
	}
	c.nodes[stopped].node = nil
	// Ask the new metadata leader: it applied the elections before the
	// stopped node saw them.
	other := 1 + stopped%3
	d, err := c.describe(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if d.RaftLeader == int32(stopped) || d.RaftLeader == 0 {
		t.Fatalf("metadata leader after the stop: %d, want another node", d.RaftLeader)
	}
	lc, err := client.New(c.nodes[int(d.RaftLeader)].api)
	if err != nil {
		t.Fatal(err)
	}
	after, err := lc.Admin().GetTable(ctx, "db", "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range after.Buckets {
		if b.Leader < 0 || b.Leader == int32(stopped) || slices.Contains(b.Isr, int32(stopped)) {
			t.Errorf("bucket %d once node %d exited: leader %d, ISR %v; want another leader and an ISR without it", b.Bucket, stopped, b.Leader, b.Isr)
		}
	}
}

// TestSIGKILLedNodesBucketsGetNewLeaders: a node killed with SIGKILL (not
// the Raft leader, so the coordinator stays) loses the leadership of its
// buckets to the first live member of each ISR once the cluster holds it
// dead; restarted, it follows, catches up and rejoins every ISR.
func TestSIGKILLedNodesBucketsGetNewLeaders(t *testing.T) {
	bin := buildStrom(t)
	c := newProcCluster(t, bin, 3)
	c.start(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader := int(c.waitFormed(ctx, []int32{1, 2, 3}).RaftLeader)
	killed := 1 + leader%3
	cl, err := client.New(c.nodes[leader].api)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{Database: "db"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{Database: "db", Table: "t",
		Descriptor_: &stromv1.TableDescriptor{
			Schema:      &stromv1.Schema{Columns: []*stromv1.Column{{Name: "id", Type: "BIGINT"}}},
			BucketCount: 6,
			Properties:  map[string]string{"table.replication.factor": "3"},
		}}); err != nil {
		t.Fatal(err)
	}
	before, err := cl.Admin().GetTable(ctx, "db", "t")
	if err != nil {
		t.Fatal(err)
	}

	if err := c.nodes[killed].kill(syscall.SIGKILL); err == nil {
		t.Fatal("SIGKILL: the process exited cleanly")
	}
	c.nodes[killed].node = nil
	var after *stromv1.TableInfo
	for {
		if after, err = cl.Admin().GetTable(ctx, "db", "t"); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(after.Buckets, func(b *stromv1.BucketAssignment) bool { return slices.Contains(b.Isr, int32(killed)) }) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %d still in ISRs: %v", killed, after.Buckets)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for i, b := range after.Buckets {
		was := before.Buckets[i]
		want := was.Leader
		if was.Leader == int32(killed) {
			// Kafka's rule: the first live ISR member in replica order.
			want = slices.DeleteFunc(slices.Clone(was.Replicas), func(id int32) bool { return id == int32(killed) })[0]
		}
		if b.Leader != want {
			t.Errorf("bucket %d (replicas %v, leader %d): leader %d after node %d died, want %d", b.Bucket, was.Replicas, was.Leader, b.Leader, killed, want)
		}
	}

	// Restarted, it catches up and its leaders have it rejoin every ISR;
	// it leads none (no preferred-leader rebalancing).
	c.launch(killed)
	c.nodes[killed].waitReady()
	for {
		again, err := cl.Admin().GetTable(ctx, "db", "t")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range again.Buckets {
			if b.Leader == int32(killed) {
				t.Fatalf("bucket %d after node %d's restart: led by it, ISR %v", b.Bucket, killed, b.Isr)
			}
		}
		if !slices.ContainsFunc(again.Buckets, func(b *stromv1.BucketAssignment) bool { return !slices.Contains(b.Isr, int32(killed)) }) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %d did not rejoin every ISR after its restart: %v", killed, again.Buckets)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
