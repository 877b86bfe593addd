package inspect

import (
	"strings"
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/workflow"
)

// evidenceOf renders a report and returns its evidence section, from the
// `Evidence (` line to the end.
func evidenceOf(t *testing.T, in Input) string {
	t.Helper()
	if in.Run == nil {
		in.Run = run(func(*record.Run) {})
	}
	in.Now = now
	got := Render(in)
	i := strings.Index(got, "Evidence (")
	if i < 0 {
		t.Fatalf("no evidence section in:\n%s", got)
	}
	return got[i:]
}

// answered is a gate response entry for review.
func answered(choice string, edit func(e *record.Entry)) *record.Entry {
	e := &record.Entry{StepID: "review", Kind: "gate_response", Status: "success",
		InputSummary: obj("choice", choice), OutputSummary: obj("choice", choice), EvidenceHash: "abcdef0123"}
	edit(e)
	return e
}

// reviewRan is review's execution entry, opened through ops over MCP.
func reviewRan() *record.Entry {
	e := ent("review", "success", obj("draft", "hi"), obj("reply", "We have refunded the charge."))
	e.DrivenBy = &record.Holder{By: "ops@server-1", BySource: "derived", Channel: "mcp-stdio"}
	return e
}

func TestRenderEvidence(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200)
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{
			name: "an answer names who answered, as stated, and the proof of the claim",
			in: Input{Def: def(&workflow.Step{Name: "review", Execution: workflow.KindAuto, Trust: workflow.TrustHumanConfirmed}),
				Entries: []*record.Entry{reviewRan(), answered("send", func(e *record.Entry) {
					e.GateMessage = "Ship order 4417?\nReply in the thread."
					e.RespondedBy = "alice"
					e.ClaimProof = obj("proof", "matched")
				})}},
			want: `Evidence (1 steps):
  1. review  success   12ms   hash: 44136fa3
     Question opened through: ops@server-1 (from the OS user, via mcp-stdio)
     Input:  {"draft":"hi"}
     Output: {"reply":"We have refunded the charge."}
     Message:  "Ship order 4417?\nReply in the thread."
     Answer: send · answered by alice (as stated, not verified) · proof: matched the claim_token of the reply that opened this question
`,
		},
		{
			name: "an answer with no name says it was not stated",
			in: Input{Entries: []*record.Entry{reviewRan(), answered("discard", func(e *record.Entry) {
				e.ClaimProof = obj("proof", "absent")
			})}},
			want: `Evidence (1 steps):
  1. review  success   12ms   hash: 44136fa3
     Question opened through: ops@server-1 (from the OS user, via mcp-stdio)
     Input:  {"draft":"hi"}
     Output: {"reply":"We have refunded the charge."}
     Answer: discard · answered by (not stated) · proof: no claim_token passed (the CLI never passes one; over MCP, only the conversation that opened the question has one to pass)
`,
		},
		{
			name: "an expiry's default is no answer and carries no proof",
			in: Input{Entries: []*record.Entry{reviewRan(), answered("hold", func(e *record.Entry) {
				e.RespondedBy = "timeout"
				e.Resolution = "expired_default"
			})}},
			want: `Evidence (1 steps):
  1. review  success   12ms   hash: 44136fa3
     Question opened through: ops@server-1 (from the OS user, via mcp-stdio)
     Input:  {"draft":"hi"}
     Output: {"reply":"We have refunded the charge."}
     Answer: hold · settled by the gate's expiry (no answer in time)
`,
		},
		{
			name: "retries: one line per attempt, then the last attempt's body",
			in: Input{Def: def(agent("classify")), Entries: []*record.Entry{
				func() *record.Entry {
					e := ent("classify", "error", obj("a", 1), obj())
					e.DrivenBy, e.Attempt, e.DurationMS = ana, 1, 30
					return e
				}(),
				func() *record.Entry {
					e := ent("classify", "success", obj("a", 2), obj("label", "ok"))
					e.DrivenBy, e.Attempt, e.DurationMS = ana, 2, 40
					e.EvidenceHash = "9f86d081884c7d65"
					e.Diagnostics = obj("cache", obj("state", "unobservable", "requests", []any{
						obj("prompt_tokens", 412.0, "output_tokens", 38.0), obj("prompt_tokens", 412.0, "output_tokens", 38.0)}))
					return e
				}(),
			}},
			want: `Evidence (1 steps):
  1. classify
     (attempt 1/2)  error   30ms   hash: 44136fa3
       Taken by: ana@build-01 (from the OS user, via agent)
     (attempt 2/2)  success   40ms   hash: 9f86d081
       Taken by: ana@build-01 (from the OS user, via agent)
     Input:  {"a":2}
     Output: {"label":"ok"}
     Diagnostics (attempt 2/2): 824 prompt tokens (measured, totals across 2 requests) | 76 output tokens (totals across 2 requests) | cache: not reported by the provider (totals across 2 requests)
`,
		},
		{
			name: "an agent step with no usage recorded says what it cannot know",
			in: Input{Def: def(agent("classify")), Entries: []*record.Entry{
				ent("classify", "success", obj(), obj("label", "ok")),
			}},
			want: `Evidence (1 steps):
  1. classify  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {"label":"ok"}
     cost: not recorded — realm has no usage figures for this attempt (for example: an outside agent over MCP made it, a person typed its answer at a realm workflow run prompt, or realm 0.45.0 or earlier recorded it)
`,
		},
		{
			name: "usage that is not a list is unreadable",
			in: Input{Def: def(agent("classify")), Entries: []*record.Entry{
				func() *record.Entry {
					e := ent("classify", "success", obj(), obj())
					e.Diagnostics = obj("cache", obj("requests", "nope"))
					return e
				}(),
			}},
			want: `Evidence (1 steps):
  1. classify  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {}
     Diagnostics: cache: unreadable — the recorded usage is not a list
     cost: unreadable — the recorded usage is not a list
`,
		},
		{
			name: "a long output is cut after its 120th character; the warning is whole",
			in: Input{Entries: []*record.Entry{
				func() *record.Entry {
					e := ent("fetch", "success", obj("text", long), obj("text", long))
					e.Warn = "Quote check: " + long
					return e
				}(),
			}},
			want: `Evidence (1 steps):
  1. fetch  success   12ms   hash: 44136fa3
     Input:  {"text":"` + strings.Repeat("x", 111) + `…
     Output: {"text":"` + strings.Repeat("x", 111) + `…
     Warn: Quote check: ` + long + `
`,
		},
		{
			name: "an output of exactly 120 characters is not cut",
			in: Input{Entries: []*record.Entry{
				ent("fetch", "success", obj(), obj("t", strings.Repeat("y", 112))),
			}},
			want: `Evidence (1 steps):
  1. fetch  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {"t":"` + strings.Repeat("y", 112) + `"}
`,
		},
		{
			name: "a bare step's output source, its trace count and control characters escaped",
			in: Input{Entries: []*record.Entry{
				func() *record.Entry {
					e := ent("copy", "success", obj(), obj())
					e.OutputSource = "dependency"
					e.Warn = "tab\there, esc\x1b"
					e.Trace = []any{obj("seq", 1.0, "event", "x")}
					return e
				}(),
			}},
			want: `Evidence (1 steps):
  1. copy  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {}
     Output source: dependency
     Warn: tab\there, esc\u001b
     Trace: 1
`,
		},
		{
			name: "an entry without an output falls back to the stored output",
			in: Input{Outputs: map[string]any{"fetch": obj("n", 2)}, Entries: []*record.Entry{
				ent("fetch", "success", obj(), nil),
			}},
			want: `Evidence (1 steps):
  1. fetch  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {"n":2}
`,
		},
		{
			name: "preconditions in the diagnostics",
			in: Input{Entries: []*record.Entry{
				func() *record.Entry {
					e := ent("ship", "success", obj(), obj())
					e.Diagnostics = obj("input_token_estimate", 3.0, "precondition_trace", []any{
						obj("precondition", "quote.ok == true", "resolved_value", true, "passed", true)})
					return e
				}(),
			}},
			want: `Evidence (1 steps):
  1. ship  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {}
     Diagnostics: ~3 tokens (estimate, step input) | preconditions: quote.ok == true → true (true)
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check(t, evidenceOf(t, tt.in), tt.want)
		})
	}
}

func TestRenderVerboseShowsToolCallArgsAndResults(t *testing.T) {
	t.Parallel()
	st := &workflow.Step{Name: "research", Execution: workflow.KindAgent, Tools: []string{"web:search"}}
	entries := []*record.Entry{ent("research", "success", obj(), obj("n", 1))}
	calls := map[int][]ToolCall{0: {
		{ServerID: "web", Tool: "search", Args: obj("q", "rent"), Result: obj("hits", 2.0), DurationMS: 31},
		{ServerID: "web", Tool: "fetch", Args: obj("url", "u"), DurationMS: 5, Error: "timeout"},
	}}
	tests := []struct {
		name    string
		verbose bool
		want    string
	}{
		{"plain", false, `Evidence (1 steps):
  1. research  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {"n":1}
     Tool calls (2):
       [web:search]  31ms
       [web:fetch]  5ms  error: timeout
`},
		{"verbose", true, `Evidence (1 steps):
  1. research  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {"n":1}
     Tool calls (2):
       [web:search]  31ms
         args:   {"q":"rent"}
         result: {"hits":2}
       [web:fetch]  5ms  error: timeout
         args:   {"url":"u"}
         result: null
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check(t, evidenceOf(t, Input{Def: def(st), Entries: entries, ToolCalls: calls, Verbose: tt.verbose}), tt.want)
		})
	}
	t.Run("a step that declares tools and called none says so", func(t *testing.T) {
		t.Parallel()
		want := `Evidence (1 steps):
  1. research  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {"n":1}
     Tools declared, none called
`
		check(t, evidenceOf(t, Input{Def: def(st), Entries: entries, Verbose: true}), want)
	})
}

func TestRenderMiddleBlocks(t *testing.T) {
	t.Parallel()
	t.Run("drive failures with declared limits and billed usage", func(t *testing.T) {
		t.Parallel()
		r := run(func(r *record.Run) {
			r.DriveFailures = &record.DriveFailures{Total: 2, Entries: []record.DriveFailure{
				{At: "2026-10-01T23:21:14.092Z", Step: "classify", Provider: "openai", ErrorClass: "connection_timeout", Message: "Request timed out.",
					ElapsedMS: 4392, DeclaredPerAttemptMS: ptr[int64](1000), DerivedCeilingMS: ptr[int64](64500), AttemptsSDK: ptr[int64](3)},
				{At: "2026-10-01T23:30:00.000Z", Step: "classify", Provider: "openai", ErrorClass: "validation_rejected", Message: "schema",
					ElapsedMS: 900, Usage: []any{
						obj("prompt_tokens", 412.0, "output_tokens", 38.0),
						obj("prompt_tokens", 412.0, "output_tokens", 38.0),
						obj("prompt_tokens", 412.0, "output_tokens", 38.0)}},
			}}
		})
		want := openHead + `
Drive failures:
  2026-10-01T23:21:14.092Z  classify  openai  connection_timeout after 4392ms: Request timed out. (declared 1000ms) (ceiling 64500ms) (attempt 3)
  2026-10-01T23:30:00.000Z  classify  openai  validation_rejected after 900ms: schema
    usage: 3 requests billed before the output was rejected — 1236 prompt tokens (totals across 3 requests), 114 output tokens (totals across 3 requests), cache not reported

Evidence (0 steps):
`
		check(t, Render(Input{Run: r, Now: now}), want)
	})
	t.Run("trace summary over every attempt that kept a trace", func(t *testing.T) {
		t.Parallel()
		a := ent("a", "success", obj(), obj())
		a.Trace = []any{obj("event", "tool"), obj("event", "tool"), obj("event", "note")}
		a.TraceSummary = obj("stored_entries", 3.0, "discarded_entries", 1.0, "truncated", true)
		a2 := ent("a", "success", obj(), obj())
		a2.Trace = []any{obj("event", "note"), obj("event", "alpha")}
		b := ent("b", "success", obj(), obj())
		want := openHead + `
Trace Summary:
  steps_with_trace:        2
  steps_with_trace_unique: 1
  stored_entries_total:   5
  discarded_entries_total:1
  truncated_steps:        1
  top_events:             note (2), tool (2), alpha (1)

Evidence (2 steps):
  1. a
     (attempt 1/2)  success   12ms   hash: 44136fa3
     (attempt 2/2)  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {}
     Trace: 2
  2. b  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {}
`
		check(t, Render(Input{Run: run(func(*record.Run) {}), Entries: []*record.Entry{a, a2, b}, Now: now}), want)
	})
}
