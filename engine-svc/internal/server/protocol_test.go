package server_test

import (
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// get_workflow_protocol hands out each step's standing instructions as
// written, never rendered (workflow-file §4.4, §11.4); a step without them
// has no such field.
func TestProtocolCarriesStepInstructionsUnrendered(t *testing.T) {
	t.Parallel()
	e := setup(t, "miniredis")
	r := e.register(t, []byte(`id: briefed
name: Briefed
version: 1
steps:
  draft:
    description: Draft.
    execution: agent
    instructions: "Quote {{ run.params.ticket }} verbatim."
  send:
    description: Send.
    execution: auto
    depends_on: [draft]
`))
	if !r.GetRegistered() {
		t.Fatal(r.GetReport().GetText())
	}
	resp, err := e.client.GetWorkflowProtocol(ctx(t), &realmv1.GetWorkflowProtocolRequest{WorkflowId: "briefed"})
	if err != nil {
		t.Fatal(err)
	}
	steps := resp.GetProtocol().AsMap()["steps"].([]any)
	got := map[string]any{}
	for _, s := range steps {
		m := s.(map[string]any)
		got[m["id"].(string)] = m["instructions"]
	}
	if got["draft"] != "Quote {{ run.params.ticket }} verbatim." || got["send"] != nil {
		t.Errorf("instructions by step = %v", got)
	}
}
