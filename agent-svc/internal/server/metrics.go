package server

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/metrics"
)

// driveMetrics counts drives by how they finished, drive failures by
// provider and class, and the drives holding a slot now.
type driveMetrics struct {
	finished *prometheus.CounterVec
	failures *prometheus.CounterVec
	running  prometheus.Gauge
}

func newDriveMetrics(reg prometheus.Registerer) *driveMetrics {
	if reg == nil {
		return nil
	}
	m := &driveMetrics{
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "drives_total",
			Help: "Drives finished, by outcome (completed, refused, failed, …).",
		}, []string{"outcome"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "drive_failures_total",
			Help: "Drive failures (a provider call that gave no usable answer), by provider and error class.",
		}, []string{"provider", "error_class"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Name: "drives_running",
			Help: "Drives holding a drive slot in this process.",
		}),
	}
	reg.MustRegister(m.finished, m.failures, m.running)
	return m
}

// event counts what one drive event reports.
func (m *driveMetrics) event(ev *realmv1.DriveEvent) {
	if m == nil {
		return
	}
	if f := ev.GetFailure(); f != nil {
		m.failures.WithLabelValues(f.GetProvider(), f.GetErrorClass()).Inc()
	}
	if ev.GetKind() == realmv1.DriveEventKind_DRIVE_EVENT_KIND_FINISHED {
		outcome := strings.ToLower(strings.TrimPrefix(ev.GetOutcome().String(), "DRIVE_OUTCOME_"))
		m.finished.WithLabelValues(outcome).Inc()
	}
}

func (m *driveMetrics) slot(delta int) {
	if m != nil {
		m.running.Add(float64(delta))
	}
}
