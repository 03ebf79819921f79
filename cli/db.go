package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"strom/client"

	stromv1 "strom/rpc/gen/strom/v1"
)

func newDBCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "db", Short: "Create, list, describe and drop databases"}

	var comment string
	var ifNotExists bool
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a database",
		Args:  exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				info, err := c.Admin().CreateDatabase(ctx, &stromv1.CreateDatabaseRequest{
					Database: args[0], Comment: comment, IgnoreIfExists: ifNotExists,
				})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.out, info)
				}
				fmt.Fprintf(g.out, "created database %s\n", info.Name)
				return nil
			})
		},
	}
	create.Flags().StringVar(&comment, "comment", "", "a description of the database")
	create.Flags().BoolVar(&ifNotExists, "if-not-exists", false, "succeed if the database exists already")

	list := &cobra.Command{
		Use:   "list",
		Short: "List databases",
		Args:  exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				names, err := c.Admin().ListDatabases(ctx)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.out, &stromv1.ListDatabasesResponse{Databases: names})
				}
				for _, n := range names {
					fmt.Fprintln(g.out, n)
				}
				return nil
			})
		},
	}

	describe := &cobra.Command{
		Use:   "describe NAME",
		Short: "Describe a database",
		Args:  exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				info, err := c.Admin().GetDatabase(ctx, args[0])
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.out, info)
				}
				tables, err := c.Admin().ListTables(ctx, args[0])
				if err != nil {
					return err
				}
				t := newTable(g.out)
				t.row("Database:", info.Name)
				t.row("Comment:", orDash(info.Comment))
				t.row("Created:", formatMillis(info.CreatedTimeMs))
				t.row("Tables:", orDash(strings.Join(tables, ", ")))
				t.row("Properties:", orDash(formatMap(info.CustomProperties)))
				return t.flush()
			})
		},
	}

	var cascade, ifExists bool
	drop := &cobra.Command{
		Use:   "drop NAME",
		Short: "Drop a database (with --cascade, its tables too)",
		Args:  exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.Admin().DropDatabase(ctx, &stromv1.DropDatabaseRequest{
					Database: args[0], Cascade: cascade, IgnoreIfNotExists: ifExists,
				}); err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.out, &stromv1.DropDatabaseResponse{})
				}
				fmt.Fprintf(g.out, "dropped database %s\n", args[0])
				return nil
			})
		},
	}
	drop.Flags().BoolVar(&cascade, "cascade", false, "drop the database's tables too")
	drop.Flags().BoolVar(&ifExists, "if-exists", false, "succeed if the database does not exist")

	cmd.AddCommand(create, list, describe, drop)
	return cmd
}

// exactArgs is cobra.ExactArgs with an error that names what is missing.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		if n == 0 {
			return fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args)
		}
		return fmt.Errorf("%s needs %s (usage: %s)", cmd.CommandPath(), names, cmd.UseLine())
	}
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ", ")
}
