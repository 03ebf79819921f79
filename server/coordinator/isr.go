package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"strom/raftmeta"
	"strom/raftmeta/catalog"
)

// Errors of AdjustISR. A leader that gets one waits for its metadata: the
// leader_isr it acted on is not the current one.
var (
	// ErrFencedLeaderEpoch: the request names another leader or an older
	// leader epoch than the bucket's (Fluss's FencedLeaderEpochException).
	ErrFencedLeaderEpoch = errors.New("coordinator: fenced leader epoch")
	// ErrInvalidUpdateVersion: the request's bucket epoch is not the
	// bucket's: its ISR changed since the leader read it (Fluss's
	// InvalidUpdateVersionException).
	ErrInvalidUpdateVersion = errors.New("coordinator: stale bucket epoch")
	// ErrIneligibleReplica: the new ISR names a node that is not a live
	// replica of the bucket, or one joining in another run than its
	// current registration's, or leaves out the leader (Fluss's
	// IneligibleReplicaException).
	ErrIneligibleReplica = errors.New("coordinator: ineligible replica in the new ISR")
)

// AdjustISRRequest is a bucket leader's request to change the bucket's ISR
// (Fluss's AdjustIsr, Kafka's AlterPartition): the leader_isr it read
// (leader, leader epoch, bucket epoch) and the ISR it wants.
type AdjustISRRequest struct {
	TableID     int64
	Bucket      int32
	Leader      int32
	LeaderEpoch int32
	BucketEpoch int32
	ISR         []int32
	// Incarnations holds, for the nodes ISR adds, the run of each
	// (catalog.TabletServerRegistration.Incarnation) whose fetches the
	// leader found caught up (Kafka's broker epochs in AlterPartition,
	// KIP-903). A joiner missing here or given 0 (a leader of a build
	// without them) is checked for liveness only.
	Incarnations map[int32]int64
}

// AdjustISR writes a bucket's new ISR, with the bucket epoch one higher, in
// one multi fenced by the coordinator epoch, and returns the leader_isr
// written. It refuses, writing nothing, a request that names another
// leader or leader epoch (ErrFencedLeaderEpoch) or another bucket epoch
// (ErrInvalidUpdateVersion) than the bucket's, and an ISR without the
// leader, with a node twice, or with a node that is not a replica of the
// bucket or (when it joins) not live or registered in another run than
// the one req.Incarnations names (ErrIneligibleReplica). An ISR equal
// to the current one is answered with the current leader_isr, unwritten.
// The leader applies the new ISR when its metadata shows it, not on the
// answer: the metadata is the truth.
func (c *Coordinator) AdjustISR(ctx context.Context, req AdjustISRRequest) (catalog.LeaderAndISR, error) {
	var out catalog.LeaderAndISR
	err := c.do(ctx, func(t *term) error {
		replicas, cur, err := c.cat.Bucket(req.TableID, req.Bucket)
		if err != nil {
			return err
		}
		servers, err := c.cat.TabletServers()
		if err != nil {
			return err
		}
		registered := func(id int32) (catalog.TabletServerRegistration, bool) {
			i := slices.IndexFunc(servers, func(s catalog.TabletServer) bool { return s.ID == id })
			if i < 0 {
				return catalog.TabletServerRegistration{}, false
			}
			return servers[i].Registration, true
		}
		if err := checkAdjustISR(req, replicas, cur, registered); err != nil {
			return err
		}
		out = cur
		if slices.Equal(cur.ISR, req.ISR) {
			return nil
		}
		out.ISR, out.BucketEpoch, out.CoordinatorEpoch = slices.Clone(req.ISR), cur.BucketEpoch+1, t.epoch
		out.ELR = nextELR(cur, out.ISR, c.minISR())
		if err := c.write(t, []raftmeta.Op{catalog.SetLeaderISROp(req.TableID, req.Bucket, out)}); err != nil {
			return err
		}
		c.lg.Info("changed ISR", "table", req.TableID, "bucket", req.Bucket, "leader", req.Leader,
			"from", cur.ISR, "to", req.ISR, "bucket_epoch", out.BucketEpoch)
		return nil
	})
	return out, err
}

// checkAdjustISR is AdjustISR's decision: whether req may replace cur, the
// leader_isr of a bucket on replicas, given the registrations of the live
// nodes.
//
// A joiner must be live and, when the leader names its run, in that run:
// the leader counted fetches of a run that may be gone. Its metadata may
// lag this one (KIP-903): it still shows, or shows no more, the
// registration of a node's earlier run, whose late fetches then name a
// log end the node, started again after a power cut, may no longer have
// (it holds only what it fsynced). NodeStarting took that node out of the
// ISR; without this check such a leader asked it back in, and the
// coordinator wrote it. The refusal is ErrIneligibleReplica, checked
// after the bucket epoch (nothing was written at it): the leader waits for
// its metadata, which shows the new run, whose fetches start afresh.
func checkAdjustISR(req AdjustISRRequest, replicas []int32, cur catalog.LeaderAndISR, registered func(int32) (catalog.TabletServerRegistration, bool)) error {
	name := fmt.Sprintf("table id %d bucket %d", req.TableID, req.Bucket)
	switch {
	case req.Leader != cur.Leader || req.LeaderEpoch != cur.LeaderEpoch:
		return fmt.Errorf("%s: %w: node %d asks as leader at epoch %d, the bucket's leader is %d at epoch %d",
			name, ErrFencedLeaderEpoch, req.Leader, req.LeaderEpoch, cur.Leader, cur.LeaderEpoch)
	case req.BucketEpoch != cur.BucketEpoch:
		return fmt.Errorf("%s: %w: the request is for bucket epoch %d, the bucket is at %d (ISR %v)",
			name, ErrInvalidUpdateVersion, req.BucketEpoch, cur.BucketEpoch, cur.ISR)
	case !slices.Contains(req.ISR, req.Leader):
		return fmt.Errorf("%s: %w: the new ISR %v leaves out the leader %d", name, ErrIneligibleReplica, req.ISR, req.Leader)
	}
	for i, id := range req.ISR {
		switch {
		case slices.Contains(req.ISR[:i], id):
			return fmt.Errorf("%s: %w: the new ISR %v names node %d twice", name, ErrIneligibleReplica, req.ISR, id)
		case !slices.Contains(replicas, id):
			return fmt.Errorf("%s: %w: node %d is not a replica of the bucket (replicas %v)", name, ErrIneligibleReplica, id, replicas)
		case slices.Contains(cur.ISR, id):
			continue
		}
		reg, live := registered(id)
		if !live {
			return fmt.Errorf("%s: %w: node %d is not live and cannot join the ISR", name, ErrIneligibleReplica, id)
		}
		if inc := req.Incarnations[id]; inc != 0 && inc != reg.Incarnation {
			return fmt.Errorf("%s: %w: node %d joins on the fetches of its run %d, but it is registered as run %d (the leader's metadata lags: it waits for the new run's fetches)",
				name, ErrIneligibleReplica, id, inc, reg.Incarnation)
		}
	}
	return nil
}
