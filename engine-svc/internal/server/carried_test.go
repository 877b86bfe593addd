package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// registeredOne is the registered copy: one agent step.
const registeredOne = `id: filerun
name: File run
version: 1
steps:
  answer:
    description: Answer.
    execution: agent
`

// fileTwo is the same id in a file never registered: other steps, version 2.
const fileTwo = `id: filerun
name: File run
version: 2
steps:
  draft:
    description: Draft.
    execution: agent
  review:
    description: Review.
    execution: agent
    depends_on: [draft]
`

// startFromSource starts a run of a workflow file without registering it.
func startFromSource(t *testing.T, e *env, yaml string) *realmv1.StartRunResponse {
	t.Helper()
	resp, err := e.client.StartRun(ctx(t), &realmv1.StartRunRequest{WorkflowSource: &realmv1.WorkflowSource{Yaml: []byte(yaml), Path: "workflow.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// protocolSteps are the step ids of get_workflow_protocol's reply, by
// workflow id or, with run set, for that run.
func protocolSteps(t *testing.T, e *env, workflowID, run string) []string {
	t.Helper()
	resp, err := e.client.GetWorkflowProtocol(ctx(t), &realmv1.GetWorkflowProtocolRequest{WorkflowId: workflowID, RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range resp.GetProtocol().AsMap()["steps"].([]any) {
		ids = append(ids, s.(map[string]any)["id"].(string))
	}
	return ids
}

// exportedEntries are the evidence entries of a run's export bundle, and
// the bundle's run document.
func exportedEntries(t *testing.T, e *env, run string) ([]map[string]any, map[string]any) {
	t.Helper()
	resp, err := e.client.ExportRun(ctx(t), &realmv1.ExportRunRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Run map[string]any `json:"run"`
	}
	if err := json.Unmarshal(resp.GetBundle(), &b); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, v := range b.Run["evidence"].([]any) {
		out = append(out, v.(map[string]any))
	}
	return out, b.Run
}

// A run started from a file without registering it is decided by the
// file's steps, and the registered copy of its id stays what it was.
func TestARunFromAFileLeavesTheRegisteredCopyAlone(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		if r := e.register(t, []byte(registeredOne)); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		resp := startFromSource(t, e, fileTwo)
		run := resp.GetReply().GetRunId()
		if run == "" || !resp.GetReport().GetValid() {
			t.Fatalf("start from a file: %v", resp)
		}
		if got := strings.Join(protocolSteps(t, e, "filerun", ""), ","); got != "answer" {
			t.Errorf("registered copy's steps = %s, want answer (untouched)", got)
		}
		if got := strings.Join(protocolSteps(t, e, "", run), ","); got != "draft,review" {
			t.Errorf("the run's steps = %s, want the file's draft,review", got)
		}
		if r := step(t, e, run, "answer", nil); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_ERROR {
			t.Errorf("the registered copy's step on the file's run: %v, want refused", r)
		}
		step(t, e, run, "draft", map[string]any{})
		if r := step(t, e, run, "review", map[string]any{}); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("review: %v", r)
		}
		if _, d := e.doc(t, run); d["definition_source"] != "run" || d["workflow_version"] != float64(2) {
			t.Errorf("run record definition_source = %v, workflow_version = %v; want run, 2", d["definition_source"], d["workflow_version"])
		}
		entries, doc := exportedEntries(t, e, run)
		if def, _ := doc["definition"].(map[string]any); def["version"] != float64(2) {
			t.Errorf("export's run.definition = %v, want the carried definition (version 2)", doc["definition"])
		}
		for _, en := range entries {
			if en["definition_version"] != float64(2) || en["definition_hash"] == nil {
				t.Errorf("entry %v: definition_version %v, hash %v; want 2 and the carried copy's hash", en["step_id"], en["definition_version"], en["definition_hash"])
			}
		}
		if text := inspectText(t, e, run); !strings.Contains(text, "Definition: carried by the run (started from a file without --register); registering 'filerun' does not change it") {
			t.Errorf("inspect does not say the run carries its definition:\n%s", text)
		}
	})
}

// Every replica decides a carried run by the same definition: the one
// stored with the run, not a registered copy or a cache of its own — also
// after its id is registered (with other steps) on another replica.
func TestReplicasAgreeOnACarriedDefinition(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, a *env) {
		b := replicaOf(t, a, engine.Options{Clock: a.clock.Now})
		run := startFromSource(t, a, fileTwo).GetReply().GetRunId()
		if got := strings.Join(protocolSteps(t, b, "filerun", run), ","); got != "draft,review" {
			t.Fatalf("the other replica's steps for the run = %s, want draft,review", got)
		}
		if r := step(t, b, run, "draft", map[string]any{}); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("draft on the other replica: %v", r)
		}
		if r := b.register(t, []byte(registeredOne)); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		if r := step(t, a, run, "review", map[string]any{}); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("review after the id was registered elsewhere: %v", r)
		}
		entries, _ := exportedEntries(t, b, run)
		if len(entries) != 2 || entries[0]["definition_hash"] != entries[1]["definition_hash"] {
			t.Errorf("entries written by two replicas name different definitions: %v", entries)
		}
	})
}

// A workflow file start_run cannot run creates nothing and says why;
// naming a workflow id beside the file is refused, not ignored.
func TestStartFromAFileRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t, "miniredis")
	resp := startFromSource(t, e, "id: broken\nname: Broken\nversion: 1\n")
	if r := resp.GetReply(); r.GetRunId() != "" || r.GetErrorCode() != "VALIDATION_WORKFLOW_SCHEMA" || resp.GetReport().GetValid() {
		t.Errorf("invalid file: %v", resp)
	}
	_, err := e.client.StartRun(ctx(t), &realmv1.StartRunRequest{WorkflowId: "filerun", WorkflowSource: &realmv1.WorkflowSource{Yaml: []byte(fileTwo)}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("workflow id and file together: %v, want InvalidArgument", err)
	}
	big := fileTwo + "x-padding: \"" + strings.Repeat("a", engine.MaxValueBytes) + "\"\n"
	_, err = e.client.StartRun(ctx(t), &realmv1.StartRunRequest{WorkflowSource: &realmv1.WorkflowSource{Yaml: []byte(big)}})
	if ce, ok := errcode.FromStatus(err); !ok || ce.Code != errcode.ResourceTooLarge {
		t.Errorf("a source over the limit: %v, want RESOURCE_TOO_LARGE", err)
	}
	if page, err := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{}); err != nil || len(page.GetRuns()) != 0 {
		t.Errorf("runs after refusals = %v %v, want none", page.GetRuns(), err)
	}
}

// A run reading its registered copy records which definition decided each
// step: inspect names each change, and the export's entries carry it.
func TestReRegistrationMidRunIsOnTheRecord(t *testing.T) {
	t.Parallel()
	const v1 = "id: midrun\nname: Mid run\nversion: 1\nsteps:\n  first:\n    description: First.\n    execution: agent\n  second:\n    description: Second.\n    execution: agent\n    depends_on: [first]\n"
	for _, tc := range []struct {
		name, again string
		line        string
		versions    []any
	}{
		{"a new version label", strings.Replace(strings.Replace(v1, "version: 1", "version: 2", 1), "Second.", "Second, again.", 1),
			"Definition: v1 → v2 at step 'second'", []any{float64(1), float64(2)}},
		{"a changed file under the same label", strings.Replace(v1, "Second.", "Second, again.", 1),
			"Definition: v1 (", []any{float64(1), float64(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, "redis")
			e.register(t, []byte(v1))
			run := start(t, e, "midrun", nil).GetRunId()
			step(t, e, run, "first", map[string]any{})
			if r := e.register(t, []byte(tc.again)); !r.GetRegistered() {
				t.Fatal(r.GetReport().GetText())
			}
			step(t, e, run, "second", map[string]any{})
			text := inspectText(t, e, run)
			if !strings.Contains(text, tc.line) || !strings.Contains(text, "at step 'second'") {
				t.Errorf("inspect does not show the change (%q):\n%s", tc.line, text)
			}
			entries, _ := exportedEntries(t, e, run)
			if len(entries) != 2 {
				t.Fatalf("entries = %v", entries)
			}
			for i, en := range entries {
				if en["definition_version"] != tc.versions[i] {
					t.Errorf("entry %d (%v) definition_version = %v, want %v", i, en["step_id"], en["definition_version"], tc.versions[i])
				}
			}
			if entries[0]["definition_hash"] == entries[1]["definition_hash"] {
				t.Errorf("both entries name definition %v; the re-registration is not on the record", entries[0]["definition_hash"])
			}
		})
	}
}
