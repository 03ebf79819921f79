package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// Remote storage as `strom table describe` and `strom snapshot list` show
// it (issue 14's visibility): per bucket the local and remote log, the
// remote bytes, and the KV snapshots, from each bucket leader's
// DescribeBuckets.

func newSnapshotCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "snapshot", Short: "Inspect the KV snapshots of primary-key tables"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list DB.TABLE",
		Short: "List every bucket's retained KV snapshots: id, log offset, creation time, files, bytes, and the leader that took it",
		Args:  exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				ct, err := c.Table(ctx, db, name)
				if err != nil {
					return err
				}
				states := ct.DescribeBuckets(ctx)
				if g.output == "json" {
					return printJSONWith(g.out, &stromv1.DescribeBucketsResponse{}, "buckets", states)
				}
				return printSnapshots(g.out, cmd.ErrOrStderr(), states)
			})
		},
	})
	return cmd
}

// printSnapshots writes a row per retained snapshot of each bucket, oldest
// first; a bucket whose leader did not answer is named on errOut.
func printSnapshots(out, errOut io.Writer, states []*stromv1.BucketState) error {
	t := newTable(out)
	t.row("BUCKET", "SNAPSHOT", "LOG OFFSET", "CREATED", "FILES", "BYTES", "LEADER", "EPOCH")
	var notes []string
	for _, st := range states {
		if st.Error != nil {
			notes = append(notes, fmt.Sprintf("bucket %d: leader's state unknown: %s", st.Bucket, st.Error.Message))
			continue
		}
		for _, s := range st.KvSnapshots {
			t.row(st.Bucket, s.Id, s.LogOffset, formatMillis(s.CreatedTimeMs), s.Files, s.SizeBytes, s.Leader, s.LeaderEpoch)
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(errOut, n)
	}
	return nil
}

// printRemoteStates writes a row per bucket: its leader's local log start,
// the tiered log's range ("-" when nothing is tiered) and bytes, and the
// latest KV snapshot ("id@offset"; "-" when none). Buckets whose leader did
// not answer show "unknown" (printBucketStates said why).
func printRemoteStates(out io.Writer, buckets []*stromv1.BucketAssignment, states []*stromv1.BucketState) error {
	t := newTable(out)
	t.row("BUCKET", "LOCAL LOG START", "REMOTE LOG", "REMOTE BYTES", "LATEST SNAPSHOT")
	for _, b := range buckets {
		st := stateOf(states, b.Bucket)
		if st == nil || st.Error != nil {
			t.row(b.Bucket, "unknown", "unknown", "unknown", "unknown")
			continue
		}
		remote, bytes, snap := "-", "0", "-"
		if st.RemoteLogStartOffset >= 0 {
			remote = fmt.Sprintf("%d-%d", st.RemoteLogStartOffset, st.RemoteLogEndOffset)
			bytes = strconv.FormatInt(st.RemoteLogBytes, 10)
		}
		if n := len(st.KvSnapshots); n > 0 {
			s := st.KvSnapshots[n-1]
			snap = fmt.Sprintf("%d@%d (%s)", s.Id, s.LogOffset, formatMillis(s.CreatedTimeMs))
		}
		t.row(b.Bucket, st.LogStartOffset, remote, bytes, snap)
	}
	return t.flush()
}
