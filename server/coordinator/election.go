package coordinator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/record"
)

// maxBucketsPerWrite bounds the leader_isr znodes one election multi
// rewrites (about 200 bytes each), so that a node leading thousands of
// buckets dying makes several Raft entries of bounded size, not one huge.
const maxBucketsPerWrite = 500

// elect returns a bucket's next leader and ISR given which nodes are live,
// and whether it changed. It follows Kafka's controller, with KIP-966's
// eligible leader replicas (ELR) for an ISR below minISR:
//
//   - a dead replica leaves the ISR (bucket epoch +1); if the ISR left is
//     smaller than minISR it joins the ELR (no acks=-1 write can be
//     acknowledged without it from then on), else the ELR is emptied;
//   - a bucket whose leader is dead (or that has none) gets the first live
//     ISR member in replica order as leader (leader epoch +1, bucket epoch
//     +1); failing that, the first live ELR member, alone in the ISR (it
//     holds every acknowledged write); or with unclean election allowed,
//     failing that, the first live replica, alone in the ISR;
//   - failing that it goes offline: leader -1 (leader epoch +1), the ISR
//     and the ELR kept as the last known, so that whichever of them comes
//     back first leads again.
func elect(cur catalog.LeaderAndISR, replicas []int32, live func(int32) bool, unclean bool, minISR int) (catalog.LeaderAndISR, bool) {
	isr := slices.DeleteFunc(slices.Clone(cur.ISR), func(id int32) bool { return !live(id) })
	next := cur
	next.BucketEpoch++
	if cur.Leader >= 0 && live(cur.Leader) {
		if len(isr) == len(cur.ISR) {
			return cur, false
		}
		next.ISR, next.ELR = isr, nextELR(cur, isr, minISR)
		return next, true
	}
	next.Leader, next.ISR = -1, cur.ISR
	for _, r := range replicas {
		if slices.Contains(isr, r) {
			next.Leader, next.ISR, next.ELR = r, isr, nextELR(cur, isr, minISR)
			break
		}
	}
	if next.Leader < 0 {
		for _, r := range replicas {
			if slices.Contains(cur.ELR, r) && live(r) {
				next.Leader, next.ISR = r, []int32{r}
				next.ELR = withoutID(union(cur.ELR, cur.ISR), r)
				if len(next.ISR) >= minISR {
					next.ELR = nil
				}
				break
			}
		}
	}
	if next.Leader < 0 && unclean {
		for _, r := range replicas {
			if live(r) {
				next.Leader, next.ISR, next.ELR = r, []int32{r}, nil
				break
			}
		}
	}
	if next.Leader < 0 && cur.Leader < 0 {
		return cur, false // still offline
	}
	next.LeaderEpoch++
	return next, true
}

// nextELR is the ELR once the ISR becomes isr: the members cur's ISR
// loses join it while isr is smaller than minISR; members back in the
// ISR leave it; and it is empty once isr has minISR members.
func nextELR(cur catalog.LeaderAndISR, isr []int32, minISR int) []int32 {
	if len(isr) >= minISR {
		return nil
	}
	elr := slices.DeleteFunc(slices.Clone(cur.ELR), func(id int32) bool { return slices.Contains(isr, id) })
	for _, id := range cur.ISR {
		if !slices.Contains(isr, id) && !slices.Contains(elr, id) {
			elr = append(elr, id)
		}
	}
	if len(elr) == 0 {
		return nil
	}
	return elr
}

func union(a, b []int32) []int32 {
	out := slices.Clone(a)
	for _, id := range b {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func withoutID(ids []int32, id int32) []int32 {
	out := slices.DeleteFunc(slices.Clone(ids), func(x int32) bool { return x == id })
	if len(out) == 0 {
		return nil
	}
	return out
}

// electStarting is elect for a node that is starting again (NodeStarting):
// it may have lost what it had not fsynced (a power cut), so it cannot be
// trusted to hold what an ISR or the ELR credits it with. It is dead to
// the election (out of the ISR of a bucket with a leader, and no longer its
// leader), it leaves the ELR, and it leaves the last known ISR of an
// offline bucket that names another candidate (in the ISR or the ELR),
// which held every acknowledged write when the bucket went offline. An
// offline bucket whose only candidate, in the ISR or the ELR, is the
// starting node keeps it there: with no flush policy every candidate lost
// power, and what none of them had fsynced is lost, as in Kafka; without
// this the last of them left too and no replica could ever be elected
// (TestPowerOffEveryNode, ISR [1] and ELR [2], nodes 1 and 2 starting).
func electStarting(cur catalog.LeaderAndISR, replicas []int32, live func(int32) bool, unclean bool, minISR int, node int32) (catalog.LeaderAndISR, bool) {
	next, changed := elect(cur, replicas, func(id int32) bool { return id != node && live(id) }, unclean, minISR)
	bump := func() {
		if !changed {
			next.BucketEpoch++
			changed = true
		}
	}
	if next.Leader < 0 && !slices.ContainsFunc(union(next.ISR, next.ELR), func(id int32) bool { return id != node }) {
		return next, changed // the only candidate left keeps its place
	}
	if slices.Contains(next.ELR, node) {
		bump()
		next.ELR = withoutID(next.ELR, node)
	}
	if next.Leader < 0 && slices.Contains(next.ISR, node) {
		bump()
		next.ISR = slices.DeleteFunc(slices.Clone(next.ISR), func(id int32) bool { return id == node })
	}
	return next, changed
}

// NodeStarting takes node, which is starting and has not registered yet,
// out of every bucket's ISR, ELR and leadership (electStarting), in fenced
// multis as electLeaders writes, and returns once they are written. A
// node calls it before it registers: a registration is all the
// coordinator sees of liveness, and a node that came back within
// milliseconds, or while no coordinator was in office, would otherwise
// lead again at the same leader epoch with a log that lost its unsynced
// tail (its followers, fetching above its log end, cutting theirs to it),
// or be elected first from an offline bucket's last known ISR over a
// replica that holds everything (issue 12; Kafka's KIP-380 and KIP-966 for
// the same two holes).
func (c *Coordinator) NodeStarting(ctx context.Context, node int32) error {
	return c.do(ctx, func(t *term) error { return c.electAll(t, node) })
}

// minISR is the configured min-in-sync-replicas, at least 1.
func (c *Coordinator) minISR() int { return max(c.cfg.MinInSyncReplicas, 1) }

// allowsUnclean reports whether a table allows unclean leader election.
func allowsUnclean(t catalog.Table) bool {
	v, _ := t.Descriptor().Option(record.OptUncleanLeaderElection)
	return strings.EqualFold(v, "true")
}

// electLeaders brings every bucket's leader and ISR in line with the live
// tablet servers (elect), writing the changes in fenced multis of at most
// maxBucketsPerWrite buckets. It runs when a term starts (a node may have
// died or come back while no coordinator was in office) and whenever the
// registrations change.
func (c *Coordinator) electLeaders(t *term) error { return c.electAll(t, -1) }

// electAll is electLeaders, with starting (≥ 0) a node that is starting
// again (electStarting).
func (c *Coordinator) electAll(t *term, starting int32) error {
	servers, err := c.cat.TabletServers()
	if err != nil {
		return err
	}
	alive := make(map[int32]bool, len(servers))
	for _, s := range servers {
		alive[s.ID] = true
	}
	live := func(id int32) bool { return alive[id] }
	tables, err := c.cat.AllTables()
	if err != nil {
		return err
	}
	var ops []raftmeta.Op
	var moved, offline []string
	left := 0 // buckets the starting node left
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		err := c.write(t, ops)
		ops = ops[:0]
		return err
	}
	for _, tbl := range tables {
		unclean := allowsUnclean(tbl)
		id := tbl.Registration.TableID
		for _, b := range tbl.Assignment.BucketIDs() {
			cur, ok := tbl.LeaderISR[b]
			if !ok {
				continue
			}
			next, changed := elect(cur, tbl.Assignment.Buckets[b], live, unclean, c.minISR())
			if starting >= 0 {
				next, changed = electStarting(cur, tbl.Assignment.Buckets[b], live, unclean, c.minISR(), starting)
			}
			if !changed {
				continue
			}
			if starting >= 0 {
				left++
			}
			next.CoordinatorEpoch = t.epoch
			name := tbl.Database + "." + tbl.Name + "/" + strconv.Itoa(int(b))
			switch {
			case next.Leader < 0:
				offline = append(offline, name)
			case next.Leader != cur.Leader:
				moved = append(moved, fmt.Sprintf("%s: %d→%d", name, cur.Leader, next.Leader))
			}
			ops = append(ops, catalog.SetLeaderISROp(id, b, next))
			if len(ops) == maxBucketsPerWrite {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if starting >= 0 {
		c.lg.Info("a starting node left the ISR and leadership of its buckets", "node", starting, "count", left)
	}
	if len(moved) > 0 {
		c.lg.Info("elected bucket leaders", "live", slices.Sorted(maps.Keys(alive)), "count", len(moved), "buckets", sample(moved))
	}
	if len(offline) > 0 {
		c.lg.Warn("buckets offline: no live in-sync replica (table.unclean-leader-election.enabled elects one outside the ISR)",
			"live", slices.Sorted(maps.Keys(alive)), "count", len(offline), "buckets", sample(offline))
	}
	return nil
}

// sample returns the first few of names, for a log line of bounded size.
func sample(names []string) []string {
	const most = 20
	if len(names) > most {
		return append(names[:most:most], "…")
	}
	return names
}
