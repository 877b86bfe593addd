package server_test

import (
	"strings"
	"testing"

	"github.com/realm-go/realm/agent-svc/internal/server"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// oneAsAFile is testdata/one.yaml (registered as v1, step 'answer') changed
// in a file: version 2, and its one step is 'reply'.
const oneAsAFile = `id: one
name: One step
version: 2
steps:
  reply:
    description: Write the reply.
    execution: agent
    prompt: "Write the reply."
`

// registeredSteps are the steps and version label of the registered copy
// of a workflow.
func registeredSteps(t *testing.T, eng realmv1.EngineServiceClient, id string) (string, float64) {
	t.Helper()
	resp, err := eng.GetWorkflowProtocol(ctx(t), &realmv1.GetWorkflowProtocolRequest{WorkflowId: id})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range resp.GetProtocol().AsMap()["steps"].([]any) {
		ids = append(ids, s.(map[string]any)["id"].(string))
	}
	list, err := eng.ListWorkflows(ctx(t), &realmv1.ListWorkflowsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var version float64
	for _, w := range list.GetWorkflows() {
		if w.GetId() == id {
			version = w.GetVersion()
		}
	}
	return strings.Join(ids, ","), version
}

// Driving a workflow file leaves the registered copy of its id as it is
// unless the drive is asked to register it; either way the run is decided
// by the file's steps.
func TestDriveFromAFileRegistersOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		register       bool
		wantRegistered string
		wantVersion    float64
	}{
		{"without register the registered copy is untouched", false, "answer", 1},
		{"with register the file replaces it", true, "reply", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eng := startEngine(t) // registers one.yaml: v1, step 'answer'
			st := newStub(t, "anthropic", triageAnswers)
			agent := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
			src := &realmv1.WorkflowSource{Yaml: []byte(oneAsAFile), Path: "one.yaml"}
			evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowSource: src, Register: tc.register, Options: opts("anthropic", "test-model")}, nil)
			out := texts(evs)
			if last(evs).GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
				t.Fatalf("drive did not complete:\n%s", out)
			}
			if !strings.Contains(out, "Realm Agent — One step v2\n") || !strings.Contains(out, "→ [agent] reply") {
				t.Errorf("the drive did not run the file's steps:\n%s", out)
			}
			run := last(evs).GetRunId()
			state, err := eng.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(state.GetState().GetCompletedSteps(), ","); got != "reply" {
				t.Errorf("completed steps = %s, want the file's reply", got)
			}
			steps, version := registeredSteps(t, eng, "one")
			if steps != tc.wantRegistered || version != tc.wantVersion {
				t.Errorf("registered copy = v%v [%s], want v%v [%s]", version, steps, tc.wantVersion, tc.wantRegistered)
			}
		})
	}
}

// A run driven from a file without registering it can be re-attached: the
// engine reads the definition the run carries, not the registered copy.
func TestReattachToARunFromAFile(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "anthropic", triageAnswers)
	agent := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
	resp, err := eng.StartRun(ctx(t), &realmv1.StartRunRequest{WorkflowSource: &realmv1.WorkflowSource{Yaml: []byte(oneAsAFile), Path: "one.yaml"}})
	if err != nil || resp.GetReply().GetRunId() == "" {
		t.Fatalf("start from a file: %v %v", resp, err)
	}
	evs := drive(t, agent, &realmv1.DriveRunRequest{RunId: resp.GetReply().GetRunId(), Options: opts("anthropic", "test-model")}, nil)
	if out := texts(evs); last(evs).GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED || !strings.Contains(out, "Realm Agent — One step v2\n") {
		t.Errorf("re-attached drive:\n%s", out)
	}
}
