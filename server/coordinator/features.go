package coordinator

import (
	"strom/raftmeta"
	"strom/raftmeta/catalog"
)

// raiseFeatureLevel moves the cluster's active feature level
// (/strom/features) up to the lowest level that every member of the
// metadata group advertises in its registration (catalog.NextFeatureLevel),
// never above this build's, in a multi fenced by the term's epoch. It
// writes nothing when the level stays. Runs on the term's goroutine.
func (c *Coordinator) raiseFeatureLevel(t *term) error {
	members, err := c.meta.Servers()
	if err != nil {
		return err
	}
	servers, err := c.cat.TabletServers()
	if err != nil {
		return err
	}
	cur, version, err := c.cat.FeatureLevel()
	if err != nil {
		return err
	}
	next := min(catalog.NextFeatureLevel(cur, catalog.MemberIDs(members), servers), max(cur, catalog.SupportedFeatureLevel))
	if next == cur {
		return nil
	}
	if err := c.write(t, []raftmeta.Op{catalog.SetFeatureLevelOp(next, version)}); err != nil {
		return err
	}
	c.lg.Info("cluster feature level raised", "from", cur, "to", next, "members", len(members))
	return nil
}
