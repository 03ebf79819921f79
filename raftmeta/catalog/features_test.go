package catalog

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"strom/internal/metatest"
	"strom/raftmeta"
)

func TestNextFeatureLevel(t *testing.T) {
	reg := func(id int32, level int) TabletServer {
		return TabletServer{ID: id, Registration: TabletServerRegistration{FeatureLevel: level}}
	}
	for _, tc := range []struct {
		name    string
		current int
		members []int32
		servers []TabletServer
		want    int
	}{
		{"all old", 0, []int32{1, 2, 3}, []TabletServer{reg(1, 0), reg(2, 0), reg(3, 0)}, 0},
		{"two of three new", 0, []int32{1, 2, 3}, []TabletServer{reg(1, 1), reg(2, 1), reg(3, 0)}, 0},
		{"all new", 0, []int32{1, 2, 3}, []TabletServer{reg(1, 1), reg(2, 1), reg(3, 1)}, 1},
		{"the lowest counts", 0, []int32{1, 2}, []TabletServer{reg(1, 3), reg(2, 2)}, 2},
		// The old node being replaced is down: the two new ones alone must
		// not move the level, since it may come back old.
		{"a member is not registered", 0, []int32{1, 2, 3}, []TabletServer{reg(1, 1), reg(2, 1)}, 0},
		{"a registered non-member does not count", 0, []int32{1, 2}, []TabletServer{reg(1, 1), reg(2, 1), reg(9, 0)}, 1},
		{"never down", 1, []int32{1, 2}, []TabletServer{reg(1, 0), reg(2, 1)}, 1},
		{"no members known", 0, nil, []TabletServer{reg(1, 1)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NextFeatureLevel(tc.current, tc.members, tc.servers); got != tc.want {
				t.Fatalf("NextFeatureLevel(%d, %v, ...) = %d, want %d", tc.current, tc.members, got, tc.want)
			}
		})
	}
}

func TestCheckFeatureLevel(t *testing.T) {
	for level := FeatureLevelBase; level <= SupportedFeatureLevel; level++ {
		if err := CheckFeatureLevel(level); err != nil {
			t.Fatalf("level %d: %v", level, err)
		}
	}
	err := CheckFeatureLevel(SupportedFeatureLevel + 1)
	if !errors.Is(err, ErrFeatureLevel) || !strings.Contains(err.Error(), "docs/upgrading.md") {
		t.Fatalf("a level above this build's: %v, want ErrFeatureLevel naming the fix", err)
	}
}

// The level reads as FeatureLevelBase until written, then as written;
// the znode's version guards the next write, and the write passes
// CheckWrite only fenced by the epoch.
func TestFeatureLevelStored(t *testing.T) {
	n := metatest.NewNode(t)
	c := New(n)
	ops, _, version, err := c.ElectOps(1, "127.0.0.1:9123")
	apply(t, n, append(c.BootstrapOps("cid"), ops...), err)
	level, v, err := c.FeatureLevel()
	if err != nil || level != FeatureLevelBase || v != -1 {
		t.Fatalf("FeatureLevel of a new cluster = %d, %d, %v; want %d, -1", level, v, err, FeatureLevelBase)
	}
	set := SetFeatureLevelOp(1, v)
	if err := CheckWrite("1", 0, []raftmeta.Op{set}); !errors.Is(err, ErrUnfencedWrite) {
		t.Fatalf("CheckWrite of an unfenced feature level write = %v, want ErrUnfencedWrite", err)
	}
	apply(t, n, []raftmeta.Op{EpochCheck(version), set}, nil)
	if level, v, err = c.FeatureLevel(); err != nil || level != 1 || v != 0 {
		t.Fatalf("FeatureLevel = %d, %d, %v; want 1, 0", level, v, err)
	}
	apply(t, n, []raftmeta.Op{EpochCheck(version), SetFeatureLevelOp(2, v)}, nil)
	if level, _, err = c.FeatureLevel(); err != nil || level != 2 {
		t.Fatalf("FeatureLevel = %d, %v; want 2", level, err)
	}
}

// A registration of a build without feature levels (no feature_level)
// decodes as FeatureLevelBase; this build's carries its level.
func TestRegistrationFeatureLevel(t *testing.T) {
	var old TabletServerRegistration
	if err := decode("x", []byte(`{"version":3,"listeners":"CLIENT://h:1","register_timestamp":5}`), &old); err != nil || old.FeatureLevel != FeatureLevelBase {
		t.Fatalf("old registration: %+v, %v", old, err)
	}
	b := marshal(TabletServerRegistration{Listeners: "CLIENT://h:1", FeatureLevel: SupportedFeatureLevel})
	if !strings.Contains(string(b), `"feature_level":`+strconv.Itoa(SupportedFeatureLevel)) {
		t.Fatalf("registration JSON %s has no feature_level", b)
	}
}

// CheckFeatureActive lets a message through at its level and above, and
// below it refuses with ErrFeatureNotActive naming the message and both
// levels.
func TestCheckFeatureActive(t *testing.T) {
	for _, active := range []int{FeatureLevelReplicaRange, FeatureLevelReplicaRange + 1} {
		if err := CheckFeatureActive("ReadReplicaRange", FeatureLevelReplicaRange, active); err != nil {
			t.Errorf("at level %d: %v", active, err)
		}
	}
	err := CheckFeatureActive("ReadReplicaRange", FeatureLevelReplicaRange, FeatureLevelRegistered)
	if !errors.Is(err, ErrFeatureNotActive) || !strings.Contains(err.Error(), "ReadReplicaRange needs feature level 2, the cluster is at 1") {
		t.Fatalf("below the level: %v, want ErrFeatureNotActive naming ReadReplicaRange and both levels", err)
	}
}
