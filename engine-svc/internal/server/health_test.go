package server_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/realm-go/realm/engine-svc/internal/server"
)

// TestStoreWatch drives StoreWatch with scripted pings: readiness follows
// each failure and recovery, the liveness status ("") never moves, and Run
// returns once its context ends.
func TestStoreWatch(t *testing.T) {
	t.Parallel()
	down := errors.New("connection refused")
	const (
		serving    = healthpb.HealthCheckResponse_SERVING
		notServing = healthpb.HealthCheckResponse_NOT_SERVING
	)
	for _, tc := range []struct {
		name  string
		pings []error // one per ping; the last repeats
		want  healthpb.HealthCheckResponse_ServingStatus
	}{
		{name: "store answers", pings: []error{nil}, want: serving},
		{name: "store gone", pings: []error{nil, down}, want: notServing},
		{name: "store back", pings: []error{down, down, nil}, want: serving},
		{name: "store flapping, then gone", pings: []error{down, nil, down}, want: notServing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hs := health.NewServer()
			const svc = "realm.v1.EngineService"
			hs.SetServingStatus(svc, serving)
			var mu sync.Mutex
			n := 0
			settled := make(chan struct{})
			ping := func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				i := min(n, len(tc.pings)-1)
				if n == len(tc.pings) {
					close(settled) // the last ping's outcome has been applied
				}
				n++
				return tc.pings[i]
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				server.StoreWatch{Health: hs, Ping: ping, Interval: time.Millisecond,
					Logger: slog.New(slog.DiscardHandler), Services: []string{svc}}.Run(ctx)
			}()
			select {
			case <-settled:
			case <-time.After(5 * time.Second):
				t.Fatal("StoreWatch did not ping")
			}
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not return after its context ended")
			}
			for svc, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{svc: tc.want, "": serving} {
				resp, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
				if err != nil {
					t.Fatal(err)
				}
				if got := resp.GetStatus(); got != want {
					t.Errorf("service %q: %v, want %v", svc, got, want)
				}
			}
		})
	}
}
