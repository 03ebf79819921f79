package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// codeSlots is one slot per Connect code (1..16) and one for success (0).
const codeSlots = 17

// RPC counts the API's requests by procedure and outcome and times them.
// Counters and histograms of the procedures named to NewRPC are resolved
// once (a request's code on its first occurrence): Observe takes no lock
// and allocates nothing for them. Its methods are safe for concurrent use.
type RPC struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	procs    map[string]*procMetrics // read-only after NewRPC
}

type procMetrics struct {
	duration prometheus.Observer
	codes    [codeSlots]atomic.Pointer[prometheus.Counter]
}

// NewRPC returns the request metrics of the given procedures
// ("/strom.v1.TabletService/ProduceLog"); others are counted too, through
// a label lookup per request.
func NewRPC(procedures []string) *RPC {
	m := &RPC{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strom_rpc_requests_total",
			Help: "API requests served, by procedure and result code (ok, or the Connect error code).",
		}, []string{"procedure", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strom_rpc_request_duration_seconds",
			Help:    "Time from a request's arrival at the handler to its reply, long-poll waits included, by procedure.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"procedure"}),
		procs: make(map[string]*procMetrics, len(procedures)),
	}
	for _, p := range procedures {
		m.procs[p] = &procMetrics{duration: m.duration.WithLabelValues(p)}
	}
	return m
}

// Observe records one request of procedure that ended with err (nil: ok)
// after d.
func (m *RPC) Observe(procedure string, err error, d time.Duration) {
	code := connect.Code(0)
	if ce, isConnect := err.(*connect.Error); isConnect {
		code = ce.Code() // what the API returns, without errors.As (which allocates)
	} else if err != nil {
		code = connect.CodeOf(err)
	}
	p, ok := m.procs[procedure]
	if !ok || int(code) >= codeSlots {
		m.requests.WithLabelValues(procedure, codeName(code)).Inc()
		m.duration.WithLabelValues(procedure).Observe(d.Seconds())
		return
	}
	p.duration.Observe(d.Seconds())
	slot := &p.codes[code]
	c := slot.Load()
	if c == nil {
		c = new(prometheus.Counter)
		*c = m.requests.WithLabelValues(procedure, codeName(code))
		slot.CompareAndSwap(nil, c) // a racing first request stores the same series
	}
	(*c).Inc()
}

// Interceptor returns a Connect interceptor that observes every unary
// request. Put it outermost, so it sees the code the client gets.
func (m *RPC) Interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			start := time.Now()
			resp, err := next(ctx, req)
			m.Observe(req.Spec().Procedure, err, time.Since(start))
			return resp, err
		}
	}
}

func codeName(c connect.Code) string {
	if c == 0 {
		return "ok"
	}
	return c.String()
}

// Describe implements prometheus.Collector.
func (m *RPC) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.duration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *RPC) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.duration.Collect(ch)
}
