package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// AbandonRun ends an open run by hand (seed "abandon_run").
func (e *Engine) AbandonRun(ctx context.Context, req *realmv1.AbandonRunRequest) (*realmv1.AbandonRunResponse, error) {
	reason := req.GetReason()
	if reason == "" {
		reason = "Abandoned via abandon_run"
	}
	arm := record.ArmAbandonRequested
	const note = "abandon is a kill — declared finalizers (if any) did NOT run and will not for this run. The graceful path is the workflow's own guard step (abort_unless), which runs them; there is no operator abort command."
	var resp *realmv1.AbandonRunResponse
	_, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		r := t.run
		switch r.Phase() {
		case record.PhaseAbandoned:
			resp = &realmv1.AbandonRunResponse{RunId: r.ID, RunPhase: phaseEnum(r.Phase()), TerminalState: true,
				TerminalReason: r.TerminalReason, Note: "already abandoned (no change this call). " + note}
			return nil
		case record.PhaseCompleted, record.PhaseAborted, record.PhaseFailed:
			msg := fmt.Sprintf("Run '%s' is already terminal (%s); cannot abandon a finished run.", r.ID, r.Phase())
			ref := refusal("abandon_run", r.ID, errcode.StateRunTerminal, msg, nil)
			ref.RunVersion = nil
			ref.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
			resp = &realmv1.AbandonRunResponse{Refusal: ref}
			return nil
		}
		if idle := time.Duration(req.GetCleanupIdleSeconds()) * time.Second; idle > 0 {
			// realm run cleanup: decided again here, in the write, so a run
			// that moved since the listing is left alone.
			var msg string
			switch {
			case r.PendingGate != nil:
				msg = fmt.Sprintf("Run '%s' is waiting on a gate; cleanup skips gate_waiting runs.", r.ID)
			case t.now.Sub(record.ParseTime(r.UpdatedAt)) < idle:
				msg = fmt.Sprintf("Run '%s' was written at %s, within the idle threshold; cleanup leaves it.", r.ID, r.UpdatedAt)
			}
			if msg != "" {
				ref := refusal("abandon_run", r.ID, errcode.StateTransitionDenied, msg, nil)
				ref.RunVersion = nil
				resp = &realmv1.AbandonRunResponse{Refusal: ref}
				return nil
			}
			arm, reason = record.ArmCleanupSweep, "Marked abandoned by realm cleanup"
		}
		if g := r.PendingGate; g != nil {
			msg := fmt.Sprintf("Run '%s' is waiting on human gate '%s' (gate '%s'); answer it before abandoning. Answer it: submit_human_response {run_id: '%s', gate_id: '%s', choice: <one of: %s>}.",
				r.ID, g.StepName, g.GateID, r.ID, g.GateID, joinComma(g.Choices))
			if req.GetCaller().GetChannel() == realmv1.Channel_CHANNEL_RUN {
				msg = fmt.Sprintf("Run '%s' is waiting on human gate '%s' (gate '%s'); answer it before abandoning. Answer it: realm run respond %s --gate %s --choice <one of: %s>.",
					r.ID, g.StepName, g.GateID, r.ID, g.GateID, joinComma(g.Choices))
			}
			ref := refusal("abandon_run", r.ID, errcode.StateTransitionDenied, msg, nil)
			ref.RunVersion = nil
			resp = &realmv1.AbandonRunResponse{Refusal: ref}
			return nil
		}
		for _, s := range r.InProgressSteps {
			delete(r.Claims, s)
		}
		r.InProgressSteps = []string{}
		r.AbandonedAt = record.FormatTime(t.now)
		r.Seal(arm, "", reason)
		t.touch()
		resp = &realmv1.AbandonRunResponse{RunId: r.ID, RunPhase: phaseEnum(record.PhaseAbandoned), TerminalState: true, TerminalReason: reason, Note: note}
		return nil
	})
	if errors.Is(err, errRunNotFound) {
		ref := refusal("abandon_run", req.GetRunId(), errcode.StateRunNotFound, "Run not found: "+req.GetRunId(), nil)
		ref.RunVersion = nil
		return &realmv1.AbandonRunResponse{Refusal: ref}, nil
	}
	if ce, ok := errcode.As(err); ok && ce.Code == errcode.EngineStoreFailed {
		// abandon_run refuses an unreadable run with the bare message, no code.
		ref := refusal("abandon_run", req.GetRunId(), "", ce.Message, nil)
		ref.RunVersion, ref.ErrorCode = nil, ""
		return &realmv1.AbandonRunResponse{Refusal: ref}, nil
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}
