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
	var out reclaimed
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		out = t.reclaim(req.GetStep(), req.GetForce(), req.GetOnlyIdempotent())
		return nil
	})
	if reply, ok := readFailure(command, req.GetRunId(), err); ok {
		return &realmv1.ReclaimRunResponse{Reply: reply}, nil
	}
	if err != nil {
		return nil, err
	}
	return &realmv1.ReclaimRunResponse{Reply: t.reclaimReply(command, out), StepIdempotent: out.idempotent}, nil
}

// reclaimedKind is what reclaim decided.
type reclaimedKind int

const (
	reclaimDone          reclaimedKind = iota // the step's claim was freed
	reclaimRunEnded                           // the run has ended: nothing to reclaim
	reclaimNoClaims                           // nothing is in progress
	reclaimListed                             // no step named: the claims are listed
	reclaimOpenGate                           // the step is an open question
	reclaimUnclaimed                          // the step holds no claim
	reclaimNotIdempotent                      // batch auto-reclaim leaves a step not declared idempotent
	reclaimNoForce                            // freeing a claim takes --force
)

// reclaimed is reclaim's decision, with what its reply needs.
type reclaimed struct {
	kind         reclaimedKind
	runID, phase string
	step         string
	// idempotent is whether the named step is declared idempotent.
	idempotent bool
	// state is the freed claim's health as it was (reclaimDone).
	state string
	// claims are the run's in-progress claims (reclaimListed).
	claims []listedClaim
}

// listedClaim is one in-progress claim as reclaim lists it: an open
// question, or a claim with its health and deadline.
type listedClaim struct {
	step            string
	gate            bool
	state, deadline string
}

// reclaim frees a step's claim (with force), lists the run's claims (no
// step named), or says why it leaves the claim alone.
func (t *txn) reclaim(step string, force, onlyIdempotent bool) reclaimed {
	r := t.run
	out := reclaimed{runID: r.ID, phase: r.Phase(), step: step}
	if s := t.stepOf(step); s != nil {
		out.idempotent = s.Idempotent
	}
	decided := func(k reclaimedKind) reclaimed { out.kind = k; return out }
	if r.Terminal() {
		return decided(reclaimRunEnded)
	}
	if len(r.InProgressSteps) == 0 {
		return decided(reclaimNoClaims)
	}
	gate := ""
	if r.PendingGate != nil {
		gate = r.PendingGate.StepName
	}
	if step == "" {
		for _, s := range r.InProgressSteps {
			if s == gate {
				out.claims = append(out.claims, listedClaim{step: s, gate: true})
				continue
			}
			c := r.Claims[s]
			deadline := "none recorded"
			if c != nil && c.Deadline != nil {
				deadline = *c.Deadline
			}
			out.claims = append(out.claims, listedClaim{step: s, state: t.claimState(c), deadline: deadline})
		}
		return decided(reclaimListed)
	}
	c, held := r.Claims[step]
	switch {
	case step == gate:
		return decided(reclaimOpenGate)
	case !held && r.StateOf(step) != record.StateInProgress:
		return decided(reclaimUnclaimed)
	case onlyIdempotent && !out.idempotent:
		return decided(reclaimNotIdempotent)
	case !force:
		return decided(reclaimNoForce)
	}
	out.state = t.claimState(c)
	evidence := map[string]any{"reclaimed": true, "claim_state": out.state, "deadline": nil}
	if c != nil && c.Deadline != nil {
		evidence["deadline"] = *c.Deadline
	}
	e := t.entry(step, "skipped")
	e.Kind = "reclaim"
	e.InputSummary = map[string]any{}
	e.OutputSummary = evidence
	r.InProgressSteps = removeString(r.InProgressSteps, step)
	delete(r.Claims, step)
	t.appendEvidence(e)
	return decided(reclaimDone)
}

// refusal is a refused reclaim's sentence ("" when it was not refused).
func (out reclaimed) refusal() string {
	switch out.kind {
	case reclaimOpenGate:
		return fmt.Sprintf("'%s' is an open gate — resolve via 'realm run respond %s', not reclaim.", out.step, out.runID)
	case reclaimUnclaimed:
		return fmt.Sprintf("Step '%s' has no in-progress claim on run '%s'.", out.step, out.runID)
	case reclaimNotIdempotent:
		return fmt.Sprintf("'%s' is not declared idempotent: true — batch auto-reclaim leaves it. To re-drive it anyway: realm run reclaim %s --step %s --force", out.step, out.runID, out.step)
	case reclaimNoForce:
		return fmt.Sprintf("Refusing to reclaim '%s' without --force. Re-run with --force to re-drive it (the step re-executes; its side effects may repeat).", out.step)
	}
	return ""
}

// lines are the hint's lines of a reclaim that was not refused.
func (out reclaimed) lines() []string {
	switch out.kind {
	case reclaimRunEnded:
		return []string{fmt.Sprintf("Run '%s' is terminal (%s); it has no reclaimable claim.", out.runID, out.phase)}
	case reclaimNoClaims:
		return []string{fmt.Sprintf("Run '%s' (%s) has no in-progress claims. Nothing to reclaim.", out.runID, out.phase)}
	case reclaimListed:
		lines := []string{fmt.Sprintf("Run '%s' (%s) — in-progress claims:", out.runID, out.phase)}
		for _, c := range out.claims {
			if c.gate {
				lines = append(lines, fmt.Sprintf("  • %s: open gate — resolve via 'realm run respond %s', not reclaim.", c.step, out.runID))
				continue
			}
			lines = append(lines, fmt.Sprintf("  • %s: %s  (deadline: %s)", c.step, c.state, c.deadline),
				fmt.Sprintf("      reclaim: realm run reclaim %s --step %s --force", out.runID, c.step))
		}
		return append(lines, "", "Reclaim re-drives a step (at-least-once — side effects may repeat). Use --step <name> --force to act on a specific claim, or --all for batch auto-reclaim.")
	case reclaimDone:
		var lines []string
		if out.state == "healthy" {
			lines = append(lines, fmt.Sprintf("⚠ '%s' currently has a HEALTHY claim (a live runner is presumed on it). --force will override it and may double-drive live work.", out.step))
		}
		return append(lines, fmt.Sprintf("⚠ Reclaiming '%s' on run '%s' — this re-drives the step; its side effects may repeat.", out.step, out.runID),
			fmt.Sprintf("Reclaimed '%s' (was %s). It is eligible again — the next driver will re-drive it.", out.step, out.state))
	}
	return nil
}

// reclaimReply composes reclaim's reply from its decision and the run as
// the call leaves it.
func (t *txn) reclaimReply(command string, out reclaimed) *realmv1.Reply {
	r := t.envelope(command)
	if msg := out.refusal(); msg != "" {
		t.refuse(r, errcode.StateTransitionDenied, msg)
		r.NextActions = nil
		return r
	}
	r.NextActions = t.nextActions(t.view())
	r.ContextHint = strings.Join(out.lines(), "\n")
	return r
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
