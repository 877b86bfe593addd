package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/realm-go/realm/pkg/metrics"
)

// instruments are the engine's own Prometheus metrics. They are counted at
// the single write path, after the store accepted a change, so a count is
// never ahead of the record.
type instruments struct {
	writes    *prometheus.CounterVec
	writeTime prometheus.Histogram
	started   prometheus.Counter
	ended     *prometheus.CounterVec
	steps     *prometheus.CounterVec
	gates     prometheus.Counter
	expiries  *prometheus.CounterVec
}

func newInstruments(reg prometheus.Registerer) *instruments {
	if reg == nil {
		return nil
	}
	m := &instruments{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "run_writes_total",
			Help: "Run compare-and-set writes by result: ok, conflict (another writer won; the act retries) or error.",
		}, []string{"result"}),
		writeTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Name: "run_write_seconds",
			Help:    "Latency of one run compare-and-set write to the store.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}),
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "runs_started_total",
			Help: "Runs created.",
		}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "runs_ended_total",
			Help: "Runs that reached a terminal phase, by phase.",
		}, []string{"phase"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "step_records_total",
			Help: "Evidence entries recorded, by step kind and status.",
		}, []string{"kind", "status"}),
		gates: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "gates_opened_total",
			Help: "Human gates opened (a run parked until a person answers).",
		}),
		expiries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "gate_expiries_total",
			Help: "Gate expiries carried out, by the gate's on_expiry.",
		}, []string{"on_expiry"}),
	}
	reg.MustRegister(m.writes, m.writeTime, m.started, m.ended, m.steps, m.gates, m.expiries)
	return m
}

// write counts one compare-and-set attempt.
func (m *instruments) write(result string, took time.Duration) {
	if m == nil {
		return
	}
	m.writes.WithLabelValues(result).Inc()
	m.writeTime.Observe(took.Seconds())
}

// committed counts what an accepted transaction changed.
func (m *instruments) committed(t *txn) {
	if m == nil {
		return
	}
	if t.create {
		m.started.Inc()
	}
	if !t.wasTerminal && t.run.Terminal() {
		m.ended.WithLabelValues(t.run.Phase()).Inc()
	}
	if t.openedGate != "" {
		m.gates.Inc()
	}
	if t.expired != nil {
		m.expiries.WithLabelValues(t.expired.onExpiry).Inc()
	}
	for _, e := range t.evidence {
		m.steps.WithLabelValues(t.stepKind(e.StepID), e.Status).Inc()
	}
}

// stepKind names a step's kind for a label; "unknown" when the definition
// is missing or no longer has the step.
func (t *txn) stepKind(name string) string {
	if t.def != nil {
		if s, ok := t.def.Def.Steps[name]; ok {
			return string(s.Execution)
		}
	}
	return "unknown"
}

// logCommit writes the log lines of an accepted change: one Debug line per
// write (run_id, version, phase and the steps it recorded) and one Info
// line when the run ends, so a run's story can be followed by its run_id.
func (e *Engine) logCommit(ctx context.Context, t *txn, version int64) {
	if !e.log.Enabled(ctx, slog.LevelDebug) && (t.wasTerminal || !t.run.Terminal()) {
		return
	}
	steps := make([]string, 0, len(t.evidence))
	for _, ev := range t.evidence {
		steps = append(steps, ev.StepID+"="+ev.Status)
	}
	attrs := []slog.Attr{
		slog.String("run_id", t.run.ID), slog.String("workflow_id", t.run.WorkflowID),
		slog.Int64("run_version", version), slog.String("phase", t.run.Phase()),
	}
	if len(steps) > 0 {
		attrs = append(attrs, slog.Any("steps", steps))
	}
	if t.openedGate != "" {
		attrs = append(attrs, slog.String("gate_step", t.openedGate))
	}
	e.log.LogAttrs(ctx, slog.LevelDebug, "run written", attrs...)
	if !t.wasTerminal && t.run.Terminal() {
		e.log.LogAttrs(ctx, slog.LevelInfo, "run ended", attrs...)
	}
}
