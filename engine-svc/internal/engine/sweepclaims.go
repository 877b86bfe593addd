package engine

import (
	"context"
	"errors"
	"slices"

	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// sweeperCaller is who the sweeper's acts are recorded as.
var sweeperCaller = &realmv1.Caller{By: "sweeper", BySource: "engine"}

// SweepClaims recovers claims past their deadline without an operator:
// the claim of a step declared idempotent is freed (as `realm run reclaim
// --only-idempotent --force` would) and the run advanced, so its handler
// runs again here, on whichever runner serves it. A step not declared
// idempotent keeps its claim: the stale-claim finding names it, and `realm
// run reclaim` is the way out. Claims of unknown age (a workflow with
// finalizers claims its non-idempotent steps with no deadline) are never
// swept. It returns how
// many claims it freed; the steps run in the background, owned by ctx and
// waited for by WaitDrives.
func (e *Engine) SweepClaims(ctx context.Context, limit int) (int, error) {
	due, err := e.st.DueAfter(ctx, store.IndexClaims, 0, float64(e.now().UnixMilli()), limit)
	if err != nil {
		return 0, err
	}
	freed := 0
	for _, runID := range due {
		var steps []string
		t, err := e.update(ctx, runID, func(t *txn) error {
			steps = steps[:0]
			if t.def == nil || t.run.Terminal() {
				return nil
			}
			t.caller = sweeperCaller
			for _, step := range slices.Clone(t.run.InProgressSteps) {
				if t.claimState(t.run.Claims[step]) != "claim_stale" {
					continue
				}
				if out := t.reclaim(step, true, true); out.kind == reclaimDone {
					steps = append(steps, step)
					t.touch()
				}
			}
			if len(steps) > 0 {
				t.advance(advanceOpts{decideGuards: true, chain: true})
			}
			return nil
		})
		if errors.Is(err, errRunNotFound) {
			continue
		}
		if err != nil {
			e.log.Warn("sweep: could not recover stale claims", "run_id", runID, "err", err)
			continue
		}
		if len(steps) == 0 {
			continue
		}
		freed += len(steps)
		e.log.Info("sweep: freed stale claims of idempotent steps", "run_id", runID, "steps", steps)
		if len(t.dispatch) > 0 {
			e.drives.Add(1)
			go func() {
				defer e.drives.Done()
				if err := e.drive(ctx, t); err != nil && ctx.Err() == nil {
					e.log.Warn("sweep: running the freed steps failed", "run_id", runID, "err", err)
				}
			}()
		}
	}
	return freed, nil
}
