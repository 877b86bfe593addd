package engine

import (
	"context"
	"errors"

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
