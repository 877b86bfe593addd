package health

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/workflow"
)

// at reads a record time or fails the test.
func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("bad time %q: %v", s, err)
	}
	return v
}

func str(s string) *string { return &s }

// def builds a definition whose file order is the order given.
func def(steps ...*workflow.Step) *workflow.Definition {
	d := &workflow.Definition{ID: "wf", Steps: map[string]*workflow.Step{}}
	for _, s := range steps {
		d.Steps[s.Name] = s
		d.StepOrder = append(d.StepOrder, s.Name)
	}
	return d
}

func agent(name string, deps ...string) *workflow.Step {
	return &workflow.Step{Name: name, Execution: workflow.KindAgent, DependsOn: deps}
}

// run is an open running run last changed at updated.
func run(updated string) *record.Run {
	r := &record.Run{ID: "run-1", WorkflowID: "wf", CreatedAt: updated, UpdatedAt: updated}
	r.Normalize()
	return r
}

// sameJSON compares a finding with a seed example as JSON values.
func sameJSON(t *testing.T, got Finding, want string) {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad golden: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("finding JSON\n got: %s\nwant: %s", b, want)
	}
}

func kinds(fs []Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Kind + "/" + f.Step
	}
	return out
}

// TestClassifyReproducesSeedExamples builds each finding the seed shows as
// JSON from a hand-made record and checks it against the seed, field by
// field.
func TestClassifyReproducesSeedExamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input func(t *testing.T) Input
		want  string
	}{
		{
			name: "never_claimed_idle after two days with step a eligible",
			input: func(t *testing.T) Input {
				since := at(t, "2026-09-29T23:39:44.004Z")
				return Input{Run: run("2026-09-29T23:39:44.004Z"), Def: def(agent("a")), Now: since.Add(172815275 * time.Millisecond)}
			},
			want: `{"kind":"never_claimed_idle","reason":"parked with no claimed step, idle","since":"2026-09-29T23:39:44.004Z","idle_ms":172815275,"evidence":{"idle_threshold_ms":86400000,"eligible_steps":["a"]}}`,
		},
		{
			name: "stale_claim on a step whose process died",
			input: func(t *testing.T) Input {
				r := run("2026-10-01T23:38:39.499Z")
				r.MarkInProgress("fetch", &record.Claim{Token: "tok", Deadline: str("2026-10-01T23:53:39.499Z"), Since: "2026-10-01T23:38:39.499Z"})
				return Input{Run: r, Def: def(agent("fetch")), Now: at(t, "2026-10-01T23:53:40.000Z")}
			},
			want: `{"kind":"stale_claim","step":"fetch","reason":"claim_stale","evidence":{"state":"claim_stale","deadline":"2026-10-01T23:53:39.499Z"}}`,
		},
		{
			name: "wedged_gate_sibling beside an open gate on another step",
			input: func(t *testing.T) Input {
				r := run("2026-10-01T23:38:41.736Z")
				r.MarkInProgress("approve", &record.Claim{Token: "g"})
				r.MarkInProgress("fetch", &record.Claim{Token: "tok", Deadline: str("2026-10-01T23:53:41.736Z")})
				r.PendingGate = &record.PendingGate{GateID: "gate-1", StepName: "approve", Choices: []string{"approve", "reject"}, OpenedAt: "2026-10-01T23:38:41.000Z"}
				return Input{Run: r, Def: def(agent("approve"), agent("fetch")), Now: at(t, "2026-10-01T23:54:00Z")}
			},
			want: `{"kind":"wedged_gate_sibling","step":"fetch","reason":"claim_stale","evidence":{"state":"claim_stale","deadline":"2026-10-01T23:53:41.736Z"}}`,
		},
		{
			name: "capability_block for a handler this server lacks",
			input: func(t *testing.T) Input {
				r := run("2026-10-01T20:15:33.944Z")
				r.CapabilityBlocks = map[string]*record.CapabilityBlock{"total": {
					Requirement: record.Requirement{Kind: "handler", Name: "order_totl"},
					Code:        "ENGINE_HANDLER_NOT_REGISTERED",
					At:          "2026-10-01T20:15:33.944Z",
				}}
				total := &workflow.Step{Name: "total", Execution: workflow.KindAuto, Handler: "order_totl"}
				return Input{Run: r, Def: def(total), Now: at(t, "2026-10-01T20:20:00Z"), Capable: func(string) bool { return false }}
			},
			want: `{"kind":"capability_block","step":"total","reason":"ENGINE_HANDLER_NOT_REGISTERED","since":"2026-10-01T20:15:33.944Z","evidence":{"requirement":{"kind":"handler","name":"order_totl"},"code":"ENGINE_HANDLER_NOT_REGISTERED"}}`,
		},
		{
			name: "gate_expired_awaiting_drive 18s after an abort expiry",
			input: func(t *testing.T) Input {
				r := run("2026-10-01T23:38:39.676Z")
				r.MarkInProgress("approve", &record.Claim{Token: "g"})
				r.PendingGate = &record.PendingGate{GateID: "60d9660a-cdf5-41b5-8c20-d1739faba3ce", StepName: "approve",
					OpenedAt: "2026-10-01T23:38:39.676Z", ExpiresAt: "2026-10-01T23:39:39.676Z", OnExpiry: "abort"}
				return Input{Run: r, Def: def(agent("approve")), Now: at(t, "2026-10-01T23:39:39.676Z").Add(18108 * time.Millisecond)}
			},
			want: `{"kind":"gate_expired_awaiting_drive","step":"approve","reason":"gate expired — awaiting enactment of the declared abort","evidence":{"gate_id":"60d9660a-cdf5-41b5-8c20-d1739faba3ce","expires_at":"2026-10-01T23:39:39.676Z","overdue_ms":18108,"disposition":"abort"}}`,
		},
		{
			name: "guard_awaiting_settlement for a guard that is the only first step",
			input: func(t *testing.T) Input {
				limit := &workflow.Step{Name: "limit", Execution: workflow.KindGuard, AbortUnless: []string{"params.amount <= 1000"}}
				return Input{Run: run("2026-10-01T23:00:00.000Z"), Def: def(limit, agent("quote", "limit")), Now: at(t, "2026-10-01T23:00:01Z")}
			},
			want: `{"kind":"guard_awaiting_settlement","step":"limit","reason":"guard 'limit' is eligible and has not been settled"}`,
		},
		{
			name: "trust_value_invalid for human_confirm from an old registration",
			input: func(t *testing.T) Input {
				r := run("2026-10-01T23:00:00.000Z")
				r.CompletedSteps = []string{"draft"}
				review := agent("review", "draft")
				review.Trust = "human_confirm"
				return Input{Run: r, Def: def(agent("draft"), review), Now: at(t, "2026-10-01T23:00:01Z")}
			},
			want: `{"kind":"trust_value_invalid","step":"review","reason":"'trust: \"human_confirm\"' is not a recognized value — the engine will refuse this step at dispatch (VALIDATION_TRUST_VALUE). Accepts auto, human_confirmed, human_reviewed; did you mean 'human_confirmed'? — correct the value and 'realm workflow register <path>'.","evidence":{"trust":"human_confirm"}}`,
		},
		{
			name: "definition_unresolvable for an agent-created workflow whose copy is gone",
			input: func(t *testing.T) Input {
				r := run("2026-10-01T23:00:00.000Z")
				r.ID, r.WorkflowID = "88620ee8-f8c1-4889-9468-a62dcb1b3c8f", "dynamic-67280ddfb5f913a2"
				return Input{Run: r, DefErr: errcode.New(errcode.StateWorkflowNotFound, "Workflow not found"), Now: at(t, "2026-10-01T23:00:01Z")}
			},
			want: `{"kind":"definition_unresolvable","reason":"Workflow 'dynamic-67280ddfb5f913a2' not found — this run's workflow was created by an agent (create_workflow) and its stored copy is gone; there is no source file to register. To end the run: realm run abandon 88620ee8-f8c1-4889-9468-a62dcb1b3c8f.","evidence":{"workflow_id":"dynamic-67280ddfb5f913a2","code":"STATE_WORKFLOW_NOT_FOUND"}}`,
		},
		{
			name: "drive_failing 17m after a connection error",
			input: func(t *testing.T) Input {
				r := run("2026-10-01T23:21:18.899Z")
				return Input{Run: r, Def: def(agent("classify")), Now: at(t, "2026-10-01T23:38:30Z"),
					DriveFailures: &DriveFailures{FirstFailedAt: "2026-10-01T23:21:18.899Z", Total: 1, Entries: []DriveFailure{{
						At: "2026-10-01T23:21:18.899Z", Step: "classify", Provider: "openai", ErrorClass: "connection_error",
						Message: "Connection error.", ElapsedMS: 912, DerivedCeilingMS: ptr(int64(1861500)),
					}}}}
			},
			want: `{"kind":"drive_failing","step":"classify","reason":"the last drive attempt failed 17m ago (connection_error): Connection error.","evidence":{"step":"classify","error_class":"connection_error","at":"2026-10-01T23:21:18.899Z","total":1,"first_failed_at":"2026-10-01T23:21:18.899Z","derived_ceiling_ms":1861500}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := Classify(tt.input(t))
			if len(fs) != 1 {
				t.Fatalf("want exactly one finding, got %v", kinds(fs))
			}
			sameJSON(t, fs[0], tt.want)
		})
	}
}

// TestInspectBlockReproducesSeedForEndedRuns renders the three ended-run
// blocks the seed prints, each from a record that yields it.
func TestInspectBlockReproducesSeedForEndedRuns(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		run  func() *record.Run
		ents []*record.Entry
		want string
	}{
		{
			name: "a cleanup step whose lease a drainer holds",
			run: func() *record.Run {
				r := run("2026-10-01T23:59:50.000Z")
				r.CompletedSteps = []string{"fetch"}
				r.Seal("complete", "", "Workflow completed.")
				r.FinalizerLedger = map[string]*record.FinalizerStatus{"release": {Status: "pending", Rank: 0, LeaseToken: "l", LeaseDeadline: "2026-10-02T00:00:20.000Z"}}
				return r
			},
			want: "Run Health (1 finding(s)):\n  terminal_pending_finalizer [release]: lease_held\n",
		},
		{
			name: "completed although fetch failed",
			run: func() *record.Run {
				r := run("2026-10-01T23:59:50.000Z")
				r.FailedSteps = []string{"fetch"}
				r.CompletedSteps = []string{"report"}
				r.Seal("complete", "", "Workflow completed.")
				return r
			},
			want: "Run Health (1 finding(s)):\n  completed_with_failed_steps: completed with 1 failed step(s): fetch — fail-triggered finalizers do not run on a completed seal unless the workflow opts into the 'completed_with_failed_steps' trigger\n",
		},
		{
			name: "strict output downgraded on a compat endpoint",
			run: func() *record.Run {
				r := run("2026-10-01T23:59:50.000Z")
				r.CompletedSteps = []string{"classify"}
				r.Seal("complete", "", "Workflow completed.")
				return r
			},
			ents: []*record.Entry{{StepID: "classify", Status: "success", Diagnostics: map[string]any{
				"structured_output": map[string]any{"requested": true, "sent": false, "downgrade_reason": "compat_endpoint", "provider": "openai"},
			}}},
			want: "Run Health (1 finding(s)):\n  structured_output_downgraded: 1 step(s) requested strict structured output but ran without it (classify: compat_endpoint) — outputs were validated post-hoc (L1), not grammar-constrained\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := InspectBlock(Classify(Input{Run: tt.run(), Def: def(agent("fetch")), Now: now, Entries: tt.ents}))
			if got != tt.want {
				t.Errorf("block\n got: %q\nwant: %q", got, tt.want)
			}
		})
	}
}

// TestClassifyFindsEachUnexampledCase covers the findings and variants the
// seed gives no JSON for, checking kind, step and reason.
func TestClassifyFindsEachUnexampledCase(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 2, 12, 0, 0, 0, time.UTC)
	recent := "2026-10-02T11:59:00.000Z"
	tests := []struct {
		name       string
		input      func() Input
		wantKind   string
		wantStep   string
		wantReason string
		wantEv     map[string]any // keys checked, when set
	}{
		{
			name: "a claim with no deadline is of unknown age from the start",
			input: func() Input {
				r := run(recent)
				r.MarkInProgress("fetch", &record.Claim{Token: "t", Since: recent})
				return Input{Run: r, Def: def(agent("fetch")), Now: now}
			},
			wantKind: KindStaleClaim, wantStep: "fetch", wantReason: "claim_unknown_age",
			wantEv: map[string]any{"state": "claim_unknown_age", "deadline": nil},
		},
		{
			name: "an in-progress step with no claim recorded is of unknown age",
			input: func() Input {
				r := run(recent)
				r.InProgressSteps = []string{"fetch"}
				return Input{Run: r, Def: def(agent("fetch")), Now: now}
			},
			wantKind: KindStaleClaim, wantStep: "fetch", wantReason: "claim_unknown_age",
		},
		{
			name: "a settle_default expiry awaits the default",
			input: func() Input {
				r := run(recent)
				r.MarkInProgress("approve", &record.Claim{Token: "g"})
				r.PendingGate = &record.PendingGate{GateID: "g1", StepName: "approve", ExpiresAt: "2026-10-02T11:59:30.000Z", OnExpiry: "settle_default", DefaultChoice: "hold"}
				return Input{Run: r, Def: def(agent("approve")), Now: now}
			},
			wantKind: KindGateExpiredAwaitingDrive, wantStep: "approve", wantReason: "gate expired — awaiting enactment of the declared default",
			wantEv: map[string]any{"disposition": "settle_default", "overdue_ms": int64(30000)},
		},
		{
			name: "a timeout without on_expiry is finding_only",
			input: func() Input {
				r := run(recent)
				r.MarkInProgress("approve", &record.Claim{Token: "g"})
				r.PendingGate = &record.PendingGate{GateID: "g1", StepName: "approve", ExpiresAt: "2026-10-02T12:00:00.000Z"}
				return Input{Run: r, Def: def(agent("approve")), Now: now}
			},
			wantKind: KindGateExpiredAwaitingDrive, wantStep: "approve",
			wantReason: "gate expired — no on_expiry is declared; it still accepts an answer",
			wantEv:     map[string]any{"disposition": "finding_only", "overdue_ms": int64(0)},
		},
		{
			name: "an adapter block stands whatever handlers this server has",
			input: func() Input {
				r := run(recent)
				r.CapabilityBlocks = map[string]*record.CapabilityBlock{"post": {Requirement: record.Requirement{Kind: "adapter", Name: "slack"}}}
				return Input{Run: r, Def: def(agent("post")), Now: now, Capable: func(string) bool { return true }}
			},
			wantKind: KindCapabilityBlock, wantStep: "post", wantReason: "ENGINE_ADAPTER_NOT_REGISTERED",
		},
		{
			name: "a registered workflow that is gone names register and abandon",
			input: func() Input {
				return Input{Run: run(recent), Now: now}
			},
			wantKind:   KindDefinitionUnresolvable,
			wantReason: "Workflow 'wf' not found — its registered copy is gone. Register it again: realm workflow register <path>. To end the run: realm run abandon run-1.",
			wantEv:     map[string]any{"code": "STATE_WORKFLOW_NOT_FOUND"},
		},
		{
			name: "a stored copy that cannot be read keeps its code",
			input: func() Input {
				return Input{Run: run(recent), Now: now, DefErr: errcode.New(errcode.StateWorkflowUnreadable, "registry folder unreadable")}
			},
			wantKind:   KindDefinitionUnresolvable,
			wantReason: "Workflow 'wf' cannot be read (registry folder unreadable) — register it again: realm workflow register <path>. To end the run: realm run abandon run-1.",
			wantEv:     map[string]any{"code": "STATE_WORKFLOW_UNREADABLE"},
		},
		{
			name: "an open gate that is also answered is corrupt",
			input: func() Input {
				r := run(recent)
				r.MarkInProgress("approve", &record.Claim{Token: "g"})
				r.PendingGate = &record.PendingGate{GateID: "g1", StepName: "approve"}
				r.ResolvedGates = map[string]*record.ResolvedGate{"g1": {Step: "approve", Choice: "approve"}}
				return Input{Run: r, Def: def(agent("approve")), Now: now}
			},
			wantKind: KindGateCorruption, wantStep: "approve",
			wantReason: "gate 'g1' on 'approve' is recorded as both answered and open — the record is inconsistent; inspect it before acting on the run",
		},
		{
			name: "an ended run still holding a gate has a stale gate",
			input: func() Input {
				r := run(recent)
				r.PendingGate = &record.PendingGate{GateID: "g1", StepName: "approve", OpenedAt: recent}
				r.Seal("complete", "", "Workflow completed.")
				return Input{Run: r, Def: def(agent("approve")), Now: now}
			},
			wantKind: KindTerminalWithStaleGate, wantStep: "approve",
			wantReason: "the run has ended but its record still holds open gate 'g1' on 'approve' — written by an older version; realm run purge removes it",
		},
		{
			name: "a finalizer never leased",
			input: func() Input {
				r := run(recent)
				r.Seal("step_failure", "", "Step 'a' failed.")
				r.FinalizerLedger = map[string]*record.FinalizerStatus{"release": {Status: "pending"}}
				return Input{Run: r, Def: def(agent("a")), Now: now}
			},
			wantKind: KindTerminalPendingFinalizer, wantStep: "release", wantReason: "never_leased",
		},
		{
			name: "a finalizer whose lease has passed",
			input: func() Input {
				r := run(recent)
				r.Seal("step_failure", "", "Step 'a' failed.")
				r.FinalizerLedger = map[string]*record.FinalizerStatus{"release": {Status: "pending", LeaseToken: "l", LeaseDeadline: "2026-10-02T11:59:59.000Z"}}
				return Input{Run: r, Def: def(agent("a")), Now: now}
			},
			wantKind: KindTerminalPendingFinalizer, wantStep: "release", wantReason: "lease_expired",
		},
		{
			name: "a tool step whose strict tool arguments were rejected mid-attempt",
			input: func() Input {
				ents := []*record.Entry{{StepID: "search", Diagnostics: map[string]any{"structured_output": map[string]any{
					"requested": true, "sent": true,
					"tool_args": map[string]any{"tools": []any{map[string]any{"name": "lookup", "dropped_mid_attempt": map[string]any{"reason": "api_rejected_schema"}}}},
				}}}}
				return Input{Run: run(recent), Def: def(agent("search")), Now: now, Entries: ents}
			},
			wantKind:   KindStructuredOutputDowngraded,
			wantReason: "1 step(s) requested strict structured output but ran without it (search: tool_args:api_rejected_schema) — outputs were validated post-hoc (L1), not grammar-constrained",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := Classify(tt.input())
			i := slices.IndexFunc(fs, func(f Finding) bool { return f.Kind == tt.wantKind })
			if i < 0 {
				t.Fatalf("no %s finding in %v", tt.wantKind, kinds(fs))
			}
			f := fs[i]
			if f.Step != tt.wantStep || f.Reason != tt.wantReason {
				t.Errorf("got step %q reason %q\nwant step %q reason %q", f.Step, f.Reason, tt.wantStep, tt.wantReason)
			}
			for k, v := range tt.wantEv {
				if got, ok := f.Evidence[k]; !ok || !reflect.DeepEqual(got, v) {
					t.Errorf("evidence[%s] = %#v, want %#v", k, got, v)
				}
			}
		})
	}
}

// TestClassifyLeavesOutWhatDoesNotApply checks the conditions that must
// keep a finding away.
func TestClassifyLeavesOutWhatDoesNotApply(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 2, 12, 0, 0, 0, time.UTC)
	recent := "2026-10-02T11:59:00.000Z"
	tests := []struct {
		name  string
		input func() Input
		kind  string
	}{
		{
			name: "a claim before its deadline is healthy",
			input: func() Input {
				r := run(recent)
				r.MarkInProgress("fetch", &record.Claim{Token: "t", Deadline: str("2026-10-02T12:15:00.000Z")})
				return Input{Run: r, Def: def(agent("fetch")), Now: now}
			},
			kind: KindStaleClaim,
		},
		{
			name: "the gate's own step is not a wedged sibling",
			input: func() Input {
				r := run(recent)
				r.MarkInProgress("approve", &record.Claim{Token: "g"})
				r.PendingGate = &record.PendingGate{GateID: "g1", StepName: "approve"}
				return Input{Run: r, Def: def(agent("approve")), Now: now}
			},
			kind: KindWedgedGateSibling,
		},
		{
			name: "a capability block this server can run is left out",
			input: func() Input {
				r := run(recent)
				r.CapabilityBlocks = map[string]*record.CapabilityBlock{"total": {Requirement: record.Requirement{Kind: "handler", Name: "order_total"}, Code: "ENGINE_HANDLER_NOT_REGISTERED"}}
				return Input{Run: r, Def: def(agent("total")), Now: now, Capable: func(h string) bool { return h == "order_total" }}
			},
			kind: KindCapabilityBlock,
		},
		{
			name: "a built-in handler is never blocked here",
			input: func() Input {
				r := run(recent)
				r.CapabilityBlocks = map[string]*record.CapabilityBlock{"check": {Requirement: record.Requirement{Kind: "handler", Name: "check_quotes"}}}
				return Input{Run: r, Def: def(agent("check")), Now: now}
			},
			kind: KindCapabilityBlock,
		},
		{
			name: "a capability block on a step that has run since is left out",
			input: func() Input {
				r := run(recent)
				r.CompletedSteps = []string{"total"}
				r.CapabilityBlocks = map[string]*record.CapabilityBlock{"total": {Requirement: record.Requirement{Kind: "handler", Name: "order_total"}}}
				return Input{Run: r, Def: def(agent("total")), Now: now}
			},
			kind: KindCapabilityBlock,
		},
		{
			name: "a gate whose time has not come is not expired",
			input: func() Input {
				r := run(recent)
				r.PendingGate = &record.PendingGate{GateID: "g1", StepName: "approve", ExpiresAt: "2026-10-02T12:00:00.001Z", OnExpiry: "abort"}
				return Input{Run: r, Def: def(agent("approve")), Now: now}
			},
			kind: KindGateExpiredAwaitingDrive,
		},
		{
			name: "a guard whose dependency is unsettled is not ready",
			input: func() Input {
				g := &workflow.Step{Name: "limit", Execution: workflow.KindGuard, DependsOn: []string{"quote"}}
				return Input{Run: run(recent), Def: def(agent("quote"), g), Now: now}
			},
			kind: KindGuardAwaitingSettlement,
		},
		{
			name: "an invalid trust on a step not yet ready is not reported",
			input: func() Input {
				review := agent("review", "draft")
				review.Trust = "human_confirm"
				return Input{Run: run(recent), Def: def(agent("draft"), review), Now: now}
			},
			kind: KindTrustValueInvalid,
		},
		{
			name: "a drive failure followed by a new claim is no longer the last event",
			input: func() Input {
				r := run(recent)
				r.MarkInProgress("classify", &record.Claim{Token: "t", Since: "2026-10-02T11:58:00.000Z"})
				return Input{Run: r, Def: def(agent("classify")), Now: now, DriveFailures: &DriveFailures{Total: 1,
					Entries: []DriveFailure{{At: "2026-10-02T11:50:00.000Z", Step: "classify", ErrorClass: "api_status"}}}}
			},
			kind: KindDriveFailing,
		},
		{
			name: "a drive failure followed by evidence is no longer the last event",
			input: func() Input {
				ents := []*record.Entry{{StepID: "classify", StartedAt: "2026-10-02T11:55:00.000Z", CompletedAt: "2026-10-02T11:55:01.000Z"}}
				return Input{Run: run(recent), Def: def(agent("classify")), Now: now, Entries: ents, DriveFailures: &DriveFailures{Total: 1,
					Entries: []DriveFailure{{At: "2026-10-02T11:50:00.000Z", Step: "classify", ErrorClass: "api_status"}}}}
			},
			kind: KindDriveFailing,
		},
		{
			name: "an outside agent's unconstrained answer is not a downgrade",
			input: func() Input {
				ents := []*record.Entry{{StepID: "classify", Diagnostics: map[string]any{"structured_output": map[string]any{"requested": true, "sent": false, "downgrade_reason": "external_agent"}}}}
				return Input{Run: run(recent), Def: def(agent("classify")), Now: now, Entries: ents}
			},
			kind: KindStructuredOutputDowngraded,
		},
		{
			name: "a later attempt sent strict clears the step",
			input: func() Input {
				ents := []*record.Entry{
					{StepID: "classify", Diagnostics: map[string]any{"structured_output": map[string]any{"requested": true, "sent": false, "downgrade_reason": "service_unavailable"}}},
					{StepID: "classify", Diagnostics: map[string]any{"structured_output": map[string]any{"requested": true, "sent": true}}},
				}
				return Input{Run: run(recent), Def: def(agent("classify")), Now: now, Entries: ents}
			},
			kind: KindStructuredOutputDowngraded,
		},
		{
			name: "a failed run with a failed step is not completed_with_failed_steps",
			input: func() Input {
				r := run(recent)
				r.FailedSteps = []string{"fetch"}
				r.Seal("step_failure", "", "Step 'fetch' failed.")
				return Input{Run: r, Def: def(agent("fetch")), Now: now}
			},
			kind: KindCompletedWithFailedSteps,
		},
		{
			name: "finalizers that finished are not owed",
			input: func() Input {
				r := run(recent)
				r.Seal("complete", "", "Workflow completed.")
				r.FinalizerLedger = map[string]*record.FinalizerStatus{"a": {Status: "completed"}, "b": {Status: "voided"}}
				return Input{Run: r, Def: def(agent("x")), Now: now}
			},
			kind: KindTerminalPendingFinalizer,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, f := range Classify(tt.input()) {
				if f.Kind == tt.kind {
					t.Errorf("unexpected %s finding: %+v", tt.kind, f)
				}
			}
		})
	}
}

// TestNeverClaimedIdleBoundary pins the 24 h threshold with an injected
// clock: idle for exactly the threshold counts, a millisecond less does not.
func TestNeverClaimedIdleBoundary(t *testing.T) {
	t.Parallel()
	last := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	zero := time.Duration(0)
	hour := time.Hour
	tests := []struct {
		name      string
		now       time.Time
		threshold *time.Duration
		want      bool
	}{
		{"a millisecond short of 24h", last.Add(24*time.Hour - time.Millisecond), nil, false},
		{"exactly 24h", last.Add(24 * time.Hour), nil, true},
		{"two days", last.Add(48 * time.Hour), nil, true},
		{"a threshold of 0m flags every idle run", last, &zero, true},
		{"a shorter threshold from --older-than", last.Add(61 * time.Minute), &hour, true},
		{"under the shorter threshold", last.Add(59 * time.Minute), &hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := run(record.FormatTime(last))
			fs := Classify(Input{Run: r, Def: def(agent("a")), Now: tt.now, IdleThreshold: tt.threshold})
			got := slices.ContainsFunc(fs, func(f Finding) bool { return f.Kind == KindNeverClaimedIdle })
			if got != tt.want {
				t.Errorf("never_claimed_idle = %v, want %v (findings %v)", got, tt.want, kinds(fs))
			}
		})
	}
}

// TestNeverClaimedIdleNeedsARunningRunWithNothingInProgress keeps the
// finding off gate-waiting runs and runs with a step in progress.
func TestNeverClaimedIdleNeedsARunningRunWithNothingInProgress(t *testing.T) {
	t.Parallel()
	old := "2026-09-01T00:00:00.000Z"
	now := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	inProgress := run(old)
	inProgress.MarkInProgress("a", &record.Claim{Token: "t", Deadline: str("2026-12-01T00:00:00.000Z")})
	gated := run(old)
	gated.PendingGate = &record.PendingGate{GateID: "g", StepName: "a"}
	for name, r := range map[string]*record.Run{"in progress": inProgress, "gate waiting": gated} {
		for _, f := range Classify(Input{Run: r, Def: def(agent("a")), Now: now}) {
			if f.Kind == KindNeverClaimedIdle {
				t.Errorf("%s: unexpected never_claimed_idle", name)
			}
		}
	}
}

func TestClassifyFindsNothingOnAHealthyRun(t *testing.T) {
	t.Parallel()
	r := run("2026-10-02T11:00:00.000Z")
	r.CompletedSteps = []string{"a"}
	r.MarkInProgress("b", &record.Claim{Token: "t", Deadline: str("2026-10-02T13:00:00.000Z"), Since: "2026-10-02T11:00:00.000Z"})
	fs := Classify(Input{Run: r, Def: def(agent("a"), agent("b", "a")), Now: time.Date(2026, 10, 2, 12, 0, 0, 0, time.UTC)})
	if len(fs) != 0 {
		t.Errorf("want no findings, got %v", kinds(fs))
	}
	if got := InspectBlock(fs); got != "" {
		t.Errorf("InspectBlock of no findings = %q, want empty", got)
	}
	if got := Stuck(Input{Run: r, Def: def(agent("a")), Now: time.Date(2026, 10, 2, 12, 0, 0, 0, time.UTC)}); len(got) != 0 {
		t.Errorf("a healthy run is not stuck, got %v", got)
	}
}

func TestClassifyOfNoRunIsEmpty(t *testing.T) {
	t.Parallel()
	if fs := Classify(Input{}); fs != nil {
		t.Errorf("got %v", fs)
	}
	if ls := Stuck(Input{}); ls != nil {
		t.Errorf("got %v", ls)
	}
}

// TestClassifyOrdersFindingsByCatalogueThenStep puts several findings in one
// open run and checks their order.
func TestClassifyOrdersFindingsByCatalogueThenStep(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 2, 12, 0, 0, 0, time.UTC)
	r := run("2026-10-02T11:00:00.000Z")
	// In the record, b was claimed before a; the workflow lists a first.
	r.MarkInProgress("b", &record.Claim{Token: "t"})
	r.MarkInProgress("a", &record.Claim{Token: "t", Deadline: str("2026-10-02T11:30:00.000Z")})
	r.CapabilityBlocks = map[string]*record.CapabilityBlock{
		"z": {Requirement: record.Requirement{Kind: "handler", Name: "hz"}},
		"c": {Requirement: record.Requirement{Kind: "handler", Name: "hc"}},
	}
	g := &workflow.Step{Name: "g", Execution: workflow.KindGuard}
	bad := agent("t")
	bad.Trust = "Auto"
	ents := []*record.Entry{{StepID: "a", StartedAt: "2026-10-02T10:00:00.000Z", Diagnostics: map[string]any{"structured_output": map[string]any{"requested": true, "sent": false, "downgrade_reason": "gate_ineligible"}}}}
	fs := Classify(Input{Run: r, Def: def(agent("a"), agent("b"), agent("z"), agent("c"), g, bad), Now: now, Entries: ents})
	want := []string{
		KindStaleClaim + "/a", KindStaleClaim + "/b",
		KindCapabilityBlock + "/z", KindCapabilityBlock + "/c",
		KindGuardAwaitingSettlement + "/g",
		KindTrustValueInvalid + "/t",
		KindStructuredOutputDowngraded + "/",
	}
	if got := kinds(fs); !slices.Equal(got, want) {
		t.Errorf("order\n got: %v\nwant: %v", got, want)
	}
	if r := fs[5].Reason; !strings.Contains(r, "did you mean 'auto'?") {
		t.Errorf("trust reason lacks the suggestion: %s", r)
	}
}

// TestClassifyOnEndedRuns checks which findings an ended run can have: the
// three about ended runs and structured_output_downgraded, never the ones
// about open runs, even when the record still shows their causes.
func TestClassifyOnEndedRuns(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 2, 12, 0, 0, 0, time.UTC)
	r := run("2026-09-01T00:00:00.000Z") // old enough to be idle
	r.CompletedSteps = []string{"a"}
	r.FailedSteps = []string{"b"}
	r.InProgressSteps = []string{"c"} // an unknown-age claim left behind
	r.CapabilityBlocks = map[string]*record.CapabilityBlock{"d": {Requirement: record.Requirement{Kind: "handler", Name: "hd"}}}
	r.PendingGate = &record.PendingGate{GateID: "g1", StepName: "e", ExpiresAt: "2026-09-01T00:01:00.000Z", OnExpiry: "abort"}
	r.ResolvedGates = map[string]*record.ResolvedGate{"g1": {Step: "e"}}
	r.Seal("complete", "", "Workflow completed.")
	r.FinalizerLedger = map[string]*record.FinalizerStatus{"second": {Status: "pending", Rank: 1}, "first": {Status: "pending", Rank: 0}}
	ents := []*record.Entry{{StepID: "a", Diagnostics: map[string]any{"structured_output": map[string]any{"requested": true, "sent": false, "downgrade_reason": "compat_endpoint"}}}}
	guard := &workflow.Step{Name: "guard", Execution: workflow.KindGuard}
	in := Input{Run: r, Now: now, Entries: ents, // no definition: unresolvable, were the run open
		DriveFailures: &DriveFailures{Total: 1, Entries: []DriveFailure{{At: "2026-10-02T11:00:00.000Z", Step: "a", ErrorClass: "other"}}}}
	want := []string{
		KindStructuredOutputDowngraded + "/",
		KindTerminalPendingFinalizer + "/first", KindTerminalPendingFinalizer + "/second",
		KindCompletedWithFailedSteps + "/",
		KindTerminalWithStaleGate + "/e",
	}
	if got := kinds(Classify(in)); !slices.Equal(got, want) {
		t.Errorf("ended run\n got: %v\nwant: %v", got, want)
	}
	in.Def = def(agent("a"), agent("b"), agent("c"), agent("d"), guard)
	if got := kinds(Classify(in)); !slices.Equal(got, want) {
		t.Errorf("ended run with its definition\n got: %v\nwant: %v", got, want)
	}

	// The same record, open again, has the open-run findings and not the
	// ended-run ones.
	open := r.Clone()
	open.SealedBy, open.TerminalState = nil, false
	open.FailedSteps = []string{}
	got := kinds(Classify(Input{Run: open, Def: in.Def, Now: now, Entries: ents}))
	for _, k := range []string{KindTerminalPendingFinalizer + "/first", KindTerminalWithStaleGate + "/e", KindCompletedWithFailedSteps + "/"} {
		if slices.Contains(got, k) {
			t.Errorf("open run has ended-run finding %s: %v", k, got)
		}
	}
	for _, k := range []string{KindWedgedGateSibling + "/c", KindCapabilityBlock + "/d", KindGateExpiredAwaitingDrive + "/e", KindGateCorruption + "/e", KindStructuredOutputDowngraded + "/"} {
		if !slices.Contains(got, k) {
			t.Errorf("open run lacks %s: %v", k, got)
		}
	}
}

func TestFindingJSONRoundTrips(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 10, 1, 20, 15, 33, 944_000_000, time.UTC)
	f := Finding{Kind: KindCapabilityBlock, Step: "total", Reason: "X", Since: &since, Evidence: map[string]any{"code": "X"}}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"kind":"capability_block","step":"total","reason":"X","since":"2026-10-01T20:15:33.944Z","evidence":{"code":"X"}}`; string(b) != want {
		t.Errorf("marshal\n got: %s\nwant: %s", b, want)
	}
	var back Finding
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Since == nil || !back.Since.Equal(since) || back.Kind != f.Kind || back.Step != f.Step {
		t.Errorf("round trip = %+v", back)
	}
	bare, _ := json.Marshal(Finding{Kind: KindGuardAwaitingSettlement, Reason: "r"})
	if string(bare) != `{"kind":"guard_awaiting_settlement","reason":"r"}` {
		t.Errorf("optional fields not left out: %s", bare)
	}
}

func TestSuggestTrust(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"human_confirm", "human_confirmed"},
		{"human_review", "human_reviewed"},
		{"Auto", "auto"},
		{"reviewed", "human_reviewed"},
		{"human", ""}, // both human_* contain it: no single guess
		{"manual", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := suggestTrust(tt.in); got != tt.want {
			t.Errorf("suggestTrust(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := trustReason("manual"); got != `'trust: "manual"' is not a recognized value — the engine will refuse this step at dispatch (VALIDATION_TRUST_VALUE). Accepts auto, human_confirmed, human_reviewed — correct the value and 'realm workflow register <path>'.` {
		t.Errorf("reason without a suggestion: %s", got)
	}
}

func TestAge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0m"},
		{59 * time.Second, "0m"},
		{17*time.Minute + 11*time.Second, "17m"},
		{89 * time.Minute, "1h 29m"},
		{48*time.Hour + 5*time.Minute, "2d 0h"},
		{-time.Minute, "0m"},
	}
	for _, tt := range tests {
		if got := Age(tt.d); got != tt.want {
			t.Errorf("Age(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestReadyFollowsTriggerRules(t *testing.T) {
	t.Parallel()
	r := run("2026-10-02T11:00:00.000Z")
	r.CompletedSteps = []string{"ok"}
	r.FailedSteps = []string{"bad"}
	r.SkippedSteps = []string{"skip"}
	tests := []struct {
		rule string
		deps []string
		want bool
	}{
		{workflow.RuleAllSuccess, []string{"ok"}, true},
		{workflow.RuleAllSuccess, []string{"ok", "bad"}, false},
		{workflow.RuleAllSuccess, []string{"ok", "open"}, false},
		{workflow.RuleAllFailed, []string{"bad"}, true},
		{workflow.RuleAllFailed, []string{"bad", "ok"}, false},
		{workflow.RuleAllDone, []string{"ok", "bad", "skip"}, true},
		{workflow.RuleOneFailed, []string{"ok", "bad"}, true},
		{workflow.RuleOneFailed, []string{"ok"}, false},
		{workflow.RuleOneSuccess, []string{"ok", "bad"}, true},
		{workflow.RuleOneSuccess, []string{"bad", "skip"}, false},
		{workflow.RuleNoneFailed, []string{"ok", "skip"}, true},
		{workflow.RuleNoneFailed, []string{"bad"}, false},
		{"no_such_rule", nil, false},
	}
	for _, tt := range tests {
		s := &workflow.Step{Name: "x", Execution: workflow.KindAgent, TriggerRule: tt.rule, DependsOn: tt.deps}
		if got := ready(r, s); got != tt.want {
			t.Errorf("ready(%s %v) = %v, want %v", tt.rule, tt.deps, got, tt.want)
		}
	}
	if ready(r, &workflow.Step{Name: "ok", Execution: workflow.KindAgent}) {
		t.Error("a completed step is not ready")
	}
	if ready(r, &workflow.Step{Name: "f", Execution: workflow.KindFinalizer}) {
		t.Error("a finalizer is never ready on an open run")
	}
}

func TestKindsAreTheFourteenOfTheSeed(t *testing.T) {
	t.Parallel()
	ks := Kinds()
	if len(ks) != 14 {
		t.Fatalf("want 14 kinds, got %d", len(ks))
	}
	seen := map[string]bool{}
	for _, k := range ks {
		if seen[k] {
			t.Errorf("duplicate kind %s", k)
		}
		seen[k] = true
	}
}
