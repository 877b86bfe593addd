package adapters_test

import (
	"context"
	"errors"
	"testing"

	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
)

// buildFrom is fromManifest that fails the test on a construction error.
func buildFrom(t *testing.T, use string, config map[string]any, vars map[string]string) (runner.Adapter, *fakeClock) {
	t.Helper()
	a, clock, err := fromManifest(t, use, config, vars)
	if err != nil {
		t.Fatal(err)
	}
	return a, clock
}

// invoke calls the adapter as the engine's call would reach it; config
// may add keys (rate_limit).
func ghCall(t *testing.T, a runner.Adapter, method, op string, params, config map[string]any) (any, *handler.WorkflowError) {
	t.Helper()
	return ghCallCtx(context.Background(), t, a, method, op, params, config)
}

func ghCallCtx(ctx context.Context, t *testing.T, a runner.Adapter, method, op string, params, config map[string]any) (any, *handler.WorkflowError) {
	t.Helper()
	cfg := map[string]any{"adapter": "svc", "service": "svc"}
	for k, v := range config {
		cfg[k] = v
	}
	out, err := a.Call(ctx, runner.AdapterCall{Method: method, Operation: op, Params: params, Config: cfg, RunID: "run-1", Step: "step"})
	if err == nil {
		return out, nil
	}
	var we *handler.WorkflowError
	if !errors.As(err, &we) {
		t.Fatalf("error %v is not a WorkflowError", err)
	}
	return nil, we
}

// loadManifest builds a manifest's adapters with an empty environment.
func loadManifest(path string) (map[string]runner.Adapter, error) {
	return adapters.LoadManifest(path, adapters.Options{LookupEnv: env(nil)}, "")
}
