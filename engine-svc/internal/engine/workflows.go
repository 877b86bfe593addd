package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/realm-go/realm/engine-svc/internal/health"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

func load(src *realmv1.WorkflowSource, strict bool) (*workflow.Definition, *workflow.Report) {
	return workflow.Load(src.GetYaml(), workflow.LoadOptions{Path: src.GetPath(), Files: src.GetFiles(), FileErrors: src.GetFileErrors(), Strict: strict})
}

// ReportProto converts a loader report.
func ReportProto(r *workflow.Report) *realmv1.WorkflowReport {
	out := &realmv1.WorkflowReport{
		Valid:         r.Valid,
		WorkflowId:    r.WorkflowID,
		Version:       r.Version,
		Description:   r.Description,
		StepCount:     int32(r.StepCount),
		Errors:        r.Errors,
		ExtensionKeys: r.ExtensionKeys,
		Text:          r.Text(),
	}
	for _, d := range r.Diagnostics {
		out.Diagnostics = append(out.Diagnostics, &realmv1.Diagnostic{
			Code: d.Code, Severity: d.Severity, Message: d.Message, Scope: d.Scope, Key: d.Key,
			Step: d.Step, DidYouMean: d.DidYouMean, Line: int32(d.Line), Column: int32(d.Column),
		})
	}
	return out
}

// ValidateWorkflow runs the loader, and the config_schema rule against the
// live runners (spec §13.1), and stores nothing.
func (e *Engine) ValidateWorkflow(ctx context.Context, req *realmv1.ValidateWorkflowRequest) (*realmv1.ValidateWorkflowResponse, error) {
	def, rep := load(req.GetSource(), req.GetStrict())
	if def != nil && rep.Valid {
		if errs := e.configSchemaProblems(ctx, def); len(errs) > 0 {
			rep.Valid = false
			rep.Errors = append(rep.Errors, errs...)
		}
	}
	return &realmv1.ValidateWorkflowResponse{Report: ReportProto(rep)}, nil
}

// RegisterWorkflow validates a workflow and stores a new version of it.
// Runs under way pick the new version up as they move (spec §1).
func (e *Engine) RegisterWorkflow(ctx context.Context, req *realmv1.RegisterWorkflowRequest) (*realmv1.RegisterWorkflowResponse, error) {
	def, rep := load(req.GetSource(), req.GetStrict())
	if def != nil && rep.Valid {
		// uses_resources and config_schema are declared by runners:
		// checked against the live registry here (uses_resources again
		// when a runner registers). config_schema binds registration only:
		// a file run without registering is not held to it (spec §13.1).
		errs := append(e.usesResourcesProblems(ctx, def), e.configSchemaProblems(ctx, def)...)
		if len(errs) > 0 {
			rep.Valid = false
			rep.Errors = append(rep.Errors, errs...)
			def = nil
		}
	}
	resp := &realmv1.RegisterWorkflowResponse{Report: ReportProto(rep)}
	if def == nil || !rep.Valid {
		return resp, nil
	}
	def.Origin = "human" // registered by a person (create_workflow writes "agent")
	rec, err := e.putDefinition(ctx, def)
	if err != nil {
		return nil, err
	}
	resp.Registered = true
	resp.StoredVersion = rec.Version
	return resp, nil
}

func (e *Engine) putDefinition(ctx context.Context, def *workflow.Definition) (*store.WorkflowRecord, error) {
	def.SchemaVersion = workflow.SchemaVersion
	b, err := json.Marshal(def)
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineInternal, err, "encode workflow: "+err.Error())
	}
	rec, err := e.st.PutWorkflow(ctx, def.ID, b)
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to store workflow: "+err.Error())
	}
	e.defs.drop(def.ID)
	return rec, nil
}

const listHint = "Call get_workflow_protocol with a workflow_id before calling start_run. If no workflow matches your task, use create_workflow to define and start your own plan."

// Pages of ListWorkflows: the default and the largest.
const (
	DefaultWorkflowPage = 100
	MaxWorkflowPage     = 1000
)

// ListWorkflows lists the registered workflows, a page at a time (by id):
// only the page's definitions are read.
func (e *Engine) ListWorkflows(ctx context.Context, req *realmv1.ListWorkflowsRequest) (*realmv1.ListWorkflowsResponse, error) {
	limit := int(req.GetLimit())
	if limit <= 0 {
		limit = DefaultWorkflowPage
	}
	limit = min(limit, MaxWorkflowPage)
	recs, next, err := e.st.ListWorkflowsPage(ctx, req.GetPageToken(), limit)
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to list workflows: "+err.Error())
	}
	resp := &realmv1.ListWorkflowsResponse{Status: "ok", Hint: listHint, Workflows: []*realmv1.WorkflowSummary{}, Unreadable: []*realmv1.UnreadableWorkflow{}, Warnings: []string{},
		NextPageToken: next}
	for _, rec := range recs {
		var d workflow.Definition
		if err := json.Unmarshal(rec.Definition, &d); err != nil {
			resp.Unreadable = append(resp.Unreadable, &realmv1.UnreadableWorkflow{Id: rec.ID, Reason: err.Error()})
			continue
		}
		sum := &realmv1.WorkflowSummary{
			Id: d.ID, Name: d.Name, Version: d.Version, Description: d.Description,
			StepCount: int32(len(d.Steps)), RegisteredAt: timestamppb.New(rec.RegisteredAt),
		}
		if d.Trigger != nil {
			sum.Trigger = toStruct(d.Trigger) // what listen-svc serves
		}
		resp.Workflows = append(resp.Workflows, sum)
	}
	if n := len(resp.Unreadable); n > 0 {
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("%d registered workflow(s) could not be read; do not create a replacement until an operator has looked.", n))
	}
	return resp, nil
}

// Standard protocol texts (spec §3.3).
var defaultRules = []string{
	"Follow the next_action instruction in each response exactly.",
	"When you receive status 'confirm_required', read gate.agent_hint for instructions, present gate.display to the user verbatim, wait for their response, then call submit_human_response by copying the call in next_actions[0].instruction.call_with and filling in their choice.",
	"Do NOT auto-confirm any human gate. The user must decide.",
	"Do NOT ask the user for permission between steps unless the system tells you to.",
	"When next_actions names advance_run, call it: the engine owes steps it runs when you call advance_run.",
}

// concurrencyRules are always appended (their original text is not
// published; these say the same in the same voice).
var concurrencyRules = []string{
	"If a reply says a step is in flight elsewhere, another attempt holds it: wait for it, then call get_run_state; do not call the step again.",
	"If a reply says a step has already completed, its answer was recorded by another attempt: do not send it again; follow next_actions.",
}

// GetWorkflowProtocol describes a workflow for an assistant.
func (e *Engine) GetWorkflowProtocol(ctx context.Context, req *realmv1.GetWorkflowProtocolRequest) (*realmv1.GetWorkflowProtocolResponse, error) {
	c, err := e.protocolDefinition(ctx, req)
	if err != nil {
		return nil, err
	}
	d := c.Def
	quick := fmt.Sprintf("Call start_run with workflow_id '%s'. The engine runs the steps it owns and returns control at the first step requiring agent action; when next_actions names advance_run, call it. Follow the next_action in each response until the workflow completes.", d.ID)
	rules := defaultRules
	if d.Protocol != nil {
		if d.Protocol.QuickStart != "" {
			quick = d.Protocol.QuickStart
		}
		if len(d.Protocol.Rules) > 0 {
			rules = d.Protocol.Rules
		}
	}
	allRules := append(append([]any{}, toAny(rules)...), toAny(concurrencyRules)...)
	steps := []any{}
	agentSteps := 0
	for _, s := range d.Ordered() {
		m := map[string]any{"id": s.Name, "description": s.Description, "execution": string(s.Execution)}
		switch s.Execution {
		case workflow.KindAgent:
			agentSteps++
			m["agent_involvement"] = "You perform this step and submit its output with execute_step."
		case workflow.KindAuto:
			m["agent_involvement"] = "The engine runs this step; you do not call it."
		case workflow.KindGuard:
			m["agent_involvement"] = "The engine checks this condition; you do not call it."
		case workflow.KindFinalizer:
			m["agent_involvement"] = "The engine runs this cleanup after the run ends."
		}
		if s.InputSchema != nil {
			m["input_schema"] = s.InputSchema
		}
		if len(s.DependsOn) > 0 {
			m["depends_on"] = toAny(s.DependsOn)
		}
		if s.Gated() {
			m["possible_gate"] = true
		}
		if s.Instructions != "" {
			// Standing instructions, never rendered (workflow-file §4.4).
			m["instructions"] = s.Instructions
		}
		if s.AgentProfile != "" {
			if text, ok := d.ResolvedProfiles[s.AgentProfile]; ok {
				m["agent_profile_instructions"] = text
			}
		}
		steps = append(steps, m)
	}
	p := map[string]any{
		"workflow_id":         d.ID,
		"name":                d.Name,
		"quick_start":         quick,
		"rules":               allRules,
		"steps":               steps,
		"agent_steps_summary": fmt.Sprintf("You perform %d of the %d steps; the engine runs the rest.", agentSteps, len(d.Steps)),
		"error_handling": map[string]any{
			"provide_input":        "Correct the input and call the step again. error_details says what was wrong.",
			"resolve_precondition": "Do what next_actions names instead.",
			"report_to_user":       "Show the error to the person and wait for guidance.",
			"wait_for_human":       "Show the error to the person and wait until they say the outside problem is fixed.",
			"wait_and_proceed":     "Wait retry_after seconds, then follow next_actions.",
			"stop":                 "Make no further calls for this run.",
		},
	}
	if d.Description != "" {
		p["description"] = d.Description
	}
	// The definition travels as the store keeps it (JSON), for readers that
	// evaluate its conditions themselves (realm run replay).
	def, err := json.Marshal(d)
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineInternal, err, "encode workflow: "+err.Error())
	}
	return &realmv1.GetWorkflowProtocolResponse{Protocol: toStruct(p), Definition: def}, nil
}

// protocolDefinition is the definition get_workflow_protocol describes:
// with a run id, the one that run's steps are decided by (the copy it
// carries, else the registered copy); else the registered copy.
func (e *Engine) protocolDefinition(ctx context.Context, req *realmv1.GetWorkflowProtocolRequest) (*compiled, error) {
	id := req.GetWorkflowId()
	if req.GetRunId() == "" {
		c, err := e.definition(ctx, id)
		if _, ok := err.(*errWorkflowMissing); ok {
			return nil, errcode.New(errcode.StateWorkflowNotFound, "Workflow not found: "+id)
		}
		return c, err
	}
	t, err := e.read(ctx, req.GetRunId())
	if errors.Is(err, errRunNotFound) {
		return nil, errcode.New(errcode.StateRunNotFound, "Run not found: "+req.GetRunId())
	}
	if err != nil {
		return nil, err
	}
	if id != "" && id != t.run.WorkflowID {
		return nil, errcode.Newf(errcode.StateWorkflowNotFound, "Run '%s' is a run of workflow '%s', not of '%s'.", t.run.ID, t.run.WorkflowID, id)
	}
	if t.def == nil {
		return nil, errcode.New(errcode.StateWorkflowNotFound, t.defErr.Error())
	}
	return t.def, nil
}

func toAny(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// ListRuns pages through the run index, newest first; with open_gates
// through the index of open gates, newest gate first; with stuck it lists
// the runs a health finding selects, read from the timer indexes the commit
// script keeps, so no form loads every run.
func (e *Engine) ListRuns(ctx context.Context, req *realmv1.ListRunsRequest) (*realmv1.ListRunsResponse, error) {
	if req.GetStuck() {
		return e.listStuck(ctx, req)
	}
	limit := int(req.GetLimit())
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	resp := &realmv1.ListRunsResponse{}
	cursor := req.GetPageToken()
	index := store.IndexRuns
	if req.GetOpenGates() {
		index = store.IndexOpenGates
	}
	for len(resp.Runs) < limit {
		page, err := e.st.ListRuns(ctx, store.ListFilter{Limit: limit, Cursor: cursor, Index: index})
		if err != nil {
			return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to list runs: "+err.Error())
		}
		err = e.readEach(ctx, page.RunIDs, func(t *txn) {
			if req.GetWorkflowId() != "" && t.run.WorkflowID != req.GetWorkflowId() {
				return
			}
			if req.GetPhase() != realmv1.RunPhase_RUN_PHASE_UNSPECIFIED && phaseEnum(t.run.Phase()) != req.GetPhase() {
				return
			}
			if req.GetOpenGates() && (t.run.PendingGate == nil || t.run.Terminal()) {
				return // answered between the index read and this one
			}
			resp.Runs = append(resp.Runs, t.summary())
		})
		if err != nil {
			return nil, err
		}
		cursor = page.Next
		if cursor == "" {
			break
		}
	}
	resp.NextPageToken = cursor
	return resp, nil
}

// summary is a run's line in `realm run list`.
func (t *txn) summary() *realmv1.RunSummary {
	r := t.run
	s := &realmv1.RunSummary{
		RunId: r.ID, WorkflowId: r.WorkflowID, WorkflowVersion: r.WorkflowVersion, RunPhase: phaseEnum(r.Phase()),
		CreatedAt: timestamp(r.CreatedAt), UpdatedAt: timestamp(r.UpdatedAt), LastStep: r.LastStep,
		StepCount: int32(len(r.CompletedSteps) + len(r.FailedSteps)),
	}
	if g := r.PendingGate; g != nil && !r.Terminal() {
		s.GateStep, s.GateOpenedAt, s.GateExpiresAt = g.StepName, timestamp(g.OpenedAt), timestamp(g.ExpiresAt)
		// The gated step's output is on the record before its question
		// opens: it has evidence, as inspect's count shows (cli.md §3.1).
		if !slices.Contains(r.CompletedSteps, g.StepName) && !slices.Contains(r.FailedSteps, g.StepName) {
			s.StepCount++
		}
	}
	return s
}

// stuckScanLimit bounds how many due members one index read returns.
const stuckScanLimit = 100000

// listStuck reads the candidates from the timer indexes — due claims, due
// expiries, ended runs owing cleanup, capability blocks, and open runs idle
// past the threshold — and keeps those a finding selects.
func (e *Engine) listStuck(ctx context.Context, req *realmv1.ListRunsRequest) (*realmv1.ListRunsResponse, error) {
	now := e.now()
	threshold := 24 * time.Hour
	if req.OlderThanSeconds != nil {
		threshold = time.Duration(req.GetOlderThanSeconds()) * time.Second
	}
	nowMS := float64(now.UnixMilli())
	seen := map[string]bool{}
	var ids []string
	for _, q := range []struct {
		index string
		upTo  float64
	}{
		// expiries as well as gate_deadlines: a run last written before
		// gate_deadlines existed is only in the first.
		{store.IndexClaims, nowMS}, {store.IndexGateDeadlines, nowMS}, {store.IndexExpiries, nowMS}, {store.IndexFinalizers, math.Inf(1)}, {store.IndexBlocked, math.Inf(1)},
		{store.IndexActivity, float64(now.Add(-threshold).UnixMilli())},
	} {
		due, err := e.st.Due(ctx, q.index, q.upTo, stuckScanLimit)
		if err != nil {
			return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to list runs: "+err.Error())
		}
		for _, id := range due {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	resp := &realmv1.ListRunsResponse{ThresholdSeconds: int64(threshold / time.Second)}
	err := e.readEach(ctx, ids, func(t *txn) {
		if req.GetWorkflowId() != "" && t.run.WorkflowID != req.GetWorkflowId() {
			return
		}
		in := health.Input{Run: t.run, Now: now, DefErr: t.defErr, IdleThreshold: &threshold}
		if t.def != nil {
			in.Def = t.def.Def
		}
		labels := health.Stuck(in)
		if len(labels) == 0 {
			return
		}
		s := t.summary()
		if suffix := strings.TrimLeft(health.StuckSuffix(labels), " "); suffix != "" {
			s.Labels = []string{suffix}
		}
		resp.Runs = append(resp.Runs, s)
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(resp.Runs, func(i, j int) bool {
		return resp.Runs[i].GetUpdatedAt().AsTime().After(resp.Runs[j].GetUpdatedAt().AsTime())
	})
	return resp, nil
}

// usesResourcesProblems checks every handler step against the resources its
// live runners declare it reads (seed 003): each name must be a step of the
// workflow.
func (e *Engine) usesResourcesProblems(ctx context.Context, def *workflow.Definition) []string {
	if e.reg == nil {
		return nil
	}
	live, err := e.reg.Live(ctx)
	if err != nil {
		return nil
	}
	declared := map[string][]string{}
	for _, r := range live {
		for _, h := range r.Handlers {
			for _, res := range h.UsesResources {
				if !slices.Contains(declared[h.Name], res) {
					declared[h.Name] = append(declared[h.Name], res)
				}
			}
		}
	}
	var out []string
	for _, s := range def.Ordered() {
		for _, res := range declared[s.Handler] {
			if res == "$settlement" {
				continue
			}
			if _, ok := def.Steps[res]; !ok {
				msg := fmt.Sprintf("Step '%s': handler '%s' declares uses_resources '%s' but no step with that ID exists in this workflow", s.Name, s.Handler, res)
				if s.Line > 0 {
					msg += fmt.Sprintf(" (step at line %d)", s.Line)
				}
				out = append(out, msg)
			}
		}
	}
	return out
}

// CheckUsesResources returns the diagnostics a runner's declarations raise
// against every registered workflow that names its handlers.
func (e *Engine) CheckUsesResources(ctx context.Context, handlers map[string][]string) []string {
	recs, err := e.st.ListWorkflows(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, rec := range recs {
		var d workflow.Definition
		if json.Unmarshal(rec.Definition, &d) != nil {
			continue
		}
		for name, s := range d.Steps {
			s.Name = name
		}
		for _, s := range d.Ordered() {
			for _, res := range handlers[s.Handler] {
				if _, ok := d.Steps[res]; !ok && res != "$settlement" {
					out = append(out, fmt.Sprintf("workflow '%s': Step '%s': handler '%s' declares uses_resources '%s' but no step with that ID exists in this workflow", d.ID, s.Name, s.Handler, res))
				}
			}
		}
	}
	return out
}
