package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

const contextFlow = `id: ctxflow
name: Context
version: 1
%WRAPPER%
workflow_context:
  policy: { source: { path: docs/policy.md } }
  missing: { source: { path: gone.md } }
steps:
  draft:
    description: Draft a reply.
    execution: agent
    prompt: "{{ workflow.context.policy }}|{{ workflow.context.policy.raw }}|{{ workflow.context.missing }}|{{ workflow.context.schema.raw }}"
    input_schema: { type: object, required: [reply], properties: { reply: { type: string } } }
    trust: human_confirmed
    gate:
      message: "{{ workflow.context.policy.raw }}Send {{ context.resources.draft.reply }}?"
      choices: [send, discard]
`

// registerContext registers contextFlow with its context texts as the CLI
// sends them: the files read beside the workflow file, and the reader's
// error for one that could not be read.
func registerContext(t *testing.T, e *env, wrapper, policy string) {
	t.Helper()
	yaml := contextFlow
	if wrapper != "" {
		wrapper = "context_wrapper: " + wrapper
	}
	yaml = strings.ReplaceAll(yaml, "%WRAPPER%", wrapper)
	resp, err := e.client.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{
		Yaml: []byte(yaml), Path: "workflow.yaml",
		Files:      map[string][]byte{"docs/policy.md": []byte(policy), "schema.json": []byte(`{"type":"object"}`)},
		FileErrors: map[string]string{"gone.md": "open /w/gone.md: no such file or directory"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetRegistered() {
		t.Fatal(resp.GetReport().GetText())
	}
}

// Workflow context texts travel with the registered definition, are
// snapshotted into the run when it is created (so the first prompt is
// already rendered), are wrapped per context_wrapper with the spec's exact
// whitespace, and an unreadable file leaves its expression as written and
// is recorded as {"content": "", "error": …} (workflow-file §3.8).
func TestWorkflowContextRendersInPromptsAndGateMessages(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		wrapper, wrapped string
	}{
		{"", "<policy>\nBe kind.\n\n</policy>"},
		{"xml", "<policy>\nBe kind.\n\n</policy>"},
		{"brackets", "[policy]\nBe kind.\n\n[/policy]"},
		{"none", "Be kind.\n"},
	} {
		t.Run("wrapper "+c.wrapper, func(t *testing.T) {
			t.Parallel()
			e := setup(t, "miniredis")
			registerContext(t, e, c.wrapper, "Be kind.\n")
			r := start(t, e, "ctxflow", nil)
			want := c.wrapped + "|Be kind.\n|{{ workflow.context.missing }}|{\"type\":\"object\"}"
			if len(r.GetNextActions()) == 0 || r.GetNextActions()[0].GetPrompt() != want {
				t.Fatalf("first prompt = %q, want %q", r.GetNextActions(), want)
			}
		})
	}

	eachBackend(t, func(t *testing.T, e *env) {
		registerContext(t, e, "", "Be kind.\n")
		run := start(t, e, "ctxflow", nil).GetRunId()
		// A new text registered while the run is open does not reach it:
		// every step of a run sees the text it started with.
		registerContext(t, e, "", "Be terse.\n")

		opened := step(t, e, run, "draft", map[string]any{"reply": "thanks"})
		if opened.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED {
			t.Fatalf("gate did not open: %v", opened)
		}
		if got := opened.GetGate().GetDisplay(); got != "Be kind.\nSend thanks?" {
			t.Errorf("gate display = %q", got)
		}

		snap, err := e.st.LoadRun(ctx(t), run)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Snapshots map[string]map[string]any `json:"workflow_context_snapshots"`
		}
		if err := json.Unmarshal(snap.Doc, &doc); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte("Be kind.\n"))
		p, m := doc.Snapshots["policy"], doc.Snapshots["missing"]
		if p["content"] != "Be kind.\n" || p["content_hash"] != hex.EncodeToString(sum[:]) || p["source_path"] != "docs/policy.md" ||
			p["loaded_at"] == nil || p["error"] != nil {
			t.Errorf("policy snapshot = %v", p)
		}
		if m["content"] != "" || m["error"] != "open /w/gone.md: no such file or directory" || m["content_hash"] != nil {
			t.Errorf("missing snapshot = %v", m)
		}
		if doc.Snapshots["schema"]["content"] != `{"type":"object"}` {
			t.Errorf("implicit schema entry = %v", doc.Snapshots["schema"])
		}
	})
}

// Without a gate.message the gate shows the step's display template over
// its output before falling back to the prompt (mcp spec §9.2).
func TestGateDisplayFallsBackToTheDisplayTemplate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ display, want string }{
		{"display: 'Send {{ reply }}?'", "Send hi?"},
		{"", "Write a reply."},
	} {
		e := setup(t, "miniredis")
		r := e.register(t, []byte(`id: shown
name: Shown
version: 1
steps:
  draft:
    description: Draft.
    execution: agent
    prompt: Write a reply.
    trust: human_confirmed
    `+c.display+`
`))
		if !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		run := start(t, e, "shown", nil).GetRunId()
		if got := step(t, e, run, "draft", map[string]any{"reply": "hi"}).GetGate().GetDisplay(); got != c.want {
			t.Errorf("%q: gate display = %q, want %q", c.display, got, c.want)
		}
	}
}
