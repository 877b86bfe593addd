package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// DefaultBatchMax is the largest batch accepted when max_items is not given.
const DefaultBatchMax = 100

// StartRunBatch starts several runs of one workflow. Every item is checked
// before any run is made; then each item is created (or matched by its
// idempotency key) and no step runs: each run waits for its first call or
// for advance_run. Creation is one atomic write per run, not one for the
// whole batch: a policy refusal of one item does not undo the others.
func (e *Engine) StartRunBatch(ctx context.Context, req *realmv1.StartRunBatchRequest) (*realmv1.StartRunBatchResponse, error) {
	const command = "start_run_batch"
	max := DefaultBatchMax
	if req.MaxItems != nil {
		max = int(req.GetMaxItems())
	}
	if n := len(req.GetItems()); n > max {
		msg := fmt.Sprintf("start_run_batch: %d items exceed max_items %d. No runs were created.", n, max)
		return &realmv1.StartRunBatchResponse{Refusal: refusal(command, "", errcode.ValidationBatchTooLarge, msg,
			map[string]any{"count": n, "max_items": max})}, nil
	}
	def, err := e.definition(ctx, req.GetWorkflowId())
	var missing *errWorkflowMissing
	if errors.As(err, &missing) {
		return &realmv1.StartRunBatchResponse{Refusal: refusal(command, "", errcode.StateWorkflowNotFound,
			fmt.Sprintf("Workflow '%s' not found.", req.GetWorkflowId()), nil)}, nil
	}
	if err != nil {
		return nil, err
	}
	var failures []any
	for i, item := range req.GetItems() {
		if def.params == nil {
			break
		}
		if errs := def.params.Validate(item.GetParams().AsMap()); len(errs) > 0 {
			failures = append(failures, map[string]any{"index": i, "reason": errs[0].RootedText()})
		}
	}
	if len(failures) > 0 {
		msg := fmt.Sprintf("start_run_batch: %d item(s) failed schema validation. No runs were created.", len(failures))
		r := refusal(command, "", errcode.ValidationBatchItems, msg, map[string]any{"failures": failures})
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT
		return &realmv1.StartRunBatchResponse{Refusal: r}, nil
	}
	resp := &realmv1.StartRunBatchResponse{Started: []*realmv1.BatchStarted{}, Failed: []*realmv1.BatchFailed{}}
	for i, item := range req.GetItems() {
		t, deduped, ref, err := e.createOrMatch(ctx, def, item.GetParams().AsMap(), createOpts{
			key: item.GetIdempotencyKey(), onLive: req.GetOnLiveMatch(), onTerminal: req.GetOnTerminalMatch(),
			parent: req.GetParentRunId(), caller: req.GetCaller(),
		})
		if err != nil {
			return nil, err
		}
		if ref != nil {
			resp.Failed = append(resp.Failed, &realmv1.BatchFailed{Index: int32(i), IdempotencyKey: item.GetIdempotencyKey(),
				ErrorCode: ref.GetErrorCode(), Reason: ref.GetErrors()[0]})
			continue
		}
		v := t.view()
		entry := &realmv1.BatchStarted{
			RunId:          t.run.ID,
			IdempotencyKey: item.GetIdempotencyKey(),
			Params:         toStruct(t.run.Params),
			Deduped:        deduped,
			RunPhase:       phaseEnum(t.run.Phase()),
			Warnings:       append([]string{}, t.warnings...),
			NextActions:    t.nextActions(v),
		}
		if deduped {
			entry.ContextHint = t.matchedReply("start_run").GetContextHint()
		} else {
			entry.ContextHint = fmt.Sprintf("Run '%s' created for workflow '%s'. %s", t.run.ID, t.run.WorkflowID, t.afterHint(v))
		}
		resp.Started = append(resp.Started, entry)
	}
	return resp, nil
}
