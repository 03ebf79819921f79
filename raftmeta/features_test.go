package raftmeta

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestFeatureLevelGate: a command whose type came with a feature level
// above the cluster's active one (Config.FeatureLevel) is not proposed:
// on the node it is made on, and again on the leader when forwarded (the
// follower already thought the level active). Once the level is reached
// it goes through. CmdOp stands in for a command added by a later
// release.
func TestFeatureLevelGate(t *testing.T) {
	commandLevels[CmdOp] = 1
	t.Cleanup(func() { delete(commandLevels, CmdOp) }) // registered first: runs after the nodes close
	var levels [3]atomic.Int32
	c := newForwardingClusterWith(t, 3, func(i int, cfg *Config) {
		cfg.FeatureLevel = func() int { return int(levels[i].Load()) }
	})
	leader, f := c.leader(), c.follower()
	li, fi := c.index(leader), c.index(f)
	ctx := testCtx(t, 20*time.Second)
	before := leader.LastZxid()

	if _, err := leader.Create(ctx, "/new", nil, Persistent); !errors.Is(err, ErrFeatureNotActive) {
		t.Fatalf("leader, level 0: %v, want ErrFeatureNotActive", err)
	}
	if _, err := f.Create(ctx, "/new", nil, Persistent); !errors.Is(err, ErrFeatureNotActive) {
		t.Fatalf("follower, level 0: %v, want ErrFeatureNotActive", err)
	}
	levels[fi].Store(1) // the follower thinks the level moved; the leader does not
	if _, err := f.Create(ctx, "/new", nil, Persistent); !errors.Is(err, ErrFeatureNotActive) {
		t.Fatalf("forwarded to a leader at level 0: %v, want ErrFeatureNotActive", err)
	}
	if got := leader.LastZxid(); got != before {
		t.Fatalf("refused commands were proposed: last zxid %d, was %d", got, before)
	}
	if _, err := leader.Exists("/new"); !errors.Is(err, ErrNoNode) {
		t.Fatalf("refused create applied: %v", err)
	}

	levels[li].Store(1)
	if _, err := f.Create(ctx, "/new", nil, Persistent); err != nil {
		t.Fatalf("level 1 everywhere it is checked: %v", err)
	}
	// Commands of level 0 were never held back.
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}
