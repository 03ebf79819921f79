package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"strom/client"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

func newTableCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "table", Short: "Create, list, describe and drop tables"}
	cmd.AddCommand(newTableCreateCmd(g), newTableListCmd(g), newTableDescribeCmd(g), newTableDropCmd(g))
	return cmd
}

func newTableCreateCmd(g *globals) *cobra.Command {
	var (
		schema                           string
		primaryKey, bucketKey, partition []string
		buckets                          int
		options                          []string
		comment                          string
		ifNotExists                      bool
	)
	cmd := &cobra.Command{
		Use:   "create DB.TABLE --schema \"a BIGINT NOT NULL, b STRING, ...\"",
		Short: "Create a table (a primary-key table with --primary-key, else a log table)",
		Example: `  strom table create demo.orders --schema "order_id BIGINT, item STRING, amount DECIMAL(10, 2)" --primary-key order_id --buckets 4
  strom table create demo.clicks --schema "user_id BIGINT, url STRING, ts TIMESTAMP_LTZ(3)" --option table.log.ttl=3d`,
		Args: exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			if strings.TrimSpace(schema) == "" {
				return fmt.Errorf("--schema is required, e.g. --schema \"id BIGINT NOT NULL, name STRING\"")
			}
			cols, err := record.ParseColumns(schema)
			if err != nil {
				return fmt.Errorf("--schema: %w", err)
			}
			desc := &stromv1.TableDescriptor{
				Schema:        &stromv1.Schema{PrimaryKey: primaryKey},
				Comment:       comment,
				PartitionKeys: partition,
				BucketKeys:    bucketKey,
				BucketCount:   int32(buckets),
			}
			for _, c := range cols {
				desc.Schema.Columns = append(desc.Schema.Columns, &stromv1.Column{Name: c.Name, Type: c.Type.String(), Comment: c.Comment})
			}
			for _, o := range options {
				k, v, ok := strings.Cut(o, "=")
				if !ok || strings.TrimSpace(k) == "" {
					return fmt.Errorf("--option %q: want key=value, e.g. --option table.log.ttl=3d", o)
				}
				k = strings.TrimSpace(k)
				if strings.HasPrefix(k, "table.") {
					if desc.Properties == nil {
						desc.Properties = map[string]string{}
					}
					desc.Properties[k] = strings.TrimSpace(v)
				} else {
					if desc.CustomProperties == nil {
						desc.CustomProperties = map[string]string{}
					}
					desc.CustomProperties[k] = strings.TrimSpace(v)
				}
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				info, err := c.Admin().CreateTable(ctx, &stromv1.CreateTableRequest{
					Database: db, Table: name, Descriptor_: desc, IgnoreIfExists: ifNotExists,
				})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.out, info)
				}
				fmt.Fprintf(g.out, "created %s %s.%s (table id %d, %d bucket(s))\n",
					tableKind(info), info.Database, info.Table, info.TableId, info.Descriptor_.GetBucketCount())
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&schema, "schema", "", "columns: \"name TYPE [NOT NULL] [COMMENT 'text'], ...\"")
	f.StringSliceVar(&primaryKey, "primary-key", nil, "primary-key columns (makes a primary-key table)")
	f.StringSliceVar(&bucketKey, "bucket-key", nil, "columns that choose a row's bucket (default: the primary key less partition keys)")
	f.StringSliceVar(&partition, "partition-key", nil, "STRING columns that partition the table (not supported yet: the server refuses them)")
	f.IntVar(&buckets, "buckets", 0, "number of buckets (default: the cluster's default.bucket.number)")
	f.StringArrayVar(&options, "option", nil, "table option key=value, repeatable (table.* keys are Fluss's)")
	f.StringVar(&comment, "comment", "", "a description of the table")
	f.BoolVar(&ifNotExists, "if-not-exists", false, "succeed if the table exists already")
	return cmd
}

func newTableListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list DB",
		Short: "List the tables of a database",
		Args:  exactArgs(1, "DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				names, err := c.Admin().ListTables(ctx, args[0])
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.out, &stromv1.ListTablesResponse{Tables: names})
				}
				for _, n := range names {
					fmt.Fprintln(g.out, n)
				}
				return nil
			})
		},
	}
}

func newTableDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe DB.TABLE",
		Short: "Describe a table: columns, keys, options, and per bucket its leader, ISR, high watermark, each replica's log end and lag, the local and remote log and the latest KV snapshot",
		Args:  exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				info, err := c.Admin().GetTable(ctx, db, name)
				if err != nil {
					return err
				}
				var states []*stromv1.BucketState
				if len(info.Buckets) > 0 {
					ct, err := c.Table(ctx, db, name)
					if err != nil {
						return err
					}
					states = ct.DescribeBuckets(ctx)
				}
				if g.output == "json" {
					return printJSONWith(g.out, info, "bucketStates", states)
				}
				d := info.Descriptor_
				t := newTable(g.out)
				t.row("Table:", info.Database+"."+info.Table)
				t.row("Kind:", tableKind(info))
				t.row("Table id:", info.TableId)
				t.row("Schema id:", info.SchemaId)
				t.row("Primary key:", orDash(strings.Join(d.GetSchema().GetPrimaryKey(), ", ")))
				t.row("Bucket key:", orDash(strings.Join(d.GetBucketKeys(), ", ")))
				t.row("Partition key:", orDash(strings.Join(d.GetPartitionKeys(), ", ")))
				t.row("Buckets:", d.GetBucketCount())
				t.row("Comment:", orDash(d.GetComment()))
				t.row("Options:", orDash(formatMap(d.GetProperties())))
				t.row("Custom options:", orDash(formatMap(d.GetCustomProperties())))
				t.row("Created:", formatMillis(info.CreatedTimeMs))
				if err := t.flush(); err != nil {
					return err
				}
				fmt.Fprintln(g.out)
				t = newTable(g.out)
				t.row("COLUMN", "TYPE", "KEY", "COMMENT")
				pk := map[string]bool{}
				for _, k := range d.GetSchema().GetPrimaryKey() {
					pk[k] = true
				}
				for _, col := range d.GetSchema().GetColumns() {
					key := ""
					if pk[col.Name] {
						key = "PK"
					}
					t.row(col.Name, col.Type, orDash(key), orDash(col.Comment))
				}
				if err := t.flush(); err != nil {
					return err
				}
				if len(info.Buckets) == 0 {
					return nil
				}
				fmt.Fprintln(g.out)
				if err := printBucketStates(g.out, cmd.ErrOrStderr(), info.Buckets, states, time.Now()); err != nil {
					return err
				}
				fmt.Fprintln(g.out)
				return printRemoteStates(g.out, info.Buckets, states)
			})
		},
	}
}

func newTableDropCmd(g *globals) *cobra.Command {
	var ifExists bool
	cmd := &cobra.Command{
		Use:   "drop DB.TABLE",
		Short: "Drop a table",
		Args:  exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				if err := c.Admin().DropTable(ctx, &stromv1.DropTableRequest{Database: db, Table: name, IgnoreIfNotExists: ifExists}); err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.out, &stromv1.DropTableResponse{})
				}
				fmt.Fprintf(g.out, "dropped table %s.%s\n", db, name)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&ifExists, "if-exists", false, "succeed if the table does not exist")
	return cmd
}

func tableKind(t *stromv1.TableInfo) string {
	if len(t.GetDescriptor_().GetSchema().GetPrimaryKey()) > 0 {
		return "primary-key table"
	}
	return "log table"
}

func ints(v []int32) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.Itoa(int(x))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// printBucketStates writes a row per bucket: its leader, epoch, replicas
// and ISR as the metadata has them, then, as its leader reported them
// (states), its high watermark and each replica's log end and lag
// ("node:value", in replica order; "?" for a follower that has not
// fetched from this leader yet). The lag of a follower out of the ISR is
// the one its last fetch left, which stays as it was when the follower is
// dead (0 if it died caught up): it is marked with how long ago the
// follower was last caught up, as of now ("3:0(out of ISR, caught up 42s
// ago)"). A bucket whose leader did not answer shows "unknown" there, and
// why on errOut.
func printBucketStates(out, errOut io.Writer, buckets []*stromv1.BucketAssignment, states []*stromv1.BucketState, now time.Time) error {
	t := newTable(out)
	t.row("BUCKET", "LEADER", "EPOCH", "REPLICAS", "ISR", "HIGH WATERMARK", "LOG END", "LAG")
	var notes []string
	for _, b := range buckets {
		hw, ends, lags := "unknown", "unknown", "unknown"
		if st := stateOf(states, b.Bucket); st != nil && st.Error == nil {
			var e, l []string
			for _, r := range st.Replicas {
				e = append(e, fmt.Sprintf("%d:%s", r.Node, offsetOrUnknown(r.LogEndOffset)))
				l = append(l, fmt.Sprintf("%d:%s%s", r.Node, offsetOrUnknown(r.Lag), outOfISR(r, now)))
			}
			hw, ends, lags = strconv.FormatInt(st.HighWatermark, 10), strings.Join(e, " "), strings.Join(l, " ")
		} else if st != nil {
			notes = append(notes, fmt.Sprintf("bucket %d: leader's state unknown: %s", b.Bucket, st.Error.Message))
		}
		t.row(b.Bucket, b.Leader, b.LeaderEpoch, ints(b.Replicas), ints(b.Isr), hw, ends, lags)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(errOut, n)
	}
	return nil
}

func stateOf(states []*stromv1.BucketState, bucket int32) *stromv1.BucketState {
	for _, st := range states {
		if st.Bucket == bucket {
			return st
		}
	}
	return nil
}

// outOfISR marks the lag of a follower out of the ISR with the age of
// its last catching up ("" for one in the ISR).
func outOfISR(r *stromv1.ReplicaState, now time.Time) string {
	switch {
	case r.InSync:
		return ""
	case r.CaughtUpTimeMs == 0:
		return "(out of ISR)"
	}
	age := max(0, now.Sub(time.UnixMilli(r.CaughtUpTimeMs))).Round(time.Second)
	return fmt.Sprintf("(out of ISR, caught up %s ago)", age)
}

func offsetOrUnknown(v int64) string {
	if v < 0 {
		return "?"
	}
	return strconv.FormatInt(v, 10)
}
