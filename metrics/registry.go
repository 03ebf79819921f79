package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Build names the running binary, for strom_build_info.
type Build struct {
	Version, Commit, GoVersion string
}

// Handler returns the /metrics handler of one node over Registry's
// metrics. A collector that fails leaves its series out and the rest is
// served.
func Handler(b Build, rpc *RPC, node *Collector) http.Handler {
	reg := Registry(b, rpc, node)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, ErrorHandling: promhttp.ContinueOnError})
}

// Registry returns one node's registry (never the global one, so several
// nodes can run in one process): the node's collector, the request
// metrics, build info, and the Go runtime and process collectors.
func Registry(b Build, rpc *RPC, node *Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "strom_build_info",
			Help:        "1, labelled with the node's Strom version, commit and Go version.",
			ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "goversion": b.GoVersion},
		}, func() float64 { return 1 }),
		rpc, node,
	)
	return reg
}
