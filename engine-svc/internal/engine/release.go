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
		t.caller = req.GetCaller()
		released = t.release(req.GetStep(), req.GetClaimToken())
		return nil
	})
	if reply, ok := readFailure(command, req.GetRunId(), err); ok {
		return &realmv1.ReleaseClaimResponse{Reply: reply}, nil
	}
	if err != nil {
		return nil, err
	}
	return &realmv1.ReleaseClaimResponse{Reply: t.releaseReply(command, req.GetStep(), released), Released: released}, nil
}

// release frees a step's claim when token is the claim it carries, and
// says whether it did (release_claim's whole decision).
func (t *txn) release(step, token string) bool {
	r := t.run
	c := r.Claims[step]
	if r.Terminal() || c == nil || token == "" || c.Token != token ||
		(r.PendingGate != nil && r.PendingGate.StepName == step) {
		return false
	}
	r.InProgressSteps = removeString(r.InProgressSteps, step)
	delete(r.Claims, step)
	t.touch()
	return true
}

// releaseReply composes release_claim's reply from its decision and the
// run as the call leaves it.
func (t *txn) releaseReply(command, step string, released bool) *realmv1.Reply {
	r := t.envelope(command)
	r.NextActions = t.nextActions(t.view())
	if released {
		r.ContextHint = fmt.Sprintf("Released the claim on '%s'; the step has not run and is ready again.", step)
	} else {
		r.ContextHint = fmt.Sprintf("Nothing released: the claim_token given is not the claim on '%s' now.", step)
	}
	return r
}
