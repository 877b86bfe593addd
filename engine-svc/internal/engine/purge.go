package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// PurgeRun deletes an ended run and everything kept with it; without force
// it says what it would remove. A run with a healthy claim or a pending
// finalizer is never purged.
func (e *Engine) PurgeRun(ctx context.Context, req *realmv1.PurgeRunRequest) (*realmv1.PurgeRunResponse, error) {
	for attempt := 0; ; attempt++ {
		resp, err := e.purgeOnce(ctx, req)
		if !store.IsConflict(err) {
			return resp, err
		}
		// Written since it was read (resumed, drained): decide again on
		// what is there now.
		if attempt+1 == maxWriteAttempts {
			return nil, errcode.Newf(errcode.StateSnapshotMismatch,
				"Run '%s' kept changing under this call (%d attempts); call get_run_state and try again.", req.GetRunId(), maxWriteAttempts)
		}
		if err := e.conflictPause(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// purgeOnce decides on one read of the run and deletes it at that version.
func (e *Engine) purgeOnce(ctx context.Context, req *realmv1.PurgeRunRequest) (*realmv1.PurgeRunResponse, error) {
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
	err = e.st.DeleteRun(ctx, r.ID, keyOf(r.WorkflowID, r.IdempotencyKey), t.base.Version)
	if store.IsConflict(err) {
		e.runs.drop(r.ID)
		return nil, err
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to purge run: "+err.Error())
	}
	e.runs.drop(r.ID)
	return &realmv1.PurgeRunResponse{Purged: true, WouldRemove: what, Message: "Purged 1/1 run(s). 0 already gone, 0 blocked, 0 failed."}, nil
}
