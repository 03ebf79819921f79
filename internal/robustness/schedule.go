package robustness

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The fault kinds. A fault aimed at one node names it by Role, resolved
// when the fault starts.
const (
	// Partition cuts one node off from the others, both ways (clients
	// still reach it).
	Partition Kind = "partition"
	// Split cuts the cluster into a majority and a minority.
	Split Kind = "split"
	// CutOneWay cuts the traffic from one node to one other, one way.
	CutOneWay Kind = "cut"
	// Latency adds a delay to every link to and from one node.
	Latency Kind = "delay"
	// DropConns closes one node's connections again and again (each new
	// one goes through until the next drop).
	DropConns Kind = "drop"
	// Kill SIGKILLs one node and starts it again when the fault ends.
	Kill Kind = "kill"
	// Pause SIGSTOPs one node and SIGCONTs it when the fault ends.
	Pause Kind = "pause"
	// Restart stops one node with SIGTERM and starts it again at once.
	Restart Kind = "restart"
	// RollingRestart stops and starts every node in turn with SIGTERM,
	// each ready before the next.
	RollingRestart Kind = "rolling-restart"
)

// Kinds lists every fault kind, in a fixed order.
var Kinds = []Kind{Partition, Split, CutOneWay, Latency, DropConns, Kill, Pause, Restart, RollingRestart}

// ParseKinds parses a comma list of kinds ("all" or empty: every kind).
func ParseKinds(s string) ([]Kind, error) {
	if s == "" || s == "all" {
		return slices.Clone(Kinds), nil
	}
	var ks []Kind
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("robustness: unknown fault kind %q (kinds: %v)", k, Kinds)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// Role names the node a fault aims at, resolved when it starts.
type Role string

const (
	// AnyNode is a node chosen by the step's Pick.
	AnyNode Role = "any"
	// RaftLeader is the metadata group's leader, the coordinator.
	RaftLeader Role = "raft-leader"
	// BucketLeader is the leader of bucket 0 of the log table or of the
	// primary-key table, by the step's pick.
	BucketLeader Role = "bucket-leader"
)

// Step is one fault of a schedule.
type Step struct {
	// At is when the fault starts, from the start of the run; Hold how
	// long it lasts before it is healed.
	At, Hold time.Duration
	Kind     Kind
	// Role names the node aimed at (Partition, CutOneWay's sender,
	// Latency, DropConns, Kill, Pause, Restart).
	Role Role
	// Pick chooses among the nodes where the choice is free: the node of
	// AnyNode, CutOneWay's receiver, Split's minority.
	Pick uint64
	// Delay is Latency's added delay.
	Delay time.Duration
}

func (s Step) String() string {
	out := fmt.Sprintf("%v+%v %s", s.At, s.Hold, s.Kind)
	if s.Role != "" {
		out += " " + string(s.Role)
	}
	if s.Delay > 0 {
		out += " " + s.Delay.String()
	}
	return out
}

// Schedule is what a run does, derived from its seed alone: the same seed,
// kinds and duration give the same schedule.
type Schedule struct {
	Seed     uint64
	Kinds    []Kind
	Duration time.Duration
	Steps    []Step
}

// Timings of a schedule: the first fault waits for the workloads to get
// going; between faults the cluster gets time to recover.
const (
	warmup  = 3 * time.Second
	minHold = 2 * time.Second
	maxHold = 8 * time.Second
	minGap  = 2 * time.Second
	maxGap  = 5 * time.Second
)

// NewSchedule derives the schedule of a run from its seed: faults one
// after another, for duration, the kinds taken in turn in an order the
// seed shuffles anew on each round (so every kind comes up in a run long
// enough for a round), each held for a time and followed by a gap the
// seed chooses.
func NewSchedule(seed uint64, kinds []Kind, duration time.Duration) Schedule {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	s := Schedule{Seed: seed, Kinds: kinds, Duration: duration}
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)).Truncate(100*time.Millisecond)
	}
	roles := []Role{AnyNode, RaftLeader, BucketLeader}
	var round []Kind
	for at := warmup; ; {
		if len(round) == 0 {
			round = slices.Clone(kinds)
			rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		st := Step{At: at, Kind: round[0], Hold: between(minHold, maxHold), Pick: rng.Uint64()}
		round = round[1:]
		switch st.Kind {
		case Partition, CutOneWay, Latency, DropConns, Kill, Pause, Restart:
			st.Role = roles[rng.IntN(len(roles))]
		}
		if st.Kind == Latency {
			st.Delay = time.Duration(10+rng.IntN(191)) * time.Millisecond
		}
		if st.Kind == Restart || st.Kind == RollingRestart {
			st.Hold = 0 // as long as the restarts take
		}
		if st.At+st.Hold > duration {
			break
		}
		s.Steps = append(s.Steps, st)
		at += st.Hold + between(minGap, maxGap)
	}
	return s
}

func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %v, faults %v\n", s.Seed, s.Duration, s.Kinds)
	for _, st := range s.Steps {
		fmt.Fprintf(&b, "  %v\n", st)
	}
	return b.String()
}
