package server_test

import (
	"fmt"
	"strings"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func TestWhenFalseAndUnsatisfiableRulesSkipDownTheGraph(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/routing.yaml"))
		run := start(t, e, "routing", nil).GetRunId()
		r := step(t, e, run, "pick", map[string]any{"lane": "fast"})
		if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || r.GetContextHint() != "Step 'pick' completed. Workflow completed." {
			t.Fatalf("reply = %v", r)
		}
		s := state(t, e, run)
		if got := strings.Join(s.GetCompletedSteps(), ","); got != "pick,fast,after_fast" {
			t.Errorf("completed = %s", got)
		}
		sd := s.GetSkipDetails().AsMap()
		slow := sd["slow"].(map[string]any)
		leaf := slow["leaves"].([]any)[0].(map[string]any)
		if slow["kind"] != "when_false" || slow["expression"] != "pick.lane == 'slow'" || leaf["resolved_value"] != "fast" ||
			leaf["lhs_present"] != true || leaf["passed"] != false {
			t.Errorf("slow skip = %v", slow)
		}
		rec := sd["recover"].(map[string]any)
		dep := rec["blocking_deps"].([]any)[0].(map[string]any)
		if rec["kind"] != "trigger_rule_unsatisfiable" || rec["rule"] != "one_failed" || dep["step"] != "pick" || dep["state"] != "completed" {
			t.Errorf("recover skip = %v", rec)
		}
	})
}

func TestExhaustedStepWithARecoveryStepLeavesTheRunOpen(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/routing.yaml"))
		run := start(t, e, "routing", nil).GetRunId()
		first := step(t, e, run, "pick", map[string]any{"lane": "sideways"})
		if first.GetErrorCode() != "VALIDATION_INPUT_SCHEMA" || first.GetErrorDetails().AsMap()["threshold"] != 2.0 {
			t.Fatalf("first refusal = %v", first)
		}
		second := step(t, e, run, "pick", map[string]any{"lane": "sideways"})
		if second.GetErrorCode() != "VALIDATION_EXHAUSTED" ||
			second.GetErrors()[0] != "Step 'pick' exhausted its validation-rejection budget (2/2)" ||
			second.GetContextHint() != "Step 'pick' failed. Recovery steps are available in next_actions." ||
			strings.Join(tools(second), ",") != "execute_step:recover" || second.GetRunVersion() != 2 {
			t.Fatalf("exhaustion = %v", second)
		}
		done := step(t, e, run, "recover", map[string]any{"note": "handled"})
		if done.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("recover = %v", done)
		}
		s := state(t, e, run)
		if strings.Join(s.GetFailedSteps(), ",") != "pick" || strings.Join(s.GetSkippedSteps(), ",") != "fast,slow,after_fast" {
			t.Errorf("state = %v", s)
		}
	})
}

func TestExhaustedStepWithoutRecoveryFailsTheRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		yaml := "id: once\nname: Once\nversion: 1\nsteps:\n  ask:\n    description: Ask.\n    execution: agent\n    validation_exhaustion: { threshold: 1 }\n    output_schema:\n      type: object\n      required: [ok]\n      properties:\n        ok: { type: boolean }\n"
		if r := e.register(t, []byte(yaml)); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		run := start(t, e, "once", nil).GetRunId()
		r := step(t, e, run, "ask", map[string]any{"ok": "yes"})
		want := fmt.Sprintf("Step 'ask' failed. Run is terminated. To make the failed step runnable again: realm run resume %s --from ask", run)
		if r.GetErrorCode() != "VALIDATION_EXHAUSTED" || r.GetContextHint() != want || r.GetAgentAction() != realmv1.AgentAction_AGENT_ACTION_STOP ||
			r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_FAILED {
			t.Fatalf("reply = %v", r)
		}
		s := state(t, e, run)
		if s.GetSealedByArm() != "step_failure" || s.GetTerminalReason() != "Step 'ask' failed: Step 'ask' exhausted its validation-rejection budget (1/1)" {
			t.Errorf("state = %v", s)
		}
	})
}
