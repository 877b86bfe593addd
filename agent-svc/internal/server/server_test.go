package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/agent-svc/internal/limit"
	"github.com/realm-go/realm/agent-svc/internal/provider"
	"github.com/realm-go/realm/agent-svc/internal/server"
	"github.com/realm-go/realm/engine-svc/enginetest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// startEngine serves a fresh engine (miniredis) with the testdata
// workflows registered.
func startEngine(t testing.TB) realmv1.EngineServiceClient {
	t.Helper()
	_, eng := startEngineAt(t)
	return eng
}

// startEngineAt is startEngine that also returns the engine's address.
func startEngineAt(t testing.TB) (string, realmv1.EngineServiceClient) {
	t.Helper()
	addr := enginetest.Start(t, "miniredis")
	eng := realmv1.NewEngineServiceClient(dial(t, addr))
	for _, f := range []string{"triage", "support", "one"} {
		y, err := os.ReadFile("testdata/" + f + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := eng.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: y, Path: f + ".yaml"}})
		if err != nil || !resp.GetRegistered() {
			t.Fatalf("register %s: %v %s", f, err, resp.GetReport().GetText())
		}
	}
	return addr, eng
}

// startAgent serves agent-svc on a loopback socket.
func startAgent(t testing.TB, c server.Config) realmv1.AgentServiceClient {
	t.Helper()
	client, _ := startAgentServer(t, c)
	return client
}

// startAgentServer is startAgent that also returns the service.
func startAgentServer(t testing.TB, c server.Config) (realmv1.AgentServiceClient, *server.Server) {
	t.Helper()
	if c.GatePoll == 0 {
		c.GatePoll = 20 * time.Millisecond
	}
	gs := grpc.NewServer()
	svc := server.New(c)
	realmv1.RegisterAgentServiceServer(gs, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { svc.Stop(); gs.Stop() })
	return realmv1.NewAgentServiceClient(dial(t, lis.Addr().String())), svc
}

func anthropicAt(url string) provider.Services {
	return provider.Services{Anthropic: provider.Config{APIKey: "test-key", BaseURL: url}}
}

func openaiAt(url string) provider.Services {
	return provider.Services{OpenAI: provider.Config{APIKey: "test-key", BaseURL: url}}
}

// drive runs one DriveRun to its end and returns its events; onEvent, when
// set, sees each as it arrives.
func drive(t testing.TB, agent realmv1.AgentServiceClient, req *realmv1.DriveRunRequest, onEvent func(*realmv1.DriveEvent)) []*realmv1.DriveEvent {
	t.Helper()
	stream, err := agent.DriveRun(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*realmv1.DriveEvent
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatalf("DriveRun: %v (events so far: %v)", err, texts(evs))
		}
		evs = append(evs, resp.GetEvent())
		if onEvent != nil {
			onEvent(resp.GetEvent())
		}
	}
}

func texts(evs []*realmv1.DriveEvent) string {
	var b strings.Builder
	for _, e := range evs {
		for _, l := range e.GetLines() {
			b.WriteString(l.GetText())
			b.WriteString("\n")
		}
	}
	return b.String()
}

func last(evs []*realmv1.DriveEvent) *realmv1.DriveEvent {
	if len(evs) == 0 {
		return nil
	}
	return evs[len(evs)-1]
}

func ofKind(evs []*realmv1.DriveEvent, k realmv1.DriveEventKind) []*realmv1.DriveEvent {
	var out []*realmv1.DriveEvent
	for _, e := range evs {
		if e.GetKind() == k {
			out = append(out, e)
		}
	}
	return out
}

func params(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func phaseOf(t testing.TB, eng realmv1.EngineServiceClient, run string) realmv1.RunPhase {
	t.Helper()
	resp, err := eng.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetState().GetRunPhase()
}

func opts(p, model string) *realmv1.DriveOptions {
	return &realmv1.DriveOptions{Provider: p, Model: model}
}

func TestDriveTakesARunToCompletionWithEachProvider(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"anthropic", "openai"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			eng := startEngine(t)
			st := newStub(t, kind, triageAnswers)
			services := anthropicAt(st.URL())
			if kind == "openai" {
				services = openaiAt(st.URL())
			}
			agent := startAgent(t, server.Config{Engine: eng, Services: services})
			evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "triage", Params: params(t, map[string]any{"ticket": 7}),
				Options: opts(kind, "test-model")}, nil)
			end := last(evs)
			if end.GetKind() != realmv1.DriveEventKind_DRIVE_EVENT_KIND_FINISHED || end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED || end.GetExitCode() != 0 {
				t.Fatalf("last event = %v\n%s", end, texts(evs))
			}
			run := end.GetRunId()
			if phaseOf(t, eng, run) != realmv1.RunPhase_RUN_PHASE_COMPLETED {
				t.Errorf("run phase = %v, want completed", phaseOf(t, eng, run))
			}
			out := texts(evs)
			for _, want := range []string{"Realm Agent — Ticket triage v1\nRun ID: " + run, "→ [agent] classify\n  Classify the ticket.\n  ✓ → running",
				"→ [auto] route\n  ✓ → running\n→ [auto] not_spam\n  ✓ → running", "→ [agent] draft", "Run complete: " + run, "Result (draft):"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			// The usage the model reported lands in include_steps as cost.
			sr, err := eng.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run, IncludeSteps: true})
			if err != nil {
				t.Fatal(err)
			}
			steps := sr.GetState().GetExtra().AsMap()["steps"].(map[string]any)
			attempt := steps["classify"].(map[string]any)["attempts"].([]any)[0].(map[string]any)
			cost, _ := attempt["cost"].(map[string]any)
			if cost["requests"] != 1.0 || fmt.Sprint(cost["prompt"]) != "map[of:1 only_request_index:0 reported:1 value:40]" ||
				fmt.Sprint(cost["output"]) != "map[of:1 only_request_index:0 reported:1 value:7]" || attempt["cost_unrecorded"] != nil {
				t.Errorf("classify attempt = %v", attempt)
			}
			calls := ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_MODEL_CALL)
			if len(calls) != 2 || calls[0].GetModelCall().GetProvider() != kind || calls[0].GetModelCall().GetUsage().GetOutputTokens() != 7 ||
				calls[0].GetModelCall().GetUsage().GetPromptTokens() != 40 {
				t.Errorf("model calls = %v", calls)
			}
			reqs := st.seen()
			if len(reqs) != 2 {
				t.Fatalf("stub saw %d requests, want 2", len(reqs))
			}
			if reqs[0].User != "Classify ticket 7." ||
				!strings.HasPrefix(reqs[0].System, "You are an AI agent executing a step in a structured workflow.\n") ||
				!strings.Contains(reqs[0].System, "\nThe JSON must conform to this schema: {") {
				t.Errorf("first request: system %q user %q", reqs[0].System, reqs[0].User)
			}
			switch kind {
			case "anthropic":
				tools, _ := reqs[0].Body["tools"].([]any)
				if reqs[0].Path != "/v1/messages" || len(tools) != 1 || tools[0].(map[string]any)["name"] != "__realm_submit__" {
					t.Errorf("anthropic request: path %s tools %v", reqs[0].Path, tools)
				}
			case "openai":
				rf, _ := reqs[0].Body["response_format"].(map[string]any)
				if reqs[0].Path != "/chat/completions" || rf["type"] != "json_object" {
					t.Errorf("openai request: path %s response_format %v", reqs[0].Path, rf)
				}
			}
		})
	}
}

func TestRefusedAnswerIsRepairedWithTheValidationErrors(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "anthropic", func(n int, r wireRequest) answer {
		if n == 1 {
			return answer{output: map[string]any{"category": "refund", "confidence": 0.9}}
		}
		return triageAnswers(n, r)
	})
	agent := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "triage", Params: params(t, map[string]any{"ticket": 7}), Options: opts("anthropic", "m")}, nil)
	if end := last(evs); end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Fatalf("outcome = %v\n%s", end.GetOutcome(), texts(evs))
	}
	repairs := ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_REPAIR)
	if len(repairs) != 1 || repairs[0].GetRepairAttempt() != 1 || repairs[0].GetRepairMax() != 2 ||
		repairs[0].GetLines()[0].GetText() != "  ⚠ output rejected (VALIDATION_INPUT_SCHEMA); repairing (attempt 1/2)" ||
		repairs[0].GetLines()[0].GetStream() != realmv1.DriveStream_DRIVE_STREAM_STDERR {
		t.Fatalf("repairs = %v", repairs)
	}
	reqs := st.seen()
	want := "Classify ticket 7.\n\nYour previous output was rejected by the input schema validator:\n" +
		"- /category: must be equal to one of the allowed values [enum]\nEmit corrected JSON only, matching the schema exactly."
	if len(reqs) < 2 || reqs[1].User != want {
		t.Errorf("repair request user message = %q, want %q", reqs[1].User, want)
	}
	if strings.Contains(reqs[1].User, "refund") {
		t.Error("the repair message repeats the submitted value")
	}
}

func TestSpentRepairBudgetStopsTheDriveAndLeavesTheRunOpen(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "openai", func(int, wireRequest) answer {
		return answer{output: map[string]any{"category": "refund", "confidence": 0.9}}
	})
	agent := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL())})
	o := opts("openai", "gpt-test")
	o.SchemaRetries = new(int32(1))
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "triage", Params: params(t, map[string]any{"ticket": 7}), Options: o}, nil)
	end := last(evs)
	if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_STOPPED || end.GetExitCode() != 1 {
		t.Fatalf("end = %v\n%s", end, texts(evs))
	}
	if n := len(st.seen()); n != 2 {
		t.Errorf("model requests = %d, want 2 (the answer and one repair)", n)
	}
	blocked := ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED)
	if len(blocked) != 1 {
		t.Fatalf("blocked events = %v", blocked)
	}
	f := blocked[0].GetFailure()
	if f.GetErrorClass() != "validation_rejected" || f.GetStep() != "classify" || f.GetProvider() != "openai" || len(f.GetUsage()) != 2 ||
		!strings.HasSuffix(f.GetMessage(), " after 1 schema-repair attempts") {
		t.Errorf("failure = %v", f)
	}
	run := end.GetRunId()
	out := texts(evs)
	reattach := "realm agent --run-id " + run + " --provider openai --model gpt-test --schema-retries 1"
	if !strings.Contains(out, "✗ Step 'classify' failed: ") || !strings.Contains(out, reattach) || !strings.Contains(out, "Run ended in phase: running") {
		t.Errorf("output:\n%s", out)
	}
	if phaseOf(t, eng, run) != realmv1.RunPhase_RUN_PHASE_RUNNING {
		t.Errorf("phase = %v, want running", phaseOf(t, eng, run))
	}
}

func TestRateLimitedRequestsAreRetriedThenSucceed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		limited  int // 429s before success
		attempts int32
	}{
		{"within the SDK's attempts", 1, 2},
		{"Retry-After waited out once more", 3, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			eng := startEngine(t)
			st := newStub(t, "anthropic", func(n int, r wireRequest) answer {
				if n <= tt.limited {
					return answer{status: http.StatusTooManyRequests, headers: map[string]string{"retry-after-ms": "20"}}
				}
				return triageAnswers(n, r)
			})
			agent := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
			evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "one", Params: params(t, map[string]any{"n": 1}), Options: opts("anthropic", "m")}, nil)
			if end := last(evs); end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
				t.Fatalf("outcome = %v\n%s", end.GetOutcome(), texts(evs))
			}
			calls := ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_MODEL_CALL)
			if len(calls) != 1 || calls[0].GetModelCall().GetAttemptsSdk() != tt.attempts {
				t.Errorf("model calls = %v, want one with %d attempts", calls, tt.attempts)
			}
		})
	}
}

func TestPersistentRateLimitIsRecordedWithItsStatus(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "openai", func(int, wireRequest) answer {
		return answer{status: http.StatusTooManyRequests, headers: map[string]string{"retry-after-ms": "10"}}
	})
	reg := prometheus.NewRegistry()
	agent := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL()), Metrics: reg})
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "one", Params: params(t, map[string]any{"n": 1}), Options: opts("openai", "gpt-test")}, nil)
	// The failure and the drive's end are counted (the slot gauge is left
	// out: the server gives the slot back after the last event is sent).
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP realm_drive_failures_total Drive failures (a provider call that gave no usable answer), by provider and error class.
# TYPE realm_drive_failures_total counter
realm_drive_failures_total{error_class="api_status",provider="openai"} 1
# HELP realm_drives_total Drives finished, by outcome (completed, refused, failed, …).
# TYPE realm_drives_total counter
realm_drives_total{outcome="stopped"} 1
`), "realm_drive_failures_total", "realm_drives_total"); err != nil {
		t.Error(err)
	}
	f := ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED)[0].GetFailure()
	if f.GetErrorClass() != "api_status" || f.GetLastObservedStatus() != 429 || f.GetAttemptsSdk() != 4 || f.GetRetryAfterObservedMs() != 10 ||
		f.GetMessage() != "429 slow down" {
		t.Errorf("failure = %v", f)
	}
	if !strings.Contains(texts(evs), "✗ Step 'answer' LLM call failed: 429 slow down") {
		t.Errorf("output:\n%s", texts(evs))
	}
}

func TestConnectionFailureStopsTheDriveAndReattachFinishesTheRun(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	// A port with nothing listening.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + lis.Addr().String()
	lis.Close()
	broken := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(dead)})
	evs := drive(t, broken, &realmv1.DriveRunRequest{WorkflowId: "triage", Params: params(t, map[string]any{"ticket": 7}), Options: opts("anthropic", "m")}, nil)
	end := last(evs)
	if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_STOPPED || end.GetExitCode() != 1 {
		t.Fatalf("end = %v\n%s", end, texts(evs))
	}
	run := end.GetRunId()
	f := ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED)[0].GetFailure()
	if f.GetErrorClass() != "connection_error" || f.GetAttemptsSdk() != 3 || f.GetMessage() != "Connection error." {
		t.Errorf("failure = %v", f)
	}
	want := "realm agent --run-id " + run + " --provider anthropic --model m"
	if end.GetReattachCommand() != want || !strings.Contains(texts(evs), "✗ Step 'classify' LLM call failed: Connection error.\nRe-attach to continue: "+want) {
		t.Errorf("reattach = %q\n%s", end.GetReattachCommand(), texts(evs))
	}

	st := newStub(t, "anthropic", triageAnswers)
	working := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
	again := drive(t, working, &realmv1.DriveRunRequest{RunId: run, Options: opts("anthropic", "m")}, nil)
	if end := last(again); end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED || end.GetRunId() != run {
		t.Fatalf("re-attach end = %v\n%s", end, texts(again))
	}
	if phaseOf(t, eng, run) != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		t.Errorf("phase after re-attach = %v", phaseOf(t, eng, run))
	}

	// A third attach finds the run ended and is refused.
	third := drive(t, working, &realmv1.DriveRunRequest{RunId: run, Options: opts("anthropic", "m")}, nil)
	if end := last(third); end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_REFUSED ||
		texts(third) != fmt.Sprintf("Error: Run %s is already in terminal state: Workflow completed..\n", run) {
		t.Errorf("attach to an ended run: %v\n%s", end, texts(third))
	}
}

func TestGateReachedMidDriveWaitsForTheAnswerThenGoesOn(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "openai", triageAnswers)
	agent := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL())})
	var answered atomic.Bool
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "support", Params: params(t, map[string]any{"ticket": 3}), Options: opts("openai", "gpt-test")},
		func(ev *realmv1.DriveEvent) {
			if ev.GetKind() != realmv1.DriveEventKind_DRIVE_EVENT_KIND_GATE_OPENED {
				return
			}
			// A person answers from elsewhere while the drive waits.
			go func() {
				resp, err := eng.SubmitHumanResponse(context.Background(), &realmv1.SubmitHumanResponseRequest{
					RunId: ev.GetRunId(), GateId: ev.GetGate().GetGateId(), Choice: "send"})
				answered.Store(err == nil && resp.GetReply().GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_OK)
			}()
		})
	end := last(evs)
	if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED || !answered.Load() {
		t.Fatalf("end = %v (answered %v)\n%s", end, answered.Load(), texts(evs))
	}
	run := end.GetRunId()
	gates := ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_GATE_OPENED)
	if len(gates) != 1 {
		t.Fatalf("gate events = %d, want 1", len(gates))
	}
	g := gates[0].GetGate()
	out := texts(evs)
	block := fmt.Sprintf("⏸  Gate: draft | ID: %s\n\n   {\n     \"reply\": \"We have refunded the charge.\"\n   }\n\n"+
		"   Send: realm run respond %s --gate %s --choice send\n   Discard: realm run respond %s --gate %s --choice discard\n   Waiting for approval...\n",
		g.GetGateId(), run, g.GetGateId(), run, g.GetGateId())
	if !strings.Contains(out, block) || !strings.Contains(out, "→ [auto] send\n  ✓ → completed") {
		t.Errorf("output:\n%s\nwant the block:\n%s", out, block)
	}
	if len(ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_GATE_RESOLVED)) != 1 {
		t.Error("no GATE_RESOLVED event")
	}
}

func TestRefusalsBeforeAnyDrive(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	agent := startAgent(t, server.Config{Engine: eng, Services: openaiAt("http://127.0.0.1:1")})
	tests := []struct {
		name string
		req  *realmv1.DriveRunRequest
		want string
	}{
		{"no run named", &realmv1.DriveRunRequest{Options: opts("openai", "m")}, "Error: one of --workflow or --run-id is required"},
		{"both", &realmv1.DriveRunRequest{WorkflowId: "one", RunId: "x", Options: opts("openai", "m")}, "Error: --workflow and --run-id are mutually exclusive"},
		{"params with run id", &realmv1.DriveRunRequest{RunId: "x", Params: params(t, map[string]any{"a": 1}), Options: opts("openai", "m")},
			"Error: --params cannot be used with --run-id; the run already has params from creation time"},
		{"unknown run", &realmv1.DriveRunRequest{RunId: "nope", Options: opts("openai", "m")}, "Error: Run not found: nope"},
		{"register without a file", &realmv1.DriveRunRequest{WorkflowId: "one", Register: true, Options: opts("openai", "m")},
			"Error: --register registers a workflow file: give --workflow <file>, or register with realm workflow register <path>"},
		{"no model", &realmv1.DriveRunRequest{WorkflowId: "one", Options: opts("openai", " ")},
			"--model is required: realm has no default model. Name an OpenAI model; OpenAI lists them at https://developers.openai.com/api/docs/models."},
		{"missing key", &realmv1.DriveRunRequest{WorkflowId: "one", Options: opts("anthropic", "m")},
			"--provider anthropic was given, but ANTHROPIC_API_KEY is not set or is empty (only OPENAI_API_KEY is set). Set ANTHROPIC_API_KEY, or use --provider openai with an OpenAI model."},
		{"bad provider", &realmv1.DriveRunRequest{WorkflowId: "one", Options: opts("antropic", "m")},
			"error: option '--provider <provider>' argument 'antropic' is invalid. --provider must be openai or anthropic."},
		{"negative retries", &realmv1.DriveRunRequest{WorkflowId: "one", Options: &realmv1.DriveOptions{Provider: "openai", Model: "m", SchemaRetries: new(int32(-1))}},
			"error: option '--schema-retries <n>' argument '-1' is invalid. --schema-retries must be a non-negative integer."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			evs := drive(t, agent, tt.req, nil)
			if len(evs) != 1 || evs[0].GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_REFUSED || evs[0].GetExitCode() != 1 ||
				strings.TrimSuffix(texts(evs), "\n") != tt.want {
				t.Errorf("events = %v, want one refusal %q", evs, tt.want)
			}
		})
	}
}

// TestDrivesAtOnceNeverExceedTheGlobalLimit drives 200 runs through two
// agent-svc replicas that share one Redis drive limit of 8.
func TestDrivesAtOnceNeverExceedTheGlobalLimit(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"redis", "miniredis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			rc := redisFor(t, backend)
			eng := startEngine(t)
			st := newStub(t, "openai", triageAnswers)
			var inFlight, peak atomic.Int64
			track := func(delta int) {
				n := inFlight.Add(int64(delta))
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
			}
			prefix := fmt.Sprintf("realm-test:%d:drives", time.Now().UnixNano())
			t.Cleanup(func() {
				for _, k := range []string{"holders", "queue", "alive", "ticket"} {
					rc.Del(context.Background(), "{"+prefix+"}:"+k)
				}
			})
			var agents []realmv1.AgentServiceClient
			for range 2 {
				lim := limit.NewRedis(rc, 8, limit.RedisOptions{Prefix: prefix, Poll: 5 * time.Millisecond})
				agents = append(agents, startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL()), Limiter: lim, Track: track}))
			}
			const drives = 200
			var wg sync.WaitGroup
			var completed, queued atomic.Int64
			for i := range drives {
				wg.Add(1)
				go func() {
					defer wg.Done()
					evs := drive(t, agents[i%2], &realmv1.DriveRunRequest{WorkflowId: "one", Params: params(t, map[string]any{"n": i}), Options: opts("openai", "gpt-test")}, nil)
					if last(evs).GetOutcome() == realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
						completed.Add(1)
					}
					if len(ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_QUEUED)) > 0 {
						queued.Add(1)
					}
				}()
			}
			wg.Wait()
			if completed.Load() != drives {
				t.Errorf("completed drives = %d, want %d", completed.Load(), drives)
			}
			if p := peak.Load(); p > 8 || p < 1 {
				t.Errorf("peak drives in flight = %d, want 1..8", p)
			}
			if st.maxIn.Load() > 8 {
				t.Errorf("peak model requests at once = %d, want at most 8", st.maxIn.Load())
			}
			if queued.Load() == 0 {
				t.Error("no drive waited its turn: the limit was never reached")
			}
		})
	}
}

// TestPromptCacheMarksTheStablePrefixAndTheCountersReachIncludeSteps: with
// --prompt-cache every Anthropic request marks its system message (the
// stable prefix) ephemeral, and the cache counters the provider reports —
// written by the first step's request, read by the second's — reach
// get_run_state include_steps as each attempt's cost, with the state
// they imply.
func TestPromptCacheMarksTheStablePrefixAndTheCountersReachIncludeSteps(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "anthropic", func(n int, r wireRequest) answer {
		a := triageAnswers(n, r)
		a.usage = map[string]any{"input_tokens": 40, "output_tokens": 7, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 300}
		if n > 1 {
			a.usage = map[string]any{"input_tokens": 40, "output_tokens": 7, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 0}
		}
		return a
	})
	agent := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
	o := opts("anthropic", "m")
	o.PromptCache = true
	run := completed(t, drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "triage", Params: params(t, map[string]any{"ticket": 7}), Options: o}, nil))
	for i, r := range st.seen() {
		sys, _ := r.Body["system"].([]any)
		if len(sys) == 0 || fmt.Sprint(sys[0].(map[string]any)["cache_control"]) != "map[type:ephemeral]" {
			t.Errorf("request %d: system = %v, want its first block marked ephemeral", i, r.Body["system"])
		}
	}
	sr, err := eng.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run, IncludeSteps: true})
	if err != nil {
		t.Fatal(err)
	}
	steps := sr.GetState().GetExtra().AsMap()["steps"].(map[string]any)
	costOf := func(step string) map[string]any {
		c, _ := steps[step].(map[string]any)["attempts"].([]any)[0].(map[string]any)["cost"].(map[string]any)
		return c
	}
	for _, tt := range []struct{ step, state, field, absent string }{
		{"classify", "write_only", "cache_write", "cache_read"},
		{"draft", "engaged", "cache_read", "cache_write"},
	} {
		c := costOf(tt.step)
		if c["state"] != tt.state || c["basis"] != "provider_reported" ||
			fmt.Sprint(c[tt.field]) != "map[of:1 only_request_index:0 reported:1 value:300]" ||
			fmt.Sprint(c[tt.absent]) != "map[of:1 only_request_index:0 reported:1 value:0]" ||
			fmt.Sprint(c["prompt"]) != "map[of:1 only_request_index:0 reported:1 value:340]" ||
			fmt.Sprint(c["uncached_input"]) != "map[of:1 only_request_index:0 reported:1 value:40]" {
			t.Errorf("%s cost = %v", tt.step, c)
		}
	}
}
