package reply

import (
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// The replies below are the tools' own shapes (seed "MCP tools"): the ones
// that are not the common envelope. Each falls back to ReplyJSON when the
// engine refused the call with a Reply.

// ListWorkflowsJSON is list_workflows' reply: status, workflows, unreadable,
// warnings and hint. A workflow shows id, name and version, and its
// description when it has one. A nil response gives nil.
func ListWorkflowsJSON(r *realmv1.ListWorkflowsResponse) map[string]any {
	if r == nil {
		return nil
	}
	workflows := make([]any, 0, len(r.GetWorkflows()))
	for _, w := range r.GetWorkflows() {
		e := map[string]any{"id": w.GetId(), "name": w.GetName(), "version": w.GetVersion()}
		if w.GetDescription() != "" {
			e["description"] = w.GetDescription()
		}
		workflows = append(workflows, e)
	}
	unreadable := make([]any, 0, len(r.GetUnreadable()))
	for _, u := range r.GetUnreadable() {
		unreadable = append(unreadable, map[string]any{"id": u.GetId(), "reason": u.GetReason()})
	}
	return map[string]any{
		"status":     r.GetStatus(),
		"workflows":  workflows,
		"unreadable": unreadable,
		"warnings":   strs(r.GetWarnings()),
		"hint":       r.GetHint(),
	}
}

// ListWorkflowsRefusalJSON is list_workflows' refusal when the engine failed
// the call with a catalogue error: its own fields (status, error_code,
// error_details, errors, agent_action, hint) with workflows and unreadable
// empty. details may be nil; action is the agent_action word.
func ListWorkflowsRefusalJSON(code, message string, details map[string]any, action string) map[string]any {
	if details == nil {
		details = map[string]any{}
	}
	m := map[string]any{
		"status":        "error",
		"error_code":    code,
		"error_details": details,
		"errors":        []any{message},
		"hint":          "",
		"workflows":     []any{},
		"unreadable":    []any{},
		"warnings":      []any{},
	}
	if action != "" {
		m["agent_action"] = action
	}
	return m
}

// StartRunBatchJSON is start_run_batch's reply: {started, failed}, or the
// refusal envelope when the whole batch was refused. A nil response gives nil.
func StartRunBatchJSON(r *realmv1.StartRunBatchResponse) map[string]any {
	if r == nil {
		return nil
	}
	if r.GetRefusal() != nil {
		return ReplyJSON(r.GetRefusal())
	}
	started := make([]any, 0, len(r.GetStarted()))
	for _, s := range r.GetStarted() {
		e := map[string]any{
			"run_id":       s.GetRunId(),
			"params":       structOrEmpty(s.GetParams()),
			"deduped":      s.GetDeduped(),
			"warnings":     strs(s.GetWarnings()),
			"next_actions": NextActionsJSON(s.GetNextActions()),
			"context_hint": s.GetContextHint(),
		}
		if s.GetIdempotencyKey() != "" {
			e["idempotency_key"] = s.GetIdempotencyKey()
		}
		if p := PhaseWord(s.GetRunPhase()); p != "" {
			e["run_phase"] = p
		}
		started = append(started, e)
	}
	failed := make([]any, 0, len(r.GetFailed()))
	for _, f := range r.GetFailed() {
		// The proto's reason is the entry's "error" (spec mcp-and-gates §7).
		e := map[string]any{"index": f.GetIndex(), "error": f.GetReason()}
		if f.GetIdempotencyKey() != "" {
			e["idempotency_key"] = f.GetIdempotencyKey()
		}
		if f.GetErrorCode() != "" {
			e["error_code"] = f.GetErrorCode()
		}
		failed = append(failed, e)
	}
	return map[string]any{"started": started, "failed": failed}
}

// AbandonRunJSON is abandon_run's reply: run_id, run_phase, terminal_state,
// terminal_reason and note, or the refusal envelope (which has no
// run_version). A nil response gives nil.
func AbandonRunJSON(r *realmv1.AbandonRunResponse) map[string]any {
	if r == nil {
		return nil
	}
	if r.GetRefusal() != nil {
		return ReplyJSON(r.GetRefusal())
	}
	return map[string]any{
		"run_id":          r.GetRunId(),
		"run_phase":       PhaseWord(r.GetRunPhase()),
		"terminal_state":  r.GetTerminalState(),
		"terminal_reason": r.GetTerminalReason(),
		"note":            r.GetNote(),
	}
}

// AppendTraceJSON is append_trace's reply: status ok and the buffer's
// counts against their limits, or the refusal envelope. A nil response
// gives nil.
func AppendTraceJSON(r *realmv1.AppendTraceResponse) map[string]any {
	if r == nil {
		return nil
	}
	if r.GetRefusal() != nil {
		return ReplyJSON(r.GetRefusal())
	}
	c := r.GetCounts()
	return map[string]any{
		"status":              "ok",
		"buffer_count":        c.GetBufferCount(),
		"buffer_bytes":        c.GetBufferBytes(),
		"limit_count":         c.GetLimitCount(),
		"limit_bytes":         c.GetLimitBytes(),
		"final_limit_entries": c.GetFinalLimitEntries(),
		"final_limit_bytes":   c.GetFinalLimitBytes(),
		"file_count":          c.GetFileCount(),
		"file_bytes":          c.GetFileBytes(),
		"file_limit_count":    c.GetFileLimitCount(),
		"file_limit_bytes":    c.GetFileLimitBytes(),
	}
}

// GetRunStateJSON is get_run_state's reply: the run's state, or the refusal
// envelope (which has no run_version). A nil response gives nil.
func GetRunStateJSON(r *realmv1.GetRunStateResponse) map[string]any {
	if r == nil {
		return nil
	}
	if r.GetRefusal() != nil {
		return ReplyJSON(r.GetRefusal())
	}
	return RunStateJSON(r.GetState())
}
