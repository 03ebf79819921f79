package coordinator

import (
	"context"
	"testing"
	"time"

	"strom/internal/metatest"
	"strom/raftmeta/catalog"
)

// TestFeatureLevelMovesWhenEveryMemberSupportsIt: on a one-member metadata
// group (node 1), the active level stays at 0 while node 1's registration
// is of a build without levels, even with a registered non-member of level
// 1, and nothing is written; once node 1 registers again with level 1 the
// coordinator raises it by itself (the registration's watch), and a later
// registration of level 0 does not lower it.
func TestFeatureLevelMovesWhenEveryMemberSupportsIt(t *testing.T) {
	meta := metatest.NewNode(t)
	c := startCoordinator(t, meta, Config{NodeID: 1, ClusterID: "c1"})
	cat := catalog.New(meta)
	ctx := context.Background()
	register := func(id int32, level int) int64 {
		t.Helper()
		sess, err := meta.CreateSession(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := meta.Do(ctx, sess.ID, catalog.RegisterTabletServerOp(id, catalog.TabletServerRegistration{Listeners: "CLIENT://x:1", FeatureLevel: level})); err != nil {
			t.Fatal(err)
		}
		return sess.ID
	}
	level := func() int {
		t.Helper()
		l, _, err := cat.FeatureLevel()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	old := register(1, 0)
	register(2, 1) // not a member of the metadata group
	before := meta.LastZxid()
	if err := c.do(ctx, func(t *term) error { return c.raiseFeatureLevel(t) }); err != nil {
		t.Fatal(err)
	}
	if got := level(); got != 0 {
		t.Fatalf("level %d with member 1 at level 0, want 0", got)
	}
	if got := meta.LastZxid(); got != before {
		t.Fatalf("zxid moved from %d to %d: a level that stays was written", before, got)
	}

	if err := meta.CloseSession(ctx, old); err != nil {
		t.Fatal(err)
	}
	newer := register(1, 1)
	waitFor(t, "feature level 1", func() bool { return level() == 1 })

	if err := meta.CloseSession(ctx, newer); err != nil {
		t.Fatal(err)
	}
	register(1, 0)
	if err := c.do(ctx, func(t *term) error { return c.raiseFeatureLevel(t) }); err != nil {
		t.Fatal(err)
	}
	if got := level(); got != 1 {
		t.Fatalf("level %d after a level-0 registration, want it to stay 1", got)
	}
}
