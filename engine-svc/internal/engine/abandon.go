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
	var out abandoned
	_, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		out = t.abandon(req.GetReason(), time.Duration(req.GetCleanupIdleSeconds())*time.Second)
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
	return abandonReply(out, req.GetCaller().GetChannel()), nil
}

// abandonedKind is what abandon_run decided.
type abandonedKind int

const (
	abandonDone         abandonedKind = iota // the run was ended
	abandonAlready                           // it had already been abandoned: no change
	abandonEnded                             // it had ended otherwise
	abandonCleanupGate                       // cleanup: it waits on a gate
	abandonCleanupFresh                      // cleanup: it was written within the idle threshold
	abandonGateOpen                          // a question is open: answer it first
)

// abandoned is abandon_run's decision, with what its reply needs.
type abandoned struct {
	kind  abandonedKind
	runID string
	phase string
	// reason is the run's terminal reason (abandonDone, abandonAlready).
	reason string
	// updatedAt is when the run was last written (abandonCleanupFresh).
	updatedAt string
	// gate is the open question (abandonGateOpen).
	gate *record.PendingGate
}

// abandon ends an open run with the operator's arm (or the cleanup
// sweep's, when idle is set and the run has been idle that long), or says
// why it leaves the run alone.
func (t *txn) abandon(reason string, idle time.Duration) abandoned {
	if reason == "" {
		reason = "Abandoned via abandon_run"
	}
	arm := record.ArmAbandonRequested
	r := t.run
	out := abandoned{runID: r.ID, phase: r.Phase()}
	switch out.phase {
	case record.PhaseAbandoned:
		out.kind, out.reason = abandonAlready, r.TerminalReason
		return out
	case record.PhaseCompleted, record.PhaseAborted, record.PhaseFailed:
		out.kind = abandonEnded
		return out
	}
	if idle > 0 {
		// realm run cleanup: decided again here, in the write, so a run
		// that moved since the listing is left alone.
		switch {
		case r.PendingGate != nil:
			out.kind = abandonCleanupGate
			return out
		case t.now.Sub(record.ParseTime(r.UpdatedAt)) < idle:
			out.kind, out.updatedAt = abandonCleanupFresh, r.UpdatedAt
			return out
		}
		arm, reason = record.ArmCleanupSweep, "Marked abandoned by realm cleanup"
	}
	if g := r.PendingGate; g != nil {
		out.kind, out.gate = abandonGateOpen, g
		return out
	}
	for _, s := range r.InProgressSteps {
		delete(r.Claims, s)
	}
	r.InProgressSteps = []string{}
	r.AbandonedAt = t.stamp()
	r.Seal(arm, "", reason)
	t.touch()
	out.kind, out.phase, out.reason = abandonDone, record.PhaseAbandoned, reason
	return out
}

// abandonNote is what every abandon_run that ends a run says.
const abandonNote = "abandon is a kill — declared finalizers (if any) did NOT run and will not for this run. The graceful path is the workflow's own guard step (abort_unless), which runs them; there is no operator abort command."

// abandonReply composes abandon_run's reply from its decision; the CLI's
// channel names the CLI's way to answer an open question.
func abandonReply(out abandoned, channel realmv1.Channel) *realmv1.AbandonRunResponse {
	refused := func(code errcode.Code, msg string) *realmv1.AbandonRunResponse {
		ref := refusal("abandon_run", out.runID, code, msg, nil)
		ref.RunVersion = nil
		return &realmv1.AbandonRunResponse{Refusal: ref}
	}
	switch out.kind {
	case abandonAlready:
		return &realmv1.AbandonRunResponse{RunId: out.runID, RunPhase: phaseEnum(out.phase), TerminalState: true,
			TerminalReason: out.reason, Note: "already abandoned (no change this call). " + abandonNote}
	case abandonEnded:
		resp := refused(errcode.StateRunTerminal, fmt.Sprintf("Run '%s' is already terminal (%s); cannot abandon a finished run.", out.runID, out.phase))
		resp.Refusal.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
		return resp
	case abandonCleanupGate:
		return refused(errcode.StateTransitionDenied, fmt.Sprintf("Run '%s' is waiting on a gate; cleanup skips gate_waiting runs.", out.runID))
	case abandonCleanupFresh:
		return refused(errcode.StateTransitionDenied, fmt.Sprintf("Run '%s' was written at %s, within the idle threshold; cleanup leaves it.", out.runID, out.updatedAt))
	case abandonGateOpen:
		g := out.gate
		msg := fmt.Sprintf("Run '%s' is waiting on human gate '%s' (gate '%s'); answer it before abandoning. Answer it: submit_human_response {run_id: '%s', gate_id: '%s', choice: <one of: %s>}.",
			out.runID, g.StepName, g.GateID, out.runID, g.GateID, joinComma(g.Choices))
		if channel == realmv1.Channel_CHANNEL_RUN {
			msg = fmt.Sprintf("Run '%s' is waiting on human gate '%s' (gate '%s'); answer it before abandoning. Answer it: realm run respond %s --gate %s --choice <one of: %s>.",
				out.runID, g.StepName, g.GateID, out.runID, g.GateID, joinComma(g.Choices))
		}
		return refused(errcode.StateTransitionDenied, msg)
	}
	return &realmv1.AbandonRunResponse{RunId: out.runID, RunPhase: phaseEnum(out.phase), TerminalState: true, TerminalReason: out.reason, Note: abandonNote}
}
