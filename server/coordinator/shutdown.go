package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"strom/raftmeta"
	"strom/raftmeta/catalog"
)

// WatchedTree is a metadata tree with watches: raftmeta.Node satisfies it.
type WatchedTree interface {
	catalog.Tree
	NewWatcher() *raftmeta.Watcher
	AddWatch(path string, w *raftmeta.Watcher, mode raftmeta.WatchMode) error
}

// LeadersToMove returns the buckets (db.table/bucket) that node leads and
// that have another live (registered) ISR member: those a controlled
// shutdown of node waits for. A bucket whose ISR is node alone has nowhere
// to go and is not listed.
func LeadersToMove(cat *catalog.Catalog, node int32) ([]string, error) {
	servers, err := cat.TabletServers()
	if err != nil {
		return nil, err
	}
	tables, err := cat.AllTables()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range tables {
		for _, b := range t.Assignment.BucketIDs() {
			lisr, ok := t.LeaderISR[b]
			if !ok || lisr.Leader != node {
				continue
			}
			movable := slices.ContainsFunc(lisr.ISR, func(id int32) bool {
				return id != node && slices.ContainsFunc(servers, func(s catalog.TabletServer) bool { return s.ID == id })
			})
			if movable {
				out = append(out, t.Database+"."+t.Name+"/"+strconv.Itoa(int(b)))
			}
		}
	}
	return out, nil
}

// WaitLeadershipMoved waits, in the local metadata replica, until
// LeadersToMove(node) is empty: once node's registration is gone the
// coordinator elects other leaders for its buckets. It returns ctx's error,
// naming the buckets still led by node, if ctx ends first.
func WaitLeadershipMoved(ctx context.Context, tree WatchedTree, node int32) error {
	w := tree.NewWatcher()
	defer w.Close()
	for _, p := range []struct {
		path string
		mode raftmeta.WatchMode
	}{{catalog.AssignmentsRoot(), raftmeta.WatchPersistentRecursive}, {catalog.TabletServersRoot(), raftmeta.WatchPersistent}} {
		if err := tree.AddWatch(p.path, w, p.mode); err != nil {
			return fmt.Errorf("watch %s: %w", p.path, err)
		}
	}
	// A snapshot installed over the tree fires no watch: check each second too.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	cat := catalog.New(tree)
	for {
		left, err := LeadersToMove(cat, node)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d still leads %d bucket(s) with other live in-sync replicas (%v): %w",
				node, len(left), sample(left), ctx.Err())
		case <-w.Events():
		case <-tick.C:
		}
	}
}
