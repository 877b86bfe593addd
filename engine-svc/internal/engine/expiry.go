package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// expiry is what carrying out an expired question did in this write.
type expiry struct {
	gateID, step, onExpiry, choice string
	via                            string // the door that carried it out
	expiredAt                      time.Time
	overdue                        time.Duration
}

// details is error_details of an answer that met an expired question.
func (x *expiry) details(runID string) map[string]any {
	d := map[string]any{
		"runId":       runID,
		"gateId":      x.gateID,
		"resolved_by": "timeout",
		"expired_at":  record.FormatTime(x.expiredAt),
		"overdue_ms":  x.overdue.Milliseconds(),
	}
	if x.choice != "" {
		d["winning_choice"] = x.choice
	}
	return d
}

// expiredGate reports whether the open question's time is up and it
// declares what to do then. A timeout without on_expiry is only reported.
func (t *txn) expiredGate() (*record.PendingGate, time.Time, bool) {
	g := t.run.PendingGate
	if g == nil || g.ExpiresAt == "" || g.OnExpiry == "" || t.run.Terminal() {
		return nil, time.Time{}, false
	}
	at := record.ParseTime(g.ExpiresAt)
	if at.IsZero() || t.now.Before(at) {
		return nil, time.Time{}, false
	}
	return g, at, true
}

// lag writes how long ago a time passed: seconds under a minute, then
// minutes, hours, days (mcp spec §9.7).
func lag(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// enactExpiry carries out an expired question's declared on_expiry inside
// this write, once: settle_default records the default choice (and decides
// the guards it makes ready), abort ends the run. via names the act that
// did it. It returns nil when nothing was due.
func (t *txn) enactExpiry(via string) *expiry {
	g, at, due := t.expiredGate()
	if !due {
		return nil
	}
	x := &expiry{gateID: g.GateID, step: g.StepName, onExpiry: g.OnExpiry, expiredAt: at, overdue: t.now.Sub(at), via: via}
	if t.run.ResolvedGates == nil {
		t.run.ResolvedGates = map[string]*record.ResolvedGate{}
	}
	t.run.PendingGate = nil
	switch g.OnExpiry {
	case "settle_default":
		x.choice = g.DefaultChoice
		out := map[string]any{}
		if m, ok := g.Preview.(map[string]any); ok {
			for k, v := range m {
				out[k] = v
			}
		}
		out["choice"] = g.DefaultChoice
		e := t.entry(g.StepName, "success")
		e.Kind = "gate_response"
		e.InputSummary = map[string]any{"choice": g.DefaultChoice}
		e.OutputSummary = out
		e.GateMessage = g.ResolvedMessage
		e.RespondedBy = "timeout"
		e.Resolution = "expired_default"
		var token *string
		if c := t.run.Claims[g.StepName]; c != nil {
			token = &c.Token
		}
		rg := &record.ResolvedGate{Step: g.StepName, Choice: g.DefaultChoice, ResolvedBy: "timeout", ExpiredAt: g.ExpiresAt, EnactedVia: via}
		if c := t.run.Claims[g.StepName]; c != nil {
			rg.Token, rg.OpenedBy, rg.OpenedSince = c.Token, c.Holder, c.Since
		}
		t.run.ResolvedGates[g.GateID] = rg
		if st := t.stepOf(g.StepName); st != nil && st.GatedBefore() {
			t.settleBefore(st, g, g.DefaultChoice, rg)
		} else {
			t.setOutput(g.StepName, out)
			t.run.MarkCompleted(g.StepName, &record.Settled{Token: token, Outcome: "gate", Choice: g.DefaultChoice, ResolvedBy: "timeout"})
		}
		t.appendEvidence(e)
		t.advance(advanceOpts{decideGuards: true, chain: false, arm: record.ArmGateExpiryDefault})
		line := fmt.Sprintf("gate '%s' on '%s' had expired %s before this call — this %s call first carried out its declared settle_default: the default choice '%s' was recorded (enacted_via: %s).",
			g.GateID, g.StepName, lag(x.overdue), via, g.DefaultChoice, via)
		t.expiryLine = line
		t.warnings = append(t.warnings, line)
	case "abort":
		t.run.ResolvedGates[g.GateID] = &record.ResolvedGate{Step: g.StepName, ResolvedBy: "timeout", ExpiredAt: g.ExpiresAt, EnactedVia: via}
		t.run.MarkSkipped(g.StepName, &record.SkipDetail{Kind: "gate_expired", GateID: g.GateID})
		t.abortRest("gate_cancelled_by_abort")
		t.run.Seal(record.ArmGateExpiryAbort, g.StepName, fmt.Sprintf("Gate '%s' expired and the run aborted per the workflow's declared on_expiry.", g.StepName))
		line := fmt.Sprintf("gate '%s' on '%s' had expired %s before this call — this %s call first carried out its declared abort: the run ended (aborted) and no answer was recorded (enacted_via: %s).",
			g.GateID, g.StepName, lag(x.overdue), via, via)
		t.expiryLine = line
		t.warnings = append(t.warnings, line)
	}
	t.touch()
	return x
}

// SweepExpired carries out every expired question that declares
// on_expiry, so no run waits for a caller to notice. Any number of engine
// replicas may sweep at once: each enactment is a compare-and-set write
// that re-checks the gate, so exactly one replica carries each out and the
// others find nothing due. It returns how many it carried out.
func (e *Engine) SweepExpired(ctx context.Context, limit int) (int, error) {
	due, err := e.st.Due(ctx, store.IndexExpiries, float64(e.now().UnixMilli()), limit)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, runID := range due {
		var did bool
		_, err := e.update(ctx, runID, func(t *txn) error {
			did = false
			if t.def == nil {
				return nil
			}
			t.warnings = nil
			if x := t.enactExpiry("sweeper"); x != nil {
				did = true
				return nil
			}
			if _, _, due := t.expiredGate(); !due {
				// Nothing to carry out (a gate without on_expiry, written
				// before such gates left the index): rewrite the run's
				// index entries, as they are now computed, so it stops
				// coming back ahead of the work that is due.
				t.maint, t.keepUpdatedAt = true, true
				t.touch()
			}
			return nil
		})
		if errors.Is(err, errRunNotFound) {
			// An entry whose run is gone (removed by hand, evicted) would
			// come back at the head of the index every sweep: reap it,
			// only while the run is still absent.
			if m, ok := e.st.(store.Maintenance); ok {
				if _, err := m.ReapIndexEntry(ctx, store.IndexExpiries, runID); err != nil {
					e.log.Warn("sweep: could not clear the entry of a missing run", "run_id", runID, "err", err)
				}
			}
			continue
		}
		if err != nil {
			e.log.Warn("sweep: could not carry out an expired question", "run_id", runID, "err", err)
			continue
		}
		if did {
			n++
			e.log.Info("sweep: carried out an expired question", "run_id", runID)
		}
	}
	return n, nil
}

// RunSweeper sweeps every interval until ctx ends: expired questions,
// stale claims of idempotent steps, ended runs whose cleanup no process is
// delivering, then rested ended runs to pack (up to packPages pages of
// 500 a turn, so packing keeps up with thousands of runs ending a
// second). The caller owns it.
func (e *Engine) RunSweeper(ctx context.Context, interval time.Duration) {
	ticking(ctx, interval, func() bool {
		if _, err := e.SweepExpired(ctx, 500); err != nil && ctx.Err() == nil {
			e.log.Warn("sweep failed", slog.Any("err", err))
		}
		if _, err := e.SweepClaims(ctx, 500); err != nil && ctx.Err() == nil {
			e.log.Warn("claims sweep failed", slog.Any("err", err))
		}
		if _, err := e.SweepFinalizers(ctx, 500); err != nil && ctx.Err() == nil {
			e.log.Warn("finalizers sweep failed", slog.Any("err", err))
		}
		for range packPages {
			n, err := e.SweepPack(ctx, 500)
			if err != nil && ctx.Err() == nil {
				e.log.Warn("pack sweep failed", slog.Any("err", err))
			}
			if n < 500 {
				break
			}
		}
		return true
	})
}

// expiryHint is the sentence that replaces "nothing ran" when a call's only
// work was carrying out an expired question.
func (t *txn) expiryHint(v view) string {
	if t.endedBy != nil {
		return fmt.Sprintf("Run '%s': its expired question was carried out as declared, and that decided guard '%s' (see warnings); no other step ran. The run ended (%s).",
			t.run.ID, t.endedBy.step, t.run.Phase())
	}
	if t.run.Terminal() {
		return fmt.Sprintf("Run '%s': its expired question was carried out as declared (see warnings); no step ran. The run ended (%s).", t.run.ID, t.run.Phase())
	}
	return fmt.Sprintf("Run '%s': its expired question was carried out as declared (see warnings); no step ran. %s", t.run.ID, t.whatNext(v))
}

// expiredAction is the advance_run act offered for a question whose time is
// up and that declares on_expiry: an answer could no longer be recorded.
func (t *txn) expiredAction(g *record.PendingGate) *realmv1.NextAction {
	return &realmv1.NextAction{
		Instruction:   t.advanceInstruction(),
		HumanReadable: fmt.Sprintf("Call advance_run to carry out the expired question on '%s' (its declared %s), then run what it leaves owed until a step opens a question, fails or ends the run. It runs with this server's extensions and environment.", g.StepName, g.OnExpiry),
		Orientation:   fmt.Sprintf("Run is paused at gate '%s', whose time is up. Engine work is owed: '%s'.", g.GateID, g.StepName),
		OwedSteps:     []string{g.StepName},
	}
}
