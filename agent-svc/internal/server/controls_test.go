package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/agent-svc/internal/server"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// slowFlow is one agent step whose llm_timeout_seconds is %TIMEOUT%.
const slowFlow = `id: slow
name: Slow
version: 1
steps:
  think:
    description: Think slowly.
    execution: agent
    prompt: Think.
    input_schema: { type: object, required: [idea], properties: { idea: { type: string } } }
%TIMEOUT%
    display: 'Idea: {{ idea }}'
`

// A step's llm_timeout_seconds overrides the drive's --llm-timeout for
// that step's model requests (agent driver §11): a model slower than the
// step's 1 s fails the step after its three attempts, while the same model
// under the flag's 30 s alone answers, and the result is printed through
// the step's display template.
func TestStepLLMTimeoutOverridesTheFlag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, timeout string
		completes     bool
	}{
		{"the step's 1 s limit cuts a 1.5 s model", "    llm_timeout_seconds: 1", false},
		{"the flag's 30 s limit waits for it", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			eng := startEngine(t)
			st := newStub(t, "anthropic", func(int, wireRequest) answer {
				time.Sleep(1500 * time.Millisecond)
				return answer{output: map[string]any{"idea": "tea"}}
			})
			agent := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
			src := &realmv1.WorkflowSource{Yaml: []byte(strings.ReplaceAll(slowFlow, "%TIMEOUT%", c.timeout)), Path: "slow.yaml"}
			o := opts("anthropic", "test-model")
			o.LlmTimeoutSeconds = 30
			evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowSource: src, Options: o}, nil)
			out, end := texts(evs), last(evs)
			if c.completes {
				if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED || !strings.Contains(out, "\nResult (think):\nIdea: tea") {
					t.Fatalf("drive did not complete with the display line:\n%s", out)
				}
				return
			}
			if end.GetOutcome() == realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED || !strings.Contains(out, "✗ Step 'think' LLM call failed: Request timed out.") {
				t.Fatalf("the step's limit did not stop the drive:\n%s", out)
			}
			if n := len(st.seen()); n != 3 {
				t.Errorf("model requests = %d, want 3 attempts", n)
			}
			if phaseOf(t, eng, end.GetRunId()) != realmv1.RunPhase_RUN_PHASE_RUNNING {
				t.Errorf("run is not left running")
			}
			f := ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED)[0].GetFailure()
			if f.GetErrorClass() != "connection_timeout" || f.GetDeclaredPerAttemptMs() != 1000 || f.GetDerivedCeilingMs() != 64500 {
				t.Errorf("failure = %v", f)
			}
		})
	}
}

// gatedFlow's gate has no message: the gate text is the step's display
// template over the answer; the prompt reads a workflow_context text.
const gatedFlow = `id: gated
name: Gated
version: 1
workflow_context:
  tone: { source: { path: tone.md } }
context_wrapper: brackets
steps:
  draft:
    description: Draft.
    execution: agent
    prompt: "{{ workflow.context.tone }}"
    input_schema: { type: object, required: [reply], properties: { reply: { type: string } } }
    trust: human_confirmed
    gate: { choices: [send, discard] }
    display: 'Reply: {{ reply }} ({{ run.params.x }})'
`

// The driver's gate text is the display template rendered against the
// preview (roots print nothing), and the model is sent the prompt with the
// workflow_context text wrapped as context_wrapper says.
func TestGateTextIsTheDisplayTemplateAndPromptsCarryWorkflowContext(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "anthropic", func(int, wireRequest) answer { return answer{output: map[string]any{"reply": "hello"}} })
	agent := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
	src := &realmv1.WorkflowSource{Yaml: []byte(gatedFlow), Path: "gated.yaml", Files: map[string][]byte{"tone.md": []byte("Be brief.")}}
	var gate *realmv1.Gate
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowSource: src, Options: opts("anthropic", "test-model")}, func(ev *realmv1.DriveEvent) {
		if ev.GetKind() == realmv1.DriveEventKind_DRIVE_EVENT_KIND_GATE_OPENED && gate == nil {
			gate = ev.GetGate()
			go func() { // a person answers from elsewhere
				_, _ = eng.SubmitHumanResponse(context.Background(), &realmv1.SubmitHumanResponseRequest{
					RunId: ev.GetRunId(), GateId: gate.GetGateId(), Choice: "send"})
			}()
		}
	})
	out := texts(evs)
	if !strings.Contains(out, "⏸  Gate: draft | ID: "+gate.GetGateId()+"\n\n   Reply: hello ()\n\n   Send: realm run respond") {
		t.Errorf("gate block:\n%s", out)
	}
	if reqs := st.seen(); len(reqs) != 1 || reqs[0].User != "[tone]\nBe brief.\n[/tone]" {
		t.Errorf("prompt sent = %v", reqs)
	}
}

// An auto step whose handler no live runner serves is warned of as the
// new run starts (§4; the built-in check_quotes is always offered), and
// stops the drive with §15's line when reached; the run is not failed.
func TestCapabilityBlockStopsTheDriveWithTheSpecsLine(t *testing.T) {
	t.Parallel()
	addr, eng := startEngineAt(t)
	st := newStub(t, "anthropic", func(int, wireRequest) answer { return answer{output: map[string]any{}} })
	agent := startAgent(t, server.Config{Engine: eng, Registry: realmv1.NewRegistryServiceClient(dial(t, addr)), Services: anthropicAt(st.URL())})
	src := &realmv1.WorkflowSource{Yaml: []byte("id: filing\nname: Filing\nversion: 1\nsteps:\n  file:\n    description: File it.\n    execution: auto\n    handler: file_ticket\n" +
		"  quotes:\n    description: Check quotes.\n    execution: auto\n    handler: check_quotes\n    depends_on: [file]\n"), Path: "filing.yaml"}
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowSource: src, Options: opts("anthropic", "test-model")}, nil)
	end := last(evs)
	var started []string
	for _, l := range evs[0].GetLines() {
		if l.GetStream() == realmv1.DriveStream_DRIVE_STREAM_STDERR {
			started = append(started, l.GetText())
		}
	}
	// Seed 003's words ("A name that is not registered").
	warning := "⚠ Step 'file' needs handler 'file_ticket', which is not registered in this runner. If reached it will block recoverably (not fail) until a runner that provides this handler executes it — load the missing extension or run on a capable runner."
	if evs[0].GetKind() != realmv1.DriveEventKind_DRIVE_EVENT_KIND_STARTED || len(started) != 1 || started[0] != warning {
		t.Errorf("the start's warnings = %q, want only\n%s", started, warning)
	}
	want := "⚠ Step 'file' is blocked: handler 'file_ticket' is not registered in this runner. The run is NOT failed — add handler 'file_ticket' and re-attach (`realm agent --run-id " +
		end.GetRunId() + " --provider anthropic --model test-model`)."
	if !strings.Contains(texts(evs), want) {
		t.Fatalf("output lacks\n%s\n%s", want, texts(evs))
	}
	if phaseOf(t, eng, end.GetRunId()) != realmv1.RunPhase_RUN_PHASE_RUNNING {
		t.Error("the run is not left running")
	}
}

// An owed auto step the engine refuses before its claim is named once, and
// when nothing else can run the drive stops with §15's line; the run stays
// open.
func TestRefusedAutoStepStopsTheDriveWithTheSpecsLines(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "anthropic", func(int, wireRequest) answer { return answer{output: map[string]any{}} })
	agent := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
	src := &realmv1.WorkflowSource{Yaml: []byte("id: gated-file\nname: Gated file\nversion: 1\nsteps:\n  file:\n    description: File it.\n    execution: auto\n    preconditions: ['run.params.ok == true']\n"), Path: "f.yaml"}
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowSource: src, Params: params(t, map[string]any{"ok": false}), Options: opts("anthropic", "test-model")}, nil)
	run := last(evs).GetRunId()
	out := texts(evs)
	if strings.Count(out, "• Step 'file' cannot run (precondition): ") != 1 {
		t.Errorf("the refused step is not named once:\n%s", out)
	}
	want := "✗ The drive stops: nothing else can run, and 'file' cannot run (precondition). Run " + run + " stays open (phase 'running'): correct the workflow, register it again, then realm run advance " + run + "; or end it: realm run abandon " + run + "."
	if !strings.Contains(out, want) {
		t.Errorf("output lacks\n%s\n%s", want, out)
	}
	if phaseOf(t, eng, run) != realmv1.RunPhase_RUN_PHASE_RUNNING {
		t.Error("the run is not left running")
	}
}

// A repair budget past the step's validation-exhaustion threshold is
// warned about once, when the step starts (agent driver §9).
func TestRepairBudgetPastTheThresholdIsWarnedOnce(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "anthropic", func(int, wireRequest) answer { return answer{output: map[string]any{"idea": "tea"}} })
	agent := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
	src := &realmv1.WorkflowSource{Yaml: []byte(strings.ReplaceAll(slowFlow, "%TIMEOUT%", "    validation_exhaustion: { threshold: 3 }")), Path: "slow.yaml"}
	o := opts("anthropic", "test-model")
	retries := int32(3)
	o.SchemaRetries = &retries
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowSource: src, Options: o}, nil)
	want := "  ⚠ --schema-retries 3 (repair budget 4 attempts) exceeds step 'think''s validation-exhaustion threshold (3) — the engine will terminalize this step before the repair loop's own budget is exhausted."
	if out := texts(evs); strings.Count(out, want) != 1 || last(evs).GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Errorf("want the warning once and a completed run:\n%s", out)
	}
}
