package engine

import (
	"context"
	"fmt"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// AdvanceRun runs the guards and auto steps a run owes.
func (e *Engine) AdvanceRun(ctx context.Context, req *realmv1.AdvanceRunRequest) (*realmv1.Reply, error) {
	const command = "advance_run"
	var warnings []string
	for _, a := range req.GetUnknownArguments() {
		warnings = append(warnings, fmt.Sprintf("advance_run: unknown argument '%s' was ignored.", a))
	}
	var out advanced
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		t.warnings = append(t.warnings[:0], warnings...)
		t.caller = req.GetCaller()
		out = t.advanceRun(req)
		return nil
	})
	if reply, ok := readFailure(command, req.GetRunId(), err); ok {
		return reply, nil
	}
	if err != nil {
		return nil, err
	}
	if err := e.drive(ctx, t); err != nil {
		return nil, err
	}
	return t.finish(t.advanceReply(command, req, out)), nil
}

// advancedKind is what advance_run decided before its chain ran.
type advancedKind int

const (
	advAdvanced        advancedKind = iota // the run was advanced (the chain may have run nothing)
	advWorkflowMissing                     // the run's workflow cannot be read
	advRunEnded                            // the run had ended: nothing ran
	advTimerIdle                           // the expiry timer found no question's time up
)

// advanced is advance_run's decision. What the chain did is in the
// transaction's effects, which drive's later writes merge into.
type advanced struct{ kind advancedKind }

// advanceRun carries out an expired question's expiry and runs the guards
// and auto steps the run owes.
func (t *txn) advanceRun(req *realmv1.AdvanceRunRequest) advanced {
	switch {
	case t.def == nil:
		return advanced{kind: advWorkflowMissing}
	case t.run.Terminal():
		return advanced{kind: advRunEnded}
	}
	via := "advance_run"
	if req.GetCaller().GetChannel() == realmv1.Channel_CHANNEL_RUN {
		via = "advance" // the CLI's word for the act
	}
	if req.GetExpiryTimer() {
		// The attending process's timer is a door for the expiry
		// only: with no question's time up it does nothing else.
		via = "timer"
		if _, _, due := t.expiredGate(); !due {
			return advanced{kind: advTimerIdle}
		}
	}
	t.expired = t.enactExpiry(via)
	t.advance(advanceOpts{decideGuards: true, chain: true})
	return advanced{kind: advAdvanced}
}

// advanceReply composes advance_run's reply from its decision and the
// effects of the call's writes, on the run as the call leaves it.
func (t *txn) advanceReply(command string, req *realmv1.AdvanceRunRequest, out advanced) *realmv1.Reply {
	var r *realmv1.Reply
	switch {
	case t.failed != nil || t.abortedBy != "":
		r = t.outcomeReply(command)
	case t.openedGate != "":
		r = t.gateReply(command)
	case t.gateErr != nil:
		r = t.gateMessageReply(command, t.gateErr)
	default:
		r = t.envelope(command)
	}
	r.ContinuedBy = &realmv1.Holder{AbsentCause: "driver_not_recorded"}
	if c := req.GetCaller(); c.GetBy() != "" {
		r.ContinuedBy = &realmv1.Holder{By: ptr(c.GetBy()), BySource: c.GetBySource(), Channel: channelName(c.GetChannel())}
	}
	if out.kind == advWorkflowMissing {
		t.refuse(r, errcode.StateWorkflowNotFound, t.defErr.Error())
		return r
	}
	if t.openedGate != "" || t.gateErr != nil || t.failed != nil || t.abortedBy != "" {
		return r
	}
	v := t.view()
	r.NextActions = t.nextActions(v)
	switch {
	case out.kind == advRunEnded:
		r.ContextHint = fmt.Sprintf("Run '%s' is already terminal (%s); nothing ran.", t.run.ID, t.run.Phase())
		if tail := t.terminalTail(); tail != "" {
			r.ContextHint += " " + tail
		}
	case t.expired != nil && !t.hasChained:
		r.ContextHint = t.expiryHint(v)
		if t.endedBy != nil {
			// The guard the expiry decided is told in the expiry's line.
			for i, w := range r.Warnings {
				if w == t.expiryLine {
					r.Warnings[i] = w + " " + t.guardSentence()
				}
			}
			r.Guards, r.EndedBy = nil, nil
			return r
		}
	case t.endedBy != nil:
		r.ContextHint = t.guardSentence()
		if t.endedBy.arm == record.ArmGuardResolutionError {
			// The way back in, as an answer's reply gives it (seed 000).
			if tail := t.terminalTail(); tail != "" {
				r.ContextHint += " " + tail
			}
		}
	case len(t.blocked) > 0 && !t.hasChained:
		s := t.blocked[0]
		r.Status = realmv1.ReplyStatus_REPLY_STATUS_ERROR
		r.ErrorCode = string(errcode.EngineHandlerNotRegistered)
		r.Errors = []string{fmt.Sprintf("Step '%s' is blocked: its handler '%s' is not registered in this runner.", s.Name, s.Handler)}
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_WAIT_FOR_HUMAN
		r.StoppedStep = s.Name
		r.ContextHint = fmt.Sprintf("Run '%s': nothing ran. %s", t.run.ID, t.afterHint(v))
	case !t.hasChained && t.run.PendingGate != nil:
		g := t.run.PendingGate
		waits := ""
		// The steps get_run_state lists as waiting_on_answer: one
		// computation for both.
		deps := t.waitingOnAnswer()
		switch len(deps) {
		case 0:
		case 1:
			waits = fmt.Sprintf("; '%s' waits for its answer", deps[0])
		default:
			waits = fmt.Sprintf("; %s wait for its answer", quoteNames(deps))
		}
		r.ContextHint = fmt.Sprintf("Run '%s': nothing ran. Waiting on the question on step '%s' (choices: %s) — answer it with submit_human_response%s.", t.run.ID, g.StepName, joinComma(g.Choices), waits)
	case !t.hasChained:
		r.ContextHint = fmt.Sprintf("Run '%s': nothing ran. %s", t.run.ID, t.afterHint(v))
	default:
		last := t.chained[len(t.chained)-1].step
		r.ContextHint = t.completedHint(last, v)
	}
	// From advance_run, guards lists only a guard that ended the run.
	if t.endedBy == nil {
		r.Guards = nil
	}
	return r
}
