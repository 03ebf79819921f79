package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"strom/client"
	stromv1 "strom/rpc/gen/strom/v1"
)

func newClusterCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Inspect the cluster"}
	cmd.AddCommand(&cobra.Command{
		Use:   "describe",
		Short: "Show each node (addresses, alive, version, feature level, rack, roles), the cluster's active feature level, and how many buckets are under-replicated or offline",
		Args:  exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Admin().DescribeCluster(ctx)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.out, resp)
				}
				return printCluster(g.out, resp)
			})
		},
	})
	return cmd
}

// printCluster writes DescribeCluster's answer as `strom cluster describe`
// shows it: the cluster's summary (with its active feature level, what the
// nodes may send each other: docs/upgrading.md), then a row per node with
// its build's version and the highest feature level it speaks (LEVEL; 0
// for a build that predates levels or a node not registered).
func printCluster(w io.Writer, resp *stromv1.DescribeClusterResponse) error {
	t := newTable(w)
	t.row("Cluster id:", resp.ClusterId)
	t.row("Version:", resp.Version)
	t.row("Feature level:", resp.ActiveFeatureLevel)
	t.row("Raft leader:", resp.RaftLeader)
	t.row("Voters:", ints(resp.Voters))
	t.row("Coordinator epoch:", resp.CoordinatorEpoch)
	t.row("Buckets:", resp.Buckets)
	t.row("Under-replicated buckets:", resp.UnderReplicatedBuckets)
	t.row("Offline buckets:", resp.OfflineBuckets)
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w)
	t.row("NODE", "API", "RAFT", "GOSSIP", "ALIVE", "VERSION", "LEVEL", "RACK", "ROLES")
	for _, n := range resp.Nodes {
		t.row(n.Id, orDash(n.ApiAddress), orDash(n.RaftAddress), orDash(n.GossipAddress), yesNo(n.Alive),
			orDash(n.Version), n.FeatureLevel, orDash(n.Rack), strings.Join(n.Roles, ","))
	}
	return t.flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
