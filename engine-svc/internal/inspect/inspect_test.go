package inspect

import (
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/health"
	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/workflow"
)

// now is when every test reads its record.
var now = time.Date(2026, 10, 1, 23, 40, 0, 0, time.UTC)

// at writes a time minutes before now as the record does.
func at(minutesAgo int) string {
	return record.FormatTime(now.Add(-time.Duration(minutesAgo) * time.Minute))
}

func ptr[T any](v T) *T { return &v }

// run is a hand-made record: run r1 of orders v1, created an hour ago.
func run(edit func(r *record.Run)) *record.Run {
	r := &record.Run{
		ID: "r1", WorkflowID: "orders", WorkflowVersion: 1,
		CreatedAt: at(60), UpdatedAt: at(5),
	}
	edit(r)
	return r
}

// def builds a workflow from steps in file order.
func def(steps ...*workflow.Step) *workflow.Definition {
	d := &workflow.Definition{ID: "orders", Version: 1, Steps: map[string]*workflow.Step{}}
	for _, s := range steps {
		d.Steps[s.Name] = s
		d.StepOrder = append(d.StepOrder, s.Name)
	}
	return d
}

func auto(name string, deps ...string) *workflow.Step {
	return &workflow.Step{Name: name, Execution: workflow.KindAuto, DependsOn: deps}
}

func agent(name string, deps ...string) *workflow.Step {
	return &workflow.Step{Name: name, Execution: workflow.KindAgent, DependsOn: deps}
}

// ent is an execution entry with a hash and a duration.
func ent(step, status string, in, out any) *record.Entry {
	return &record.Entry{StepID: step, Status: status, InputSummary: in, OutputSummary: out,
		EvidenceHash: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", DurationMS: 12}
}

// ana is a program name from the OS user through realm agent.
var ana = &record.Holder{By: "ana@build-01", BySource: "derived", Channel: "agent"}

func obj(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// check compares whole strings and shows both when they differ.
func check(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("report differs\n--- got ---\n%s\n--- want ---\n%s", got, want)
	}
}

func TestRenderEndedRuns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{
			name: "completed run shows the tick, its seal, cause and each step's evidence",
			in: Input{
				Run: run(func(r *record.Run) {
					r.CompletedSteps = []string{"fetch", "classify"}
					r.Seal("complete", "", "Workflow completed.")
				}),
				Def: def(auto("fetch"), &workflow.Step{Name: "classify", Execution: workflow.KindAgent, DependsOn: []string{"fetch"}, AgentProfile: "triage"}),
				Entries: []*record.Entry{
					func() *record.Entry {
						e := ent("fetch", "success", obj("order", "A-17"), obj("total", 48))
						e.ResolvedParams = obj("order", "A-17")
						e.DrivenBy = &record.Holder{By: "ops", BySource: "ambient", Channel: "advance"}
						e.Warn = "One record had no email address."
						return e
					}(),
					func() *record.Entry {
						e := ent("classify", "success", obj("label", "refund"), obj("label", "refund"))
						e.DrivenBy = ana
						e.DurationMS = 1400
						e.Diagnostics = obj("input_token_estimate", 23.0, "precondition_trace", []any{},
							"cache", obj("state", "unobservable", "basis", "unobservable",
								"requests", []any{obj("request_index", 0.0, "prompt_tokens", 412.0, "output_tokens", 38.0)}))
						return e
					}(),
				},
				Now: now,
			},
			want: `Run: r1
Workflow: orders v1
Phase: completed  ✓
Sealed by: complete
Cause: Workflow completed.
Completed: fetch, classify
In Progress: (none)
Failed: (none)
Skipped: (none)
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z

Evidence (2 steps):
  1. fetch     success   12ms   hash: 44136fa3
     Taken by: ops (from REALM_OPERATOR, via advance)
     Input:  {"order":"A-17"}
     Resolved: {"order":"A-17"}
     Output: {"total":48}
     Warn: One record had no email address.
  2. classify  [profile: triage] success   1400ms   hash: 44136fa3
     Taken by: ana@build-01 (from the OS user, via agent)
     Input:  {"label":"refund"}
     Output: {"label":"refund"}
     Diagnostics: ~23 tokens (estimate, step input) | 412 prompt tokens (measured, first request) | 38 output tokens | no preconditions | cache: not reported by the provider (1 request)
`,
		},
		{
			name: "failed run names its cause, the resume way and the failure",
			in: Input{
				Run: run(func(r *record.Run) {
					r.CompletedSteps = []string{"fetch"}
					r.FailedSteps = []string{"total"}
					r.Seal("step_failure", "total", "Step 'total' failed: Dispatcher failed: no rate")
				}),
				Def: def(auto("fetch"), auto("total", "fetch")),
				Entries: []*record.Entry{
					ent("fetch", "success", obj(), obj("n", 1)),
					func() *record.Entry {
						e := ent("total", "error", obj("n", 1), obj())
						e.Error = "Dispatcher failed: no rate"
						return e
					}(),
				},
				Now: now,
			},
			want: `Run: r1
Workflow: orders v1
Phase: failed
Sealed by: step_failure
Cause: Step 'total' failed: Dispatcher failed: no rate
Resumable: 'total' — realm run resume r1 --from total
Completed: fetch
In Progress: (none)
Failed: total
Skipped: (none)
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z

Evidence (2 steps):
  1. fetch  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {"n":1}
  2. total  error   12ms   hash: 44136fa3
     Input:  {"n":1}
     Output: {}
     Error: Dispatcher failed: no rate
`,
		},
		{
			name: "abandoned run with a failed step warns what resuming erases; cleanup steps are never resumable",
			in: Input{
				Run: run(func(r *record.Run) {
					r.FailedSteps = []string{"fetch", "release"}
					r.FinalizerLedger = map[string]*record.FinalizerStatus{"release": {Status: "failed"}}
					r.AbandonedAt = at(2)
					r.Seal("abandon_requested", "", "Abandoned via realm run abandon")
				}),
				Now: now,
			},
			want: `Run: r1
Workflow: orders v1
Phase: abandoned
Sealed by: abandon_requested
Cause: Abandoned via realm run abandon
Resumable: 'fetch' — realm run resume r1 --from fetch — resuming erases the operator's ending and its reason, and records no one and no reason for the undo
Completed: (none)
In Progress: (none)
Failed: fetch, release
Skipped: (none)
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z

Evidence (0 steps):
`,
		},
		{
			name: "failed run with several failed steps offers each",
			in: Input{
				Run: run(func(r *record.Run) {
					r.FailedSteps = []string{"a", "b"}
					r.Seal("step_failure", "b", "Step 'b' failed: x")
				}),
				Now: now,
			},
			want: `Run: r1
Workflow: orders v1
Phase: failed
Sealed by: step_failure
Cause: Step 'b' failed: x
Resumable: 'a', 'b' — realm run resume r1 --from <one of: a, b>
Completed: (none)
In Progress: (none)
Failed: a, b
Skipped: (none)
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z

Evidence (0 steps):
`,
		},
		{
			name: "guard abort shows the guard, the abort context and the guard's skip",
			in: Input{
				Run: run(func(r *record.Run) {
					r.CompletedSteps = []string{"quote"}
					r.SkippedSteps = []string{"limit", "ship"}
					r.SkipDetails = map[string]*record.SkipDetail{
						"limit": {Kind: "guard_abort"},
						"ship":  {Kind: "trigger_rule_unsatisfiable", Rule: "all_success", BlockingDeps: []record.Dep{{Step: "limit", State: "skipped"}}},
					}
					r.AbortedAt = &record.AbortedAt{StepID: "limit",
						Conditions:   []record.ConditionEval{{Condition: "quote.amount <= 1000", ResolvedValue: 5000.0, Passed: false}},
						AbortMessage: "The amount is over the limit."}
					r.Seal("guard_abort", "limit", "")
				}),
				Entries: []*record.Entry{
					func() *record.Entry {
						e := ent("limit", "skipped", obj(), obj("aborted", true, "abort_message", "The amount is over the limit.",
							"conditions", []any{obj("condition", "quote.amount <= 1000", "resolved_value", 5000.0, "passed", false)}))
						return e
					}(),
				},
				Now: now,
			},
			want: `Run: r1
Workflow: orders v1
Phase: aborted
Sealed by: guard_abort (limit)
Cause: Guard 'limit' aborted the run.
Aborted at: 'limit' — The amount is over the limit.
  quote.amount <= 1000 → false (5000)
Completed: quote
In Progress: (none)
Failed: (none)
Skipped: limit, ship
  limit: guard_abort
  ship: trigger_rule_unsatisfiable: all_success, dep limit skipped
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z

Evidence (1 steps):
  1. limit  skipped   12ms   hash: 44136fa3
     Input:  {}
     Output: {"abort_message":"The amount is over the limit.","aborted":true,"conditions":[{"condition":"quote.amount <= 1000","passe…
`,
		},
		{
			name: "handler abort carries its message in the cause and needs no abort context",
			in: Input{
				Run: run(func(r *record.Run) {
					r.SkippedSteps = []string{"only"}
					r.SkipDetails = map[string]*record.SkipDetail{"only": {Kind: "handler_abort"}}
					r.AbortedAt = &record.AbortedAt{StepID: "only", AbortMessage: "The account is closed."}
					r.Seal("handler_abort", "only", "Handler 'only' aborted the run: The account is closed.")
				}),
				Now: now,
			},
			want: `Run: r1
Workflow: orders v1
Phase: aborted
Sealed by: handler_abort (only)
Cause: Handler 'only' aborted the run: The account is closed.
Completed: (none)
In Progress: (none)
Failed: (none)
Skipped: only
  only: handler_abort
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z

Evidence (0 steps):
`,
		},
		{
			name: "completed run with a pending cleanup step puts run health before the evidence",
			in: Input{
				Run: run(func(r *record.Run) {
					r.RerunOf = "r0"
					r.CompletedSteps = []string{"fetch"}
					r.FinalizerLedger = map[string]*record.FinalizerStatus{
						"notify":  {Status: "pending", Rank: 1},
						"release": {Status: "pending", Rank: 0},
						"audit":   {Status: "completed", Rank: 2},
					}
					r.Seal("complete", "", "Workflow completed.")
					r.SealedBy.Classified = true
				}),
				Findings: []health.Finding{
					{Kind: "terminal_pending_finalizer", Step: "release", Reason: "lease_held"},
					{Kind: "terminal_pending_finalizer", Step: "notify", Reason: "never_leased"},
				},
				Entries: []*record.Entry{ent("fetch", "success", obj(), obj())},
				Now:     now,
			},
			want: `Run: r1
Workflow: orders v1
Phase: completed  ✓
Rerun of: r0
Sealed by: complete (recovered by classifier)
Cause: Workflow completed.
Cleanup steps left pending: 'release', 'notify' — to run them with code that has their handlers: realm run drain r1 --force
Completed: fetch
In Progress: (none)
Failed: (none)
Skipped: (none)
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z

Run Health (2 finding(s)):
  terminal_pending_finalizer [release]: lease_held
  terminal_pending_finalizer [notify]: never_leased

Evidence (1 steps):
  1. fetch  success   12ms   hash: 44136fa3
     Input:  {}
     Output: {}
`,
		},
		{
			name: "one pending cleanup step and a defaulted step",
			in: Input{
				Run: run(func(r *record.Run) {
					r.CompletedSteps = []string{"decide"}
					r.DefaultedSteps = []string{"decide"}
					r.FinalizerLedger = map[string]*record.FinalizerStatus{"release": {Status: "pending"}}
					r.Seal("complete", "", "Workflow completed.")
				}),
				Now: now,
			},
			want: `Run: r1
Workflow: orders v1
Phase: completed  ✓
Sealed by: complete
Cause: Workflow completed.
Cleanup step left pending: 'release' — to run it with code that has its handler: realm run drain r1 --force
Completed: decide
In Progress: (none)
Failed: (none)
Skipped: (none)
Defaulted (settled by default): decide
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z

Evidence (0 steps):
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check(t, Render(tt.in), tt.want)
		})
	}
}

func TestRenderSkippedStepsSayWhy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		detail *record.SkipDetail
		want   string
	}{
		{"when false shows the condition and its value as JSON",
			&record.SkipDetail{Kind: "when_false", Expression: "review.choice == 'send'",
				Leaves: []record.Leaf{{Leaf: "review.choice == 'send'", LHSPresent: true, ResolvedValue: "discard", Passed: false}}},
			`when_false: review.choice == 'send' [lhs → "discard"]`},
		{"when false names the leaf that failed among several",
			&record.SkipDetail{Kind: "when_false", Expression: "a > 1",
				Leaves: []record.Leaf{{Leaf: "b", LHSPresent: true, ResolvedValue: true, Passed: true}, {Leaf: "a > 1", LHSPresent: true, ResolvedValue: 0.0, Passed: false}}},
			`when_false: a > 1 [lhs → 0]`},
		{"when false with no value says it was absent",
			&record.SkipDetail{Kind: "when_false", Expression: "x.y == 1",
				Leaves: []record.Leaf{{Leaf: "x.y == 1", LHSPresent: false, Passed: false}}},
			`when_false: x.y == 1 [lhs absent]`},
		{"when false without leaves shows the condition alone",
			&record.SkipDetail{Kind: "when_false", Expression: "x"},
			`when_false: x`},
		{"trigger rule names the rule and the deps that decided it",
			&record.SkipDetail{Kind: "trigger_rule_unsatisfiable", Rule: "all_success", BlockingDeps: []record.Dep{{Step: "fetch", State: "failed"}}},
			`trigger_rule_unsatisfiable: all_success, dep fetch failed`},
		{"trigger rule with several deps repeats the form",
			&record.SkipDetail{Kind: "trigger_rule_unsatisfiable", Rule: "all_success", BlockingDeps: []record.Dep{{Step: "a", State: "failed"}, {Step: "b", State: "skipped"}}},
			`trigger_rule_unsatisfiable: all_success, dep a failed, dep b skipped`},
		{"handler abort", &record.SkipDetail{Kind: "handler_abort"}, `handler_abort`},
		{"guard abort", &record.SkipDetail{Kind: "guard_abort"}, `guard_abort`},
		{"gate expired names the gate", &record.SkipDetail{Kind: "gate_expired", GateID: "g-1"}, `gate_expired: gate g-1`},
		{"gate cancelled names the gate", &record.SkipDetail{Kind: "gate_cancelled_by_abort", GateID: "g-2"}, `gate_cancelled_by_abort: gate g-2`},
		{"no detail recorded", nil, `(no reason recorded)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := Input{Now: now, Run: run(func(r *record.Run) {
				r.SkippedSteps = []string{"s"}
				if tt.detail != nil {
					r.SkipDetails = map[string]*record.SkipDetail{"s": tt.detail}
				}
			})}
			want := `Run: r1
Workflow: orders v1
Phase: running
Completed: (none)
In Progress: (none)
Failed: (none)
Skipped: s
  s: ` + tt.want + `
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z

Evidence (0 steps):
`
			check(t, Render(in), want)
		})
	}
}

// gateRun is a run waiting at a gate on review opened 3 minutes ago.
func gateRun(edit func(g *record.PendingGate)) *record.Run {
	return run(func(r *record.Run) {
		r.CompletedSteps = []string{"draft"}
		g := &record.PendingGate{GateID: "g-1", StepName: "review", Choices: []string{"send", "discard"}, OpenedAt: at(3)}
		if edit != nil {
			edit(g)
		}
		r.PendingGate = g
		r.MarkInProgress("review", &record.Claim{Token: "t", Holder: &record.Holder{By: "ops@server-1", BySource: "derived", Channel: "mcp-stdio"}, Since: at(3)})
	})
}

// gateHead is the header every gate test shares, up to Updated.
const gateHead = `Run: r1
Workflow: orders v1
Phase: gate_waiting
Completed: draft
In Progress: review
  review: question opened through ops@server-1 (from the OS user, via mcp-stdio), 3m ago
Failed: (none)
Skipped: (none)
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z
Gate: review (gate g-1, opened 3m ago)
  Choices: send, discard
`

func TestRenderOpenGate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{
			name: "without expiry: the gate, its choices and what waits for the answer",
			in:   Input{Run: gateRun(nil), WaitingOnAnswer: []string{"publish"}, Now: now},
			want: gateHead + `Question open on 'review': 'publish' waits for its answer.

Evidence (0 steps):
`,
		},
		{
			name: "several steps wait for the answer",
			in:   Input{Run: gateRun(nil), WaitingOnAnswer: []string{"publish", "archive"}, Now: now},
			want: gateHead + `Question open on 'review': 'publish', 'archive' wait for its answer.

Evidence (0 steps):
`,
		},
		{
			name: "with an expiry still ahead: when and what then",
			in: Input{Run: gateRun(func(g *record.PendingGate) {
				g.ExpiresAt = record.FormatTime(now.Add(57 * time.Minute))
				g.OnExpiry, g.DefaultChoice = "settle_default", "discard"
			}), Now: now},
			want: gateHead + `  Expires: 2026-10-02T00:37:00.000Z (in 57m), on_expiry: settle_default ('discard')

Evidence (0 steps):
`,
		},
		{
			name: "expired with a declared abort: owed to the engine",
			in: Input{Run: gateRun(func(g *record.PendingGate) {
				g.ExpiresAt = at(1)
				g.OnExpiry = "abort"
			}), Findings: []health.Finding{{Kind: "gate_expired_awaiting_drive", Step: "review", Reason: "gate expired — awaiting enactment of the declared abort"}}, Now: now},
			want: gateHead + `  EXPIRED 1m ago (2026-10-01T23:39:00.000Z), on_expiry: abort
Owed to the engine: the expired question on 'review' (its declared abort) — realm run advance r1 carries it out, then runs what that leaves owed until a step opens a question, fails or ends the run

Run Health (1 finding(s)):
  gate_expired_awaiting_drive [review]: gate expired — awaiting enactment of the declared abort

Evidence (0 steps):
`,
		},
		{
			name: "expired with nothing declared: reported, nothing owed",
			in: Input{Run: gateRun(func(g *record.PendingGate) {
				g.ExpiresAt = at(90)
			}), Now: now},
			want: gateHead + `  EXPIRED 1h 30m ago (2026-10-01T22:10:00.000Z), no on_expiry: reported as expired, and an answer is still taken

Evidence (0 steps):
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check(t, Render(tt.in), tt.want)
		})
	}
}

// openHead is the header of an open run with nothing settled.
const openHead = `Run: r1
Workflow: orders v1
Phase: running
Completed: (none)
In Progress: (none)
Failed: (none)
Skipped: (none)
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z
`

func TestRenderWhatAnOpenRunWaitsOn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{
			name: "one owed step names the command",
			in:   Input{Run: run(func(*record.Run) {}), Owed: []string{"total"}},
			want: openHead + "Owed to the engine: 'total' — realm run advance r1\n",
		},
		{
			name: "several owed steps say how far advance runs",
			in:   Input{Run: run(func(*record.Run) {}), Owed: []string{"limit", "total"}},
			want: openHead + "Owed to the engine: 'limit', 'total' — realm run advance r1 runs them until a step opens a question, fails or ends the run\n",
		},
		{
			name: "one ready agent step",
			in:   Input{Run: run(func(*record.Run) {}), AgentsReady: []string{"classify"}},
			want: openHead + "An agent step is ready: 'classify' — drive it with realm agent --run-id r1 --provider <provider> --model <model>\n",
		},
		{
			name: "several ready agent steps",
			in:   Input{Run: run(func(*record.Run) {}), AgentsReady: []string{"a", "b"}},
			want: openHead + "Agent steps are ready: 'a', 'b' — drive them with realm agent --run-id r1 --provider <provider> --model <model>\n",
		},
		{
			name: "a refused step and nothing else: the way out",
			in: Input{Run: run(func(*record.Run) {}), Def: def(auto("fetch"), auto("total", "fetch")),
				CannotRun: []Refusal{{Step: "total", Check: "precondition", Why: "Precondition failed: 'fetch.ok'. Resolved value: false."}}},
			want: openHead + `Cannot run 'total' (precondition): Precondition failed: 'fetch.ok'. Resolved value: false
Run r1 stays open (phase 'running'): correct the workflow, register it again, then realm run advance r1 — or end it: realm run abandon r1
`,
		},
		{
			name: "a first step refused for its input: the params way out",
			in: Input{Run: run(func(*record.Run) {}), Def: def(auto("fetch")),
				CannotRun: []Refusal{{Step: "fetch", Check: "input_schema", Why: "'order' is required"}}},
			want: openHead + `Cannot run 'fetch' (input_schema): 'order' is required
Run r1 stays open (phase 'running'): for 'fetch', start a run with params that fit, or correct its input_schema and register the workflow again; then, after a fix, realm run advance r1 — or end it: realm run abandon r1
`,
		},
		{
			name: "a first step refused for what its input_map builds: the general way out",
			in: Input{Run: run(func(*record.Run) {}), Def: def(&workflow.Step{Name: "fetch", Execution: workflow.KindAuto, Handler: "fetch_order",
				InputMap: map[string]any{"order_id": map[string]any{"$literal": 5}}}),
				CannotRun: []Refusal{{Step: "fetch", Check: "input_schema", Why: "/order_id must be string"}}},
			want: openHead + `Cannot run 'fetch' (input_schema): /order_id must be string
Run r1 stays open (phase 'running'): correct the workflow, register it again, then realm run advance r1 — or end it: realm run abandon r1
`,
		},
		{
			name: "a refusal beside an agent step ready has no way-out line",
			in: Input{Run: run(func(*record.Run) {}), AgentsReady: []string{"classify"},
				CannotRun: []Refusal{{Step: "total", Check: "trust", Why: "x"}}},
			want: openHead + `An agent step is ready: 'classify' — drive it with realm agent --run-id r1 --provider <provider> --model <model>
Cannot run 'total' (trust): x
`,
		},
		{
			name: "a capability block on the record is judged from the record",
			in: Input{Run: run(func(r *record.Run) {
				r.CapabilityBlocks = map[string]*record.CapabilityBlock{
					"total": {Requirement: record.Requirement{Kind: "handler", Name: "order_totl"}, Code: "ENGINE_HANDLER_NOT_REGISTERED"},
					"done":  {Requirement: record.Requirement{Kind: "handler", Name: "x"}},
				}
				r.CompletedSteps = []string{"done"}
			})},
			want: openHead[:strings.Index(openHead, "Completed:")] + `Completed: done
In Progress: (none)
Failed: (none)
Skipped: (none)
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z
Could not run 'total' (capability): handler 'order_totl' was not registered in the runner that last attempted it — from a program that has it: realm run advance r1
`,
		},
		{
			name: "the engine's own capability refusal replaces the record's",
			in: Input{Run: run(func(r *record.Run) {
				r.CapabilityBlocks = map[string]*record.CapabilityBlock{"total": {Requirement: record.Requirement{Kind: "adapter", Name: "crm"}}}
			}), CannotRun: []Refusal{{Step: "total", Check: "capability", Why: "adapter 'crm' is not registered here"}}},
			want: openHead + "Cannot run 'total' (capability): adapter 'crm' is not registered here\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.in.Now = now
			check(t, Render(tt.in), tt.want+"\nEvidence (0 steps):\n")
		})
	}
}

func TestRenderInProgressNamesWhoTookEachStep(t *testing.T) {
	t.Parallel()
	r := run(func(r *record.Run) {
		r.InProgressSteps = []string{"a", "b", "c", "d", "e", "f"}
		r.Claims = map[string]*record.Claim{
			"a": {Holder: &record.Holder{By: "ana", BySource: "stated", Channel: "run"}, Since: at(17)},
			"b": {Since: at(4)},
			"c": {},
			"e": {Holder: &record.Holder{By: "x\x1by", BySource: "derived", Channel: "agent"}, Since: at(0)},
			"f": {Holder: &record.Holder{By: strings.Repeat("n", 205), BySource: "derived", Channel: "agent"}, Since: at(0)},
		}
	})
	want := `Run: r1
Workflow: orders v1
Phase: running
Completed: (none)
In Progress: a, b, c, d, e, f
  a: taken by ana (as stated, via run), 17m ago
  b: no program name was recorded on this claim, 4m ago
  c: claimed before program names were recorded
  d: no claim is recorded for this step
  e: taken by a recorded name that cannot be printed (control characters, or not a name with its source), 0m ago
  f: taken by ` + strings.Repeat("n", 200) + `…[truncated] (from the OS user, via agent), 0m ago
Failed: (none)
Skipped: (none)
Created: 2026-10-01T22:40:00.000Z
Updated: 2026-10-01T23:35:00.000Z

Evidence (0 steps):
`
	check(t, Render(Input{Run: r, Now: now}), want)
}

func TestRenderNilRunIsEmpty(t *testing.T) {
	t.Parallel()
	if got := Render(Input{}); got != "" {
		t.Errorf("Render of no run = %q, want empty", got)
	}
}

// The header names every change of the definition that decided the run's
// entries, and says when the run carries its own; entries without a
// definition (older records) say nothing.
func TestRenderDefinitionChanges(t *testing.T) {
	t.Parallel()
	decided := func(step string, v float64, hash string) *record.Entry {
		e := &record.Entry{StepID: step, Status: "success", StartedAt: at(30), CompletedAt: at(30), DefinitionHash: hash}
		if hash != "" {
			e.DefinitionVersion = &v
		}
		return e
	}
	for _, tc := range []struct {
		name    string
		carried bool
		entries []*record.Entry
		want    []string
	}{
		{"one definition throughout", false, []*record.Entry{decided("a", 1, "aaaa"), decided("b", 1, "aaaa")}, nil},
		{"older entries name none", false, []*record.Entry{decided("a", 0, ""), decided("b", 0, "")}, nil},
		{"a new version, then back", false, []*record.Entry{decided("a", 1, "aaaa"), decided("b", 2, "bbbb"), decided("c", 1, "aaaa")},
			[]string{"Definition: v1 → v2 at step 'b'", "Definition: v2 → v1 at step 'c'"}},
		{"same label, other content", false, []*record.Entry{decided("a", 1, "aaaa0000000000ff"), decided("b", 1, "bbbb0000000000ff")},
			[]string{"Definition: v1 (aaaa00000000) → v1 (bbbb00000000) at step 'b'"}},
		{"an entry without one in between", false, []*record.Entry{decided("a", 1, "aaaa"), decided("x", 0, ""), decided("b", 2, "bbbb")},
			[]string{"Definition: v1 → v2 at step 'b'"}},
		{"carried", true, []*record.Entry{decided("a", 1, "aaaa")},
			[]string{"Definition: carried by the run (started from a file without --register); registering 'orders' does not change it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := run(func(r *record.Run) {
				if tc.carried {
					r.DefinitionSource = record.DefinitionCarried
				}
			})
			var got []string
			for _, l := range strings.Split(Render(Input{Run: r, Entries: tc.entries, Now: now}), "\n") {
				if strings.HasPrefix(l, "Definition: ") {
					got = append(got, l)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("definition lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
