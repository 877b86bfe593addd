package server_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

type handlerFunc func(ctx context.Context, req *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error)

// testRunner is a handler runner hosted in the test: a real gRPC server
// that registers with the engine's registry like any runner.
type testRunner struct {
	realmv1.UnimplementedRunnerServiceServer
	handlers map[string]handlerFunc
	calls    atomic.Int64
	gs       *grpc.Server
	id       string
}

func (r *testRunner) ExecuteHandler(ctx context.Context, req *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
	r.calls.Add(1)
	return r.handlers[req.GetHandler()](ctx, req)
}

func startRunner(t *testing.T, e *env, handlers map[string]handlerFunc) *testRunner {
	t.Helper()
	r := &testRunner{handlers: handlers, gs: grpc.NewServer()}
	realmv1.RegisterRunnerServiceServer(r.gs, r)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.gs.Serve(lis) }()
	t.Cleanup(r.gs.Stop)
	req := &realmv1.RegisterRequest{Endpoint: lis.Addr().String(), RunnerName: "test-runner", Lease: durationpb.New(time.Minute)}
	for name := range handlers {
		req.Handlers = append(req.Handlers, &realmv1.HandlerSpec{Name: name})
	}
	resp, err := e.registry.Register(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	r.id = resp.GetRunnerId()
	return r
}

func value(t testing.TB, v any) *structpb.Value {
	pv, err := structpb.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// oneStep is a workflow whose only step runs a handler.
func oneStep(handler, extra string) []byte {
	return []byte(fmt.Sprintf("id: one_%s\nname: One\nversion: 1\nsteps:\n  work:\n    description: Do the work.\n    execution: auto\n    handler: %s\n%s", handler, handler, extra))
}

func TestEachHandlerOutcomeIsRecordedAsTheSeedSays(t *testing.T) {
	t.Parallel()
	handlers := map[string]handlerFunc{
		"data": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"checked": 3.0})}, nil
		},
		"list": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Data: value(t, []any{1.0, 2.0})}, nil
		},
		"warns": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			w := "One record had no email address."
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"checked": 3.0}), Warn: &w}, nil
		},
		"aborts": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			m := "The account is closed."
			return &realmv1.ExecuteHandlerResponse{AbortMessage: &m, Data: value(t, map[string]any{"dropped": true})}, nil
		},
		"nothing": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{}, nil
		},
		"throws": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{Message: "the billing service is down"}}, nil
		},
		"notfound": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			d, _ := structpb.NewStruct(map[string]any{"order": "A-17"})
			return &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{Message: "Order A-17 is not in the system.", Code: "RESOURCE_NOT_FOUND",
				Category: "RESOURCE", AgentAction: "report_to_user", Details: d}}, nil
		},
		// Fails until the third attempt (by the attempt the engine sends, so
		// the two backends running at once do not share a count).
		"flaky": func(_ context.Context, req *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			if req.GetAttempt() < 3 {
				return &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{Message: "rate limited", Code: "SERVICE_RATE_LIMITED", Retryable: true}}, nil
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"ok": true})}, nil
		},
		"limited": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{Message: "rate limited", Code: "SERVICE_RATE_LIMITED", Retryable: true}}, nil
		},
		"slow": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{})}, nil
		},
	}
	retry := "    retry: { max_attempts: 3 }\n    timeout_seconds: 10\n"
	cases := []struct {
		handler, extra string
		phase          realmv1.RunPhase
		output         string // the step's recorded output as fmt prints it
		code, msg      string
		warning        string
		attempts       int
	}{
		{handler: "data", phase: realmv1.RunPhase_RUN_PHASE_COMPLETED, output: "map[checked:3]"},
		{handler: "list", phase: realmv1.RunPhase_RUN_PHASE_COMPLETED, output: "[1 2]"},
		{handler: "warns", phase: realmv1.RunPhase_RUN_PHASE_COMPLETED, output: "map[checked:3]", warning: "One record had no email address."},
		{handler: "aborts", phase: realmv1.RunPhase_RUN_PHASE_ABORTED, output: "map[abort_message:The account is closed. aborted:true]"},
		{handler: "nothing", phase: realmv1.RunPhase_RUN_PHASE_FAILED, code: "ENGINE_HANDLER_FAILED", msg: "Handler 'nothing' returned nothing: a handler returns data, a warning or an abort."},
		{handler: "throws", extra: retry, phase: realmv1.RunPhase_RUN_PHASE_FAILED, code: "ENGINE_HANDLER_FAILED", msg: "Handler 'throws' threw: the billing service is down", attempts: 1},
		{handler: "notfound", extra: retry, phase: realmv1.RunPhase_RUN_PHASE_FAILED, code: "RESOURCE_NOT_FOUND", msg: "Order A-17 is not in the system.", attempts: 1},
		{handler: "flaky", extra: retry, phase: realmv1.RunPhase_RUN_PHASE_COMPLETED, output: "map[ok:true]", attempts: 3},
		{handler: "limited", extra: retry, phase: realmv1.RunPhase_RUN_PHASE_FAILED, code: "STEP_RETRY_EXHAUSTED", msg: "Step 'work' failed after 3 attempts", attempts: 3},
		{handler: "slow", extra: "    timeout_seconds: 1\n", phase: realmv1.RunPhase_RUN_PHASE_FAILED, code: "STEP_TIMEOUT", msg: "Step 'work' timed out after 1000ms"},
	}
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			e := setup(t, b)
			startRunner(t, e, handlers)
			for _, c := range cases {
				t.Run(c.handler, func(t *testing.T) {
					if r := e.register(t, oneStep(c.handler, c.extra)); !r.GetRegistered() {
						t.Fatal(r.GetReport().GetText())
					}
					r := start(t, e, "one_"+c.handler, nil)
					if r.GetRunPhase() != c.phase {
						t.Fatalf("phase %v, reply %v", r.GetRunPhase(), r)
					}
					if c.code != "" && (r.GetErrorCode() != c.code || r.GetErrors()[0] != c.msg || r.GetStoppedStep() != "work" ||
						r.GetAgentAction() != realmv1.AgentAction_AGENT_ACTION_STOP) {
						t.Errorf("failure reply = %v", r)
					}
					if c.warning != "" && strings.Join(r.GetWarnings(), "|") != c.warning {
						t.Errorf("warnings = %v", r.GetWarnings())
					}
					ev, err := e.st.Evidence(ctx(t), r.GetRunId(), 0, -1)
					if err != nil {
						t.Fatal(err)
					}
					if c.attempts > 0 && len(ev) != c.attempts {
						t.Errorf("%d evidence entries, want one per attempt (%d)", len(ev), c.attempts)
					}
					for _, raw := range ev {
						var entry struct {
							DurationMS int64 `json:"duration_ms"`
						}
						if err := jsonUnmarshal(raw, &entry); err != nil || entry.DurationMS < 0 || entry.DurationMS > 60000 {
							t.Errorf("entry duration = %d (%v): %s", entry.DurationMS, err, raw)
						}
					}
					if c.output != "" {
						snap, _ := e.st.LoadRun(ctx(t), r.GetRunId())
						var out any
						_ = jsonUnmarshal(snap.Outputs["work"], &out)
						if got := fmt.Sprint(out); got != c.output {
							t.Errorf("output = %s, want %s", got, c.output)
						}
					}
				})
			}
			if c := r0(t, e, "one_limited"); c.GetErrorDetails().AsMap()["lastError"] != "rate limited" {
				t.Errorf("exhausted details = %v", c.GetErrorDetails())
			}
			aborted := state(t, e, r0(t, e, "one_aborts").GetRunId())
			if aborted.GetSealedByArm() != "handler_abort" || aborted.GetTerminalReason() != "Handler 'work' aborted the run: The account is closed." {
				t.Errorf("abort state = %v", aborted)
			}
		})
	}
}

// r0 starts another run of a workflow and returns its reply.
func r0(t *testing.T, e *env, wf string) *realmv1.Reply { return start(t, e, wf, nil) }

func TestCapabilityBlocksUntilARunnerRegisters(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, oneStep("later", ""))
		r := start(t, e, "one_later", nil)
		want := fmt.Sprintf("Run '%s' created for workflow 'one_later'. 'work' cannot run here (capability): handler 'later' is not registered here — load the missing extension, or run the step on a runner that has it.", r.GetRunId())
		if r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK || r.GetContextHint() != want || len(r.GetNextActions()) != 0 {
			t.Fatalf("start = %v", r)
		}
		if strings.Join(r.GetWarnings(), "|") != "Step 'work' is blocked: its handler 'later' is not registered in this runner." {
			t.Errorf("warnings = %v", r.GetWarnings())
		}
		s := state(t, e, r.GetRunId())
		if s.GetNextActionsStatus() != "blocked_on_capability" || s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_RUNNING {
			t.Errorf("state = %v", s)
		}
		block := extra(s)["capability_blocks"].(map[string]any)["work"].(map[string]any)
		if block["code"] != "ENGINE_HANDLER_NOT_REGISTERED" || block["requirement"].(map[string]any)["name"] != "later" {
			t.Errorf("capability_blocks = %v", block)
		}
		if again := advance(t, e, r.GetRunId()); again.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK || len(again.GetWarnings()) != 0 {
			t.Errorf("a second advance with the marker recorded = %v", again)
		}
		startRunner(t, e, map[string]handlerFunc{"later": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"done": true})}, nil
		}})
		if s := state(t, e, r.GetRunId()); s.GetNextActionsStatus() != "advance_owed" {
			t.Errorf("state once a runner has it = %v", s.GetNextActionsStatus())
		}
		adv := advance(t, e, r.GetRunId())
		if adv.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || adv.GetChainedAutoSteps()[0].GetStep() != "work" {
			t.Errorf("advance = %v", adv)
		}
	})
}

func TestTwoRunnersShareOneCapability(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ok := func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{})}, nil
		}
		a := startRunner(t, e, map[string]handlerFunc{"shared": ok})
		b := startRunner(t, e, map[string]handlerFunc{"shared": ok})
		e.register(t, oneStep("shared", ""))
		for range 10 {
			if r := start(t, e, "one_shared", nil); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
				t.Fatalf("run = %v", r)
			}
		}
		if a.calls.Load() == 0 || b.calls.Load() == 0 || a.calls.Load()+b.calls.Load() != 10 {
			t.Errorf("calls: %d and %d", a.calls.Load(), b.calls.Load())
		}
	})
}

// A runner that dies mid-step fails the attempt; with a retry block and a
// second runner alive, the next attempt runs there and the step completes.
func TestRunnerKilledMidStepIsRetriedOnAnother(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		entered := make(chan struct{})
		var once sync.Once
		dying := startRunner(t, e, map[string]handlerFunc{"fragile": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			once.Do(func() { close(entered) })
			<-ctx.Done()
			return nil, ctx.Err()
		}})
		e.register(t, oneStep("fragile", "    idempotent: true\n    retry: { max_attempts: 2 }\n    timeout_seconds: 30\n"))
		done := make(chan *realmv1.Reply, 1)
		go func() { done <- start(t, e, "one_fragile", nil) }()
		<-entered
		// The first runner dies; a healthy one takes its place.
		_, _ = e.registry.Deregister(ctx(t), &realmv1.DeregisterRequest{RunnerId: dying.id})
		startRunner(t, e, map[string]handlerFunc{"fragile": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"second": true})}, nil
		}})
		dying.gs.Stop()
		r := <-done
		if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("reply = %v", r)
		}
		ev, _ := e.st.Evidence(ctx(t), r.GetRunId(), 0, -1)
		if len(ev) != 2 || !strings.Contains(string(ev[0]), `"status":"error"`) || !strings.Contains(string(ev[1]), `"attempt":2`) {
			t.Errorf("evidence = %s", ev)
		}
	})
}

// uses_resources is checked with the seed's diagnostic when a workflow is
// registered against live runners, and when a runner registers against
// the registered workflows.
func TestUsesResourcesIsCheckedBothWays(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		wf := []byte("id: needs\nname: Needs\nversion: 1\nsteps:\n  fetch:\n    description: Fetch.\n    execution: auto\n    handler: needs\n")
		if r := e.register(t, wf); !r.GetRegistered() {
			t.Fatalf("no runner yet, so nothing to check: %v", r.GetReport())
		}
		resp, err := e.registry.Register(ctx(t), &realmv1.RegisterRequest{Endpoint: "127.0.0.1:1", RunnerName: "r",
			Handlers: []*realmv1.HandlerSpec{{Name: "needs", UsesResources: []string{"fetch", "parse"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(resp.GetWarnings(), "|") != "workflow 'needs': Step 'fetch': handler 'needs' declares uses_resources 'parse' but no step with that ID exists in this workflow" {
			t.Errorf("runner warnings = %v", resp.GetWarnings())
		}
		r := e.register(t, wf)
		if r.GetRegistered() || strings.TrimSpace(r.GetReport().GetText()) != "Invalid workflow: Step 'fetch': handler 'needs' declares uses_resources 'parse' but no step with that ID exists in this workflow (step at line 5)" {
			t.Errorf("registration = %v", r.GetReport().GetText())
		}
	})
}

// retry.total_timeout_seconds bounds every attempt and wait together
// (spec §12.2): a wait that would overrun it ends the step at once, and
// an attempt's timeout is cut to what is left; the evidence says so.
func TestTotalTimeoutBoundsEveryAttemptAndWait(t *testing.T) {
	t.Parallel()
	handlers := map[string]handlerFunc{
		"limited": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{Message: "rate limited", Code: "SERVICE_RATE_LIMITED", Retryable: true}}, nil
		},
		"slow": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Second):
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{})}, nil
		},
	}
	cases := []struct {
		name, handler, extra string
		lastError            string // prefix
	}{
		// Without the budget: 5 attempts, 1.5 s apart.
		{"the next wait would overrun it", "limited",
			"    timeout_seconds: 10\n    retry: { max_attempts: 5, backoff: fixed, base_delay_ms: 1500, total_timeout_seconds: 1 }\n", "rate limited"},
		// Without the budget: one 10 s attempt, then another.
		{"an attempt is cut to what is left", "slow",
			"    timeout_seconds: 10\n    idempotent: true\n    retry: { max_attempts: 3, on_timeout: true, total_timeout_seconds: 1 }\n", "Step 'work' timed out after "},
	}
	e := setup(t, "miniredis")
	startRunner(t, e, handlers)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if r := e.register(t, oneStep(c.handler, c.extra)); !r.GetRegistered() {
				t.Fatal(r.GetReport().GetText())
			}
			began := time.Now()
			r := start(t, e, "one_"+c.handler, nil)
			took := time.Since(began)
			d := r.GetErrorDetails().AsMap()
			if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_FAILED || r.GetErrorCode() != "STEP_RETRY_EXHAUSTED" ||
				r.GetErrors()[0] != "Step 'work' failed after 1 attempts" || d["exhausted_by"] != "total_timeout" ||
				!strings.HasPrefix(fmt.Sprint(d["lastError"]), c.lastError) {
				t.Fatalf("reply = %v", r)
			}
			if took > 8*time.Second {
				t.Errorf("the step took %s past a 1 s budget", took)
			}
			ev, err := e.st.Evidence(ctx(t), r.GetRunId(), 0, -1)
			if err != nil || len(ev) != 1 {
				t.Fatalf("evidence %d entries (%v), want the one attempt", len(ev), err)
			}
			var entry struct {
				ExhaustedBy string `json:"exhausted_by"`
				ClippedToMS int64  `json:"clipped_to_ms"`
				Error       string `json:"error"`
			}
			if err := jsonUnmarshal(ev[0], &entry); err != nil {
				t.Fatal(err)
			}
			if entry.ExhaustedBy != "total_timeout" || entry.ClippedToMS <= 0 || entry.ClippedToMS > 1000 || !strings.HasPrefix(entry.Error, c.lastError) {
				t.Errorf("evidence = %s", ev[0])
			}
		})
	}
}
