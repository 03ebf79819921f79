package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"strom/raftmeta"
)

// Feature levels: what the nodes of a cluster speak to each other. A node
// advertises the highest level it supports in its registration
// (TabletServerRegistration.FeatureLevel); the coordinator moves the
// cluster's active level (/strom/features) up to the lowest level every
// member of the metadata group supports (NextFeatureLevel), and never down.
// Code that would emit a Raft command or a node-to-node message that an
// older node does not know asks for the active level first
// (raftmeta.Config.FeatureLevel, the server's featureLevel), so that during a
// rolling upgrade nothing new is sent until the last node is new.
//
// A level is only ever appended: give each new command, message or stored
// format a new level and raise SupportedFeatureLevel with it.
const (
	// FeatureLevelBase is what a node that predates feature levels speaks
	// (its registration has no feature_level): the commands and messages of
	// the first release.
	FeatureLevelBase = 0
	// FeatureLevelRegistered: the node advertises its level and refuses to
	// start in a cluster whose active level is above it. It adds no command
	// or message; it is the level a cluster reaches once every node is new
	// enough to refuse a downgrade.
	FeatureLevelRegistered = 1
	// FeatureLevelReplicaRange: a bucket's leader may call
	// ReplicaService.ReadReplicaRange on its followers, to repair a damaged
	// range of its log from their copies. A build of a lower level has no
	// such call (it would answer Unimplemented), so a leader does not send
	// it below this level.
	FeatureLevelReplicaRange = 2
)

// SupportedFeatureLevel is the highest feature level this build speaks.
const SupportedFeatureLevel = FeatureLevelReplicaRange

// ErrFeatureLevel: this build is older than the cluster's active feature
// level (a downgrade after the level moved).
var ErrFeatureLevel = errors.New("catalog: the cluster's feature level is above this build's")

// ErrFeatureNotActive: a node-to-node message of a feature level the
// cluster has not reached yet (some member may run a build without it);
// nothing was sent. raftmeta.ErrFeatureNotActive is its counterpart for
// Raft commands.
var ErrFeatureNotActive = errors.New("catalog: the cluster's active feature level does not include this message yet")

// CheckFeatureActive returns nil when a message that came with level need
// may be sent in a cluster at level active, and otherwise an error
// wrapping ErrFeatureNotActive that names what and both levels.
func CheckFeatureActive(what string, need, active int) error {
	if active >= need {
		return nil
	}
	return fmt.Errorf("%w: %s needs feature level %d, the cluster is at %d (a node may still run an older build): not sent",
		ErrFeatureNotActive, what, need, active)
}

// ClusterFeatures is stored at /strom/features: the cluster's active
// feature level. Absent: FeatureLevelBase.
type ClusterFeatures struct {
	Version int `json:"version"`
	Level   int `json:"level"`
}

// FeatureLevel returns the cluster's active feature level from the local
// replica, and the version of its znode (-1 when it does not exist yet).
func (c *Catalog) FeatureLevel() (level int, version int32, err error) {
	data, stat, err := c.tree.Get(featuresPath)
	if errors.Is(err, raftmeta.ErrNoNode) {
		return FeatureLevelBase, -1, nil
	}
	if err != nil {
		return 0, 0, err
	}
	var f ClusterFeatures
	if err := decode(featuresPath, data, &f); err != nil {
		return 0, 0, err
	}
	return f.Level, stat.Version, nil
}

// SetFeatureLevelOp writes the active level; version is the znode's version
// FeatureLevel returned (-1: create it). The coordinator runs it fenced by
// its epoch.
func SetFeatureLevelOp(level int, version int32) raftmeta.Op {
	data := marshal(ClusterFeatures{Version: 1, Level: level})
	if version < 0 {
		return raftmeta.CreateOp(featuresPath, data, raftmeta.Persistent)
	}
	return raftmeta.SetDataOp(featuresPath, data, version)
}

// NextFeatureLevel is the level the cluster may move to from current:
// the lowest level advertised by the registrations of members (the node
// ids of the metadata group's configuration, voters and non-voters), when
// every member is registered; else current. It never returns less than
// current: a level once active stays (a node of a lower level is refused,
// see CheckFeatureLevel), so rolling back is possible only before it moves.
//
// A member without a registration (stopped, restarting, or not yet
// registered) holds the level where it is: it may come back with an older
// binary. Registered nodes that are not members do not count (a node is a
// member from the moment the metadata leader adds it, before it registers).
func NextFeatureLevel(current int, members []int32, servers []TabletServer) int {
	if len(members) == 0 {
		return current
	}
	level := -1
	for _, id := range members {
		i := slices.IndexFunc(servers, func(s TabletServer) bool { return s.ID == id })
		if i < 0 {
			return current
		}
		if l := servers[i].Registration.FeatureLevel; level < 0 || l < level {
			level = l
		}
	}
	return max(current, level)
}

// CheckFeatureLevel refuses a node of this build in a cluster whose active
// level is above SupportedFeatureLevel, with an error wrapping
// ErrFeatureLevel that says what to do.
func CheckFeatureLevel(active int) error {
	if active <= SupportedFeatureLevel {
		return nil
	}
	return fmt.Errorf("%w: the cluster runs at feature level %d, this build speaks up to %d: "+
		"run a build of level %d or later (a level once active is not rolled back; see docs/upgrading.md)",
		ErrFeatureLevel, active, SupportedFeatureLevel, active)
}

// MemberIDs converts the metadata group's server ids (decimal node ids) to
// node ids; an id that is not a number is not a Strom node and is skipped.
func MemberIDs(servers []raftmeta.Server) []int32 {
	var ids []int32
	for _, s := range servers {
		if id, err := strconv.ParseInt(s.ID, 10, 32); err == nil {
			ids = append(ids, int32(id))
		}
	}
	return ids
}
