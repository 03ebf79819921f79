// Package cli holds the strom command: `strom server` runs a node, every other
// command is a client of the API.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"strom/client"
)

// Execute runs the strom command with os.Args and exits non-zero on error,
// after printing the error as one line.
func Execute() {
	if err := NewRoot(os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strom: "+oneLine(err))
		os.Exit(1)
	}
}

// globals are the flags every client command shares.
type globals struct {
	server  string
	output  string
	timeout time.Duration
	out     io.Writer
}

// NewRoot returns the root command writing to out and errOut. Tests run it
// in-process.
func NewRoot(out, errOut io.Writer) *cobra.Command {
	g := &globals{out: out}
	root := &cobra.Command{
		Use:           "strom",
		Short:         "Strom: streaming storage for real-time analytics",
		Long:          "Strom stores tables, not topics: log tables kept as Apache Arrow and read column by column,\nand primary-key tables that take upserts and emit a changelog.\n\nRun a node with `strom server`; every other command is a client of a running node.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	server := os.Getenv("STROM_SERVER")
	if server == "" {
		server = client.DefaultAddress
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", server, "address of a Strom node, or a comma-separated list of a cluster's nodes (env STROM_SERVER)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table or json (consume also takes csv)")
	pf.DurationVar(&g.timeout, "timeout", 30*time.Second, "how long a request may take")
	root.AddCommand(newServerCmd(), newDBCmd(g), newTableCmd(g), newClusterCmd(g),
		newProduceCmd(g), newConsumeCmd(g), newOffsetsCmd(g), newBenchCmd(g),
		newPutCmd(g), newDeleteCmd(g), newLookupCmd(g), newScanCmd(g), newHealthcheckCmd(g), newVersionCmd(g), newSnapshotCmd(g))
	return root
}

// outputsAnnotation lists the --output formats a command supports
// (default "table,json").
const outputsAnnotation = "outputs"

// call validates the shared flags, then runs fn with a client and a context
// bounded by --timeout.
func (g *globals) call(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	return g.run(cmd, g.timeout, fn)
}

// callLong is call for commands that run until done or interrupted
// (SIGINT, SIGTERM), not bounded by --timeout.
func (g *globals) callLong(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	return g.run(cmd, 0, fn)
}

func (g *globals) run(cmd *cobra.Command, timeout time.Duration, fn func(ctx context.Context, c *client.Client) error) error {
	outputs := cmd.Annotations[outputsAnnotation]
	if outputs == "" {
		outputs = "table,json"
	}
	if !slices.Contains(strings.Split(outputs, ","), g.output) {
		return fmt.Errorf("--output: want %s, got %q", strings.ReplaceAll(outputs, ",", " or "), g.output)
	}
	// Say once what a call that keeps failing is waiting for (a node still
	// starting, or none there yet), rather than hanging silently.
	var told sync.Once
	notify := client.WithRetryNotify(func(_ error, waited time.Duration) {
		if waited < time.Second {
			return
		}
		told.Do(func() {
			until := "--timeout"
			if timeout > 0 {
				until += " " + timeout.String()
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "strom: no answer from a ready node at %s yet; retrying until %s runs out\n", g.server, until)
		})
	})
	c, err := client.New(g.server, notify)
	if err != nil {
		return fmt.Errorf("--server: %w", err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return fn(ctx, c)
}

// oneLine renders err as a single line: joined problems are separated by
// "; ", and a server error carries its code name.
func oneLine(err error) string {
	var ce *client.Error
	msg := err.Error()
	if errors.As(err, &ce) && ce.Name != "" && ce.Name != "UNKNOWN" {
		msg = fmt.Sprintf("%s [%s]", msg, ce.Name)
	}
	if errors.Is(err, client.ErrUnreachable) {
		msg += " (is `strom server` running there? set --server or STROM_SERVER)"
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
}
