package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// GetRunState returns where a run stands (seed "Run state and health
// findings"). It reads; it never writes.
func (e *Engine) GetRunState(ctx context.Context, req *realmv1.GetRunStateRequest) (*realmv1.GetRunStateResponse, error) {
	t, err := e.read(ctx, req.GetRunId())
	if errors.Is(err, errRunNotFound) {
		r := refusal("get_run_state", req.GetRunId(), errcode.StateRunNotFound, "Run not found: "+req.GetRunId(), nil)
		r.RunVersion = nil
		return &realmv1.GetRunStateResponse{Refusal: r}, nil
	}
	if reply, ok := readFailure("get_run_state", req.GetRunId(), err); ok {
		reply.RunVersion = nil
		return &realmv1.GetRunStateResponse{Refusal: reply}, nil
	}
	if err != nil {
		return nil, err
	}
	return &realmv1.GetRunStateResponse{State: t.state(ctx, req.GetIncludeSteps())}, nil
}

func timestamp(s string) *timestamppb.Timestamp {
	t := record.ParseTime(s)
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// state composes get_run_state's reply from the record.
func (t *txn) state(ctx context.Context, includeSteps bool) *realmv1.RunState {
	r := t.run
	s := &realmv1.RunState{
		RunId:           r.ID,
		WorkflowId:      r.WorkflowID,
		RunPhase:        phaseEnum(r.Phase()),
		TerminalState:   r.Terminal(),
		CompletedSteps:  r.CompletedSteps,
		InProgressSteps: r.InProgressSteps,
		FailedSteps:     r.FailedSteps,
		SkippedSteps:    r.SkippedSteps,
		EvidenceCount:   int32(r.EvidenceCount),
		CreatedAt:       timestamp(r.CreatedAt),
		UpdatedAt:       timestamp(r.UpdatedAt),
		Params:          toStruct(r.Params),
		RerunOf:         r.RerunOf,
		DefaultedSteps:  r.DefaultedSteps,
		RunVersion:      r.Version,
	}
	if r.LastStep != "" {
		s.LastStep = ptr(r.LastStep)
	}
	if g := r.PendingGate; g != nil {
		s.PendingGate = &realmv1.PendingGate{
			GateId:    g.GateID,
			StepName:  g.StepName,
			Preview:   toValue(g.Preview),
			Choices:   g.Choices,
			OpenedAt:  timestamp(g.OpenedAt),
			ExpiresAt: timestamp(g.ExpiresAt),
		}
		pg := s.PendingGate
		if g.Owner != "" {
			pg.Owner = ptr(g.Owner)
		}
		if g.ResolvedMessage != "" {
			pg.ResolvedMessage = ptr(g.ResolvedMessage)
		}
		if len(g.ResolutionMessages) > 0 {
			m := map[string]any{}
			for k, v := range g.ResolutionMessages {
				m[k] = v
			}
			pg.ResolutionMessages = toStruct(m)
		}
		if g.OnExpiry != "" {
			pg.OnExpiry = ptr(g.OnExpiry)
		}
		if g.DefaultChoice != "" {
			pg.DefaultChoice = ptr(g.DefaultChoice)
		}
		if g.ReminderSeconds > 0 {
			pg.ReminderSeconds = ptr(int32(g.ReminderSeconds))
			pg.ReminderMax = ptr(int32(g.ReminderMax))
		}
	}
	if r.Terminal() {
		if r.TerminalReason != "" {
			s.TerminalReason = ptr(r.TerminalReason)
		}
		if r.SealedBy != nil {
			s.SealedByArm = string(r.SealedBy.Arm)
			if r.SealedBy.Arm.NamesStep() {
				s.SealedByStep = r.SealedBy.Step
			}
			if r.SealedBy.Classified {
				s.SealedByClassified = ptr(true) // stamped by realm run migrate --stamp-seals
			}
		}
	}
	if a := r.AbortedAt; a != nil && r.SealedBy != nil && r.SealedBy.Arm == record.ArmGuardAbort {
		ctx := map[string]any{"step_id": a.StepID, "conditions": condList(a.Conditions)}
		if a.AbortMessage != "" {
			ctx["abort_message"] = a.AbortMessage
		}
		s.AbortContext = toStruct(ctx)
	}
	if len(r.SkipDetails) > 0 {
		s.SkipDetails = toStruct(normalizeJSON(r.SkipDetails))
	}
	s.NextActions, s.NextActionsStatus = t.stateNext()
	if x := t.stateExtra(ctx, includeSteps); len(x) > 0 {
		s.Extra = toStruct(x)
	}
	return s
}

// stateNext is next_actions and next_actions_status for get_run_state.
func (t *txn) stateNext() ([]*realmv1.NextAction, string) {
	switch {
	case t.run.Terminal():
		return []*realmv1.NextAction{}, "skipped_terminal"
	case t.def == nil:
		return []*realmv1.NextAction{}, "workflow_unresolved"
	}
	v := t.view()
	actions := t.nextActions(v)
	return actions, t.nextStatus(v, actions)
}

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

// AdvanceRun runs the guards and auto steps a run owes.
func (e *Engine) AdvanceRun(ctx context.Context, req *realmv1.AdvanceRunRequest) (*realmv1.Reply, error) {
	const command = "advance_run"
	var warnings []string
	for _, a := range req.GetUnknownArguments() {
		warnings = append(warnings, fmt.Sprintf("advance_run: unknown argument '%s' was ignored.", a))
	}
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		t.warnings = append(t.warnings[:0], warnings...)
		t.caller = req.GetCaller()
		if t.def == nil || t.run.Terminal() {
			return nil
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
				return nil
			}
		}
		t.expired = t.enactExpiry(via)
		t.advance(advanceOpts{decideGuards: true, chain: true})
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
	r, err := t.advanceReply(command, req)
	return t.finish(r), err
}

func (t *txn) advanceReply(command string, req *realmv1.AdvanceRunRequest) (*realmv1.Reply, error) {
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
	if t.def == nil {
		t.refuse(r, errcode.StateWorkflowNotFound, t.defErr.Error())
		return r, nil
	}
	if t.openedGate != "" || t.gateErr != nil || t.failed != nil || t.abortedBy != "" {
		return r, nil
	}
	v := t.view()
	r.NextActions = t.nextActions(v)
	switch {
	case !t.dirty && t.run.Terminal():
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
			return r, nil
		}
	case t.endedBy != nil:
		r.ContextHint = t.guardSentence()
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
		var deps []string
		for _, child := range t.def.parents[g.StepName] {
			if t.run.StateOf(child) == record.StatePending {
				deps = append(deps, child)
			}
		}
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
		r.ContextHint = fmt.Sprintf("Step '%s' completed. %s", last, t.afterHint(v))
	}
	// From advance_run, guards lists only a guard that ended the run.
	if t.endedBy == nil {
		r.Guards = nil
	}
	return r, nil
}
