package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// ReclaimRun frees a claimed-but-never-finished step so it can run again
// (cli spec §4.6): at-least-once, so side effects may repeat. Without a
// step it reports the run's claims. It runs no step; a result that comes
// back later from the freed attempt is not recorded (its token is gone).
func (e *Engine) ReclaimRun(ctx context.Context, req *realmv1.ReclaimRunRequest) (*realmv1.ReclaimRunResponse, error) {
	const command = "reclaim"
	var lines []string
	var refused string
	idempotent := false
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		lines, refused = nil, ""
		r := t.run
		if s := t.stepOf(req.GetStep()); s != nil {
			idempotent = s.Idempotent
		}
		if r.Terminal() {
			lines = []string{fmt.Sprintf("Run '%s' is terminal (%s); it has no reclaimable claim.", r.ID, r.Phase())}
			return nil
		}
		if len(r.InProgressSteps) == 0 {
			lines = []string{fmt.Sprintf("Run '%s' (%s) has no in-progress claims. Nothing to reclaim.", r.ID, r.Phase())}
			return nil
		}
		gate := ""
		if r.PendingGate != nil {
			gate = r.PendingGate.StepName
		}
		if req.GetStep() == "" {
			lines = append(lines, fmt.Sprintf("Run '%s' (%s) — in-progress claims:", r.ID, r.Phase()))
			for _, s := range r.InProgressSteps {
				if s == gate {
					lines = append(lines, fmt.Sprintf("  • %s: open gate — resolve via 'realm run respond %s', not reclaim.", s, r.ID))
					continue
				}
				c := r.Claims[s]
				deadline := "none recorded"
				if c != nil && c.Deadline != nil {
					deadline = *c.Deadline
				}
				lines = append(lines, fmt.Sprintf("  • %s: %s  (deadline: %s)", s, t.claimState(c), deadline),
					fmt.Sprintf("      reclaim: realm run reclaim %s --step %s --force", r.ID, s))
			}
			lines = append(lines, "", "Reclaim re-drives a step (at-least-once — side effects may repeat). Use --step <name> --force to act on a specific claim, or --all for batch auto-reclaim.")
			return nil
		}
		step := req.GetStep()
		c, held := r.Claims[step]
		switch {
		case step == gate:
			refused = fmt.Sprintf("'%s' is an open gate — resolve via 'realm run respond %s', not reclaim.", step, r.ID)
			return nil
		case !held && r.StateOf(step) != record.StateInProgress:
			refused = fmt.Sprintf("Step '%s' has no in-progress claim on run '%s'.", step, r.ID)
			return nil
		case req.GetOnlyIdempotent() && !idempotent:
			refused = fmt.Sprintf("'%s' is not declared idempotent: true — batch auto-reclaim leaves it. To re-drive it anyway: realm run reclaim %s --step %s --force", step, r.ID, step)
			return nil
		case !req.GetForce():
			refused = fmt.Sprintf("Refusing to reclaim '%s' without --force. Re-run with --force to re-drive it (the step re-executes; its side effects may repeat).", step)
			return nil
		}
		state := t.claimState(c)
		if state == "healthy" {
			lines = append(lines, fmt.Sprintf("⚠ '%s' currently has a HEALTHY claim (a live runner is presumed on it). --force will override it and may double-drive live work.", step))
		}
		lines = append(lines, fmt.Sprintf("⚠ Reclaiming '%s' on run '%s' — this re-drives the step; its side effects may repeat.", step, r.ID),
			fmt.Sprintf("Reclaimed '%s' (was %s). It is eligible again — the next driver will re-drive it.", step, state))
		out := map[string]any{"reclaimed": true, "claim_state": state, "deadline": nil}
		if c != nil && c.Deadline != nil {
			out["deadline"] = *c.Deadline
		}
		e := t.entry(step, "skipped")
		e.Kind = "reclaim"
		e.InputSummary = map[string]any{}
		e.OutputSummary = out
		r.InProgressSteps = removeString(r.InProgressSteps, step)
		delete(r.Claims, step)
		t.appendEvidence(e)
		return nil
	})
	if reply, ok := readFailure(command, req.GetRunId(), err); ok {
		return &realmv1.ReclaimRunResponse{Reply: reply}, nil
	}
	if err != nil {
		return nil, err
	}
	r := t.envelope(command)
	if refused != "" {
		t.refuse(r, errcode.StateTransitionDenied, refused)
		r.NextActions = nil
		return &realmv1.ReclaimRunResponse{Reply: r, StepIdempotent: idempotent}, nil
	}
	r.NextActions = t.nextActions(t.view())
	r.ContextHint = strings.Join(lines, "\n")
	return &realmv1.ReclaimRunResponse{Reply: r, StepIdempotent: idempotent}, nil
}

func removeString(xs []string, x string) []string {
	out := xs[:0]
	for _, y := range xs {
		if y != x {
			out = append(out, y)
		}
	}
	return out
}
