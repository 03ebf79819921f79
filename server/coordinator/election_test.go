package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"strom/internal/metatest"
	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/record"
)

// createTable creates db.name with buckets buckets at replication rf and
// the given table options.
func createTable(t *testing.T, c *Coordinator, name string, buckets, rf int, opts map[string]string) catalog.Table {
	t.Helper()
	ctx := context.Background()
	if err := c.CreateDatabase(ctx, "db", "", nil, true); err != nil {
		t.Fatal(err)
	}
	desc := logTable("a")
	desc.BucketCount = buckets
	desc.Properties = map[string]string{record.OptReplicationFactor: fmt.Sprint(rf)}
	for k, v := range opts {
		desc.Properties[k] = v
	}
	tbl, err := c.CreateTable(ctx, "db", name, desc, false)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// waitLeaders waits until cond holds for every bucket of db.name and
// returns the table as it then is.
func waitLeaders(t *testing.T, meta *raftmeta.Node, name, what string, cond func(replicas []int32, lisr catalog.LeaderAndISR) bool) catalog.Table {
	t.Helper()
	cat := catalog.New(meta)
	var tbl catalog.Table
	waitFor(t, what, func() bool {
		var err error
		if tbl, err = cat.Table("db", name); err != nil {
			t.Fatal(err)
		}
		for b, replicas := range tbl.Assignment.Buckets {
			if !cond(replicas, tbl.LeaderISR[b]) {
				return false
			}
		}
		return true
	})
	return tbl
}

func closeSession(t *testing.T, meta *raftmeta.Node, id int64) {
	t.Helper()
	if err := meta.CloseSession(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}

func without(ids []int32, id int32) []int32 {
	return slices.DeleteFunc(slices.Clone(ids), func(x int32) bool { return x == id })
}

func TestNodeDeathElectsLeadersFromTheISR(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, ClusterID: "c1"})
	sessions := registerServers(t, meta, 1, 2, 3)
	before := createTable(t, c, "t", 6, 3, nil)
	leads := map[int32]int{}
	for _, lisr := range before.LeaderISR {
		leads[lisr.Leader]++
	}
	if leads[1] != 2 || leads[2] != 2 || leads[3] != 2 {
		t.Fatalf("leaders per node %v, want 2 each (6 buckets, RF 3, 3 nodes)", leads)
	}

	closeSession(t, meta, sessions[1]) // node 1 dies
	after := waitLeaders(t, meta, "t", "node 1 out of every ISR", func(_ []int32, lisr catalog.LeaderAndISR) bool {
		return !slices.Contains(lisr.ISR, 1)
	})
	for b, replicas := range after.Assignment.Buckets {
		old, now := before.LeaderISR[b], after.LeaderISR[b]
		want := old
		want.ISR = without(old.ISR, 1)
		want.BucketEpoch = old.BucketEpoch + 1
		want.CoordinatorEpoch = c.Epoch()
		if old.Leader == 1 {
			// Kafka's rule: the first live ISR member in replica order.
			want.Leader = without(replicas, 1)[0]
			want.LeaderEpoch = old.LeaderEpoch + 1
		}
		want.Version = now.Version
		if !slices.Equal(now.ISR, want.ISR) || now.Leader != want.Leader || now.LeaderEpoch != want.LeaderEpoch ||
			now.BucketEpoch != want.BucketEpoch || now.CoordinatorEpoch != want.CoordinatorEpoch {
			t.Errorf("bucket %d (replicas %v): leader_isr %+v, want %+v", b, replicas, now, want)
		}
	}
}

func TestLastISRMemberDeadGoesOfflineAndLeadsWhenBack(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, ClusterID: "c1"})
	sessions := registerServers(t, meta, 1, 2)
	createTable(t, c, "t", 2, 2, nil)

	closeSession(t, meta, sessions[2])
	waitLeaders(t, meta, "t", "ISR [1]", func(_ []int32, lisr catalog.LeaderAndISR) bool {
		return lisr.Leader == 1 && slices.Equal(lisr.ISR, []int32{1})
	})
	closeSession(t, meta, sessions[1])
	// Node 2 comes back meanwhile: it is not in sync, so it must not lead.
	registerServer(t, meta, 2, "")
	offline := waitLeaders(t, meta, "t", "offline", func(_ []int32, lisr catalog.LeaderAndISR) bool {
		return lisr.Leader == -1
	})
	for b, lisr := range offline.LeaderISR {
		if !slices.Equal(lisr.ISR, []int32{1}) {
			t.Errorf("bucket %d offline with ISR %v, want the last known [1]", b, lisr.ISR)
		}
	}

	registerServer(t, meta, 1, "")
	back := waitLeaders(t, meta, "t", "node 1 leading again", func(_ []int32, lisr catalog.LeaderAndISR) bool {
		return lisr.Leader == 1
	})
	for b, lisr := range back.LeaderISR {
		if lisr.LeaderEpoch != offline.LeaderISR[b].LeaderEpoch+1 || !slices.Equal(lisr.ISR, []int32{1}) {
			t.Errorf("bucket %d back: %+v, want leader epoch %d and ISR [1]", b, lisr, offline.LeaderISR[b].LeaderEpoch+1)
		}
	}
}

func TestUncleanElectionOnlyWhereTheTableAllowsIt(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, ClusterID: "c1"})
	sessions := registerServers(t, meta, 1, 2)
	createTable(t, c, "clean", 2, 2, nil)
	createTable(t, c, "unclean", 2, 2, map[string]string{record.OptUncleanLeaderElection: "true"})

	closeSession(t, meta, sessions[2])
	for _, name := range []string{"clean", "unclean"} {
		waitLeaders(t, meta, name, "ISR [1]", func(_ []int32, lisr catalog.LeaderAndISR) bool {
			return slices.Equal(lisr.ISR, []int32{1})
		})
	}
	registerServer(t, meta, 2, "")
	closeSession(t, meta, sessions[1])
	waitLeaders(t, meta, "unclean", "node 2 elected outside the ISR", func(_ []int32, lisr catalog.LeaderAndISR) bool {
		return lisr.Leader == 2 && slices.Equal(lisr.ISR, []int32{2})
	})
	clean := waitLeaders(t, meta, "clean", "offline", func(_ []int32, lisr catalog.LeaderAndISR) bool {
		return lisr.Leader == -1
	})
	for b, lisr := range clean.LeaderISR {
		if !slices.Equal(lisr.ISR, []int32{1}) {
			t.Errorf("clean bucket %d: ISR %v, want [1] kept", b, lisr.ISR)
		}
	}
}

func TestNewTermElectsForNodesThatDiedWithoutACoordinator(t *testing.T) {
	meta := metatest.NewNode(t)
	cfg := Config{NodeID: 1, ClusterID: "c1"}
	first, stop := runCoordinator(t, meta, cfg)
	waitFor(t, "first coordinator in office", func() bool { return first.Epoch() > 0 })
	sessions := registerServers(t, meta, 1, 2, 3)
	createTable(t, first, "t", 3, 3, nil)
	stop()

	closeSession(t, meta, sessions[2]) // no coordinator in office
	c := startCoordinator(t, meta, cfg)
	waitLeaders(t, meta, "t", "node 2 replaced", func(_ []int32, lisr catalog.LeaderAndISR) bool {
		return lisr.Leader != 2 && !slices.Contains(lisr.ISR, 2) && lisr.CoordinatorEpoch == c.Epoch()
	})
}

func TestDeposedCoordinatorsElectionIsRefused(t *testing.T) {
	meta := metatest.NewNode(t)
	cat := catalog.New(meta)
	ctx := context.Background()
	c := New(withDefaults(t, Config{NodeID: 1, ClusterID: "c1"}), meta)
	term, err := c.takeOffice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sessions := registerServers(t, meta, 1, 2)
	id, claim, err := cat.NextTableID()
	if err != nil {
		t.Fatal(err)
	}
	a := catalog.TableAssignment{Buckets: map[int32][]int32{0: {1, 2}}}
	dbOps, err := cat.CreateDatabaseOps("db", catalog.DatabaseRegistration{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.write(term, dbOps); err != nil {
		t.Fatal(err)
	}
	tblOps, err := cat.CreateTableOps(catalog.NewTable{Database: "db", Name: "t", Schema: logTable("a").Schema,
		Registration: catalog.TableRegistration{TableID: id, BucketCount: 1},
		Assignment:   &a, LeaderISR: initialLeaders(a, term.epoch)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.write(term, append([]raftmeta.Op{claim}, tblOps...)); err != nil {
		t.Fatal(err)
	}

	// Another coordinator takes office, then node 1, the leader, dies.
	ops, _, _, err := cat.ElectOps(2, "127.0.0.1:9999")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.Multi(ctx, 0, ops...); err != nil {
		t.Fatal(err)
	}
	closeSession(t, meta, sessions[1])
	if err := c.electLeaders(term); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("election by a deposed coordinator: %v, want ErrNotCoordinator", err)
	}
	tbl, err := cat.Table("db", "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := tbl.LeaderISR[0]; got.Leader != 1 || got.LeaderEpoch != 0 || got.BucketEpoch != 0 || !slices.Equal(got.ISR, []int32{1, 2}) {
		t.Fatalf("leader_isr %+v changed: the deposed coordinator's election was applied", got)
	}
}

func TestElect(t *testing.T) {
	live := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return slices.Contains(ids, id) }
	}
	lisr := func(leader, epoch, bucketEpoch int32, isr ...int32) catalog.LeaderAndISR {
		return catalog.LeaderAndISR{Leader: leader, LeaderEpoch: epoch, BucketEpoch: bucketEpoch, ISR: isr}
	}
	replicas := []int32{3, 1, 2}
	for _, tc := range []struct {
		name    string
		cur     catalog.LeaderAndISR
		live    func(int32) bool
		unclean bool
		want    catalog.LeaderAndISR
		changed bool
	}{
		{"all live", lisr(3, 4, 7, 3, 1, 2), live(1, 2, 3), false, lisr(3, 4, 7, 3, 1, 2), false},
		{"follower dies", lisr(3, 4, 7, 3, 1, 2), live(2, 3), false, lisr(3, 4, 8, 3, 2), true},
		{"leader dies: first live ISR member in replica order", lisr(3, 4, 7, 2, 3, 1), live(1, 2), false, lisr(1, 5, 8, 2, 1), true},
		{"leader and followers die: offline, ISR kept", lisr(3, 4, 7, 3, 1), live(2), false, lisr(-1, 5, 8, 3, 1), true},
		{"still offline", lisr(-1, 5, 8, 3, 1), live(2), false, lisr(-1, 5, 8, 3, 1), false},
		{"ISR member back", lisr(-1, 5, 8, 3, 1), live(1, 2), false, lisr(1, 6, 9, 1), true},
		{"unclean: a live replica outside the ISR", lisr(3, 4, 7, 3), live(1, 2), true, lisr(1, 5, 8, 1), true},
		{"unclean from offline", lisr(-1, 5, 8, 3), live(2), true, lisr(2, 6, 9, 2), true},
		{"unclean, nothing live", lisr(3, 4, 7, 3), live(), true, lisr(-1, 5, 8, 3), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := elect(tc.cur, replicas, tc.live, tc.unclean, 1)
			if changed != tc.changed || got.Leader != tc.want.Leader || got.LeaderEpoch != tc.want.LeaderEpoch ||
				got.BucketEpoch != tc.want.BucketEpoch || !slices.Equal(got.ISR, tc.want.ISR) || !slices.Equal(got.ELR, tc.want.ELR) {
				t.Fatalf("elect(%+v) = %+v, %v; want %+v, %v", tc.cur, got, changed, tc.want, tc.changed)
			}
		})
	}
}

func TestControlledShutdownWaitsUntilLeadershipMoved(t *testing.T) {
	meta := metatest.NewNode(t)
	cfg := Config{NodeID: 1, ClusterID: "c1"}
	first, stop := runCoordinator(t, meta, cfg)
	waitFor(t, "first coordinator in office", func() bool { return first.Epoch() > 0 })
	sessions := registerServers(t, meta, 1, 2, 3)
	createTable(t, first, "t", 6, 3, nil)
	createTable(t, first, "solo", 3, 1, nil) // one bucket on each node, nowhere to move
	stop()

	// Node 1 closes its session while no coordinator is in office: its
	// two buckets of t must move, solo's bucket on it cannot.
	closeSession(t, meta, sessions[1])
	cat := catalog.New(meta)
	left, err := LeadersToMove(cat, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || !strings.HasPrefix(left[0], "db.t/") || !strings.HasPrefix(left[1], "db.t/") {
		t.Fatalf("LeadersToMove(1) = %v, want node 1's two buckets of db.t (not db.solo's)", left)
	}

	waited := make(chan error, 1)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	go func() { waited <- WaitLeadershipMoved(wctx, meta, 1) }()
	startCoordinator(t, meta, cfg)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.Table("db", "t")
	if err != nil {
		t.Fatal(err)
	}
	for b, lisr := range tbl.LeaderISR {
		if lisr.Leader == 1 || lisr.Leader < 0 {
			t.Errorf("bucket %d: leader %d after the wait, want another live ISR member", b, lisr.Leader)
		}
	}
}

// Three metadata nodes, a coordinator on each. The Raft leader's node dies
// with the metadata leader: a coordinator takes office on another node,
// the dead node's registration expires (the new leader grants its session
// a full timeout first), and its buckets get new leaders from the ISR.
func TestCoordinatorFailoverElectsForTheDeadNode(t *testing.T) {
	group := metatest.NewGroup(t, 3)
	coords := make([]*Coordinator, len(group))
	for i, n := range group {
		coords[i], _ = runCoordinator(t, n, Config{NodeID: int32(i + 1), ClusterID: "c1"})
	}
	li := slices.IndexFunc(group, func(n *raftmeta.Node) bool { return n.IsLeader() })
	if li < 0 {
		t.Fatal("no metadata leader")
	}
	leader, dead := group[li], int32(li+1)
	waitFor(t, "coordinator in office on the leader", func() bool { return coords[li].Epoch() > 0 })
	oldEpoch := coords[li].Epoch()

	// Tablet server i+1 lives on metadata node i; the leader's keeps its
	// short session alive until the node dies.
	ctx := context.Background()
	for id := int32(1); id <= 3; id++ {
		timeout := time.Minute
		if id == dead {
			timeout = time.Second
		}
		sess, err := leader.CreateSession(ctx, timeout)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leader.Do(ctx, sess.ID, catalog.RegisterTabletServerOp(id, catalog.TabletServerRegistration{Listeners: "CLIENT://x:1"})); err != nil {
			t.Fatal(err)
		}
		if id == dead {
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						leader.Touch(sess.ID)
					}
				}
			}()
		}
	}
	before := createTable(t, coords[li], "t", 6, 3, nil)
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}

	var next int
	waitFor(t, "a coordinator in office on another node", func() bool {
		next = slices.IndexFunc(coords, func(c *Coordinator) bool { return c.Epoch() > oldEpoch })
		return next >= 0
	})
	after := waitLeaders(t, group[next], "t", "the dead node out of every ISR", func(_ []int32, lisr catalog.LeaderAndISR) bool {
		return !slices.Contains(lisr.ISR, dead)
	})
	for b, lisr := range after.LeaderISR {
		if lisr.Leader < 0 || lisr.Leader == dead || lisr.CoordinatorEpoch != coords[next].Epoch() {
			t.Errorf("bucket %d: %+v, want a live leader written by the new coordinator (epoch %d)", b, lisr, coords[next].Epoch())
		}
		if was := before.LeaderISR[b]; was.Leader == dead && lisr.LeaderEpoch != was.LeaderEpoch+1 {
			t.Errorf("bucket %d: leader epoch %d, want %d", b, lisr.LeaderEpoch, was.LeaderEpoch+1)
		}
	}
}

// An election over more buckets than one multi takes (maxBucketsPerWrite)
// writes them all, in several multis.
func TestElectionOfManyBuckets(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, ClusterID: "c1"})
	sessions := registerServers(t, meta, 1, 2)
	n := 2*maxBucketsPerWrite + 7
	createTable(t, c, "t", n, 2, nil)
	closeSession(t, meta, sessions[1])
	tbl := waitLeaders(t, meta, "t", "every bucket led by node 2 alone", func(_ []int32, lisr catalog.LeaderAndISR) bool {
		return lisr.Leader == 2 && slices.Equal(lisr.ISR, []int32{2})
	})
	if len(tbl.LeaderISR) != n {
		t.Fatalf("%d buckets, want %d", len(tbl.LeaderISR), n)
	}
}

// A node starting again (it may have lost its unsynced tail) is dead to
// the election, and leaves an offline bucket's last known ISR when another
// node is in it.
func TestElectStarting(t *testing.T) {
	live := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return slices.Contains(ids, id) }
	}
	lisr := func(leader, epoch, bucketEpoch int32, isr ...int32) catalog.LeaderAndISR {
		return catalog.LeaderAndISR{Leader: leader, LeaderEpoch: epoch, BucketEpoch: bucketEpoch, ISR: isr}
	}
	withELR := func(l catalog.LeaderAndISR, elr ...int32) catalog.LeaderAndISR {
		l.ELR = elr
		return l
	}
	replicas := []int32{3, 1, 2}
	for _, tc := range []struct {
		name    string
		cur     catalog.LeaderAndISR
		node    int32 // starting
		live    func(int32) bool
		want    catalog.LeaderAndISR
		changed bool
	}{
		// Registered again before the coordinator saw it gone: live, and
		// still leader at the same epoch, or still in the ISR.
		{"leader back unseen", lisr(3, 4, 7, 3, 1, 2), 3, live(1, 2, 3), lisr(1, 5, 8, 1, 2), true},
		{"follower back unseen", lisr(3, 4, 7, 3, 1, 2), 1, live(1, 2, 3), lisr(3, 4, 8, 3, 2), true},
		{"not in the ISR", lisr(3, 4, 7, 3, 2), 1, live(1, 2, 3), lisr(3, 4, 7, 3, 2), false},
		{"leader, no other live ISR member: offline, waiting for the others", lisr(3, 4, 7, 3, 1), 3, live(3), lisr(-1, 5, 8, 1), true},
		{"offline, others in the last ISR", lisr(-1, 5, 8, 3, 1, 2), 3, live(), lisr(-1, 5, 9, 1, 2), true},
		{"offline, alone in the last ISR", lisr(-1, 5, 8, 3), 3, live(), lisr(-1, 5, 8, 3), false},
		{"offline, not in the last ISR", lisr(-1, 5, 8, 1), 3, live(), lisr(-1, 5, 8, 1), false},
		// With min-in-sync 2: the ELR names candidates too. TestPowerOffEveryNode
		// hung when the last candidate of a bucket whose ISR was [1] and ELR
		// [2] left both in turn (node 1, then node 2 starting): no replica was
		// left to elect, and the bucket stayed offline for good.
		{"offline, alone in the ISR, another in the ELR", withELR(lisr(-1, 5, 8, 1), 2), 1, live(), withELR(lisr(-1, 5, 9), 2), true},
		{"offline, the ELR's last candidate", withELR(lisr(-1, 5, 9), 2), 2, live(), withELR(lisr(-1, 5, 9), 2), false},
		{"offline, one of two in the ELR", withELR(lisr(-1, 5, 9), 2, 3), 2, live(), withELR(lisr(-1, 5, 10), 3), true},
		{"led, in the ELR", withELR(lisr(1, 5, 9, 1), 2), 2, live(1), lisr(1, 5, 10, 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := electStarting(tc.cur, replicas, tc.live, false, 2, tc.node)
			if changed != tc.changed || got.Leader != tc.want.Leader || got.LeaderEpoch != tc.want.LeaderEpoch ||
				got.BucketEpoch != tc.want.BucketEpoch || !slices.Equal(got.ISR, tc.want.ISR) {
				t.Fatalf("electStarting(%+v, %d) = %+v, %v; want %+v, %v", tc.cur, tc.node, got, changed, tc.want, tc.changed)
			}
		})
	}
}

// tableBucket0 reads bucket 0's leader_isr of db.name.
func tableBucket0(t *testing.T, meta *raftmeta.Node, name string) catalog.LeaderAndISR {
	t.Helper()
	tbl, err := catalog.New(meta).Table("db", name)
	if err != nil {
		t.Fatal(err)
	}
	return tbl.LeaderISR[0]
}

// Issue 12, first interleaving: the leader restarts (losing its unsynced
// tail) and registers again before the coordinator sees its registration
// gone, so no election runs and it would lead again at the same leader
// epoch. NodeStarting, called while it is still registered, moves the
// leadership and takes it out of the ISR.
func TestNodeStartingMovesLeadershipOffIt(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, ClusterID: "c1"})
	registerServers(t, meta, 1, 2, 3)
	createTable(t, c, "t", 1, 3, nil)
	before := tableBucket0(t, meta, "t")
	if err := c.NodeStarting(context.Background(), before.Leader); err != nil {
		t.Fatal(err)
	}
	after := tableBucket0(t, meta, "t")
	if after.Leader == before.Leader || after.Leader < 0 || slices.Contains(after.ISR, before.Leader) ||
		after.LeaderEpoch != before.LeaderEpoch+1 || after.CoordinatorEpoch != c.Epoch() {
		t.Fatalf("after node %d started again: %+v (before %+v), want another leader at epoch %d without it in the ISR",
			before.Leader, after, before, before.LeaderEpoch+1)
	}
}

// Issue 12, second interleaving: every ISR member drops out at once (the
// leader loses power, the others' sessions expire under load), so the
// bucket goes offline with its last ISR kept; the powered-off leader,
// back first, was elected with the log it had fsynced, and the others,
// holding everything, truncated to it. NodeStarting takes it out of the
// last ISR: the bucket waits for a member that held every committed
// write. An offline bucket whose last ISR is the starting node alone keeps
// it (TestElectStarting).
func TestNodeStartingLeavesAnOfflineBucketsLastISR(t *testing.T) {
	meta := metatest.NewNode(t)
	cfg := Config{NodeID: 1, ClusterID: "c1"}
	first, stop := runCoordinator(t, meta, cfg)
	waitFor(t, "first coordinator in office", func() bool { return first.Epoch() > 0 })
	sessions := registerServers(t, meta, 1, 2, 3)
	createTable(t, first, "t", 1, 3, nil)
	stop()
	for _, id := range []int32{1, 2, 3} {
		closeSession(t, meta, sessions[id]) // no coordinator in office
	}
	c := startCoordinator(t, meta, cfg)
	offline := waitLeaders(t, meta, "t", "offline", func(_ []int32, li catalog.LeaderAndISR) bool { return li.Leader == -1 })
	last := offline.LeaderISR[0].ISR
	if len(last) != 3 {
		t.Fatalf("offline with ISR %v, want all three kept", last)
	}
	starting, other := last[0], last[1]
	if err := c.NodeStarting(context.Background(), starting); err != nil {
		t.Fatal(err)
	}
	registerServer(t, meta, starting, "")
	// An election pass that sees the registration (the watch's may or may
	// not have run yet): wrongly, it would elect the starting node.
	if err := c.do(context.Background(), c.electLeaders); err != nil {
		t.Fatal(err)
	}
	if now := tableBucket0(t, meta, "t"); now.Leader != -1 || slices.Contains(now.ISR, starting) {
		t.Fatalf("after node %d started and registered: %+v, want the bucket offline without it in the ISR", starting, now)
	}
	registerServer(t, meta, other, "")
	waitLeaders(t, meta, "t", fmt.Sprintf("node %d leading", other), func(_ []int32, li catalog.LeaderAndISR) bool { return li.Leader == other })
}

// With min-in-sync 2, a replica that leaves an ISR left below it joins the
// ELR, and is elected when no ISR member is live; a starting node leaves
// the ELR, and an offline bucket's last ISR when the ELR has a candidate.
func TestElectWithEligibleLeaderReplicas(t *testing.T) {
	live := func(ids ...int32) func(int32) bool {
		return func(id int32) bool { return slices.Contains(ids, id) }
	}
	li := func(leader, epoch, bucketEpoch int32, isr []int32, elr ...int32) catalog.LeaderAndISR {
		if len(elr) == 0 {
			elr = nil
		}
		return catalog.LeaderAndISR{Leader: leader, LeaderEpoch: epoch, BucketEpoch: bucketEpoch, ISR: isr, ELR: elr}
	}
	ids := func(x ...int32) []int32 { return x }
	replicas := []int32{3, 1, 2}
	for _, tc := range []struct {
		name     string
		cur      catalog.LeaderAndISR
		starting int32 // -1: none
		live     func(int32) bool
		want     catalog.LeaderAndISR
		changed  bool
	}{
		{"a follower dies, the ISR stays at min", li(3, 4, 7, ids(3, 1, 2)), -1, live(3, 1), li(3, 4, 8, ids(3, 1)), true},
		{"a follower dies below min: it joins the ELR", li(3, 4, 7, ids(3, 1)), -1, live(3), li(3, 4, 8, ids(3), 1), true},
		{"the leader dies too: the ELR member leads", li(3, 4, 8, ids(3), 1), -1, live(1), li(1, 5, 9, ids(1), 3), true},
		{"nobody live: offline, ISR and ELR kept", li(3, 4, 8, ids(3), 1), -1, live(), li(-1, 5, 9, ids(3), 1), true},
		{"an ELR member back leads", li(-1, 5, 9, ids(3), 1), -1, live(1), li(1, 6, 10, ids(1), 3), true},
		{"an ISR member back leads before the ELR", li(-1, 5, 9, ids(3), 1), -1, live(1, 3), li(3, 6, 10, ids(3), 1), true},
		// The issue 12 run: ISR [3] after 1 died, ELR [1]; 3 lost power.
		{"the starting last ISR member leaves it for the ELR", li(3, 4, 8, ids(3), 1), 3, live(3), li(-1, 5, 9, ids(), 1), true},
		{"the starting ELR member leaves the ELR", li(-1, 5, 9, ids(3), 1), 1, live(1), li(-1, 5, 10, ids(3)), true},
		{"the starting last candidate keeps the ISR", li(-1, 5, 9, ids(3)), 3, live(3), li(-1, 5, 9, ids(3)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got catalog.LeaderAndISR
			var changed bool
			if tc.starting >= 0 {
				got, changed = electStarting(tc.cur, replicas, tc.live, false, 2, tc.starting)
			} else {
				got, changed = elect(tc.cur, replicas, tc.live, false, 2)
			}
			if changed != tc.changed || got.Leader != tc.want.Leader || got.LeaderEpoch != tc.want.LeaderEpoch ||
				got.BucketEpoch != tc.want.BucketEpoch || !slices.Equal(got.ISR, tc.want.ISR) || !slices.Equal(got.ELR, tc.want.ELR) {
				t.Fatalf("= %+v, %v; want %+v, %v", got, changed, tc.want, tc.changed)
			}
		})
	}
}

// An AdjustISR's ELR: a member shrunk out below min-in-sync joins it, a
// member back in the ISR leaves it, and it empties once the ISR is at min.
func TestNextELR(t *testing.T) {
	cur := catalog.LeaderAndISR{ISR: []int32{1, 2}, ELR: []int32{3}}
	if got := nextELR(cur, []int32{1}, 2); !slices.Equal(got, []int32{3, 2}) {
		t.Errorf("shrunk below min: ELR %v, want [3 2]", got)
	}
	cur = catalog.LeaderAndISR{ISR: []int32{1}, ELR: []int32{3, 2}}
	if got := nextELR(cur, []int32{1, 2}, 3); !slices.Equal(got, []int32{3}) {
		t.Errorf("2 back, still below min: ELR %v, want [3]", got)
	}
	if got := nextELR(cur, []int32{1, 2}, 2); got != nil {
		t.Errorf("back at min: ELR %v, want none", got)
	}
}
