package mcpserver

import (
	"context"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

// tool is one MCP tool: its name, description and parameters, and the one
// engine call it makes. call returns the reply's JSON value.
type tool struct {
	name   string
	desc   string
	params []param
	call   func(ctx context.Context, s *Server, a *args) (any, error)
}

// Parameter descriptions repeat the seed's "Holds" column.
var (
	pRunID    = param{name: "run_id", kind: kString, required: true, desc: "The run."}
	pWorkflow = param{name: "workflow_id", kind: kString, required: true, desc: "The workflow's ID."}
	pOnLive   = param{name: "on_live_match", kind: kString, desc: "What a repeat does while the first run is open: use_existing (default) or fail."}
	pOnTerm   = param{name: "on_terminal_match", kind: kString, desc: "What a repeat does after the first run has ended: reuse (default), reject, rerun_if_failed or rerun."}
	pNonce    = param{name: "writer_nonce", kind: kString, desc: "An identifier for this attempt of the step, the same one given to append_trace and execute_step."}

	traceEntry = param{name: "entry", kind: kObject, fields: []param{
		{name: "event", kind: kString, required: true, desc: "A name for what happened."},
		{name: "timestamp", kind: kString, desc: "When."},
		{name: "data", kind: kObject, scalarValues: true, desc: "Details. Each value is text, a number, true, false or null."},
	}}

	batchItem = param{name: "item", kind: kObject, fields: []param{
		{name: "params", kind: kObject, required: true, desc: "The run's parameters."},
		{name: "idempotency_key", kind: kString, desc: "A key that makes a repeat return the first run."},
	}}

	createStep = param{name: "step", kind: kObject, fields: []param{
		{name: "id", kind: kString, required: true, desc: "The step's name."},
		{name: "description", kind: kString, required: true, desc: "What the step is for."},
		{name: "depends_on", kind: kArray, items: &param{kind: kString}, desc: "The steps that must complete first."},
		{name: "input_schema", kind: kObject, desc: "The schema the step's answer must fit."},
		{name: "llm_timeout_seconds", kind: kInteger, desc: "As in a workflow file."},
		{name: "structured_output", kind: kString, desc: "As in a workflow file."},
	}}
)

// tools are the 11 tools, in the seed's order. Descriptions are the
// spec's suggested one-liners (mcp-and-gates §2). Unknown arguments are
// ignored, except that create_workflow, submit_human_response and
// advance_run hand them to the engine (unknown_arguments), which names them
// in warnings.
var tools = []*tool{
	{
		name: "list_workflows",
		desc: "List registered workflows (id, name, version) and any unreadable registry entries. Call first.",
		call: func(ctx context.Context, s *Server, _ *args) (any, error) {
			resp, err := client.ListAllWorkflows(ctx, s.engine)
			if err != nil {
				return listRefusal(err)
			}
			return reply.ListWorkflowsJSON(resp), nil
		},
	},
	{
		name:   "get_workflow_protocol",
		desc:   "Return the briefing for one workflow: steps, schemas, profile instructions, rules, quick start. Call before start_run.",
		params: []param{pWorkflow},
		call: func(ctx context.Context, s *Server, a *args) (any, error) {
			resp, err := s.engine.GetWorkflowProtocol(ctx, &realmv1.GetWorkflowProtocolRequest{WorkflowId: a.str("workflow_id")})
			if err != nil {
				return nil, err
			}
			return nonNil(resp.GetProtocol().AsMap())
		},
	},
	{
		name: "start_run",
		desc: "Start a run (optional idempotency key and repeat policies); runs ready automatic steps and returns the first task.",
		params: []param{
			{name: "workflow_id", kind: kString, required: true, desc: "The workflow to run."},
			{name: "params", kind: kObject, desc: "The run's parameters. Checked against the workflow's params_schema. Default {}."},
			{name: "idempotency_key", kind: kString, desc: "A key that makes a repeat of the call return the first run."},
			pOnLive, pOnTerm,
		},
		call: func(ctx context.Context, s *Server, a *args) (any, error) {
			params, err := a.object("params")
			if err != nil {
				return nil, err
			}
			resp, err := s.engine.StartRun(ctx, &realmv1.StartRunRequest{
				WorkflowId: a.str("workflow_id"), Params: params, IdempotencyKey: a.str("idempotency_key"),
				OnLiveMatch: a.str("on_live_match"), OnTerminalMatch: a.str("on_terminal_match"), Caller: s.caller,
			})
			if err != nil {
				return nil, err
			}
			return nonNil(reply.ReplyJSON(resp.GetReply()))
		},
	},
	{
		name: "start_run_batch",
		desc: "Validate then start several runs of one workflow; runs no steps.",
		params: []param{
			{name: "workflow_id", kind: kString, required: true, desc: "The workflow to run."},
			{name: "items", kind: kArray, required: true, items: &batchItem, desc: "One entry for each run: params (required) and idempotency_key (optional)."},
			{name: "max_items", kind: kInteger, desc: "The largest batch accepted. Default 100."},
			{name: "parent_run_id", kind: kString, desc: "Recorded on each new run as the run that started it."},
			pOnLive, pOnTerm,
		},
		call: func(ctx context.Context, s *Server, a *args) (any, error) {
			items, err := batchItems(a.list("items"))
			if err != nil {
				return nil, err
			}
			resp, err := s.engine.StartRunBatch(ctx, &realmv1.StartRunBatchRequest{
				WorkflowId: a.str("workflow_id"), Items: items, MaxItems: a.optInt32("max_items"),
				ParentRunId: a.str("parent_run_id"), OnLiveMatch: a.str("on_live_match"),
				OnTerminalMatch: a.str("on_terminal_match"), Caller: s.caller,
			})
			if err != nil {
				return nil, err
			}
			return nonNil(reply.StartRunBatchJSON(resp))
		},
	},
	{
		name: "execute_step",
		desc: "Submit the answer for an agent step (or run an automatic step by name); returns what comes next.",
		params: []param{
			pRunID,
			{name: "command", kind: kString, required: true, desc: "The step's name."},
			{name: "params", kind: kObject, desc: "For an agent step, the assistant's answer. Default {}."},
			{name: "trace", kind: kArray, items: &traceEntry, desc: "Trace entries to record with the step. See append_trace for their shape."},
			pNonce,
		},
		call: func(ctx context.Context, s *Server, a *args) (any, error) {
			params, err := a.objectJSON("params")
			if err != nil {
				return nil, err
			}
			trace, err := traceEntries(a.list("trace"))
			if err != nil {
				return nil, err
			}
			resp, err := s.engine.ExecuteStep(ctx, &realmv1.ExecuteStepRequest{
				RunId: a.str("run_id"), Command: a.str("command"), ParamsJson: params, Trace: trace,
				WriterNonce: a.str("writer_nonce"), Caller: s.caller,
			})
			if err != nil {
				return nil, err
			}
			return nonNil(reply.ReplyJSON(resp.GetReply()))
		},
	},
	{
		name: "submit_human_response",
		desc: "Record a person's choice at an open gate.",
		params: []param{
			pRunID,
			{name: "gate_id", kind: kString, required: true, desc: "The open gate's ID, from gate.gate_id."},
			{name: "choice", kind: kString, required: true, desc: "One of the gate's choices."},
			{name: "responded_by", kind: kString, desc: "Who made the choice, as the caller states it. Not verified. At most 200 characters, no control characters. Recorded with the answer."},
			{name: "claim_token", kind: kString, desc: "The value from gate.claim_token on the reply that opened this question. Never required."},
		},
		call: func(ctx context.Context, s *Server, a *args) (any, error) {
			resp, err := s.engine.SubmitHumanResponse(ctx, &realmv1.SubmitHumanResponseRequest{
				RunId: a.str("run_id"), GateId: a.str("gate_id"), Choice: a.str("choice"),
				RespondedBy: a.optStr("responded_by"), ClaimToken: a.optStr("claim_token"),
				UnknownArguments: a.unknown, Caller: s.caller,
			})
			if err != nil {
				return nil, err
			}
			return nonNil(reply.ReplyJSON(resp.GetReply()))
		},
	},
	{
		name:   "advance_run",
		desc:   "Run the guards and automatic steps a run owes, with this server's code and environment.",
		params: []param{pRunID},
		call: func(ctx context.Context, s *Server, a *args) (any, error) {
			resp, err := s.engine.AdvanceRun(ctx, &realmv1.AdvanceRunRequest{
				RunId: a.str("run_id"), UnknownArguments: a.unknown, Caller: s.caller,
			})
			if err != nil {
				return nil, err
			}
			return nonNil(reply.ReplyJSON(resp.GetReply()))
		},
	},
	{
		name: "get_run_state",
		desc: "Read where a run stands, what to do next, and any health findings.",
		params: []param{
			pRunID,
			{name: "include_steps", kind: kBool, desc: "Adds each step's attempts and what the model calls cost."},
		},
		call: func(ctx context.Context, s *Server, a *args) (any, error) {
			resp, err := s.engine.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: a.str("run_id"), IncludeSteps: a.boolean("include_steps")})
			if err != nil {
				return nil, err
			}
			return nonNil(reply.GetRunStateJSON(resp))
		},
	},
	{
		name: "abandon_run",
		desc: "End an open run that should not continue (no cleanup steps run).",
		params: []param{
			pRunID,
			{name: "reason", kind: kString, desc: "Recorded as the run's cause. Default Abandoned via abandon_run."},
		},
		call: func(ctx context.Context, s *Server, a *args) (any, error) {
			resp, err := s.engine.AbandonRun(ctx, &realmv1.AbandonRunRequest{RunId: a.str("run_id"), Reason: a.str("reason"), Caller: s.caller})
			if err != nil {
				return nil, err
			}
			return nonNil(reply.AbandonRunJSON(resp))
		},
	},
	{
		name: "create_workflow",
		desc: "Define a small all-agent workflow from a list of steps and start a run of it.",
		params: []param{
			{name: "steps", kind: kArray, required: true, minItems: 1, items: &createStep, desc: "The steps, at least one."},
			{name: "metadata", kind: kObject, desc: "name, description, task_description, model, agent."},
		},
		call: func(ctx context.Context, s *Server, a *args) (any, error) {
			steps, err := structpb.NewList(a.list("steps"))
			if err != nil {
				return nil, err
			}
			meta, err := a.optObject("metadata")
			if err != nil {
				return nil, err
			}
			resp, err := s.engine.CreateWorkflow(ctx, &realmv1.CreateWorkflowRequest{
				Steps: steps, Metadata: meta, UnknownArguments: a.unknown, Caller: s.caller,
			})
			if err != nil {
				return nil, err
			}
			return nonNil(reply.ReplyJSON(resp.GetReply()))
		},
	},
	{
		name: "append_trace",
		desc: "Record notes for an agent step before submitting it.",
		params: []param{
			pRunID,
			{name: "step_id", kind: kString, required: true, desc: "The agent step the notes are about. It must not yet have been done."},
			{name: "entries", kind: kArray, required: true, items: &traceEntry, desc: "The trace entries."},
			pNonce,
		},
		call: func(ctx context.Context, s *Server, a *args) (any, error) {
			entries, err := traceEntries(a.list("entries"))
			if err != nil {
				return nil, err
			}
			resp, err := s.engine.AppendTrace(ctx, &realmv1.AppendTraceRequest{
				RunId: a.str("run_id"), StepId: a.str("step_id"), Entries: entries,
				WriterNonce: a.str("writer_nonce"), Caller: s.caller,
			})
			if err != nil {
				return nil, err
			}
			return nonNil(reply.AppendTraceJSON(resp))
		},
	},
}

// traceEntries converts checked trace entries; fields other than event,
// timestamp and data are dropped.
func traceEntries(list []any) ([]*realmv1.TraceEntry, error) {
	out := make([]*realmv1.TraceEntry, 0, len(list))
	for _, x := range list {
		m, _ := x.(map[string]any)
		e := &realmv1.TraceEntry{}
		e.Event, _ = m["event"].(string)
		e.Timestamp, _ = m["timestamp"].(string)
		if d, ok := m["data"].(map[string]any); ok {
			s, err := structpb.NewStruct(d)
			if err != nil {
				return nil, err
			}
			e.Data = s
		}
		out = append(out, e)
	}
	return out, nil
}

// batchItems converts checked batch items.
func batchItems(list []any) ([]*realmv1.BatchItem, error) {
	out := make([]*realmv1.BatchItem, 0, len(list))
	for _, x := range list {
		m, _ := x.(map[string]any)
		p, _ := m["params"].(map[string]any)
		params, err := toStruct(p)
		if err != nil {
			return nil, err
		}
		key, _ := m["idempotency_key"].(string)
		out = append(out, &realmv1.BatchItem{Params: params, IdempotencyKey: key})
	}
	return out, nil
}
