package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

func params(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func start(t testing.TB, e *env, wf string, p map[string]any) *realmv1.Reply {
	t.Helper()
	resp, err := e.client.StartRun(ctx(t), &realmv1.StartRunRequest{WorkflowId: wf, Params: params(t, p)})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetReply()
}

func step(t testing.TB, e *env, run, name string, p map[string]any) *realmv1.Reply {
	t.Helper()
	resp, err := e.client.ExecuteStep(ctx(t), &realmv1.ExecuteStepRequest{RunId: run, Command: name, Params: params(t, p)})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetReply()
}

func state(t testing.TB, e *env, run string) *realmv1.RunState {
	t.Helper()
	resp, err := e.client.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetRefusal() != nil {
		t.Fatalf("get_run_state refused: %v", resp.GetRefusal())
	}
	return resp.GetState()
}

func tools(r *realmv1.Reply) []string {
	var out []string
	for _, a := range r.GetNextActions() {
		out = append(out, a.GetInstruction().GetTool()+":"+reply.Command(a.GetInstruction()))
	}
	return out
}

func eachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t, b))
		})
	}
}

func TestRunDrivenToCompletedThroughAgentAutoAndGuard(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		if r := e.register(t, readFile(t, "testdata/triage.yaml")); !r.GetRegistered() {
			t.Fatalf("register: %s", r.GetReport().GetText())
		}
		r := start(t, e, "triage", map[string]any{"ticket": 101})
		run := r.GetRunId()
		want := fmt.Sprintf("Run '%s' created for workflow 'triage'. Ready for the agent: 'classify'.", run)
		if r.GetContextHint() != want || r.GetRunVersion() != 0 || r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("start: hint %q version %d status %v", r.GetContextHint(), r.GetRunVersion(), r.GetStatus())
		}
		na := r.GetNextActions()[0]
		if got := reply.CallWith(na.GetInstruction())["params"]; fmt.Sprint(got) != "map[category:<billing|bug|other> confidence:0]" {
			t.Errorf("call_with params = %v", got)
		}
		if na.GetPrompt() != "Classify ticket 101." || na.GetHumanReadable() != "Execute step 'classify': Classify the ticket." ||
			na.GetOrientation() != "Run is active. Next step ready: 'classify'." {
			t.Errorf("next action = %v", na)
		}

		// A refused answer: the seed's error details, counted on the run.
		bad := step(t, e, run, "classify", map[string]any{"category": "refund", "confidence": 0.9})
		if bad.GetErrorCode() != "VALIDATION_INPUT_SCHEMA" || bad.GetAgentAction() != realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT {
			t.Fatalf("bad answer: %v", bad)
		}
		details := bad.GetErrorDetails().AsMap()
		first := details["errors"].([]any)[0].(map[string]any)
		if first["instancePath"] != "/category" || first["schemaPath"] != "#/properties/category/enum" || first["keyword"] != "enum" ||
			first["message"] != "must be equal to one of the allowed values" || details["rejections"] != 1.0 || details["threshold"] != 6.0 {
			t.Errorf("error_details = %v", details)
		}
		if bad.GetContextHint() != "Error during 'classify'. Run phase: 'running'." || bad.GetRunVersion() != 0 {
			t.Errorf("refusal hint %q version %d", bad.GetContextHint(), bad.GetRunVersion())
		}
		if v := state(t, e, run).GetRunVersion(); v != 1 {
			t.Errorf("run_version after the counted refusal = %d, want 1", v)
		}

		// A good answer runs the auto step and the guard in the same call.
		ok := step(t, e, run, "classify", map[string]any{"category": "billing", "confidence": 0.9})
		if ok.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("good answer: %v", ok)
		}
		var chained []string
		for _, c := range ok.GetChainedAutoSteps() {
			chained = append(chained, c.GetStep()+"/"+c.GetRunPhase().String())
		}
		if strings.Join(chained, ",") != "route/RUN_PHASE_RUNNING,not_spam/RUN_PHASE_RUNNING" {
			t.Errorf("chained = %v", chained)
		}
		if len(ok.GetGuards()) != 1 || ok.GetGuards()[0].GetOutcome() != "pass" {
			t.Errorf("guards = %v", ok.GetGuards())
		}
		if ok.GetContextHint() != "Step 'classify' completed. Ready for the agent: 'draft'." {
			t.Errorf("hint = %q", ok.GetContextHint())
		}
		if got := tools(ok); strings.Join(got, ",") != "execute_step:draft" {
			t.Errorf("next = %v", got)
		}

		done := step(t, e, run, "draft", map[string]any{"reply": "We have refunded the charge."})
		if done.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || len(done.GetNextActions()) != 0 {
			t.Fatalf("draft: %v", done)
		}
		s := state(t, e, run)
		if s.GetSealedByArm() != "complete" || s.GetTerminalReason() != "Workflow completed." || s.GetNextActionsStatus() != "skipped_terminal" ||
			strings.Join(s.GetCompletedSteps(), ",") != "classify,route,not_spam,draft" || s.GetEvidenceCount() != 4 {
			t.Errorf("final state = %v", s)
		}

		// A call on the ended run: ok, stop.
		again := step(t, e, run, "draft", map[string]any{"reply": "x"})
		if again.GetAgentAction() != realmv1.AgentAction_AGENT_ACTION_STOP ||
			again.GetContextHint() != fmt.Sprintf("Run '%s' is already terminal (completed); no steps executed.", run) {
			t.Errorf("terminal call: %v", again)
		}
	})
}

func TestGuardAbortEndsTheRunInTheAnswersWrite(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/triage.yaml"))
		run := start(t, e, "triage", map[string]any{"ticket": 7}).GetRunId()
		r := step(t, e, run, "classify", map[string]any{"category": "other", "confidence": 0.1})
		if r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK || r.GetContextHint() != "Guard step 'not_spam' aborted the run." ||
			r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED || r.GetAgentAction() != realmv1.AgentAction_AGENT_ACTION_UNSPECIFIED {
			t.Fatalf("reply = %v", r)
		}
		if eb := r.GetEndedBy(); eb.GetArm() != "guard_abort" || eb.GetStep() != "not_spam" || eb.GetReason() != "The classification is not confident enough." {
			t.Errorf("ended_by = %v", eb)
		}
		last := r.GetChainedAutoSteps()[len(r.GetChainedAutoSteps())-1]
		if last.GetStep() != "not_spam" || last.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED {
			t.Errorf("chained = %v", r.GetChainedAutoSteps())
		}
		s := state(t, e, run)
		ac := s.GetAbortContext().AsMap()
		if s.GetSealedByArm() != "guard_abort" || s.GetSealedByStep() != "not_spam" || ac["step_id"] != "not_spam" ||
			strings.Join(s.GetSkippedSteps(), ",") != "not_spam,draft" || s.TerminalReason != nil {
			t.Errorf("state = %v", s)
		}
	})
}

func TestStepCalledTooEarlyIsBlockedWithWhatCanRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/triage.yaml"))
		run := start(t, e, "triage", map[string]any{"ticket": 1}).GetRunId()
		r := step(t, e, run, "draft", map[string]any{"reply": "x"})
		if r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_BLOCKED || r.GetAgentAction() != realmv1.AgentAction_AGENT_ACTION_RESOLVE_PRECONDITION {
			t.Fatalf("reply = %v", r)
		}
		if want := "Step 'draft' cannot be called now: its dependencies are not settled: 'not_spam'. Ready for the agent: 'classify'."; r.GetContextHint() != want {
			t.Errorf("hint = %q", r.GetContextHint())
		}
		if br := r.GetBlockedReason(); strings.Join(br.GetEligibleSteps(), ",") != "classify" || br.GetSuggestion() != "Call one of the steps indicated in next_actions instead." {
			t.Errorf("blocked_reason = %v", br)
		}
	})
}

func TestRefusalsThatNameNoRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/triage.yaml"))
		cases := []struct {
			name string
			got  *realmv1.Reply
			code string
		}{
			{"unknown workflow", start(t, e, "nope", nil), "STATE_WORKFLOW_NOT_FOUND"},
			{"params refused", start(t, e, "triage", map[string]any{"ticket": "x"}), "VALIDATION_INPUT_SCHEMA"},
			{"unknown run", step(t, e, "no-such-run", "classify", nil), "STATE_RUN_NOT_FOUND"},
		}
		for _, c := range cases {
			if c.got.GetErrorCode() != c.code || c.got.GetRunVersion() != 0 || c.got.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_ERROR {
				t.Errorf("%s: %v", c.name, c.got)
			}
		}
		if cases[1].got.GetRunId() != "" || cases[2].got.GetRunId() != "no-such-run" {
			t.Errorf("run ids: %q %q", cases[1].got.GetRunId(), cases[2].got.GetRunId())
		}
		if got := cases[1].got.GetErrors()[0]; got != "Invalid params for workflow 'triage': /ticket must be integer" {
			t.Errorf("params message = %q", got)
		}
	})
}

func TestWorkflowWithCycleIsRefused(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		yaml := []byte("id: loop\nname: Loop\nversion: 1\nsteps:\n  a:\n    description: A.\n    execution: agent\n    depends_on: [b]\n  b:\n    description: B.\n    execution: agent\n    depends_on: [a]\n")
		r := e.register(t, yaml)
		if r.GetRegistered() || r.GetReport().GetValid() || !strings.Contains(r.GetReport().GetText(), "cycle") {
			t.Fatalf("report = %v", r.GetReport())
		}
		list, err := e.client.ListWorkflows(ctx(t), &realmv1.ListWorkflowsRequest{})
		if err != nil || len(list.GetWorkflows()) != 0 {
			t.Errorf("a refused workflow was stored: %v %v", list, err)
		}
	})
}

// Fifty callers answer the same agent step of one run at once: exactly one
// answer is recorded, every other caller is told the step already
// completed, and the record holds one entry for the step.
func TestConcurrentAnswersToOneStepRecordExactlyOne(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/triage.yaml"))
		run := start(t, e, "triage", map[string]any{"ticket": 5}).GetRunId()
		const n = 50
		replies := make([]*realmv1.Reply, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[i] = step(t, e, run, "classify", map[string]any{"category": "bug", "confidence": 0.5 + float64(i)/1000})
			}()
		}
		wg.Wait()
		okCount := 0
		for _, r := range replies {
			switch {
			case r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_OK && r.GetContextHint() == "Step 'classify' completed. Ready for the agent: 'draft'.":
				okCount++
			case r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_BLOCKED &&
				strings.HasPrefix(r.GetContextHint(), "Step 'classify' cannot be called now: it has already completed."):
			default:
				t.Errorf("unexpected reply: %v", r)
			}
		}
		if okCount != 1 {
			t.Fatalf("%d callers succeeded, want exactly 1", okCount)
		}
		s := state(t, e, run)
		// One write: the answer with its chained route and guard.
		if s.GetRunVersion() != 1 {
			t.Errorf("run_version = %d, want 1", s.GetRunVersion())
		}
		entries := 0
		for _, c := range s.GetCompletedSteps() {
			if c == "classify" {
				entries++
			}
		}
		if entries != 1 || s.GetEvidenceCount() != 3 {
			t.Errorf("completed = %v evidence = %d", s.GetCompletedSteps(), s.GetEvidenceCount())
		}
	})
}

// A run re-reads the registered copy as it moves: registering the workflow
// again changes what a run already under way offers next.
func TestRunUnderWayPicksUpTheReRegisteredWorkflow(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		v1 := "id: rereg\nname: Re-register\nversion: 1\nsteps:\n  a:\n    description: First.\n    execution: agent\n  b:\n    description: Second.\n    execution: agent\n    depends_on: [a]\n"
		e.register(t, []byte(v1))
		run := start(t, e, "rereg", nil).GetRunId()
		v2 := strings.Replace(v1, "description: Second.", "description: Second, reworded.", 1)
		if r := e.register(t, []byte(v2)); !r.GetRegistered() || r.GetStoredVersion() != 2 {
			t.Fatalf("second registration = %v", r)
		}
		r := step(t, e, run, "a", map[string]any{})
		if got := r.GetNextActions()[0].GetHumanReadable(); got != "Execute step 'b': Second, reworded." {
			t.Errorf("next action = %q", got)
		}
	})
}
