package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

func respond(t testing.TB, e *env, run, gate, choice string, token *string) *realmv1.Reply {
	t.Helper()
	req := &realmv1.SubmitHumanResponseRequest{RunId: run, GateId: gate, Choice: choice, ClaimToken: token,
		Caller: &realmv1.Caller{By: "ops@server-1", BySource: "derived", Channel: realmv1.Channel_CHANNEL_MCP_STDIO}}
	resp, err := e.client.SubmitHumanResponse(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetReply()
}

func advance(t testing.TB, e *env, run string) *realmv1.Reply {
	t.Helper()
	resp, err := e.client.AdvanceRun(ctx(t), &realmv1.AdvanceRunRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetReply()
}

func TestGateOpensAnswersAndOwesTheNextAutoStep(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		if r := e.register(t, readFile(t, "testdata/support.yaml")); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		run := start(t, e, "support", nil).GetRunId()
		caller := &realmv1.Caller{By: "ops@server-1", BySource: "derived", Channel: realmv1.Channel_CHANNEL_MCP_STDIO}
		resp, err := e.client.ExecuteStep(ctx(t), &realmv1.ExecuteStepRequest{RunId: run, Command: "draft",
			Params: params(t, map[string]any{"reply": "We have refunded the charge."}), Caller: caller})
		if err != nil {
			t.Fatal(err)
		}
		opened := resp.GetReply()
		g := opened.GetGate()
		if opened.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED || opened.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_GATE_WAITING ||
			opened.GetContextHint() != fmt.Sprintf("Run is paused at gate '%s'. Available choices: send, discard.", g.GetGateId()) ||
			g.GetStepName() != "draft" || strings.Join(g.GetChoices(), ",") != "send,discard" ||
			g.GetPreview().GetStructValue().AsMap()["reply"] != "We have refunded the charge." || g.GetClaimToken() == "" {
			t.Fatalf("opening reply = %v", opened)
		}
		answer := opened.GetNextActions()[0].GetInstruction()
		if answer.GetTool() != "submit_human_response" || reply.Params(answer)["claim_token"] != g.GetClaimToken() ||
			reply.CallWith(answer)["choice"] != "<send|discard>" {
			t.Errorf("answer instruction = %v", answer)
		}

		s := state(t, e, run)
		if s.GetNextActionsStatus() != "awaiting_human" || s.GetPendingGate().GetGateId() != g.GetGateId() ||
			strings.Join(s.GetInProgressSteps(), ",") != "draft" ||
			reply.Params(s.GetNextActions()[0].GetInstruction())["claim_token"] != nil {
			t.Errorf("state at the gate = %v", s)
		}

		early := step(t, e, run, "send", nil)
		if early.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_BLOCKED ||
			early.GetContextHint() != "Step 'send' cannot be called now: it waits on the question on step 'draft' (choices: send, discard) — answer it with submit_human_response." ||
			early.GetBlockedReason().GetSuggestion() != "Answer the open question first, as next_actions says." {
			t.Errorf("early call = %v", early)
		}

		refusals := []struct {
			gate, choice, code, msg string
		}{
			{g.GetGateId(), "maybe", "VALIDATION_INPUT_SCHEMA", "Choice 'maybe' is not valid. Expected one of: send, discard"},
			{"x", "send", "STATE_BLOCKED", "Gate 'x' is not the open gate and matches no committed resolution."},
		}
		for _, c := range refusals {
			r := respond(t, e, run, c.gate, c.choice, nil)
			if r.GetErrorCode() != c.code || r.GetErrors()[0] != c.msg || r.GetGateClaim() != nil {
				t.Errorf("answer %s/%s = %v", c.gate, c.choice, r)
			}
		}

		token := g.GetClaimToken()
		ok := respond(t, e, run, g.GetGateId(), "send", &token)
		if ok.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK || ok.GetCommand() != "draft" ||
			ok.GetContextHint() != "Gate 'draft' resolved with choice 'send'. Owed to the engine: 'send' — call advance_run." ||
			ok.GetGateClaim().GetProof() != "matched" || ok.GetGateClaim().GetOpenedBy().GetBy() != "ops@server-1" ||
			ok.GetGateClaim().GetOpenedBy().GetChannel() != "mcp-stdio" || len(ok.GetWarnings()) != 0 {
			t.Fatalf("answer = %v", ok)
		}
		if tools := ok.GetNextActions(); len(tools) != 1 || tools[0].GetInstruction().GetTool() != "advance_run" {
			t.Errorf("next after the answer = %v", tools)
		}

		same := respond(t, e, run, g.GetGateId(), "send", nil)
		if same.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK || same.GetAgentAction() != realmv1.AgentAction_AGENT_ACTION_UNSPECIFIED ||
			same.GetContextHint() != fmt.Sprintf("Gate '%s' was already resolved with choice 'send' — no action was taken.", g.GetGateId()) {
			t.Errorf("repeat = %v", same)
		}
		// Replayed with the question's claim token: spent by the answer, and
		// opened by the program that opened the question (not no_claim).
		replay := respond(t, e, run, g.GetGateId(), "send", &token)
		if gc := replay.GetGateClaim(); gc.GetProof() != "spent" || gc.GetCause() != "answered" ||
			gc.GetOpenedBy().GetBy() != "ops@server-1" || gc.GetOpenedBy().GetChannel() != "mcp-stdio" || gc.GetOpenedBy().GetAbsentCause() != "" {
			t.Errorf("replayed answer's gate_claim = %v", gc)
		}
		other := respond(t, e, run, g.GetGateId(), "discard", nil)
		if other.GetErrorCode() != "STATE_BLOCKED" ||
			other.GetErrors()[0] != fmt.Sprintf("Gate '%s' was already resolved with choice 'send' — your choice 'discard' was not recorded.", g.GetGateId()) {
			t.Errorf("other choice = %v", other)
		}
		// The choice recorded first, and no resolved_by: a person answered.
		if d := other.GetErrorDetails().AsMap(); d["winning_choice"] != "send" || d["gateId"] != g.GetGateId() || d["runId"] != run || d["resolved_by"] != nil {
			t.Errorf("conflicting answer's error_details = %v", d)
		}

		adv := advance(t, e, run)
		if adv.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || len(adv.GetChainedAutoSteps()) != 1 || adv.GetChainedAutoSteps()[0].GetStep() != "send" {
			t.Errorf("advance = %v", adv)
		}
	})
}

func TestAnswerThatMakesAGuardAbortIsStillOk(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		if r := e.register(t, readFile(t, "testdata/shipping.yaml")); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		opened := start(t, e, "shipping", map[string]any{"order": 4417})
		g := opened.GetGate()
		if opened.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED || g.GetDisplay() != "Ship order 4417?" || opened.GetStoppedStep() != "approve" {
			t.Fatalf("start = %v", opened)
		}
		r := respond(t, e, opened.GetRunId(), g.GetGateId(), "hold", nil)
		if r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK || r.GetContextHint() != "Guard step 'only_if_shipping' aborted the run." ||
			r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED || len(r.GetChainedAutoSteps()) != 0 ||
			r.GetEndedBy().GetReason() != "The order was held." || len(r.GetGuards()) != 1 || r.GetGuards()[0].GetOutcome() != "abort" {
			t.Fatalf("answer = %v", r)
		}
		if r.GetGateClaim().GetProof() != "absent" || r.GetWarnings()[0] != "No claim_token was passed; the answer was recorded. Only the conversation that opened the question has one to pass." {
			t.Errorf("claim = %v %v", r.GetGateClaim(), r.GetWarnings())
		}
		late := respond(t, e, opened.GetRunId(), "other-gate", "ship", nil)
		want := fmt.Sprintf("Run '%s' is terminal (aborted); cannot submit a gate response — an aborted run is never resumed; 'realm run purge %s' previews what it would remove.", opened.GetRunId(), opened.GetRunId())
		if late.GetErrorCode() != "STATE_RUN_TERMINAL" || late.GetErrors()[0] != want {
			t.Errorf("late = %v", late)
		}
	})
}

// gate.before (beyond the original): the person approves irreversible work
// before it is called; the preview is what it would be called with, and a
// refusal never calls it.
func TestAGateBeforeTheWorkCallsItOnlyWhenApproved(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		var calls atomic.Int32
		startRunner(t, e, map[string]handlerFunc{
			"delete_account": func(_ context.Context, req *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
				calls.Add(1)
				in, _ := req.GetInputs().AsMap()["params"].(map[string]any)
				return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"deleted": in["account"]})}, nil
			},
		})
		wf := `id: offboard
name: Offboard
version: 1
steps:
  delete:
    description: Delete the account.
    execution: auto
    handler: delete_account
    input_map:
      account: run.params.account
    trust: human_confirmed
    gate:
      before: true
      message: Delete {{ run.params.account }}?
`
		if r := e.register(t, []byte(wf)); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		for _, c := range []struct {
			choice string
			calls  int32
			phase  realmv1.RunPhase
		}{{"reject", 0, realmv1.RunPhase_RUN_PHASE_COMPLETED}, {"approve", 1, realmv1.RunPhase_RUN_PHASE_COMPLETED}} {
			calls.Store(0)
			opened := start(t, e, "offboard", map[string]any{"account": "acme"})
			g := opened.GetGate()
			if opened.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_GATE_WAITING || g.GetPreview().GetStructValue().AsMap()["account"] != "acme" || calls.Load() != 0 {
				t.Fatalf("the question must come first, with the call's input as preview: %v (calls %d)", opened, calls.Load())
			}
			run := opened.GetRunId()
			respond(t, e, run, g.GetGateId(), c.choice, nil)
			r := advance(t, e, run)
			if r.GetRunPhase() != c.phase || calls.Load() != c.calls {
				t.Fatalf("%s: phase %v, %d calls of the work, want %d: %v", c.choice, r.GetRunPhase(), calls.Load(), c.calls, r)
			}
			s := state(t, e, run)
			switch c.choice {
			case "reject":
				if strings.Join(s.GetSkippedSteps(), ",") != "delete" {
					t.Errorf("a refused step is skipped: %v", s)
				}
			default:
				if strings.Join(s.GetCompletedSteps(), ",") != "delete" {
					t.Errorf("an approved step completes with its work: %v", s)
				}
				snap, _ := e.st.LoadRun(ctx(t), run)
				if string(snap.Outputs["delete"]) != `{"deleted":"acme"}` {
					t.Errorf("output = %s", snap.Outputs["delete"])
				}
			}
		}
		bad := strings.Replace(wf, "    handler: delete_account\n    input_map:\n      account: run.params.account\n", "", 1)
		if r := e.register(t, []byte(strings.Replace(bad, "id: offboard", "id: bare", 1))); r.GetRegistered() ||
			!strings.Contains(r.GetReport().GetText(), "'gate.before: true' applies to an auto step whose work is a handler or a service") {
			t.Errorf("gate.before on a step with no work: %s", r.GetReport().GetText())
		}
	})
}
