package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"strom/client"
)

func newClusterCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Inspect the cluster"}
	cmd.AddCommand(&cobra.Command{
		Use:   "describe",
		Short: "Show each node (addresses, alive, version, rack, roles) and how many buckets are under-replicated or offline",
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
				t := newTable(g.out)
				t.row("Cluster id:", resp.ClusterId)
				t.row("Version:", resp.Version)
				t.row("Raft leader:", resp.RaftLeader)
				t.row("Voters:", ints(resp.Voters))
				t.row("Coordinator epoch:", resp.CoordinatorEpoch)
				t.row("Buckets:", resp.Buckets)
				t.row("Under-replicated buckets:", resp.UnderReplicatedBuckets)
				t.row("Offline buckets:", resp.OfflineBuckets)
				if err := t.flush(); err != nil {
					return err
				}
				fmt.Fprintln(g.out)
				t = newTable(g.out)
				t.row("NODE", "API", "RAFT", "GOSSIP", "ALIVE", "VERSION", "RACK", "ROLES")
				for _, n := range resp.Nodes {
					t.row(n.Id, orDash(n.ApiAddress), orDash(n.RaftAddress), orDash(n.GossipAddress), yesNo(n.Alive),
						orDash(n.Version), orDash(n.Rack), strings.Join(n.Roles, ","))
				}
				return t.flush()
			})
		},
	})
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
