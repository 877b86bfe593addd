package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/workflow"
)

// These tests decide on an in-memory transaction: no store, no registry,
// no gRPC. They pin evaluation, advancing, the state view and seal
// classification where the server tests reach them only end to end.

var testNow = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

// setup compiles a workflow and begins a transaction on a new run of it.
func setup(t *testing.T, src string) *txn {
	t.Helper()
	def, rep := workflow.Load([]byte(src), workflow.LoadOptions{Path: "test.yaml"})
	if def == nil || !rep.Valid {
		t.Fatalf("workflow does not load: %v", rep.Errors)
	}
	b, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	c, err := compile(&store.WorkflowRecord{ID: def.ID, Version: 1, Definition: b})
	if err != nil {
		t.Fatal(err)
	}
	r := &record.Run{ID: "r1", WorkflowID: def.ID}
	r.Normalize()
	e := &Engine{st: emptyEvidence{}, log: slog.New(slog.DiscardHandler)}
	return &txn{e: e, snap: snap{run: r, def: c, outputs: map[string]any{}, traces: map[string][]byte{}, now: testNow, base: &store.Snapshot{}}}
}

// emptyEvidence is a store whose runs have no evidence yet; nothing else
// of it is called while deciding.
type emptyEvidence struct{ store.Store }

func (emptyEvidence) Evidence(context.Context, string, int64, int64) ([][]byte, error) {
	return nil, nil
}

// settle records steps as the given states before a decision.
func settle(t *txn, states map[string]string) {
	for step, st := range states {
		switch st {
		case record.StateCompleted:
			t.run.MarkCompleted(step, &record.Settled{Outcome: "complete"})
			t.outputs[step] = map[string]any{}
		case record.StateFailed:
			t.run.MarkFailed(step, "boom", &record.Settled{Outcome: "fail"})
		case record.StateSkipped:
			t.run.MarkSkipped(step, &record.SkipDetail{Kind: "when_false"})
		}
	}
}

const twoParents = `id: rules
name: Rules
version: 1
steps:
  a: {description: A., execution: agent}
  b: {description: B., execution: agent}
  c: {description: C., execution: agent, depends_on: [a, b], trigger_rule: %s}
`

func TestEvaluateAppliesTriggerRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		rule      string
		states    map[string]string
		want      readiness
		blockedBy string
	}{
		{"all_success waits for both", "all_success", map[string]string{"a": "completed"}, waiting, ""},
		{"all_success runs when both completed", "all_success", map[string]string{"a": "completed", "b": "completed"}, ready, ""},
		{"all_success skips at the first failure, without waiting", "all_success", map[string]string{"b": "failed"}, skipNow, "b"},
		{"none_failed runs after a skip", "none_failed", map[string]string{"a": "completed", "b": "skipped"}, ready, ""},
		{"one_failed skips when none failed", "one_failed", map[string]string{"a": "completed", "b": "completed"}, skipNow, "b"},
		{"one_failed runs when one failed", "one_failed", map[string]string{"a": "completed", "b": "failed"}, ready, ""},
		{"all_done runs whatever settled", "all_done", map[string]string{"a": "failed", "b": "skipped"}, ready, ""},
		{"one_success skips when none completed", "one_success", map[string]string{"a": "failed", "b": "skipped"}, skipNow, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tx := setup(t, strings.Replace(twoParents, "%s", tt.rule, 1))
			settle(tx, tt.states)
			got, skip := tx.evaluate(tx.stepOf("c"))
			if got != tt.want {
				t.Fatalf("evaluate = %v, want %v", got, tt.want)
			}
			if tt.want == skipNow {
				if skip.Kind != "trigger_rule_unsatisfiable" || skip.Rule != tt.rule || skip.BlockingDeps[0].Step != tt.blockedBy {
					t.Errorf("skip = %+v", skip)
				}
			}
		})
	}
}

func TestEvaluateSkipsOnAFalseWhenAndNamesTheLeaf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		output   any
		want     readiness
		wantExpr string
	}{
		{"a true condition runs", map[string]any{"choice": "send", "n": 3.0}, ready, ""},
		{"the failing leaf of several is named", map[string]any{"choice": "send", "n": 1.0}, skipNow, "pick.n > 2"},
		{"a missing value skips", map[string]any{}, skipNow, "pick.choice == 'send'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tx := setup(t, `id: when
name: When
version: 1
steps:
  pick: {description: Pick., execution: agent}
  send:
    description: Send.
    execution: agent
    depends_on: [pick]
    when: ["pick.choice == 'send'", "pick.n > 2"]
`)
			tx.run.MarkCompleted("pick", nil)
			tx.outputs["pick"] = tt.output
			got, skip := tx.evaluate(tx.stepOf("send"))
			if got != tt.want {
				t.Fatalf("evaluate = %v, want %v", got, tt.want)
			}
			if tt.want == skipNow && (skip.Kind != "when_false" || skip.Expression != tt.wantExpr) {
				t.Errorf("skip = %+v, want expression %q", skip, tt.wantExpr)
			}
		})
	}
}

const chain = `id: chain
name: Chain
version: 1
steps:
  first: {description: First., execution: auto}
  check:
    description: Check.
    execution: guard
    depends_on: [first]
    abort_unless: 'first.n <= %s'
    abort_message: Too many.
  last: {description: Last., execution: auto, depends_on: [check]}
`

func TestAdvanceRunsPassThroughStepsAndDecidesGuards(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		limit      string
		wantPhase  string
		wantArm    record.Arm
		wantChain  []string
		wantGuards []guardOutcome
	}{
		{"a passing guard lets the chain complete the run", "5", record.PhaseCompleted, record.ArmComplete, []string{"first", "check", "last"}, []guardOutcome{{"check", "pass"}}},
		{"an aborting guard ends the run and skips the rest", "1", record.PhaseAborted, record.ArmGuardAbort, []string{"first", "check"}, []guardOutcome{{"check", "abort"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tx := setup(t, strings.Replace(chain, "%s", tt.limit, 1))
			tx.run.Params = map[string]any{"n": 3.0}
			tx.advance(advanceOpts{decideGuards: true, chain: true})
			if got := tx.run.Phase(); got != tt.wantPhase {
				t.Fatalf("phase = %s, want %s", got, tt.wantPhase)
			}
			if tx.run.SealedBy == nil || tx.run.SealedBy.Arm != tt.wantArm {
				t.Errorf("sealed by %+v, want %s", tx.run.SealedBy, tt.wantArm)
			}
			var chained []string
			for _, c := range tx.chained {
				chained = append(chained, c.step)
			}
			if !slices.Equal(chained, tt.wantChain) || !slices.Equal(tx.guards, tt.wantGuards) {
				t.Errorf("chained %v guards %v, want %v %v", chained, tx.guards, tt.wantChain, tt.wantGuards)
			}
			if !tx.dirty || len(tx.evidence) != len(tt.wantChain) {
				t.Errorf("dirty %v with %d evidence entries", tx.dirty, len(tx.evidence))
			}
		})
	}
}

func TestAdvanceWithoutChainingOwesAutoSteps(t *testing.T) {
	t.Parallel()
	tx := setup(t, strings.Replace(chain, "%s", "5", 1))
	tx.advance(advanceOpts{decideGuards: true})
	if tx.run.Terminal() || len(tx.run.CompletedSteps) != 0 || tx.dirty {
		t.Fatalf("advance without chain ran something: %+v", tx.run)
	}
	v := tx.view()
	if len(v.owed) != 1 || v.owed[0].Name != "first" || len(v.agents) != 0 {
		t.Errorf("view = %+v", v)
	}
}

func TestAdvanceBlocksAHandlerNoRunnerServes(t *testing.T) {
	t.Parallel()
	tx := setup(t, `id: blocked
name: Blocked
version: 1
steps:
  work: {description: Work., execution: auto, handler: later}
`)
	tx.advance(advanceOpts{decideGuards: true, chain: true})
	b := tx.run.CapabilityBlocks["work"]
	if b == nil || b.Requirement != (record.Requirement{Kind: record.RequireHandler, Name: "later"}) || b.Code != "ENGINE_HANDLER_NOT_REGISTERED" {
		t.Fatalf("capability block = %+v", b)
	}
	if tx.run.Terminal() || len(tx.dispatch) != 0 || len(tx.blocked) != 1 {
		t.Errorf("run %s, dispatch %v, blocked %v", tx.run.Phase(), tx.dispatch, tx.blocked)
	}
	v := tx.view()
	if !v.blockedOnCapability() || len(v.refused) != 1 {
		t.Fatalf("view = %+v", v)
	}
	want := "'work' cannot run here (capability): handler 'later' is not registered here — load the missing extension, or run the step on a runner that has it."
	if got := v.refused[0].sentence(); got != want {
		t.Errorf("sentence = %q", got)
	}
	if got := tx.nextStatus(v, tx.nextActions(v)); got != "blocked_on_capability" {
		t.Errorf("next_actions_status = %s", got)
	}
}

func TestViewSortsReadyStepsAndRefusals(t *testing.T) {
	t.Parallel()
	tx := setup(t, `id: view
name: View
version: 1
params_schema: {type: object}
steps:
  ask: {description: Ask., execution: agent}
  gated:
    description: Gated.
    execution: agent
    preconditions: ["run.params.ok == true"]
  bare: {description: Bare., execution: auto}
  guard: {description: Guard., execution: guard, depends_on: [ask], abort_unless: 'ask.ok == true'}
`)
	tx.run.Params = map[string]any{"ok": true} // a precondition never reads params: it resolves null
	v := tx.view()
	var agents, owed []string
	for _, s := range v.agents {
		agents = append(agents, s.Name)
	}
	for _, s := range v.owed {
		owed = append(owed, s.Name)
	}
	if !slices.Equal(agents, []string{"ask"}) || !slices.Equal(owed, []string{"bare"}) {
		t.Fatalf("agents %v owed %v", agents, owed)
	}
	if len(v.refused) != 1 || v.refused[0].check != checkPrecondition || v.refused[0].why != "Precondition failed: 'run.params.ok == true'. Resolved value: null" {
		t.Fatalf("refused = %+v", *v.refused[0])
	}
	if got, want := tx.whatNext(v), "Ready for the agent: 'ask'. Owed to the engine: 'bare' — call advance_run. 'gated' cannot run (precondition): Precondition failed: 'run.params.ok == true'. Resolved value: null."; got != want {
		t.Errorf("whatNext = %q\nwant        %q", got, want)
	}
	if got := tx.nextStatus(v, tx.nextActions(v)); got != "ok" {
		t.Errorf("next_actions_status = %s", got)
	}
	if a := tx.nextActions(v); len(a) != 2 || !slices.Equal(a[1].GetOwedSteps(), []string{"bare"}) {
		t.Errorf("next_actions = %v", a)
	}
}

func TestStateExtraShowsRefusalsAsFields(t *testing.T) {
	t.Parallel()
	tx := setup(t, `id: extra
name: Extra
version: 1
steps:
  work: {description: Work., execution: auto, handler: later}
  ask:
    description: Ask.
    execution: agent
    preconditions: ["run.params.ok == true"]
`)
	x := tx.stateExtra(t.Context(), false)
	runnable := x["engine_runnable"].([]any)[0].(map[string]any)
	if runnable["refused_by"] != "capability" || runnable["refusal"] != "handler 'later' is not registered here" || runnable["basis"] != "registry" || runnable["runnable_here"] != false {
		t.Errorf("engine_runnable = %v", runnable)
	}
	refused := x["agent_refused"].([]any)[0].(map[string]any)
	if refused["refused_by"] != "precondition" || refused["refusal"] != "Precondition failed: 'run.params.ok == true'. Resolved value: null" {
		t.Errorf("agent_refused = %v", refused)
	}
}

func TestUncallableClausesKeepTheSeedWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		u                 uncallable
		clause, afterStep string
	}{
		{uncallable{kind: callCompleted}, "it has already completed", "has already completed"},
		{uncallable{kind: callQuestionOpen, choices: []string{"yes", "no"}}, "its question is open (choices: yes, no) — answer it with submit_human_response", "its question is open (choices: yes, no) — answer it with submit_human_response"},
		{uncallable{kind: callWaitsQuestion, gateStep: "g", choices: []string{"ok"}}, "it waits on the question on step 'g' (choices: ok) — answer it with submit_human_response", "waits on the question on step 'g' (choices: ok) — answer it with submit_human_response"},
		{uncallable{kind: callWaiting, open: []*workflow.Step{{Name: "a"}, {Name: "b"}}}, "its dependencies are not settled: 'a', 'b'", "its dependencies are not settled: 'a', 'b'"},
		{uncallable{kind: callRunEnded, runID: "r1", phase: "failed"}, "run 'r1' is already terminal (failed)", "run 'r1' is already terminal (failed)"},
	}
	for _, tt := range tests {
		t.Run(tt.clause, func(t *testing.T) {
			t.Parallel()
			if got := tt.u.clause(); got != tt.clause {
				t.Errorf("clause = %q", got)
			}
			if got := tt.u.afterStep(); got != tt.afterStep {
				t.Errorf("afterStep = %q", got)
			}
		})
	}
}

func TestProofWarningsAndTheirFacts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		proof, cause string
		passed       bool
		full, fact   string
	}{
		{"absent", "", false, "No claim_token was passed; the answer was recorded. Only the conversation that opened the question has one to pass.", "No claim_token was passed."},
		{"unverifiable", "no_claim", true, "The claim_token passed could not be checked (no_claim); the answer was recorded.", "The claim_token passed could not be checked (no_claim)."},
		{"spent", "expired", true, "The claim_token passed belongs to a question already settled (expired); this call recorded nothing.", "The claim_token passed belongs to a question already settled (expired)."},
		{"spent", "expired", false, "", ""},
		{"matched", "", true, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.proof+"/"+tt.cause, func(t *testing.T) {
			t.Parallel()
			if got := proofWarning(tt.proof, tt.cause, tt.passed); got != tt.full {
				t.Errorf("warning = %q", got)
			}
			if got := proofFact(tt.proof, tt.cause, tt.passed); got != tt.fact {
				t.Errorf("fact = %q", got)
			}
		})
	}
}

func TestEffectsMergeAddsTheChainAndKeepsTheFirstWritesBlocks(t *testing.T) {
	t.Parallel()
	first := effects{warnings: []string{"w1"}, expiryLine: "x", blocked: []*workflow.Step{{Name: "b"}}}
	first.chain("a")
	later := effects{warnings: []string{"w2"}, lastAuto: "c", endedBy: &ending{arm: record.ArmGuardAbort, step: "g"}, guards: []guardOutcome{{"g", "abort"}}, blocked: []*workflow.Step{{Name: "z"}}}
	later.chain("c", "careful")
	first.merge(&later)
	if len(first.chained) != 2 || !first.hasChained || first.lastAuto != "c" || first.endedBy.step != "g" {
		t.Errorf("merged chain = %+v", first)
	}
	if !slices.Equal(first.warnings, []string{"w1", "w2"}) || len(first.blocked) != 1 || first.expiryLine != "x" {
		t.Errorf("merged warnings %v blocked %v expiry %q", first.warnings, first.blocked, first.expiryLine)
	}
	run := &record.Run{}
	run.Seal(record.ArmGuardAbort, "g", "")
	got := first.chainedReply(run)
	if got[0].GetRunPhase().String() != "RUN_PHASE_RUNNING" || got[1].GetRunPhase().String() != "RUN_PHASE_ABORTED" || got[1].GetWarnings()[0] != "careful" {
		t.Errorf("chained reply = %v", got)
	}
}

func TestClassifySealReadsLegacyRecords(t *testing.T) {
	t.Parallel()
	ended := func(f func(r *record.Run)) *record.Run {
		r := &record.Run{TerminalState: true}
		f(r)
		return r
	}
	tests := []struct {
		name     string
		run      *record.Run
		wantArm  record.Arm
		wantStep string
		wantWhy  string
	}{
		{"a completed run", ended(func(r *record.Run) { r.TerminalReason = "Workflow completed." }), record.ArmComplete, "", ""},
		{"an abandoned run", ended(func(r *record.Run) { r.AbandonedAt = "2026-01-01T00:00:00.000Z" }), record.ArmAbandonRequested, "", ""},
		{"a cleanup sweep", ended(func(r *record.Run) {
			r.AbandonedAt, r.TerminalReason = "2026-01-01T00:00:00.000Z", "Marked abandoned by realm cleanup"
		}), record.ArmCleanupSweep, "", ""},
		{"a guard abort", ended(func(r *record.Run) {
			r.AbortedAt = &record.AbortedAt{StepID: "g", Conditions: []record.ConditionEval{{Condition: "x"}}}
		}), record.ArmGuardAbort, "g", ""},
		{"a handler abort", ended(func(r *record.Run) {
			r.AbortedAt, r.TerminalReason = &record.AbortedAt{StepID: "h"}, "Handler 'h' aborted the run: no"
		}), record.ArmHandlerAbort, "h", ""},
		{"a gate expiry abort", ended(func(r *record.Run) {
			r.AbortedAt, r.TerminalReason = &record.AbortedAt{StepID: "q"}, "Gate 'q' expired and the run aborted per the workflow's declared on_expiry."
		}), record.ArmGateExpiryAbort, "q", ""},
		{"a failed step", ended(func(r *record.Run) { r.FailedSteps, r.TerminalReason = []string{"s"}, "Step 's' failed: x" }), record.ArmStepFailure, "", ""},
		{"a spawn failure", ended(func(r *record.Run) {
			r.FailedSteps, r.TerminalReason = []string{}, "spawn_failure: no driver"
		}), "", "", "the record suggests 'spawn_failure', which would change its phase 'completed'"},
		{"an unknown reason", ended(func(r *record.Run) { r.TerminalReason = "who knows" }), "", "", "ended with reason 'who knows', which names no arm"},
		{"an abort that names nothing", ended(func(r *record.Run) { r.AbortedAt = &record.AbortedAt{StepID: "x"} }), "", "", "aborted, but the record names neither a guard, a handler nor a gate expiry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			seal, why := classifySeal(tt.run)
			if why != tt.wantWhy {
				t.Fatalf("why = %q, want %q", why, tt.wantWhy)
			}
			if tt.wantArm == "" {
				if seal != nil {
					t.Errorf("seal = %+v, want none", seal)
				}
				return
			}
			if seal == nil || seal.Arm != tt.wantArm || seal.Step != tt.wantStep {
				t.Errorf("seal = %+v, want %s (%s)", seal, tt.wantArm, tt.wantStep)
			}
		})
	}
}

func TestCheckSealSortsSealedRecords(t *testing.T) {
	t.Parallel()
	sealed := func(arm record.Arm, f func(r *record.Run)) *record.Run {
		r := &record.Run{}
		r.Seal(arm, "", "")
		if f != nil {
			f(r)
		}
		return r
	}
	tests := []struct {
		name   string
		run    *record.Run
		bucket sealBucket
		note   string
	}{
		{"a completion agrees", sealed(record.ArmComplete, nil), sealAgreeing, ""},
		{"a ruling is never rechecked", sealed(record.ArmComplete, func(r *record.Run) { r.SealedBy.Adjudicated = &record.Adjudication{By: "op"} }), sealRuled, ""},
		{"an unknown arm is incoherent", sealed("mystery", nil), sealIncoherent, "unknown arm"},
		{"an abandon without abandoned_at", sealed(record.ArmAbandonRequested, nil), sealIncoherent, "abandoned arm without abandoned_at"},
		{"a guard abort without aborted_at", sealed(record.ArmGuardAbort, nil), sealIncoherent, "aborted arm without aborted_at"},
		{"a gate expiry abort needs no aborted_at", sealed(record.ArmGateExpiryAbort, nil), sealAgreeing, ""},
		{"a spawn failure cannot be confirmed", sealed(record.ArmSpawnFailure, nil), sealUnverifiable, ""},
		{"a step failure without a failed step", sealed(record.ArmStepFailure, nil), sealIncoherent, "step_failure without a failed step"},
		{"a completion on an aborted record", sealed(record.ArmComplete, func(r *record.Run) { r.AbortedAt = &record.AbortedAt{} }), sealIncoherent, "completed arm on an abandoned or aborted record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if bucket, note := checkSeal(tt.run); bucket != tt.bucket || note != tt.note {
				t.Errorf("checkSeal = %s %q, want %s %q", bucket, note, tt.bucket, tt.note)
			}
		})
	}
}

func TestArmsNameTheirStepOnlyForGuardsGatesAndHandlerAborts(t *testing.T) {
	t.Parallel()
	for arm := range record.ArmPhase {
		want := strings.HasPrefix(string(arm), "guard_") || strings.HasPrefix(string(arm), "gate_") || arm == record.ArmHandlerAbort
		if got := arm.NamesStep(); got != want {
			t.Errorf("%s.NamesStep() = %v, want %v", arm, got, want)
		}
	}
}
