package server_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

type adapterRunner struct {
	realmv1.UnimplementedRunnerServiceServer
	mu   sync.Mutex
	last *realmv1.CallAdapterRequest
	call func(*realmv1.CallAdapterRequest) *realmv1.CallAdapterResponse
}

func (a *adapterRunner) CallAdapter(_ context.Context, req *realmv1.CallAdapterRequest) (*realmv1.CallAdapterResponse, error) {
	a.mu.Lock()
	a.last = req
	a.mu.Unlock()
	return a.call(req), nil
}

// startAdapterRunner serves adapter and registers it by name only, as a
// runner that predates adapter specs does.
func startAdapterRunner(t *testing.T, e *env, adapter string, call func(*realmv1.CallAdapterRequest) *realmv1.CallAdapterResponse) *adapterRunner {
	t.Helper()
	return serveAdapters(t, e, &realmv1.RegisterRequest{Adapters: []string{adapter}}, call)
}

// serveAdapters serves the adapters reg names and registers them with reg's
// names and specs.
func serveAdapters(t *testing.T, e *env, reg *realmv1.RegisterRequest, call func(*realmv1.CallAdapterRequest) *realmv1.CallAdapterResponse) *adapterRunner {
	t.Helper()
	a := &adapterRunner{call: call}
	gs := grpc.NewServer()
	realmv1.RegisterRunnerServiceServer(gs, a)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	reg.Endpoint, reg.RunnerName, reg.Lease = lis.Addr().String(), "adapters", durationpb.New(time.Minute)
	if _, err := e.registry.Register(ctx(t), reg); err != nil {
		t.Fatal(err)
	}
	return a
}

const crm = `id: crm
name: CRM
version: 1
services:
  crm: { adapter: http, trust: engine_managed }
steps:
  add_contact:
    description: Add the contact.
    execution: auto
    uses_service: crm
    service_method: create
    operation: contacts
    input_map:
      email: run.params.email
%s`

func TestServiceStepCallsItsAdapterWithTheMergedConfig(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		a := startAdapterRunner(t, e, "http", func(req *realmv1.CallAdapterRequest) *realmv1.CallAdapterResponse {
			switch req.GetParams().AsMap()["email"] {
			case "fail@x":
				return &realmv1.CallAdapterResponse{Error: &realmv1.HandlerError{Message: "socket hang up"}}
			case "num@x":
				return &realmv1.CallAdapterResponse{Data: value(t, 42.0)}
			}
			return &realmv1.CallAdapterResponse{Data: value(t, map[string]any{"status": 201.0, "data": map[string]any{"id": "c-1"}})}
		})
		e.register(t, []byte(fmt.Sprintf(crm, "    config: { list: vip }\n")))
		r := start(t, e, "crm", map[string]any{"email": "ana@x"})
		if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("reply = %v", r)
		}
		if snap, _ := e.st.LoadRun(ctx(t), r.GetRunId()); string(snap.Outputs["add_contact"]) != `{"id":"c-1"}` {
			t.Errorf("object data recorded as %s", snap.Outputs["add_contact"])
		}
		req := a.last
		if req.GetMethod() != "create" || req.GetOperation() != "contacts" || req.GetParams().AsMap()["email"] != "ana@x" ||
			fmt.Sprint(req.GetConfig().AsMap()) != "map[adapter:http list:vip service:crm trust:engine_managed]" {
			t.Errorf("request = %v", req)
		}
		if r := start(t, e, "crm", map[string]any{"email": "fail@x"}); r.GetErrors()[0] != "Adapter 'http' threw: socket hang up" || r.GetErrorCode() != "ENGINE_ADAPTER_FAILED" {
			t.Errorf("plain error = %v", r)
		}
		num := start(t, e, "crm", map[string]any{"email": "num@x"})
		snap, _ := e.st.LoadRun(ctx(t), num.GetRunId())
		if string(snap.Outputs["add_contact"]) != `{"data":42}` {
			t.Errorf("non-object data recorded as %s", snap.Outputs["add_contact"])
		}
	})
}

func TestServiceStepWithoutItsAdapterIsBlocked(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, []byte(fmt.Sprintf(crm, "")))
		r := start(t, e, "crm", map[string]any{"email": "ana@x"})
		want := fmt.Sprintf("Run '%s' created for workflow 'crm'. 'add_contact' cannot run here (capability): adapter 'http' is not registered here — load the missing extension, or run the step on a runner that has it.", r.GetRunId())
		if r.GetContextHint() != want || r.GetWarnings()[0] != "Step 'add_contact' is blocked: its adapter 'http' is not registered in this runner." {
			t.Errorf("start = %v", r)
		}
	})
}

// A service's rate_limit holds across engine replicas: calls through two
// engines on one store draw on one bucket (spec §3.4 says per process;
// here per service, for the whole deployment).
func TestAServiceRateLimitIsSharedByEveryReplica(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"redis", "miniredis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			a := setup(t, backend)
			b := engineOn(t, a.st, a.rc, a.prefix)
			var mu sync.Mutex
			var calls []time.Time
			startAdapterRunner(t, a, "http", func(*realmv1.CallAdapterRequest) *realmv1.CallAdapterResponse {
				mu.Lock()
				calls = append(calls, time.Now())
				mu.Unlock()
				return &realmv1.CallAdapterResponse{Data: value(t, map[string]any{"status": 200.0, "data": map[string]any{}})}
			})
			wf := strings.Replace(fmt.Sprintf(crm, ""), "crm: { adapter: http, trust: engine_managed }",
				"crm: { adapter: http, rate_limit: { requests_per_second: 4, burst: 1 } }", 1)
			a.register(t, []byte(wf))
			const perEngine = 4
			var wg sync.WaitGroup
			for i := range 2 * perEngine {
				e := a
				if i%2 == 1 {
					e = b
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if r := start(t, e, "crm", map[string]any{"email": "x@x"}); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
						t.Errorf("run = %v", r)
					}
				}()
			}
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			if len(calls) != 2*perEngine {
				t.Fatalf("%d calls, want %d", len(calls), 2*perEngine)
			}
			slices.SortFunc(calls, func(x, y time.Time) int { return x.Compare(y) })
			// 8 calls at 4 a second, one at a time: at least 7 intervals of
			// 250 ms. Each engine alone would let its 4 through in 750 ms.
			span := calls[len(calls)-1].Sub(calls[0])
			if span < 1650*time.Millisecond {
				t.Errorf("8 calls in %s: %.1f a second, over the limit of 4", span, float64(len(calls)-1)/span.Seconds())
			}
			t.Logf("8 calls through two engines in %s (%.2f a second; limit 4)", span, float64(len(calls)-1)/span.Seconds())
		})
	}
}
