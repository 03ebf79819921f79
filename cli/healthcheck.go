package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

// newHealthcheckCmd is `strom healthcheck`: the container image's
// HEALTHCHECK, which has no curl. It reads api.listen the way `strom server`
// does (--config FILE, then STROM_* variables; not the server's flags), so it
// checks the node of the same container without being told where it listens.
func newHealthcheckCmd(g *globals) *cobra.Command {
	var configFile string
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 if the node on this host answers /readyz with 200, 1 otherwise (a container's HEALTHCHECK)",
		Long: "Exit 0 if the node on this host answers /readyz with 200 within --timeout, 1 otherwise.\n" +
			"The node's address is api.listen from --config FILE and STROM_API_LISTEN, as `strom server`\n" +
			"reads it (an unspecified host, as in :9123, is 127.0.0.1). Server flags are not seen: give\n" +
			"the listen address to both as STROM_API_LISTEN or in the config file.",
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(configFile)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			return checkReady(ctx, g.out, cfg.ReadyURL())
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "the server's YAML configuration file, for api.listen")
	return cmd
}

// checkReady GETs url and returns nil when it answers 200.
func checkReady(ctx context.Context, out io.Writer, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: %s answered %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	_, err = fmt.Fprintf(out, "ready: %s\n", url)
	return err
}
