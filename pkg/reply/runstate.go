package reply

import (
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// RunStateJSON is get_run_state's reply (seed "Run state and health
// findings"): the always-present fields, the present-when fields that are
// set, and the keys of s.extra (run_health, step_claims, …) at top level.
// A typed field always wins over an extra key of the same name. A nil state
// gives nil.
func RunStateJSON(s *realmv1.RunState) map[string]any {
	if s == nil {
		return nil
	}
	m := map[string]any{}
	// Extras first, so the typed fields below overwrite any clash.
	for k, v := range s.GetExtra().AsMap() {
		m[k] = v
	}
	m["run_id"] = s.GetRunId()
	m["workflow_id"] = s.GetWorkflowId()
	m["run_phase"] = PhaseWord(s.GetRunPhase())
	m["terminal_state"] = s.GetTerminalState()
	m["completed_steps"] = strs(s.GetCompletedSteps())
	m["in_progress_steps"] = strs(s.GetInProgressSteps())
	m["failed_steps"] = strs(s.GetFailedSteps())
	m["skipped_steps"] = strs(s.GetSkippedSteps())
	m["evidence_count"] = s.GetEvidenceCount()
	m["last_step"] = nil
	if s.LastStep != nil {
		m["last_step"] = s.GetLastStep()
	}
	m["created_at"] = timeOrNull(s.GetCreatedAt())
	m["updated_at"] = timeOrNull(s.GetUpdatedAt())
	m["params"] = structOrEmpty(s.GetParams())
	m["next_actions"] = NextActionsJSON(s.GetNextActions())
	m["next_actions_status"] = s.GetNextActionsStatus()

	if g := s.GetPendingGate(); g != nil {
		m["pending_gate"] = pendingGateJSON(g)
	}
	if s.TerminalReason != nil {
		m["terminal_reason"] = s.GetTerminalReason()
	}
	if s.GetSealedByArm() != "" {
		m["sealed_by_arm"] = s.GetSealedByArm()
	}
	if s.GetSealedByStep() != "" {
		m["sealed_by_step"] = s.GetSealedByStep()
	}
	if s.SealedByClassified != nil {
		m["sealed_by_classified"] = s.GetSealedByClassified()
	}
	if s.GetRerunOf() != "" {
		m["rerun_of"] = s.GetRerunOf()
	}
	if s.GetAbortContext() != nil {
		m["abort_context"] = s.GetAbortContext().AsMap()
	}
	if s.GetSkipDetails() != nil {
		m["skip_details"] = s.GetSkipDetails().AsMap()
	}
	if len(s.GetDefaultedSteps()) > 0 {
		m["defaulted_steps"] = strs(s.GetDefaultedSteps())
	}
	if len(s.GetWarnings()) > 0 {
		m["warnings"] = strs(s.GetWarnings())
	}
	return m
}

// pendingGateJSON is pending_gate: the gate and the settings stored when it
// opened, each only when set.
func pendingGateJSON(g *realmv1.PendingGate) map[string]any {
	m := map[string]any{
		"gate_id":   g.GetGateId(),
		"step_name": g.GetStepName(),
		"preview":   valueOrNull(g.GetPreview()),
		"choices":   strs(g.GetChoices()),
		"opened_at": timeOrNull(g.GetOpenedAt()),
	}
	if g.Owner != nil {
		m["owner"] = g.GetOwner()
	}
	if g.ResolvedMessage != nil {
		m["resolved_message"] = g.GetResolvedMessage()
	}
	if g.GetResolutionMessages() != nil {
		m["resolution_messages"] = g.GetResolutionMessages().AsMap()
	}
	if s := FormatTime(g.GetExpiresAt()); s != "" {
		m["expires_at"] = s
	}
	if g.OnExpiry != nil {
		m["on_expiry"] = g.GetOnExpiry()
	}
	if g.DefaultChoice != nil {
		m["default_choice"] = g.GetDefaultChoice()
	}
	if g.ReminderSeconds != nil {
		m["reminder_seconds"] = g.GetReminderSeconds()
	}
	if g.ReminderMax != nil {
		m["reminder_max"] = g.GetReminderMax()
	}
	return m
}
