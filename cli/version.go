package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"strom/internal/buildinfo"
)

// versionInfo is what `strom version` prints.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Show this binary's version, commit and Go version (each node's: strom cluster describe)",
		Args:  exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versionInfo{Version: buildinfo.Version(), Commit: buildinfo.Commit(), GoVersion: buildinfo.GoVersion()}
			switch g.output {
			case "json":
				b, err := json.Marshal(v)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(g.out, "%s\n", b)
				return err
			case "table":
				t := newTable(g.out)
				t.row("Version:", v.Version)
				t.row("Commit:", v.Commit)
				t.row("Go:", v.GoVersion)
				return t.flush()
			default:
				return fmt.Errorf("--output: want table or json, got %q", g.output)
			}
		},
	}
}
