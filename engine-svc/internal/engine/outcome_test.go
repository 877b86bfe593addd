package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// These tests pin the typed outcomes of the operator verbs (abandon,
// resume, reclaim, release, append_trace) and the replies composed from
// them, and that a decision leaves the snapshot it was read from alone.

const operated = `id: ops
name: Ops
version: 1
steps:
  a: {description: A., execution: agent}
  b: {description: B., execution: agent, depends_on: [a]}
  c: {description: C., execution: auto, depends_on: [a]}
  d: {description: D., execution: agent}
`

func deadline(at time.Time) *string { s := record.FormatTime(at); return &s }

func TestAbandonDecides(t *testing.T) {
	t.Parallel()
	gate := &record.PendingGate{GateID: "g1", StepName: "a", Choices: []string{"yes", "no"}}
	tests := []struct {
		name   string
		prep   func(r *record.Run)
		idle   time.Duration
		want   abandonedKind
		arm    record.Arm
		reason string
	}{
		{"an open run is ended by the operator", func(r *record.Run) {
			r.MarkInProgress("a", &record.Claim{Token: "t"})
		}, 0, abandonDone, record.ArmAbandonRequested, "Abandoned via abandon_run"},
		{"an abandoned run is left as it is", func(r *record.Run) {
			r.AbandonedAt = record.FormatTime(testNow)
			r.TerminalReason = "earlier"
		}, 0, abandonAlready, "", "earlier"},
		{"a completed run is refused", func(r *record.Run) { r.Seal(record.ArmComplete, "", "") }, 0, abandonEnded, "", ""},
		{"an open question is answered first", func(r *record.Run) { r.PendingGate = gate }, 0, abandonGateOpen, "", ""},
		{"cleanup skips a run waiting on a gate", func(r *record.Run) { r.PendingGate = gate }, time.Hour, abandonCleanupGate, "", ""},
		{"cleanup leaves a run written within the threshold", func(r *record.Run) {
			r.UpdatedAt = record.FormatTime(testNow.Add(-time.Minute))
		}, time.Hour, abandonCleanupFresh, "", ""},
		{"cleanup ends an idle run with its own arm", func(r *record.Run) {
			r.UpdatedAt = record.FormatTime(testNow.Add(-2 * time.Hour))
		}, time.Hour, abandonDone, record.ArmCleanupSweep, "Marked abandoned by realm cleanup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tx := setup(t, operated)
			tt.prep(tx.run)
			out := tx.abandon("", tt.idle)
			if out.kind != tt.want || out.reason != tt.reason {
				t.Fatalf("abandon = %+v, want kind %v reason %q", out, tt.want, tt.reason)
			}
			if wrote := tt.want == abandonDone; tx.dirty != wrote {
				t.Fatalf("dirty = %v, want %v", tx.dirty, wrote)
			}
			if tt.want != abandonDone {
				return
			}
			r := tx.run
			if r.SealedBy.Arm != tt.arm || r.Phase() != record.PhaseAbandoned || len(r.InProgressSteps) != 0 || len(r.Claims) != 0 {
				t.Errorf("run = sealed %+v phase %s in progress %v claims %v", r.SealedBy, r.Phase(), r.InProgressSteps, r.Claims)
			}
		})
	}
}

func TestAbandonReplyRendersEachDecision(t *testing.T) {
	t.Parallel()
	gate := &record.PendingGate{GateID: "g1", StepName: "a", Choices: []string{"yes", "no"}}
	tests := []struct {
		name    string
		out     abandoned
		channel realmv1.Channel
		code    errcode.Code
		msg     string
		action  realmv1.AgentAction
		note    string
	}{
		{name: "ended", out: abandoned{kind: abandonDone, runID: "r1", phase: record.PhaseAbandoned, reason: "why"}, note: abandonNote},
		{name: "already", out: abandoned{kind: abandonAlready, runID: "r1", phase: record.PhaseAbandoned, reason: "earlier"},
			note: "already abandoned (no change this call). " + abandonNote},
		{name: "terminal", out: abandoned{kind: abandonEnded, runID: "r1", phase: record.PhaseCompleted}, code: errcode.StateRunTerminal,
			msg: "Run 'r1' is already terminal (completed); cannot abandon a finished run.", action: realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER},
		{name: "cleanup gate", out: abandoned{kind: abandonCleanupGate, runID: "r1"}, code: errcode.StateTransitionDenied,
			msg: "Run 'r1' is waiting on a gate; cleanup skips gate_waiting runs."},
		{name: "cleanup fresh", out: abandoned{kind: abandonCleanupFresh, runID: "r1", updatedAt: "2026-10-01T11:59:00Z"}, code: errcode.StateTransitionDenied,
			msg: "Run 'r1' was written at 2026-10-01T11:59:00Z, within the idle threshold; cleanup leaves it."},
		{name: "gate over MCP", out: abandoned{kind: abandonGateOpen, runID: "r1", gate: gate}, code: errcode.StateTransitionDenied,
			msg: "Run 'r1' is waiting on human gate 'a' (gate 'g1'); answer it before abandoning. Answer it: submit_human_response {run_id: 'r1', gate_id: 'g1', choice: <one of: yes, no>}."},
		{name: "gate from the CLI", out: abandoned{kind: abandonGateOpen, runID: "r1", gate: gate}, channel: realmv1.Channel_CHANNEL_RUN, code: errcode.StateTransitionDenied,
			msg: "Run 'r1' is waiting on human gate 'a' (gate 'g1'); answer it before abandoning. Answer it: realm run respond r1 --gate g1 --choice <one of: yes, no>."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := abandonReply(tt.out, tt.channel)
			ref := resp.GetRefusal()
			if tt.msg == "" {
				if ref != nil || resp.GetRunId() != "r1" || !resp.GetTerminalState() || resp.GetTerminalReason() != tt.out.reason || resp.GetNote() != tt.note ||
					resp.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABANDONED {
					t.Fatalf("reply = %v", resp)
				}
				return
			}
			if ref == nil || ref.ErrorCode != string(tt.code) || ref.ContextHint != tt.msg || ref.RunVersion != nil || resp.GetRunId() != "" {
				t.Fatalf("refusal = %v", ref)
			}
			if tt.action != 0 && ref.AgentAction != tt.action {
				t.Errorf("agent_action = %v, want %v", ref.AgentAction, tt.action)
			}
		})
	}
}

func TestResumeDecides(t *testing.T) {
	t.Parallel()
	failed := func(r *record.Run) {
		r.MarkFailed("a", "boom", &record.Settled{Outcome: "fail"})
		r.Seal(record.ArmStepFailure, "a", "boom")
	}
	tests := []struct {
		name string
		step string
		prep func(r *record.Run)
		want resumedKind
		msg  string
	}{
		{"a failed step of a failed run is runnable again", "a", failed, resumeDone, ""},
		{"an abandoned run's failed step too", "a", func(r *record.Run) {
			r.MarkFailed("a", "boom", &record.Settled{Outcome: "fail"})
			r.AbandonedAt = record.FormatTime(testNow)
			r.Seal(record.ArmAbandonRequested, "", "by hand")
		}, resumeDone, ""},
		{"a running run is not resumable", "a", func(*record.Run) {}, resumeWrongPhase,
			"Run r1 is in phase 'running', which is not resumable."},
		{"an aborted run never is", "a", func(r *record.Run) { r.Seal(record.ArmGuardAbort, "c", "no") }, resumeAborted,
			"Run r1 was aborted (step 'c') — aborted runs are never resumable."},
		{"only a failed step is resumed", "b", failed, resumeNotFailed, "Step 'b' is not in failed_steps for run 'r1'."},
		{"a healthy claim is live work", "a", func(r *record.Run) {
			failed(r)
			r.Claims = map[string]*record.Claim{"a": {Token: "t", Deadline: deadline(testNow.Add(time.Minute))}}
		}, resumeHealthyClaim, "Step 'a' has a HEALTHY claim (deadline 2026-10-01T12:01:00.000Z) — a live runner is presumed on it. Resume refuses to disturb live work."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tx := setup(t, operated)
			tt.prep(tx.run)
			out := tx.resume(tt.step, false)
			if out.kind != tt.want {
				t.Fatalf("resume = %+v, want %v", out, tt.want)
			}
			_, msg, refused := out.refusal()
			if refused != (tt.want != resumeDone) || msg != tt.msg {
				t.Fatalf("refusal = %q (%v), want %q", msg, refused, tt.msg)
			}
			if tx.dirty != !refused {
				t.Fatalf("dirty = %v", tx.dirty)
			}
			if !refused && (tx.run.Terminal() || tx.run.StateOf("a") != record.StatePending || tx.run.SealedBy != nil) {
				t.Errorf("run = phase %s, a %s", tx.run.Phase(), tx.run.StateOf("a"))
			}
		})
	}
}

func TestResumeReplyNamesTheStepAndWhatIsNext(t *testing.T) {
	t.Parallel()
	tx := setup(t, operated)
	tx.run.MarkFailed("a", "boom", &record.Settled{Outcome: "fail"})
	tx.run.Seal(record.ArmStepFailure, "a", "boom")
	r := tx.resumeReply("resume", tx.resume("a", false))
	if r.Status != realmv1.ReplyStatus_REPLY_STATUS_OK || r.RunPhase != realmv1.RunPhase_RUN_PHASE_RUNNING ||
		!strings.HasPrefix(r.ContextHint, "Resumed run 'r1': step 'a' re-enabled and run reset to 'running'.") {
		t.Fatalf("reply = %v", r)
	}
	refused := tx.resumeReply("resume", resumed{kind: resumeNotFailed, runID: "r1", step: "b"})
	if refused.ErrorCode != string(errcode.StateStepNotEligible) || refused.NextActions != nil ||
		refused.ContextHint != "Step 'b' is not in failed_steps for run 'r1'." {
		t.Fatalf("refusal = %v", refused)
	}
}

func TestReclaimDecides(t *testing.T) {
	t.Parallel()
	claimed := func(r *record.Run) {
		r.MarkCompleted("a", &record.Settled{Outcome: "complete"})
		r.MarkInProgress("b", &record.Claim{Token: "t", Deadline: deadline(testNow.Add(-time.Minute))})
	}
	tests := []struct {
		name           string
		step           string
		force, onlyIdm bool
		prep           func(r *record.Run)
		want           reclaimedKind
	}{
		{"an ended run has nothing to reclaim", "b", true, false, func(r *record.Run) { r.Seal(record.ArmComplete, "", "") }, reclaimRunEnded},
		{"nothing in progress", "b", true, false, func(*record.Run) {}, reclaimNoClaims},
		{"no step lists the claims", "", false, false, claimed, reclaimListed},
		{"an unclaimed step is refused", "a", true, false, claimed, reclaimUnclaimed},
		{"batch reclaim leaves a step not idempotent", "b", true, true, claimed, reclaimNotIdempotent},
		{"freeing takes force", "b", false, false, claimed, reclaimNoForce},
		{"force frees the claim", "b", true, false, claimed, reclaimDone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tx := setup(t, operated)
			tt.prep(tx.run)
			out := tx.reclaim(tt.step, tt.force, tt.onlyIdm)
			if out.kind != tt.want {
				t.Fatalf("reclaim = %+v, want %v", out, tt.want)
			}
			if tx.dirty != (tt.want == reclaimDone) {
				t.Fatalf("dirty = %v", tx.dirty)
			}
			switch tt.want {
			case reclaimDone:
				if out.state != "claim_stale" || tx.run.StateOf("b") != record.StatePending || len(tx.evidence) != 1 || tx.evidence[0].Kind != "reclaim" {
					t.Errorf("out = %+v, b %s, evidence %d", out, tx.run.StateOf("b"), len(tx.evidence))
				}
			case reclaimListed:
				if !slices.Equal(out.claims, []listedClaim{{step: "b", state: "claim_stale", deadline: "2026-10-01T11:59:00.000Z"}}) {
					t.Errorf("claims = %+v", out.claims)
				}
			}
		})
	}
}

func TestReclaimRendersItsLinesAndRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		out     reclaimed
		refusal string
		lines   []string
	}{
		{name: "ended", out: reclaimed{kind: reclaimRunEnded, runID: "r1", phase: "completed"},
			lines: []string{"Run 'r1' is terminal (completed); it has no reclaimable claim."}},
		{name: "no claims", out: reclaimed{kind: reclaimNoClaims, runID: "r1", phase: "running"},
			lines: []string{"Run 'r1' (running) has no in-progress claims. Nothing to reclaim."}},
		{name: "listed", out: reclaimed{kind: reclaimListed, runID: "r1", phase: "gate_waiting", claims: []listedClaim{
			{step: "a", gate: true}, {step: "b", state: "healthy", deadline: "none recorded"}}},
			lines: []string{
				"Run 'r1' (gate_waiting) — in-progress claims:",
				"  • a: open gate — resolve via 'realm run respond r1', not reclaim.",
				"  • b: healthy  (deadline: none recorded)",
				"      reclaim: realm run reclaim r1 --step b --force",
				"",
				"Reclaim re-drives a step (at-least-once — side effects may repeat). Use --step <name> --force to act on a specific claim, or --all for batch auto-reclaim.",
			}},
		{name: "freed a stale claim", out: reclaimed{kind: reclaimDone, runID: "r1", step: "b", state: "claim_stale"}, lines: []string{
			"⚠ Reclaiming 'b' on run 'r1' — this re-drives the step; its side effects may repeat.",
			"Reclaimed 'b' (was claim_stale). It is eligible again — the next driver will re-drive it.",
		}},
		{name: "freed a healthy claim", out: reclaimed{kind: reclaimDone, runID: "r1", step: "b", state: "healthy"}, lines: []string{
			"⚠ 'b' currently has a HEALTHY claim (a live runner is presumed on it). --force will override it and may double-drive live work.",
			"⚠ Reclaiming 'b' on run 'r1' — this re-drives the step; its side effects may repeat.",
			"Reclaimed 'b' (was healthy). It is eligible again — the next driver will re-drive it.",
		}},
		{name: "open gate", out: reclaimed{kind: reclaimOpenGate, runID: "r1", step: "a"},
			refusal: "'a' is an open gate — resolve via 'realm run respond r1', not reclaim."},
		{name: "unclaimed", out: reclaimed{kind: reclaimUnclaimed, runID: "r1", step: "a"},
			refusal: "Step 'a' has no in-progress claim on run 'r1'."},
		{name: "not idempotent", out: reclaimed{kind: reclaimNotIdempotent, runID: "r1", step: "b"},
			refusal: "'b' is not declared idempotent: true — batch auto-reclaim leaves it. To re-drive it anyway: realm run reclaim r1 --step b --force"},
		{name: "no force", out: reclaimed{kind: reclaimNoForce, runID: "r1", step: "b"},
			refusal: "Refusing to reclaim 'b' without --force. Re-run with --force to re-drive it (the step re-executes; its side effects may repeat)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.out.refusal(); got != tt.refusal {
				t.Errorf("refusal = %q, want %q", got, tt.refusal)
			}
			if got := tt.out.lines(); !slices.Equal(got, tt.lines) {
				t.Errorf("lines = %q, want %q", got, tt.lines)
			}
		})
	}
}

func TestReclaimReplyRefusesWithoutNextActions(t *testing.T) {
	t.Parallel()
	tx := setup(t, operated)
	r := tx.reclaimReply("reclaim", reclaimed{kind: reclaimNoForce, runID: "r1", step: "b"})
	if r.ErrorCode != string(errcode.StateTransitionDenied) || r.NextActions != nil || !strings.HasPrefix(r.ContextHint, "Refusing to reclaim 'b'") {
		t.Fatalf("refusal = %v", r)
	}
	r = tx.reclaimReply("reclaim", reclaimed{kind: reclaimNoClaims, runID: "r1", phase: "running"})
	if r.Status != realmv1.ReplyStatus_REPLY_STATUS_OK || len(r.NextActions) == 0 || r.ContextHint != "Run 'r1' (running) has no in-progress claims. Nothing to reclaim." {
		t.Fatalf("reply = %v", r)
	}
}

func TestReleaseFreesOnlyTheClaimItsTokenNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, token string
		want        bool
		hint        string
	}{
		{"the claim's token frees it", "t1", true, "Released the claim on 'a'; the step has not run and is ready again."},
		{"another token frees nothing", "t2", false, "Nothing released: the claim_token given is not the claim on 'a' now."},
		{"no token frees nothing", "", false, "Nothing released: the claim_token given is not the claim on 'a' now."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tx := setup(t, operated)
			tx.run.MarkInProgress("a", &record.Claim{Token: "t1"})
			got := tx.release("a", tt.token)
			if got != tt.want || tx.dirty != tt.want || (tx.run.StateOf("a") == record.StatePending) != tt.want {
				t.Fatalf("release = %v, dirty %v, a %s", got, tx.dirty, tx.run.StateOf("a"))
			}
			if r := tx.releaseReply("release_claim", "a", got); r.ContextHint != tt.hint {
				t.Errorf("hint = %q", r.ContextHint)
			}
		})
	}
}

func TestAppendTraceDecidesAndReplies(t *testing.T) {
	t.Parallel()
	entry := []*realmv1.TraceEntry{{Event: "thought"}}
	tests := []struct {
		name  string
		step  string
		prep  func(r *record.Run)
		want  tracedKind
		code  errcode.Code
		msg   string
		agent realmv1.AgentAction
	}{
		{name: "an agent step buffers", step: "a", prep: func(*record.Run) {}, want: traceBuffered},
		{name: "a step waiting on its dependencies buffers too", step: "b", prep: func(*record.Run) {}, want: traceBuffered},
		{name: "an ended run adopts nothing", step: "a", prep: func(r *record.Run) { r.Seal(record.ArmComplete, "", "") }, want: traceRunEnded,
			code: errcode.StateStepNotEligible, msg: "Run 'r1' is terminal (phase: 'completed') — trace entries can no longer be adopted by any step.",
			agent: realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER},
		{name: "no such step", step: "z", prep: func(*record.Run) {}, want: traceNoSuchStep,
			code: errcode.StepNotFound, msg: "Step 'z' not found in workflow 'ops'."},
		{name: "an auto step keeps no trace", step: "c", prep: func(r *record.Run) { r.MarkCompleted("a", &record.Settled{Outcome: "complete"}) }, want: traceNotAgent,
			code: errcode.StateStepNotEligible, msg: "Step 'c' is not an agent step; only an agent step's trace is recorded."},
		{name: "a done step cannot take a trace", step: "a", prep: func(r *record.Run) { r.MarkCompleted("a", &record.Settled{Outcome: "complete"}) }, want: traceUncallable,
			code: errcode.StateStepNotEligible},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tx := setup(t, operated)
			tt.prep(tx.run)
			out := tx.appendTrace(tt.step, "n1", entry)
			if out.kind != tt.want || tx.dirty != (tt.want == traceBuffered) {
				t.Fatalf("appendTrace = %+v, dirty %v", out, tx.dirty)
			}
			resp := tx.traceReply("append_trace", out)
			if tt.want == traceBuffered {
				if c := resp.GetCounts(); c == nil || c.BufferCount != 1 || c.FileCount != 1 || resp.GetRefusal() != nil || len(tx.buffered(tt.step)) != 1 {
					t.Fatalf("reply = %v", resp)
				}
				return
			}
			ref := resp.GetRefusal()
			if ref == nil || ref.ErrorCode != string(tt.code) || (tt.msg != "" && ref.ContextHint != tt.msg) || ref.NextActions != nil {
				t.Fatalf("refusal = %v", ref)
			}
			if tt.agent != 0 && ref.AgentAction != tt.agent {
				t.Errorf("agent_action = %v", ref.AgentAction)
			}
		})
	}
}

// workflowStore serves one workflow and no evidence: what begin and the
// operator verbs read.
type workflowStore struct {
	emptyEvidence
	rec *store.WorkflowRecord
}

func (s workflowStore) GetWorkflow(context.Context, string) (*store.WorkflowRecord, error) {
	return s.rec, nil
}

func TestDecidingLeavesTheSnapshotAlone(t *testing.T) {
	t.Parallel()
	def, rep := workflow.Load([]byte(operated), workflow.LoadOptions{Path: "test.yaml"})
	if def == nil || !rep.Valid {
		t.Fatalf("workflow does not load: %v", rep.Errors)
	}
	b, _ := json.Marshal(def)
	e := &Engine{st: workflowStore{rec: &store.WorkflowRecord{ID: def.ID, Version: 1, Definition: b}},
		now: func() time.Time { return testNow }, log: slog.New(slog.DiscardHandler), defs: newDefCache(time.Hour)}
	open := &record.Run{ID: "r1", WorkflowID: def.ID, Params: map[string]any{}}
	open.Normalize()
	open.MarkCompleted("a", &record.Settled{Outcome: "complete"})
	open.MarkInProgress("b", &record.Claim{Token: "t1", Deadline: deadline(testNow.Add(-time.Minute))})
	ended := open.Clone()
	ended.MarkFailed("b", "boom", &record.Settled{Outcome: "fail"})
	ended.InProgressSteps = []string{}
	ended.Seal(record.ArmStepFailure, "b", "boom")
	tests := []struct {
		name   string
		run    *record.Run
		decide func(t *txn)
	}{
		{"abandon", open, func(t *txn) { t.abandon("", 0) }},
		{"reclaim", open, func(t *txn) { t.reclaim("b", true, false) }},
		{"release", open, func(t *txn) { t.release("b", "t1") }},
		{"append_trace", open, func(t *txn) { t.appendTrace("d", "n1", []*realmv1.TraceEntry{{Event: "e"}}) }},
		{"resume", ended, func(t *txn) { t.resume("b", false) }},
		{"advance", open, func(t *txn) { t.advance(advanceOpts{decideGuards: true, chain: true}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, _ := json.Marshal(tt.run)
			out, _ := json.Marshal(map[string]any{"v": 1})
			d, err := decode(&store.Snapshot{Version: 3, Doc: doc, Outputs: map[string][]byte{"a": out}})
			if err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(d.run)
			outputs, traces := maps.Clone(d.outputs), maps.Clone(d.traces)
			tx, err := e.begin(context.Background(), d)
			if err != nil {
				t.Fatal(err)
			}
			tt.decide(tx)
			if !tx.dirty {
				t.Fatal("the decision wrote nothing: the test decides nothing")
			}
			c, _, _, err := tx.change()
			if err != nil {
				t.Fatal(err)
			}
			if after, _ := json.Marshal(d.run); string(after) != string(before) || string(d.snap.Doc) != string(doc) {
				t.Errorf("the cached run changed:\n%s\n%s", before, after)
			}
			if !maps.EqualFunc(d.outputs, outputs, func(a, b any) bool { x, _ := json.Marshal(a); y, _ := json.Marshal(b); return string(x) == string(y) }) ||
				!maps.EqualFunc(d.traces, traces, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Errorf("the cached outputs or traces changed")
			}
			// The change is exactly what is pending: the clone, one version up
			// from the snapshot it was read at.
			if c.ExpectVersion != 3 || c.NewVersion != 4 || len(c.Evidence) != len(tx.evidence) {
				t.Errorf("change = expect %d new %d evidence %d", c.ExpectVersion, c.NewVersion, len(c.Evidence))
			}
			if want, _ := json.Marshal(tx.run); string(c.Doc) != string(want) {
				t.Errorf("change doc is not the decided run")
			}
		})
	}
}
