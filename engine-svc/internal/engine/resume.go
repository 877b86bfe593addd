package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
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
