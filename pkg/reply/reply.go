// Package reply turns the engine's protobuf replies into the JSON shapes the
// seeds give ("MCP tools" → The reply; "Run state and health findings").
//
// Every front door that prints a reply (the realm CLI, the MCP server) uses
// this one converter, so a field's presence rule lives in one place. The
// functions return plain maps ready for encoding/json; they never fail: a
// field the engine left unset is simply absent (or its documented default).
package reply

import (
	"encoding/json"
	"strings"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// timeLayout is ISO-8601 UTC with milliseconds, as every time in the seeds
// is written (2026-10-09T09:14:02.511Z).
const timeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime renders t as ISO-8601 UTC with milliseconds. A nil or invalid
// timestamp renders as "".
func FormatTime(t *timestamppb.Timestamp) string {
	if t == nil || t.CheckValid() != nil {
		return ""
	}
	return t.AsTime().UTC().Format(timeLayout)
}

// timeOrNull is FormatTime for always-present fields: null when unset.
func timeOrNull(t *timestamppb.Timestamp) any {
	if s := FormatTime(t); s != "" {
		return s
	}
	return nil
}

// StatusWord is the reply status as JSON spells it ("ok", "error", …).
func StatusWord(s realmv1.ReplyStatus) string {
	return enumWord(s.String(), "REPLY_STATUS_")
}

// PhaseWord is the run phase as JSON spells it ("running", "gate_waiting", …);
// "" for RUN_PHASE_UNSPECIFIED.
func PhaseWord(p realmv1.RunPhase) string {
	if p == realmv1.RunPhase_RUN_PHASE_UNSPECIFIED {
		return ""
	}
	return enumWord(p.String(), "RUN_PHASE_")
}

// ActionWord is the agent_action as JSON spells it ("provide_input", …);
// "" for AGENT_ACTION_UNSPECIFIED.
func ActionWord(a realmv1.AgentAction) string {
	if a == realmv1.AgentAction_AGENT_ACTION_UNSPECIFIED {
		return ""
	}
	return enumWord(a.String(), "AGENT_ACTION_")
}

// ChannelWord is the door's word as holders record it ("mcp-stdio", "run", …);
// "" for CHANNEL_UNSPECIFIED. Channels use hyphens, unlike the other enums.
func ChannelWord(c realmv1.Channel) string {
	if c == realmv1.Channel_CHANNEL_UNSPECIFIED {
		return ""
	}
	return strings.ReplaceAll(enumWord(c.String(), "CHANNEL_"), "_", "-")
}

func enumWord(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// ReplyJSON is the reply envelope of start_run, execute_step,
// submit_human_response, advance_run and create_workflow (and of the
// refusals of the other tools). A nil reply gives nil.
func ReplyJSON(r *realmv1.Reply) map[string]any {
	if r == nil {
		return nil
	}
	m := map[string]any{
		"command":      r.GetCommand(),
		"run_id":       r.GetRunId(),
		"status":       StatusWord(r.GetStatus()),
		"context_hint": r.GetContextHint(),
		"next_actions": NextActionsJSON(r.GetNextActions()),
		"warnings":     strs(r.GetWarnings()),
		"errors":       strs(r.GetErrors()),
		"data":         structOrEmpty(r.GetData()),
		"evidence":     listOrEmpty(r.GetEvidence()),
	}
	if r.RunVersion != nil {
		m["run_version"] = r.GetRunVersion()
	}
	if p := PhaseWord(r.GetRunPhase()); p != "" {
		m["run_phase"] = p
	}
	if r.GetErrorCode() != "" {
		m["error_code"] = r.GetErrorCode()
	}
	if r.GetErrorDetails() != nil {
		m["error_details"] = r.GetErrorDetails().AsMap()
	}
	if a := ActionWord(r.GetAgentAction()); a != "" {
		m["agent_action"] = a
	}
	if r.RetryAfter != nil {
		m["retry_after"] = r.GetRetryAfter()
	}
	if b := r.GetBlockedReason(); b != nil {
		m["blocked_reason"] = map[string]any{
			"eligible_steps": strs(b.GetEligibleSteps()),
			"suggestion":     b.GetSuggestion(),
		}
	}
	if g := r.GetGate(); g != nil {
		m["gate"] = gateJSON(g)
	}
	if r.Deduped != nil {
		m["deduped"] = r.GetDeduped()
	}
	if r.GetHasChainedAutoSteps() || len(r.GetChainedAutoSteps()) > 0 {
		m["chained_auto_steps"] = chainedJSON(r.GetChainedAutoSteps())
	}
	if r.GetStoppedStep() != "" {
		m["stopped_step"] = r.GetStoppedStep()
	}
	if len(r.GetGuards()) > 0 {
		guards := make([]any, 0, len(r.GetGuards()))
		for _, g := range r.GetGuards() {
			guards = append(guards, map[string]any{"step": g.GetStep(), "outcome": g.GetOutcome()})
		}
		m["guards"] = guards
	}
	if e := r.GetEndedBy(); e != nil {
		ended := map[string]any{"arm": e.GetArm(), "step": e.GetStep()}
		if e.Reason != nil {
			ended["reason"] = e.GetReason()
		}
		m["ended_by"] = ended
	}
	if r.AnswerRecorded != nil {
		m["answer_recorded"] = r.GetAnswerRecorded()
	}
	if c := r.GetGateClaim(); c != nil {
		claim := map[string]any{"proof": c.GetProof()}
		if c.GetCause() != "" {
			claim["cause"] = c.GetCause()
		}
		if c.GetOpenedBy() != nil {
			claim["opened_by"] = HolderJSON(c.GetOpenedBy())
		}
		m["gate_claim"] = claim
	}
	if r.AdoptedOwn != nil {
		m["adopted_own"] = r.GetAdoptedOwn()
	}
	if r.AdoptedAnonymous != nil {
		m["adopted_anonymous"] = r.GetAdoptedAnonymous()
	}
	if r.PreservedForeign != nil {
		m["preserved_foreign"] = r.GetPreservedForeign()
	}
	if r.SettledByDefault != nil {
		m["settled_by_default"] = r.GetSettledByDefault()
	}
	if len(r.GetDefaultedSteps()) > 0 {
		m["defaulted_steps"] = strs(r.GetDefaultedSteps())
	}
	if r.GetHasDiagnostics() || len(r.GetDiagnostics()) > 0 {
		m["diagnostics"] = strs(r.GetDiagnostics())
	}
	if r.GetContinuedBy() != nil {
		m["continued_by"] = HolderJSON(r.GetContinuedBy())
	}
	return m
}

// HolderJSON is a recorded program name: {by, by_source, channel}, or
// {by: null, absent_cause} when there is none.
func HolderJSON(h *realmv1.Holder) map[string]any {
	if h == nil {
		return nil
	}
	m := map[string]any{"by": nil}
	if h.By != nil {
		m["by"] = h.GetBy()
	}
	if h.GetBySource() != "" {
		m["by_source"] = h.GetBySource()
	}
	if h.GetChannel() != "" {
		m["channel"] = h.GetChannel()
	}
	if h.GetAbsentCause() != "" {
		m["absent_cause"] = h.GetAbsentCause()
	}
	return m
}

// NextActionsJSON is a next_actions list; never nil, so it encodes as [].
func NextActionsJSON(actions []*realmv1.NextAction) []any {
	out := make([]any, 0, len(actions))
	for _, a := range actions {
		if a == nil {
			continue
		}
		out = append(out, NextActionJSON(a))
	}
	return out
}

// NextActionJSON is one entry of next_actions.
func NextActionJSON(a *realmv1.NextAction) map[string]any {
	in := a.GetInstruction()
	m := map[string]any{
		"instruction": map[string]any{
			"tool":      in.GetTool(),
			"params":    rawObject(in.GetParamsJson(), in.GetParams()),
			"call_with": rawObject(in.GetCallWithJson(), in.GetCallWith()),
		},
		"human_readable": a.GetHumanReadable(),
		"orientation":    a.GetOrientation(),
	}
	if raw := a.GetInputSchemaJson(); len(raw) > 0 {
		m["input_schema"] = json.RawMessage(raw)
	} else if a.GetInputSchema() != nil {
		m["input_schema"] = a.GetInputSchema().AsInterface()
	}
	if a.Prompt != nil {
		m["prompt"] = a.GetPrompt()
	}
	return m
}

func gateJSON(g *realmv1.Gate) map[string]any {
	m := map[string]any{
		"gate_id":   g.GetGateId(),
		"step_name": g.GetStepName(),
		"preview":   valueOrNull(g.GetPreview()),
		"choices":   strs(g.GetChoices()),
	}
	if g.Display != nil {
		m["display"] = g.GetDisplay()
	}
	if g.AgentHint != nil {
		m["agent_hint"] = g.GetAgentHint()
	}
	if s := FormatTime(g.GetExpiresAt()); s != "" {
		m["expires_at"] = s
	}
	if g.ClaimToken != nil {
		m["claim_token"] = g.GetClaimToken()
	}
	if g.GetResponseSpec() != nil {
		m["response_spec"] = g.GetResponseSpec().AsMap()
	}
	return m
}

func chainedJSON(steps []*realmv1.ChainedStep) []any {
	out := make([]any, 0, len(steps))
	for _, s := range steps {
		e := map[string]any{"step": s.GetStep()}
		if p := PhaseWord(s.GetRunPhase()); p != "" {
			e["run_phase"] = p
		}
		if len(s.GetWarnings()) > 0 {
			e["warnings"] = strs(s.GetWarnings())
		}
		out = append(out, e)
	}
	return out
}

// strs copies a string list into []any so an empty list encodes as [].
func strs(in []string) []any {
	out := make([]any, 0, len(in))
	for _, s := range in {
		out = append(out, s)
	}
	return out
}

func structOrEmpty(s *structpb.Struct) map[string]any {
	if s == nil {
		return map[string]any{}
	}
	return s.AsMap()
}

func listOrEmpty(l *structpb.ListValue) []any {
	if l == nil {
		return []any{}
	}
	return l.AsSlice()
}

func valueOrNull(v *structpb.Value) any {
	if v == nil {
		return nil
	}
	return v.AsInterface()
}

// Terminal is true for the phases a run ends in: nothing moves it again
// but purge.
func Terminal(p realmv1.RunPhase) bool {
	switch p {
	case realmv1.RunPhase_RUN_PHASE_COMPLETED, realmv1.RunPhase_RUN_PHASE_FAILED,
		realmv1.RunPhase_RUN_PHASE_ABORTED, realmv1.RunPhase_RUN_PHASE_ABANDONED:
		return true
	}
	return false
}
