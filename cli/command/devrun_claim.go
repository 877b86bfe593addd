package command

import (
	"context"
	"slices"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// heldClaim is the claim this command holds on an agent step while its
// prompt waits (cli.md §2.6): no other driver does the step meanwhile.
type heldClaim struct {
	step, token string
	since       time.Time
}

// claim takes the step's claim before its prompt. A nil claim with no
// error means the engine refused it: ok says whether the step is still
// there to prompt for (unclaimed, as before this engine had ClaimStep);
// otherwise the record changed and the loop reads it again.
func (d *devRun) claim(step string) (c *heldClaim, ok bool, err error) {
	resp, err := devCall(d, func(ctx context.Context) (*realmv1.ClaimStepResponse, error) {
		return d.eng.ClaimStep(ctx, &realmv1.ClaimStepRequest{RunId: d.runID, Step: step, Caller: d.caller})
	})
	if err != nil {
		return nil, false, err
	}
	if tok := resp.GetClaimToken(); tok != "" {
		return &heldClaim{step: step, token: tok, since: resp.GetSince().AsTime()}, true, nil
	}
	st, err := d.state(false)
	if err != nil {
		return nil, false, err
	}
	if slices.Contains(st.GetInProgressSteps(), step) || st.GetTerminalState() || d.agentStep(st) != step {
		return nil, false, nil
	}
	return nil, true, nil
}

// release gives the claim back (the prompt was left, or a signal ends the
// command). It runs even when the command's context is cancelled by the
// signal; a token the engine no longer holds (answered, reclaimed) changes
// nothing.
func (d *devRun) release(c *heldClaim) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), d.a.timeout)
	defer cancel()
	_, _ = d.eng.ReleaseClaim(ctx, &realmv1.ReleaseClaimRequest{RunId: d.runID, Step: c.step, ClaimToken: c.token, Caller: d.caller})
}

// ours reports whether the step's claim in the record is this command's.
func (c *heldClaim) ours(st *realmv1.RunState) bool {
	claims, _ := st.GetExtra().AsMap()["step_claims"].([]any)
	for _, x := range claims {
		m, _ := x.(map[string]any)
		if s, _ := m["step"].(string); s != c.step {
			continue
		}
		since, _ := m["since"].(string)
		at, err := time.Parse(time.RFC3339Nano, since)
		return err == nil && at.Equal(c.since)
	}
	return false
}
