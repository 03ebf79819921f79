package e2e

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"strom/client"
	"strom/raftmeta/catalog"
	stromv1 "strom/rpc/gen/strom/v1"
)

// TestRollingUpgrade replaces a cluster of the previous release with this
// build one node at a time, under write load (docs/upgrading.md). The two
// binaries come from the environment, STROM_UPGRADE_OLD_BIN and
// STROM_UPGRADE_NEW_BIN; scripts/upgrade-test.sh builds them (the old one
// from the commit docs/upgrading.md names, in a git worktree) and runs
// this test, which is skipped without them.
//
// Three old processes, a log table and a primary-key table, both of
// replication factor 3 with min ISR 2, written the whole time by
// idempotent acks=-1 writers. Each node in turn: wait until every bucket
// of both tables has its three replicas in sync, SIGTERM (a controlled
// shutdown), start the new binary on the same data directory, wait until
// it is ready. Before the last one, that last old node is restarted with
// the old build, so that a new node leads the metadata group (and its
// coordinator decides the level) while an old node is down and then back.
// Then:
//
//   - no write failed, although a write fails once it cannot be
//     acknowledged within one retry cycle (the client's retry timeout, 30 s,
//     as delivery timeout): no client request failed for longer than that;
//   - every acknowledged log row is read back exactly once, offsets dense,
//     and the scanner that ran throughout read the same log;
//   - a lookup of every key returns its latest acknowledged write (or a
//     later one);
//   - the active feature level is 0 while any node is old, and moves to
//     this build's (catalog.SupportedFeatureLevel) once the last one is new.
func TestRollingUpgrade(t *testing.T) {
	oldBin, newBin := os.Getenv("STROM_UPGRADE_OLD_BIN"), os.Getenv("STROM_UPGRADE_NEW_BIN")
	if oldBin == "" || newBin == "" {
		t.Skip("needs STROM_UPGRADE_OLD_BIN and STROM_UPGRADE_NEW_BIN: run scripts/upgrade-test.sh")
	}
	ctx, cancel := failoverContext(3)
	defer cancel()
	const retryCycle = 30 * time.Second
	rc := startReplicated(ctx, t, oldBin, client.WithRetryTimeout(retryCycle))
	logTbl := rc.createTable(ctx, "upgrade_log", eventsSchema, 2)
	pkTbl := rc.createTable(ctx, "upgrade_pk", accountsSchema, 2)
	load := startAppendLoad(ctx, t, logTbl, client.DeliveryTimeout(retryCycle))
	cons := startConsumer(ctx, t, logTbl)
	ups := startUpsertLoad(ctx, t, pkTbl, 15, client.DeliveryTimeout(retryCycle))

	isNew := map[int]bool{}
	for i, id := range rc.ids() {
		rc.waitInSync(ctx, "upgrade_log")
		rc.waitInSync(ctx, "upgrade_pk")
		time.Sleep(500 * time.Millisecond) // writes in flight at the stop
		if err := rc.nodes[id].kill(syscall.SIGTERM); err != nil {
			t.Fatalf("node %d: SIGTERM: %v", id, err)
		}
		rc.nodes[id].node = nil
		rc.bin = newBin
		rc.restart(int32(id))
		isNew[id] = true
		t.Logf("node %d: stopped with SIGTERM, started with the new build", id)
		if i == len(rc.ids())-1 {
			break
		}
		if i == len(rc.ids())-2 {
			// The last old node is restarted, still old: if it led the
			// metadata group, a new node leads now, so a new coordinator is
			// in office with an old member, and was while that member was
			// down (unregistered): the level must hold through both.
			last := rc.ids()[i+1]
			rc.waitInSync(ctx, "upgrade_log")
			rc.waitInSync(ctx, "upgrade_pk")
			if err := rc.nodes[last].kill(syscall.SIGTERM); err != nil {
				t.Fatalf("node %d: SIGTERM: %v", last, err)
			}
			rc.nodes[last].node = nil
			rc.bin = oldBin
			rc.restart(int32(last))
			rc.bin = newBin
			d, err := rc.describe(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !isNew[int(d.RaftLeader)] {
				t.Fatalf("after node %d's restart the metadata leader is node %d, an old one", last, d.RaftLeader)
			}
			t.Logf("node %d: restarted with the old build; node %d (new) leads the metadata group", last, d.RaftLeader)
		}
		// One node or more still old: once the new ones are in sync (the
		// coordinator has seen their registrations), the level has not moved.
		rc.waitInSync(ctx, "upgrade_log")
		rc.waitInSync(ctx, "upgrade_pk")
		for nid := range isNew {
			d, err := rc.describe(ctx, nid)
			if err != nil {
				t.Fatalf("describe on node %d: %v", nid, err)
			}
			if d.ActiveFeatureLevel != 0 {
				t.Fatalf("with %d of 3 nodes new, node %d reports feature level %d, want 0", len(isNew), nid, d.ActiveFeatureLevel)
			}
			for _, n := range d.Nodes {
				if want := levelOf(isNew[int(n.Id)]); n.FeatureLevel != want {
					t.Errorf("node %d reports node %d at feature level %d, want %d", nid, n.Id, n.FeatureLevel, want)
				}
			}
		}
	}
	rc.waitInSync(ctx, "upgrade_log")
	rc.waitInSync(ctx, "upgrade_pk")
	waitFeatureLevel(ctx, t, rc, catalog.SupportedFeatureLevel)
	time.Sleep(500 * time.Millisecond) // writes at the new level

	load.finish(ctx)
	_ = ups.finish(ctx)
	gap := load.longestGap()
	t.Logf("log table: %d rows acknowledged, failed appends by error: %v, longest time between two acknowledgements %v",
		len(load.acked), load.failures, gap.Round(time.Millisecond))
	t.Logf("primary-key table: %d keys with acknowledged writes, failed writes by error: %v", len(ups.h.acked), ups.h.failed)
	fmt.Printf("rolling upgrade: longest time between two acknowledged writes %v (%d rows acknowledged)\n", gap.Round(time.Millisecond), len(load.acked))
	if len(load.failures) > 0 || len(ups.h.failed) > 0 {
		t.Errorf("writes failed during the rolling upgrade: log %v, primary key %v", load.failures, ups.h.failed)
	}
	cons.check(readBack(ctx, t, logTbl, load))
	l, err := pkTbl.NewLookuper()
	if err != nil {
		t.Fatal(err)
	}
	checkLookups(ctx, t, l, &ups.h, upsertKeys)
}

func levelOf(isNew bool) int32 {
	if isNew {
		return catalog.SupportedFeatureLevel
	}
	return catalog.FeatureLevelBase
}

// waitFeatureLevel waits until every node reports the active feature level
// want.
func waitFeatureLevel(ctx context.Context, t *testing.T, rc *replicated, want int32) {
	t.Helper()
	var last string
	for {
		ok := true
		for _, id := range rc.ids() {
			d, err := rc.describe(ctx, id)
			if err != nil || d.ActiveFeatureLevel != want {
				ok, last = false, fmt.Sprintf("node %d: level %v (%v)", id, d.GetActiveFeatureLevel(), err)
				break
			}
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the feature level did not move to %d once every node was new: %s", want, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// accountsSchema is the primary-key tables' schema: (id, balance, note).
var accountsSchema = &stromv1.Schema{Columns: []*stromv1.Column{{Name: "id", Type: "BIGINT NOT NULL"}, {Name: "balance", Type: "BIGINT"}, {Name: "note", Type: "STRING"}},
	PrimaryKey: []string{"id"}}
