package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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
	var out resumed
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		out = t.resume(req.GetFromStep(), req.GetForce())
		return nil
	})
	if reply, ok := readFailure(command, req.GetRunId(), err); ok {
		return &realmv1.ResumeRunResponse{Reply: reply}, nil
	}
	if err != nil {
		return nil, err
	}
	return &realmv1.ResumeRunResponse{Reply: t.resumeReply(command, out)}, nil
}

// resumedKind is what resume decided.
type resumedKind int

const (
	resumeDone         resumedKind = iota // the step is runnable again
	resumeFinalizer                       // a finalizer is drained or voided, never resumed
	resumeAborted                         // an aborted run is never resumable
	resumeWrongPhase                      // only a failed or abandoned run is resumable
	resumeNotFailed                       // the step is not a failed one
	resumeHealthyClaim                    // a live runner is presumed on the step
	resumeUnknownClaim                    // the step's claim has no deadline, and no --force
	resumeLeaseHeld                       // a drainer is running one of the run's finalizers
)

// resumed is resume's decision, with what its reply needs.
type resumed struct {
	kind  resumedKind
	runID string
	step  string
	// phase is the run's phase (resumeWrongPhase); sealedStep the guard
	// that aborted it (resumeAborted).
	phase, sealedStep string
	// deadline is the healthy claim's (resumeHealthyClaim).
	deadline string
	// finalizer and until are the held drain lease (resumeLeaseHeld).
	finalizer string
	until     time.Time
	// cancelled are the finalizers the erased ending owed (resumeDone).
	cancelled []string
}

// resume makes a failed step of an ended run runnable again, erasing the
// run's ending and the finalizers it owed, or says why it cannot. force
// overrides a claim of unknown age on the step (never a healthy one): the
// operator has confirmed its runner is dead.
func (t *txn) resume(step string, force bool) resumed {
	r := t.run
	out := resumed{runID: r.ID, step: step}
	refuse := func(k resumedKind) resumed { out.kind = k; return out }
	phase := r.Phase()
	if s := t.stepOf(step); s != nil && s.Execution == workflow.KindFinalizer {
		return refuse(resumeFinalizer)
	}
	switch phase {
	case record.PhaseAborted:
		out.sealedStep = r.SealedBy.Step
		return refuse(resumeAborted)
	case record.PhaseFailed, record.PhaseAbandoned:
	default:
		out.phase = phase
		return refuse(resumeWrongPhase)
	}
	if !slices.Contains(r.FailedSteps, step) {
		return refuse(resumeNotFailed)
	}
	if c := r.Claims[step]; c != nil && c.Deadline != nil && t.now.Before(record.ParseTime(*c.Deadline)) {
		out.deadline = *c.Deadline
		return refuse(resumeHealthyClaim)
	}
	if c := r.Claims[step]; c != nil && c.Deadline == nil && !force {
		return refuse(resumeUnknownClaim)
	}
	for _, n := range pendingFinalizers(r) {
		if until, ok := leaseHeld(r.FinalizerLedger[n], t.now); ok {
			out.finalizer, out.until, out.cancelled = n, until, nil
			return refuse(resumeLeaseHeld)
		}
		out.cancelled = append(out.cancelled, n)
	}
	r.FailedSteps = slices.DeleteFunc(r.FailedSteps, func(s string) bool { return s == step })
	delete(r.StepErrors, step)
	r.Unsettle(step)
	delete(r.Claims, step)
	r.InProgressSteps = slices.DeleteFunc(r.InProgressSteps, func(s string) bool { return s == step })
	if r.ValidationRejections != nil {
		delete(r.ValidationRejections, step)
	}
	r.SealedBy, r.TerminalState, r.TerminalReason, r.AbandonedAt, r.AbortedAt = nil, false, "", "", nil
	r.PendingGate = nil
	r.FinalizerLedger = nil
	t.touch()
	out.kind = resumeDone
	return out
}

// refusal is a refused resume's code and sentence (ok false when it was
// not refused).
func (out resumed) refusal() (errcode.Code, string, bool) {
	switch out.kind {
	case resumeFinalizer:
		return errcode.StateTransitionDenied, fmt.Sprintf("Step '%s' is a finalizer — finalizers cannot be resumed via --from. Use 'realm run drain %s' or '--void %s' instead.", out.step, out.runID, out.step), true
	case resumeAborted:
		return errcode.StateTransitionDenied, fmt.Sprintf("Run %s was aborted (step '%s') — aborted runs are never resumable.", out.runID, out.sealedStep), true
	case resumeWrongPhase:
		return errcode.StateTransitionDenied, fmt.Sprintf("Run %s is in phase '%s', which is not resumable.", out.runID, out.phase), true
	case resumeNotFailed:
		return errcode.StateStepNotEligible, fmt.Sprintf("Step '%s' is not in failed_steps for run '%s'.", out.step, out.runID), true
	case resumeHealthyClaim:
		return errcode.StateTransitionDenied, fmt.Sprintf("Step '%s' has a HEALTHY claim (deadline %s) — a live runner is presumed on it. Resume refuses to disturb live work.", out.step, out.deadline), true
	case resumeUnknownClaim:
		return errcode.StateTransitionDenied, fmt.Sprintf("Step '%s' has an unknown-age claim (no reliable deadline) — its liveness cannot be verified. Re-run with --force to override (only after confirming the runner is actually dead).", out.step), true
	case resumeLeaseHeld:
		return errcode.StateTransitionDenied, fmt.Sprintf("Run %s has an active drain lease on finalizer '%s' (expires %s) — a drainer is executing NOW. Wait for it to finish, then resume.", out.runID, out.finalizer, record.FormatTime(out.until)), true
	}
	return "", "", false
}

// resumeReply composes resume's reply from its decision and the run as
// the call leaves it.
func (t *txn) resumeReply(command string, out resumed) *realmv1.Reply {
	r := t.envelope(command)
	if code, msg, refused := out.refusal(); refused {
		t.refuse(r, code, msg)
		r.NextActions = nil
		return r
	}
	v := t.view()
	r.NextActions = t.nextActions(v)
	var lines []string
	for _, n := range out.cancelled {
		lines = append(lines, fmt.Sprintf("⚠ cleanup step '%s' was pending for the ending this resume erased; it is cancelled, and the run's next ending chooses its cleanup again.", n))
	}
	lines = append(lines, fmt.Sprintf("Resumed run '%s': step '%s' re-enabled and run reset to 'running'.", t.run.ID, out.step))
	if next := t.whatNext(v); next != "" {
		lines = append(lines, next)
	}
	r.ContextHint = strings.Join(lines, "\n")
	return r
}
