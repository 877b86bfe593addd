package engine

import (
	"context"
	"fmt"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// ReleaseClaim gives back a claim taken with ClaimStep. Only the claim's
// own token frees it: a token the step no longer carries (answered,
// reclaimed, taken over by a question) changes nothing.
func (e *Engine) ReleaseClaim(ctx context.Context, req *realmv1.ReleaseClaimRequest) (*realmv1.ReleaseClaimResponse, error) {
	const command = "release_claim"
	released := false
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		released = false
		t.caller = req.GetCaller()
		r, step := t.run, req.GetStep()
		c := r.Claims[step]
		if r.Terminal() || c == nil || req.GetClaimToken() == "" || c.Token != req.GetClaimToken() ||
			(r.PendingGate != nil && r.PendingGate.StepName == step) {
			return nil
		}
		r.InProgressSteps = removeString(r.InProgressSteps, step)
		delete(r.Claims, step)
		released = true
		t.touch()
		return nil
	})
	if reply, ok := readFailure(command, req.GetRunId(), err); ok {
		return &realmv1.ReleaseClaimResponse{Reply: reply}, nil
	}
	if err != nil {
		return nil, err
	}
	r := t.envelope(command)
	r.NextActions = t.nextActions(t.view())
	if released {
		r.ContextHint = fmt.Sprintf("Released the claim on '%s'; the step has not run and is ready again.", req.GetStep())
	} else {
		r.ContextHint = fmt.Sprintf("Nothing released: the claim_token given is not the claim on '%s' now.", req.GetStep())
	}
	return &realmv1.ReleaseClaimResponse{Reply: r, Released: released}, nil
}
