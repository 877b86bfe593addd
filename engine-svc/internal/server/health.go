package server

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// StoreWatch keeps the readiness of the named services (grpc.health.v1) in
// step with the store: NOT_SERVING while a ping fails, SERVING once one
// answers again. The overall ("") status, which liveness probes ask, is
// left alone: a lost store is waited out, not cured by a restart.
type StoreWatch struct {
	Health   *health.Server
	Ping     func(context.Context) error
	Interval time.Duration // between pings; each ping gets as long
	Logger   *slog.Logger
	Services []string
}

// Run pings until ctx ends. The caller owns the goroutine running it and
// stops it by cancelling ctx.
func (w StoreWatch) Run(ctx context.Context) {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	serving := true
	for {
		pctx, cancel := context.WithTimeout(ctx, w.Interval)
		err := w.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil && serving:
			serving = false
			w.Logger.Warn("store unreachable: not serving until it answers", "err", err)
			w.set(healthpb.HealthCheckResponse_NOT_SERVING)
		case err == nil && !serving:
			serving = true
			w.Logger.Info("store answers again: serving")
			w.set(healthpb.HealthCheckResponse_SERVING)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w StoreWatch) set(s healthpb.HealthCheckResponse_ServingStatus) {
	for _, svc := range w.Services {
		w.Health.SetServingStatus(svc, s)
	}
}
