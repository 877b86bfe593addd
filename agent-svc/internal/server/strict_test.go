package server_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/realm-go/realm/agent-svc/internal/server"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// strictWorkflow has one agent step that opts in to structured_output:
// strict with an eligible schema, and one whose schema has a caveat under
// OpenAI's rules (a null-union).
const strictWorkflow = `id: strict
name: Strict
version: 1
steps:
  code:
    description: Give the code.
    execution: agent
    prompt: Give code.
    structured_output: strict
    input_schema:
      type: object
      additionalProperties: false
      required: [code]
      properties:
        code: { type: string }
  note:
    description: Write a note.
    execution: agent
    depends_on: [code]
    prompt: Write note.
    structured_output: strict
    input_schema:
      type: object
      additionalProperties: false
      required: [note]
      properties:
        note: { type: [string, "null"] }
`

// A step that opts in to structured_output: strict is sent with the
// provider's strict mode, and a caveat the provider does not enforce is
// said once, on stderr, before its call.
func TestStrictStepsAreSentStrictAndCaveatsAreSaid(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	if r, err := eng.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(strictWorkflow), Path: "strict.yaml"}}); err != nil || !r.GetRegistered() {
		t.Fatalf("register: %v %s", err, r.GetReport().GetText())
	}
	st := newStub(t, "openai", func(_ int, r wireRequest) answer {
		if strings.Contains(r.User, "Give code") {
			return answer{output: map[string]any{"code": "ABC"}}
		}
		return answer{output: map[string]any{"note": "done"}}
	})
	agent := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL())})
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "strict", Options: opts("openai", "gpt-test")}, nil)
	if end := last(evs); end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Fatalf("end = %v\n%s", end, texts(evs))
	}
	reqs := st.seen()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		rf, _ := r.Body["response_format"].(map[string]any)
		js, _ := rf["json_schema"].(map[string]any)
		if rf["type"] != "json_schema" || js["strict"] != true {
			t.Errorf("request for %q: response_format = %v, want strict json_schema", r.User, rf)
		}
	}
	out := texts(evs)
	note := "  ⚠ Step 'note': structured_output: strict — sent, with caveats: null_union_emission at properties/note.\n"
	if strings.Count(out, note) != 1 || strings.Contains(out, "Step 'code': structured_output") {
		t.Errorf("output:\n%s\nwant the caveat line once, for note only", out)
	}
	for _, ev := range ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_MODEL_CALL) {
		if !ev.GetModelCall().GetStrictSent() {
			t.Errorf("model call for %s: strict not sent", ev.GetStep())
		}
	}
}

// The record of each strict answer reaches the evidence, and a provider
// that refuses the strict schema (the answer came without it) shows as the
// run's structured_output_downgraded finding.
func TestAStrictDowngradeIsRecordedAndFound(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	if r, err := eng.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(strictWorkflow), Path: "strict.yaml"}}); err != nil || !r.GetRegistered() {
		t.Fatalf("register: %v %s", err, r.GetReport().GetText())
	}
	st := newStub(t, "openai", func(_ int, r wireRequest) answer {
		if strings.Contains(r.User, "Give code") {
			return answer{output: map[string]any{"code": "ABC"}}
		}
		// The note step's strict schema is refused: the provider sends
		// the request again without strict.
		if rf, _ := r.Body["response_format"].(map[string]any); rf["type"] == "json_schema" {
			return answer{status: 400}
		}
		return answer{output: map[string]any{"note": "done"}}
	})
	agent := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL())})
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "strict", Options: opts("openai", "gpt-test")}, nil)
	end := last(evs)
	if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Fatalf("end = %v\n%s", end, texts(evs))
	}
	got := strictOf(t, eng, end.GetRunId())
	want := map[string]any{
		"code": map[string]any{"requested": true, "sent": true, "provider": "openai"},
		"note": map[string]any{"requested": true, "sent": false, "provider": "openai", "downgrade_reason": "api_rejected_schema",
			"api_message": "slow down", "api_param": nil, "api_code": nil, "caveats": []any{"null_union_emission at properties/note"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("structured_output records = %v, want %v", got, want)
	}
	// An ended run's findings are in inspect's Run Health block.
	ins, err := eng.InspectRun(ctx(t), &realmv1.InspectRunRequest{RunId: end.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	line := "structured_output_downgraded: 1 step(s) requested strict structured output but ran without it (note: api_rejected_schema)"
	if !strings.Contains(ins.GetText(), line) {
		t.Errorf("inspect:\n%s\nwant a line with %q", ins.GetText(), line)
	}
}
