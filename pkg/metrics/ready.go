package metrics

import (
	"context"
	"fmt"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Ready is one readiness check of /readyz: nil when ready.
type Ready func(context.Context) error

// HealthChecker is what HealthReady asks: a gRPC health server.
type HealthChecker interface {
	Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error)
}

// HealthReady is ready while h reports every service SERVING: /readyz
// then says what the gRPC health check says (engine-svc is NOT_SERVING
// while Redis does not answer).
func HealthReady(h HealthChecker, services ...string) Ready {
	return func(ctx context.Context) error {
		for _, svc := range services {
			resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil {
				return fmt.Errorf("%s: %w", svc, err)
			}
			if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("%s is %s", svc, st)
			}
		}
		return nil
	}
}
