package cli

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"strom/server"
)

func newServerCmd() *cobra.Command {
	var configFile string
	flagValues := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a Strom node (with no flags: a complete single-node cluster in ./strom-data)",
		Long:  serverLong(),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(configFile)
			if err != nil {
				return err
			}
			for _, k := range server.Keys() {
				if k.Flag != "" && cmd.Flags().Changed(k.Flag) {
					if err := k.Set(&cfg, *flagValues[k.Flag]); err != nil {
						return fmt.Errorf("--%s: %w", k.Flag, err)
					}
				}
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			lg := server.NewLogger(cmd.ErrOrStderr(), cfg.LogFormat, cfg.LogLevel)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return server.Run(ctx, cfg, lg)
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "YAML file of configuration keys (see below)")
	defaults := server.DefaultConfig()
	for _, k := range server.Keys() {
		if k.Flag == "" {
			continue
		}
		v := new(string)
		flagValues[k.Flag] = v
		cmd.Flags().StringVar(v, k.Flag, k.Get(&defaults), k.Usage+" ("+k.Name+", env "+k.EnvName()+")")
		if k.Bool {
			cmd.Flags().Lookup(k.Flag).NoOptDefVal = "true"
		}
	}
	return cmd
}

// loadConfig is the defaults, then configFile (if not empty), then the
// STROM_* variables: a node's configuration before its flags.
func loadConfig(configFile string) (server.Config, error) {
	cfg := server.DefaultConfig()
	if configFile != "" {
		if err := cfg.LoadFile(configFile); err != nil {
			return cfg, err
		}
	}
	return cfg, cfg.LoadEnv(os.LookupEnv)
}

func serverLong() string {
	var b strings.Builder
	b.WriteString("Run a Strom node. With no flags it is a complete single-node cluster: data in ./strom-data,\n")
	b.WriteString("the API on :9123, Raft on :9124, gossip on :9125. A cluster is the same binary with --node-id,\n")
	b.WriteString("--join host:port,... and --bootstrap-expect N on each node, and STROM_CLUSTER_SECRET (the same on\n")
	b.WriteString("every node; `openssl rand -base64 32` makes one).\n\n")
	b.WriteString("Configuration comes from the defaults, then --config FILE (flat YAML, key: value), then\n")
	b.WriteString("STROM_* environment variables, then flags, each overriding the last. Keys:\n\n")
	defaults := server.DefaultConfig()
	for _, k := range server.Keys() {
		fmt.Fprintf(&b, "  %-28s %-32s default %q\n", k.Name, k.EnvName(), k.Get(&defaults))
	}
	b.WriteString("\nSIGINT or SIGTERM stops the node cleanly.")
	return b.String()
}
