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
