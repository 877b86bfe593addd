package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func extra(s *realmv1.RunState) map[string]any { return s.GetExtra().AsMap() }

func stateWith(t testing.TB, e *env, run string, steps bool) *realmv1.RunState {
	t.Helper()
	resp, err := e.client.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run, IncludeSteps: steps})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetState()
}

func TestStateNamesClaimsAnswersAndAttempts(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/support.yaml"))
		run := start(t, e, "support", nil).GetRunId()
		caller := &realmv1.Caller{By: "ana@build-01", BySource: "derived", Channel: realmv1.Channel_CHANNEL_MCP_STDIO}
		if _, err := e.client.ExecuteStep(ctx(t), &realmv1.ExecuteStepRequest{RunId: run, Command: "draft", Caller: caller,
			Params: params(t, map[string]any{"reply": "Hi."})}); err != nil {
			t.Fatal(err)
		}
		s := stateWith(t, e, run, false)
		claims := extra(s)["step_claims"].([]any)
		c := claims[0].(map[string]any)
		h := c["holder"].(map[string]any)
		if c["step"] != "draft" || h["by"] != "ana@build-01" || h["channel"] != "mcp-stdio" || c["since"] == nil || extra(s)["stuck_claims"] != nil {
			t.Errorf("claims = %v", extra(s))
		}
		g := s.GetPendingGate()
		by := "alice"
		resp, _ := e.client.SubmitHumanResponse(ctx(t), &realmv1.SubmitHumanResponseRequest{RunId: run, GateId: g.GetGateId(), Choice: "discard", RespondedBy: &by})
		if resp.GetReply().GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("answer = %v", resp.GetReply())
		}
		steps := extra(stateWith(t, e, run, true))["steps"].(map[string]any)
		draft := steps["draft"].(map[string]any)
		attempt := draft["attempts"].([]any)[0].(map[string]any)
		answer := draft["answers"].([]any)[0].(map[string]any)
		if attempt["cost_unrecorded"] != "not_measured_by_realm" || attempt["driven_by"].(map[string]any)["by"] != "ana@build-01" ||
			answer["choice"] != "discard" || answer["answered_by"].(map[string]any)["by"] != "alice" ||
			answer["claim_proof"].(map[string]any)["proof"] != "absent" {
			t.Errorf("steps = %v", steps)
		}
	})
}

func TestStaleClaimIsNamedOnceItsDeadlinePasses(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		release := make(chan struct{})
		startRunner(t, e, map[string]handlerFunc{"hang": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{})}, nil
		}})
		e.register(t, oneStep("hang", "    timeout_seconds: 30\n"))
		done := make(chan *realmv1.Reply, 1)
		go func() { done <- start(t, e, "one_hang", nil) }()
		var run string
		for i := 0; i < 200 && run == ""; i++ {
			list, _ := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "one_hang"})
			if len(list.GetRuns()) == 1 {
				run = list.GetRuns()[0].GetRunId()
			}
			time.Sleep(10 * time.Millisecond)
		}
		if s := state(t, e, run); s.GetNextActionsStatus() != "ok" || extra(s)["stuck_claims"] != nil {
			t.Errorf("healthy claim: %v %v", s.GetNextActionsStatus(), extra(s))
		}
		e.clock.Advance(16 * time.Minute) // the claim window: 30 s + 1 min, at least 15 min
		s := state(t, e, run)
		stuck := extra(s)["stuck_claims"].([]any)[0].(map[string]any)
		if s.GetNextActionsStatus() != "claim_stale" || stuck["step"] != "work" || stuck["state"] != "claim_stale" {
			t.Errorf("stale claim: %v %v", s.GetNextActionsStatus(), extra(s))
		}
		finding := extra(s)["run_health"].([]any)[0].(map[string]any)
		if finding["kind"] != "stale_claim" || finding["step"] != "work" || finding["reason"] != "claim_stale" ||
			fmt.Sprint(extra(s)["warnings"]) != "[this run has 1 active run-health finding(s) — see 'run_health' for detail.]" {
			t.Errorf("run_health = %v", extra(s))
		}
		close(release)
		<-done
	})
}

func TestStateOfABatchRunOwesItsReadyGuardAndAFailedRunIsResumable(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		yaml := "id: guarded\nname: Guarded\nversion: 1\nsteps:\n  limit:\n    description: Stop when x is not ok.\n    execution: guard\n    abort_unless: [\"x.ok == true\"]\n  x:\n    description: X.\n    execution: agent\n"
		e.register(t, []byte(yaml))
		b, err := e.client.StartRunBatch(ctx(t), &realmv1.StartRunBatchRequest{WorkflowId: "guarded", Items: []*realmv1.BatchItem{{Params: params(t, map[string]any{})}}})
		if err != nil {
			t.Fatal(err)
		}
		s := state(t, e, b.GetStarted()[0].GetRunId())
		if fmt.Sprint(extra(s)["pending_guards"]) != "[limit]" {
			t.Errorf("pending_guards = %v", extra(s))
		}
		if f := extra(s)["run_health"].([]any)[0].(map[string]any); f["kind"] != "guard_awaiting_settlement" ||
			f["reason"] != "guard 'limit' is eligible and has not been settled" {
			t.Errorf("run_health = %v", f)
		}
		e.register(t, []byte("id: once\nname: Once\nversion: 1\nsteps:\n  ask:\n    description: Ask.\n    execution: agent\n    validation_exhaustion: { threshold: 1 }\n    output_schema:\n      type: object\n      required: [ok]\n      properties:\n        ok: { type: boolean }\n"))
		run := start(t, e, "once", nil).GetRunId()
		step(t, e, run, "ask", map[string]any{"ok": "no"})
		res := extra(state(t, e, run))["resumable"].(map[string]any)
		if res["command"] != fmt.Sprintf("realm run resume %s --from ask", run) {
			t.Errorf("resumable = %v", res)
		}
	})
}

func TestEngineRunnableNamesAStepThisServerCannotRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, oneStep("absent", ""))
		run := start(t, e, "one_absent", nil).GetRunId()
		er := extra(state(t, e, run))["engine_runnable"].([]any)[0].(map[string]any)
		if er["step"] != "work" || er["runnable_here"] != false || er["refused_by"] != "capability" || er["basis"] != "registry" ||
			er["refusal"] != "handler 'absent' is not registered here" {
			t.Errorf("engine_runnable = %v", er)
		}
	})
}

func TestDriveFailureCostsFollowTheRecordedFailures(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/triage.yaml"))
		run := start(t, e, "triage", map[string]any{"ticket": 1}).GetRunId()
		prompt, output := int64(120), int64(9)
		for _, class := range []string{"connection_error", "api_status"} {
			if _, err := e.client.RecordDriveFailure(ctx(t), &realmv1.RecordDriveFailureRequest{RunId: run, Failure: &realmv1.DriveFailure{
				Step: "classify", Provider: "anthropic", ErrorClass: class, Message: "failed",
				Usage: []*realmv1.ModelUsage{{RequestIndex: 0, PromptTokens: &prompt, OutputTokens: &output}}}}); err != nil {
				t.Fatal(err)
			}
		}
		x := extra(stateWith(t, e, run, true))
		costs := x["drive_failure_costs"].([]any)
		c := costs[1].(map[string]any)["cost"].(map[string]any)
		if len(costs) != 2 || fmt.Sprint(c["prompt"]) != "map[of:1 only_request_index:0 reported:1 value:120]" || c["cache_read"] != nil {
			t.Errorf("drive_failure_costs = %v", costs)
		}
		if f := x["run_health"].([]any)[0].(map[string]any); f["kind"] != "drive_failing" || f["step"] != "classify" {
			t.Errorf("run_health = %v", x["run_health"])
		}
	})
}
