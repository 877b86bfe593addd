package mcpserver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/realm-go/realm/pkg/metrics"
)

// toolMetrics counts and times tool calls. Labels are bounded: tool is one
// of the 11 names and result one of the reply statuses or "tool_error".
type toolMetrics struct {
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

func newToolMetrics(reg prometheus.Registerer) *toolMetrics {
	if reg == nil {
		return nil
	}
	m := &toolMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "mcp_tool_calls_total",
			Help: "MCP tool calls by tool and result: the reply's status (ok, blocked, error, …) or tool_error when the call failed before a reply.",
		}, []string{"tool", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Name: "mcp_tool_call_seconds",
			Help:    "Time to answer one MCP tool call, engine round trip included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"tool"}),
	}
	reg.MustRegister(m.calls, m.latency)
	return m
}

func (m *toolMetrics) observe(tool string, out any, failed bool, took time.Duration) {
	if m == nil {
		return
	}
	result := "tool_error"
	if !failed {
		result = "ok"
		if r, ok := out.(map[string]any); ok {
			if st, ok := r["status"].(string); ok && st != "" {
				result = st
			}
		}
	}
	m.calls.WithLabelValues(tool, result).Inc()
	m.latency.WithLabelValues(tool).Observe(took.Seconds())
}
