package engine

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// ClaimStep takes a ready agent step's claim without doing it (cli spec
// §2.6): the process that attends the step holds it while a person types
// the answer, so no other driver does the step meanwhile. The claim is the
// record shape every claim has, with no deadline: nobody can say how long a
// person takes, so health reports it as claim_unknown_age, and a holder
// that died is recovered with reclaim --force.
func (e *Engine) ClaimStep(ctx context.Context, req *realmv1.ClaimStepRequest) (*realmv1.ClaimStepResponse, error) {
	const command = "claim_step"
	var out claimDecision
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		t.caller = req.GetCaller()
		out = t.claimOnly(req.GetStep())
		return nil
	})
	if reply, ok := readFailure(command, req.GetRunId(), err); ok {
		return &realmv1.ClaimStepResponse{Reply: reply}, nil
	}
	if err != nil {
		return nil, err
	}
	switch {
	case out.workflowMissing:
		return &realmv1.ClaimStepResponse{Reply: refusal(command, t.run.ID, errcode.StateWorkflowNotFound, t.defErr.Error(), nil)}, nil
	case out.uncallable != nil:
		return &realmv1.ClaimStepResponse{Reply: t.blockedReply(req.GetStep(), out.uncallable)}, nil
	case out.cannotRun != nil:
		return &realmv1.ClaimStepResponse{Reply: t.cannotRunReply(req.GetStep(), out.cannotRun)}, nil
	}
	r := t.envelope(command)
	r.ContextHint = fmt.Sprintf("Step '%s' is claimed by this call, with no deadline. Answer it with execute_step passing this claim_token, or give the claim back with release_claim.", req.GetStep())
	return &realmv1.ClaimStepResponse{Reply: r, ClaimToken: out.claim.Token, Since: timestamppb.New(record.ParseTime(out.claim.Since))}, nil
}

// claimDecision is claim_step's decision: the claim taken, or why none was.
type claimDecision struct {
	claim           *record.Claim
	workflowMissing bool
	uncallable      *uncallable
	cannotRun       *cannotRun
}

// claimOnly marks a callable agent step in progress under a new claim, or
// says why the step cannot be claimed now.
func (t *txn) claimOnly(step string) claimDecision {
	switch {
	case t.def == nil:
		return claimDecision{workflowMissing: true}
	case t.run.Terminal():
		return claimDecision{uncallable: &uncallable{kind: callRunEnded, runID: t.run.ID, phase: t.run.Phase()}}
	}
	s := t.stepOf(step)
	if s == nil {
		return claimDecision{uncallable: &uncallable{kind: callNotInWorkflow, step: step, workflowID: t.run.WorkflowID}}
	}
	if u := t.notCallable(s); u != nil {
		return claimDecision{uncallable: u}
	}
	if s.Execution != workflow.KindAgent {
		return claimDecision{uncallable: &uncallable{kind: callNotAgent}}
	}
	if c := t.refusedBeforeClaim(s); c != nil {
		return claimDecision{cannotRun: c}
	}
	c := &record.Claim{Token: uuid.NewString(), Holder: holderOf(t.caller), Since: t.stamp()}
	t.run.MarkInProgress(s.Name, c)
	t.touch()
	return claimDecision{claim: c}
}

// heldClaim reports whether token is the claim an agent step in flight
// carries (taken with ClaimStep), so its answer may be recorded.
func (t *txn) heldClaim(s *workflow.Step, token string) bool {
	if token == "" || s.Execution != workflow.KindAgent || t.run.StateOf(s.Name) != record.StateInProgress {
		return false
	}
	if g := t.run.PendingGate; g != nil && g.StepName == s.Name {
		return false
	}
	c := t.run.Claims[s.Name]
	return c != nil && c.Token == token
}
