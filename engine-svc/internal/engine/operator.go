package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// ResumeRun reopens a run that ended failed or abandoned by making one of
// its failed steps runnable again (cli spec §4.3). It runs no step.
// Resuming an abandoned run erases the operator's ending and its reason.
func (e *Engine) ResumeRun(ctx context.Context, req *realmv1.ResumeRunRequest) (*realmv1.ResumeRunResponse, error) {
	const command = "resume"
	step := req.GetFromStep()
	var refusedMsg string
	var refusedCode errcode.Code
	var cancelled []string
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		refusedMsg, cancelled = "", nil
		r := t.run
		refuse := func(code errcode.Code, format string, args ...any) error {
			refusedCode, refusedMsg = code, fmt.Sprintf(format, args...)
			return nil
		}
		phase := r.Phase()
		if s := t.stepOf(step); s != nil && s.Execution == workflow.KindFinalizer {
			return refuse(errcode.StateTransitionDenied, "Step '%s' is a finalizer — finalizers cannot be resumed via --from. Use 'realm run drain %s' or '--void %s' instead.", step, r.ID, step)
		}
		switch phase {
		case record.PhaseAborted:
			return refuse(errcode.StateTransitionDenied, "Run %s was aborted (step '%s') — aborted runs are never resumable.", r.ID, r.SealedBy.Step)
		case record.PhaseFailed, record.PhaseAbandoned:
		default:
			return refuse(errcode.StateTransitionDenied, "Run %s is in phase '%s', which is not resumable.", r.ID, phase)
		}
		if !slices.Contains(r.FailedSteps, step) {
			return refuse(errcode.StateStepNotEligible, "Step '%s' is not in failed_steps for run '%s'.", step, r.ID)
		}
		if c := r.Claims[step]; c != nil && c.Deadline != nil && t.now.Before(record.ParseTime(*c.Deadline)) {
			return refuse(errcode.StateTransitionDenied, "Step '%s' has a HEALTHY claim (deadline %s) — a live runner is presumed on it. Resume refuses to disturb live work.", step, *c.Deadline)
		}
		for _, n := range pendingFinalizers(r) {
			if until, ok := leaseHeld(r.FinalizerLedger[n], t.now); ok {
				return refuse(errcode.StateTransitionDenied, "Run %s has an active drain lease on finalizer '%s' (expires %s) — a drainer is executing NOW. Wait for it to finish, then resume.", r.ID, n, record.FormatTime(until))
			}
			cancelled = append(cancelled, n)
		}
		r.FailedSteps = slices.DeleteFunc(r.FailedSteps, func(s string) bool { return s == step })
		delete(r.StepErrors, step)
		delete(r.Settled, step)
		delete(r.Claims, step)
		r.InProgressSteps = slices.DeleteFunc(r.InProgressSteps, func(s string) bool { return s == step })
		if r.ValidationRejections != nil {
			delete(r.ValidationRejections, step)
		}
		r.SealedBy, r.TerminalState, r.TerminalReason, r.AbandonedAt, r.AbortedAt = nil, false, "", "", nil
		r.PendingGate = nil
		r.FinalizerLedger = nil
		t.touch()
		return nil
	})
	if reply, ok := readFailure(command, req.GetRunId(), err); ok {
		return &realmv1.ResumeRunResponse{Reply: reply}, nil
	}
	if err != nil {
		return nil, err
	}
	r := t.envelope(command)
	if refusedMsg != "" {
		t.refuse(r, refusedCode, refusedMsg)
		r.NextActions = nil
		return &realmv1.ResumeRunResponse{Reply: r}, nil
	}
	v := t.view()
	r.NextActions = t.nextActions(v)
	var lines []string
	for _, n := range cancelled {
		lines = append(lines, fmt.Sprintf("⚠ cleanup step '%s' was pending for the ending this resume erased; it is cancelled, and the run's next ending chooses its cleanup again.", n))
	}
	lines = append(lines, fmt.Sprintf("Resumed run '%s': step '%s' re-enabled and run reset to 'running'.", t.run.ID, step))
	if next := t.whatNext(v); next != "" {
		lines = append(lines, next)
	}
	r.ContextHint = strings.Join(lines, "\n")
	return &realmv1.ResumeRunResponse{Reply: r}, nil
}

// PurgeRun deletes an ended run and everything kept with it; without force
// it says what it would remove. A run with a healthy claim or a pending
// finalizer is never purged.
func (e *Engine) PurgeRun(ctx context.Context, req *realmv1.PurgeRunRequest) (*realmv1.PurgeRunResponse, error) {
	t, err := e.read(ctx, req.GetRunId())
	if errors.Is(err, errRunNotFound) {
		return &realmv1.PurgeRunResponse{Refusal: realmv1.PurgeRefusal_PURGE_REFUSAL_RUN_NOT_FOUND, Message: "Run not found: " + req.GetRunId()}, nil
	}
	if err != nil {
		return nil, err
	}
	r := t.run
	if !r.Terminal() {
		return &realmv1.PurgeRunResponse{Refusal: realmv1.PurgeRefusal_PURGE_REFUSAL_NOT_TERMINAL, Message: fmt.Sprintf("Refusing to purge '%s': not terminal (phase: '%s').", r.ID, r.Phase())}, nil
	}
	for step, c := range r.Claims {
		if c.Deadline != nil && t.now.Before(record.ParseTime(*c.Deadline)) {
			return &realmv1.PurgeRunResponse{Refusal: realmv1.PurgeRefusal_PURGE_REFUSAL_HEALTHY_CLAIM, Message: fmt.Sprintf("Refusing to purge '%s': step '%s' has a healthy claim (deadline %s).", r.ID, step, *c.Deadline)}, nil
		}
	}
	if len(pendingFinalizers(r)) > 0 {
		return &realmv1.PurgeRunResponse{Refusal: realmv1.PurgeRefusal_PURGE_REFUSAL_DRAIN_PENDING, Message: fmt.Sprintf("Refusing to purge '%s': drain_pending — %s", r.ID, t.cleanupTail())}, nil
	}
	what := []string{"run record", fmt.Sprintf("evidence (%d entries)", r.EvidenceCount), fmt.Sprintf("step outputs (%d)", len(t.outputs))}
	if len(t.traces) > 0 {
		what = append(what, fmt.Sprintf("trace buffers (%d)", len(t.traces)))
	}
	resumable := r.Phase() == record.PhaseFailed || r.Phase() == record.PhaseAbandoned
	note := "It is not resumable via 'realm run resume'."
	if resumable && len(r.FailedSteps) > 0 {
		note = "It is resumable via 'realm run resume' — purging would destroy that path permanently."
	}
	if !req.GetForce() {
		return &realmv1.PurgeRunResponse{WouldRemove: what, Message: fmt.Sprintf("1 run(s) WOULD be purged:\n  • %s  (%s)\n\n%s\nRe-run with --force to actually delete.", r.ID, r.Phase(), note)}, nil
	}
	// The run's idempotency key goes in the same script, if it still names
	// this run: a later start with the key creates a new run.
	if err := e.st.DeleteRun(ctx, r.ID, keyOf(r.WorkflowID, r.IdempotencyKey)); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to purge run: "+err.Error())
	}
	e.runs.drop(r.ID)
	return &realmv1.PurgeRunResponse{Purged: true, WouldRemove: what, Message: "Purged 1/1 run(s). 0 already gone, 0 blocked, 0 failed."}, nil
}

// ExportRun writes the whole record as one bundle (run-record spec §9):
// the run with its evidence and outputs, claim tokens included, and the
// refused answers (attempts.go).
func (e *Engine) ExportRun(ctx context.Context, req *realmv1.ExportRunRequest) (*realmv1.ExportRunResponse, error) {
	snap, err := e.st.LoadRun(ctx, req.GetRunId())
	if errors.Is(err, store.ErrNotFound) {
		return nil, errcode.New(errcode.StateRunNotFound, "Run not found: "+req.GetRunId())
	}
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load run from store: "+err.Error())
	}
	var run map[string]any
	if err := json.Unmarshal(snap.Doc, &run); err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load run from store: "+err.Error())
	}
	run["version"] = snap.Version
	var artifactErrors []any
	evidence := []any{}
	entries, err := e.st.Evidence(ctx, req.GetRunId(), 0, -1)
	if err != nil {
		artifactErrors = append(artifactErrors, map[string]any{"artifact": "evidence", "code": string(errcode.EngineStoreFailed), "message": err.Error()})
	}
	for _, raw := range entries {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			evidence = append(evidence, v)
		}
	}
	run["evidence"] = evidence
	outputs := map[string]any{}
	wal := map[string]any{}
	attempts, attemptsErr := decodeAttempts(snap.Outputs[attemptsField])
	if attemptsErr != nil {
		// Run-record spec §9: an unreadable part makes the bundle
		// incomplete; it never stops the export.
		artifactErrors = append(artifactErrors, map[string]any{"artifact": "failed-attempt sidecar", "code": string(errcode.EngineStoreFailed), "message": attemptsErr.Error()})
	}
	for k, raw := range snap.Outputs {
		if k == attemptsField {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		if step, ok := strings.CutPrefix(k, traceField); ok {
			wal[step] = []any{map[string]any{"entries": v}}
			continue
		}
		outputs[k] = v
	}
	run["outputs"] = outputs
	bundle := map[string]any{
		"realm_export_version": 4,
		"exported_at":          record.FormatTime(e.now()),
		"run":                  run,
		"attempts":             append([]json.RawMessage{}, attempts.Records...),
		"attempts_capped":      attempts.Capped,
		"wal":                  wal,
		"sealed":               nil,
		"complete":             len(artifactErrors) == 0,
		"artifact_errors":      append([]any{}, artifactErrors...),
	}
	b, err := json.MarshalIndent(bundle, "", "  ")
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineInternal, err, "encode export: "+err.Error())
	}
	return &realmv1.ExportRunResponse{Bundle: b}, nil
}
