package server_test

import (
	"fmt"
	"strings"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

func TestAdvanceAtAnOpenQuestionNamesItAndWhatWaits(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		// 'note' is ready by what it depends on (nothing) and held by the
		// open question; 'send' depends on the gated step itself, so it
		// does not wait for the answer: it waits for the step (seed 001,
		// waiting_on_answer). The hint names exactly what the field lists.
		wf := string(readFile(t, "testdata/support.yaml")) +
			"  note:\n    description: Note the ticket.\n    execution: agent\n    input_schema: { type: object }\n"
		e.register(t, []byte(strings.Replace(wf, "id: support", "id: support_note", 1)))
		run := start(t, e, "support_note", nil).GetRunId()
		step(t, e, run, "draft", map[string]any{"reply": "Hi."})
		r := advance(t, e, run)
		want := fmt.Sprintf("Run '%s': nothing ran. Waiting on the question on step 'draft' (choices: send, discard) — answer it with submit_human_response; 'note' waits for its answer.", run)
		if r.GetContextHint() != want || r.GetNextActions()[0].GetInstruction().GetTool() != "submit_human_response" ||
			reply.Params(r.GetNextActions()[0].GetInstruction())["claim_token"] != nil {
			t.Errorf("advance = %v", r)
		}
		s, err := e.client.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run})
		if err != nil {
			t.Fatal(err)
		}
		if w := fmt.Sprint(s.GetState().GetExtra().AsMap()["waiting_on_answer"]); w != "[note]" {
			t.Errorf("get_run_state's waiting_on_answer = %s, want [note]", w)
		}
	})
}

func TestStepsRefusedForTheirInputGiveEachStepsWayOut(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		yaml := "id: strict\nname: Strict\nversion: 1\nsteps:\n  intake:\n    description: Take the order.\n    execution: auto\n    input_schema:\n      type: object\n      required: [order]\n      properties:\n        order: { type: string }\n"
		e.register(t, []byte(yaml))
		r := start(t, e, "strict", map[string]any{"other": 1})
		want := fmt.Sprintf("Run '%s' created for workflow 'strict'. 'intake' cannot run (input_schema): must have required property 'order'. For 'intake', start a run with params that fit, or correct its input_schema and register the workflow again; then, after a fix, call advance_run; or end the run with abandon_run.", r.GetRunId())
		if r.GetContextHint() != want || len(r.GetNextActions()) != 0 || r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Errorf("start = %q", r.GetContextHint())
		}
	})
}

// A step called by name whose dependency is refused before its claim is
// told so, as a reason of its own (seed 000), not "not settled", and the
// reply ends with the same way out as every reply that says what comes
// next: the dependency's own way (refused for its input), then the run's.
func TestAStepWhoseDependencyCannotRunSaysSo(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		yaml := "id: dep_refused\nname: Dep\nversion: 1\nsteps:\n  intake:\n    description: Take the order.\n    execution: auto\n    input_schema:\n      type: object\n      required: [order]\n      properties:\n        order: { type: string }\n" +
			"  reply:\n    description: Reply.\n    execution: agent\n    depends_on: [intake]\n    input_schema: { type: object }\n"
		if r := e.register(t, []byte(yaml)); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		run := start(t, e, "dep_refused", map[string]any{"other": 1}).GetRunId()
		resp, err := e.client.ExecuteStep(ctx(t), &realmv1.ExecuteStepRequest{RunId: run, Command: "reply", Params: params(t, map[string]any{})})
		if err != nil {
			t.Fatal(err)
		}
		r := resp.GetReply()
		want := "Step 'reply' cannot be called now: a step it depends on cannot run ('intake'). 'intake' cannot run (input_schema): must have required property 'order'. For 'intake', start a run with params that fit, or correct its input_schema and register the workflow again; then, after a fix, call advance_run; or end the run with abandon_run."
		if r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_BLOCKED || r.GetContextHint() != want {
			t.Errorf("reply = %q (%v)", r.GetContextHint(), r.GetStatus())
		}
	})
}
