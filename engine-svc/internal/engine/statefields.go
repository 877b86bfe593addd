package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/realm-go/realm/engine-svc/internal/health"
	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// holderJSON is a claim's holder as get_run_state shows it.
func holderJSON(c *record.Claim) map[string]any {
	switch {
	case c == nil:
		return map[string]any{"by": nil, "absent_cause": "no_claim"}
	case c.Holder == nil || c.Holder.By == "":
		if c.Since == "" {
			return map[string]any{"by": nil, "absent_cause": "pre_lease_claim"}
		}
		return map[string]any{"by": nil, "absent_cause": "holder_not_recorded"}
	}
	return map[string]any{"by": c.Holder.By, "by_source": c.Holder.BySource, "channel": c.Holder.Channel}
}

// claimState is a claim's liveness (run-record spec §6).
func (t *txn) claimState(c *record.Claim) string {
	if c == nil || c.Deadline == nil {
		return "claim_unknown_age"
	}
	if t.now.After(record.ParseTime(*c.Deadline)) {
		return "claim_stale"
	}
	return "healthy"
}

// stateExtra composes the present-when fields of get_run_state that have
// no typed home in the protocol.
func (t *txn) stateExtra(ctx context.Context, includeSteps bool) map[string]any {
	r := t.run
	x := map[string]any{}
	open := !r.Terminal()
	var entries []*record.Entry
	if includeSteps || open {
		var err error
		if entries, err = t.e.evidence(ctx, r.ID); err != nil {
			// get_run_state still answers from the record: the steps view is
			// empty, and findings that need the evidence are not found,
			// never invented.
			t.e.log.WarnContext(ctx, "get_run_state: the evidence could not be read", "run_id", r.ID, "err", err)
		}
	}
	gateStep := ""
	if r.PendingGate != nil {
		gateStep = r.PendingGate.StepName
	}
	if open && len(r.InProgressSteps) > 0 {
		var claims, stuck []any
		for _, s := range r.InProgressSteps {
			c := r.Claims[s]
			entry := map[string]any{"step": s, "holder": holderJSON(c)}
			if c != nil && c.Since != "" {
				entry["since"] = c.Since
			}
			claims = append(claims, entry)
			if s == gateStep {
				continue // an open question's claim is never stuck
			}
			if st := t.claimState(c); st != "healthy" {
				e := map[string]any{"step": s, "state": st, "deadline": nil}
				if c != nil && c.Deadline != nil {
					e["deadline"] = *c.Deadline
				}
				stuck = append(stuck, e)
			}
		}
		x["step_claims"] = claims
		if len(stuck) > 0 {
			x["stuck_claims"] = stuck
		}
	}
	if open && t.def != nil {
		var runnable, refused, guards []any
		for _, s := range t.def.ordered {
			if s.Execution == workflow.KindFinalizer || r.StateOf(s.Name) != record.StatePending {
				continue
			}
			if rd, _ := t.evaluate(s); rd != ready {
				continue
			}
			if r.PendingGate != nil {
				continue
			}
			switch s.Execution {
			case workflow.KindAuto:
				e := map[string]any{"step": s.Name, "runnable_here": true}
				if c := t.runnableHere(s); c != nil {
					e["runnable_here"], e["refused_by"], e["refusal"] = false, string(c.check), c.why
					if b := c.basis(); b != "" {
						e["basis"] = b
					}
				}
				runnable = append(runnable, e)
			case workflow.KindAgent:
				if c := t.refusedBeforeClaim(s); c != nil {
					refused = append(refused, map[string]any{"step": s.Name, "runnable_here": false, "refused_by": string(c.check), "refusal": c.why})
				}
			case workflow.KindGuard:
				guards = append(guards, s.Name)
			}
		}
		setList(x, "engine_runnable", runnable)
		setList(x, "agent_refused", refused)
		if len(guards) > 0 {
			x["pending_guards"] = guards
		}
		if w := t.waitingOnAnswer(); len(w) > 0 {
			x["waiting_on_answer"] = w
		}
	}
	if open && len(r.CapabilityBlocks) > 0 {
		blocks := map[string]any{}
		for k, v := range r.CapabilityBlocks {
			blocks[k] = v
		}
		x["capability_blocks"] = blocks
	}
	if r.Phase() == record.PhaseFailed {
		var steps []string
		for _, s := range r.FailedSteps {
			if st := t.stepOf(s); st != nil && st.Execution != workflow.KindFinalizer {
				steps = append(steps, s)
			}
		}
		if len(steps) > 0 {
			x["resumable"] = map[string]any{"steps": steps, "command": fmt.Sprintf("realm run resume %s --from %s", r.ID, steps[0])}
		}
	}
	if pending := pendingFinalizers(r); r.Terminal() && len(pending) > 0 {
		cp := map[string]any{"steps": pending, "command": fmt.Sprintf("realm run drain %s --force", r.ID)}
		for _, n := range pending {
			if until, ok := leaseHeld(r.FinalizerLedger[n], t.now); ok {
				cp["held_until"] = record.FormatTime(until)
			}
		}
		x["cleanup_pending"] = cp
	}
	if includeSteps {
		x["steps"] = t.stepsView(entries)
		if df := r.DriveFailures; df != nil && len(df.Entries) > 0 {
			// What each failed drive was billed, in the order of
			// drive_failures.entries (seed 001).
			costs := make([]any, 0, len(df.Entries))
			for _, f := range df.Entries {
				reqs := append(make([]any, 0, len(f.Usage)), f.Usage...)
				c := map[string]any{"step": f.Step, "at": f.At}
				if cost := costOf(map[string]any{"cache": map[string]any{"requests": normalizeJSON(reqs), "basis": "unobservable", "state": "unobservable"}}); cost != nil {
					c["cost"] = cost
				} else {
					c["cost_unrecorded"] = "not_measured_by_realm"
				}
				costs = append(costs, c)
			}
			x["drive_failure_costs"] = costs
		}
	}
	if open {
		if fs := t.findings(entries); len(fs) > 0 {
			b, _ := json.Marshal(fs)
			var list []any
			_ = json.Unmarshal(b, &list)
			x["run_health"] = list
			x["warnings"] = []any{fmt.Sprintf("this run has %d active run-health finding(s) — see 'run_health' for detail.", len(fs))}
		}
	}
	return x
}

// findings are the run's health findings as this server judges them.
func (t *txn) findings(entries []*record.Entry) []health.Finding {
	in := health.Input{Run: t.run, Now: t.now, Capable: t.capable, DefErr: t.defErr, Entries: entries}
	if t.def != nil {
		in.Def = t.def.Def
	}
	return health.Classify(in)
}

func setList(m map[string]any, key string, list []any) {
	if len(list) > 0 {
		m[key] = list
	}
}

// stepsView is include_steps: each step's attempts (and a gate's answers),
// read from the evidence.
func (t *txn) stepsView(entries []*record.Entry) map[string]any {
	out := map[string]any{}
	for _, e := range entries {
		s, _ := out[e.StepID].(map[string]any)
		if s == nil {
			s = map[string]any{"attempts": []any{}}
			out[e.StepID] = s
		}
		if e.Kind == "gate_response" {
			answers, _ := s["answers"].([]any)
			choice := ""
			if m, ok := e.InputSummary.(map[string]any); ok {
				choice, _ = m["choice"].(string)
			}
			a := map[string]any{"choice": choice}
			switch {
			case e.RespondedBy == "timeout":
				a["answered_by"] = map[string]any{"by": nil, "absent_cause": "settled_by_expiry"}
				a["claim_proof_absent"] = "settled_by_expiry"
			case e.RespondedBy != "":
				a["answered_by"] = map[string]any{"by": e.RespondedBy, "by_source": "stated"}
				if e.RespondedByVouchedBy != "" {
					a["answered_by"] = map[string]any{"by": e.RespondedBy, "by_source": "verified", "vouched_by": e.RespondedByVouchedBy}
				}
			default:
				a["answered_by"] = map[string]any{"by": nil, "absent_cause": "not_stated"}
			}
			if e.ClaimProof != nil {
				a["claim_proof"] = e.ClaimProof
			} else if _, ok := a["claim_proof_absent"]; !ok {
				a["claim_proof_absent"] = "proof_not_recorded"
			}
			s["answers"] = append(answers, a)
			continue
		}
		attempts := s["attempts"].([]any)
		n := e.Attempt
		if n == 0 {
			n = len(attempts) + 1
		}
		status := "success"
		if e.Status == "error" {
			status = "error"
		}
		a := map[string]any{"attempt": n, "status": status}
		if e.DrivenBy != nil && e.DrivenBy.By != "" {
			a["driven_by"] = map[string]any{"by": e.DrivenBy.By, "by_source": e.DrivenBy.BySource, "channel": e.DrivenBy.Channel}
		} else {
			a["driven_by"] = map[string]any{"by": nil, "absent_cause": "driver_not_recorded"}
		}
		if cost := costOf(e.Diagnostics); cost != nil {
			a["cost"] = cost
		} else if len(e.ToolCalls) > 0 {
			// Realm's driver records a tool-calling step's usage; an
			// attempt with calls and none is an older or outside record.
			a["cost_unrecorded"] = "tool_calling_step"
		} else if st := t.stepOf(e.StepID); st != nil && st.Execution == workflow.KindAgent {
			a["cost_unrecorded"] = "not_measured_by_realm"
		}
		if len(e.ToolCalls) > 0 {
			a["tool_calls"] = normalizeJSON(toolCallList(e.ToolCalls))
		}
		s["attempts"] = append(attempts, a)
	}
	return out
}

// toolCallList is an attempt's tool calls as include_steps shows them:
// {server_id, tool, args, result, duration_ms, error?}.
func toolCallList(calls []record.ToolCall) []any {
	out := make([]any, 0, len(calls))
	for _, c := range calls {
		m := map[string]any{"server_id": c.ServerID, "tool": c.Tool, "args": c.Args, "result": c.Result, "duration_ms": c.DurationMS}
		if c.Error != "" {
			m["error"] = c.Error
		}
		out = append(out, m)
	}
	return out
}

// nextStatus decides next_actions_status with the seed's precedence:
// awaiting_human, then blocked_on_capability, then claim_stale.
func (t *txn) nextStatus(v view, actions []*realmv1.NextAction) string {
	r := t.run
	gateOpen := false
	if r.PendingGate != nil {
		_, _, due := t.expiredGate()
		gateOpen = !due
	}
	if gateOpen {
		return "awaiting_human"
	}
	if v.blockedOnCapability() && len(v.owed) == 0 {
		return "blocked_on_capability"
	}
	stale, unknown := false, false
	for _, s := range r.InProgressSteps {
		if r.PendingGate != nil && s == r.PendingGate.StepName {
			continue
		}
		switch t.claimState(r.Claims[s]) {
		case "claim_stale":
			stale = true
		case "claim_unknown_age":
			unknown = true
		}
	}
	switch {
	case stale:
		return "claim_stale"
	case unknown && len(actions) == 0:
		return "claim_unknown_age"
	case r.PendingGate != nil || (len(v.owed) > 0 && len(v.agents) == 0):
		return "advance_owed"
	}
	return "ok"
}

// waitingOnAnswer are the steps ready by what they depend on but held while
// a question is open; they go on after the answer.
func (t *txn) waitingOnAnswer() []string {
	r := t.run
	if r.PendingGate == nil || r.Terminal() || t.def == nil {
		return nil
	}
	var out []string
	for _, s := range t.def.ordered {
		if s.Execution == workflow.KindFinalizer || r.StateOf(s.Name) != record.StatePending {
			continue
		}
		if rd, _ := t.evaluate(s); rd == ready {
			out = append(out, s.Name)
		}
	}
	return out
}

// cacheDiagnostics is the evidence's diagnostics.cache for the requests
// behind an answer (run-record spec §3.1). A counter no request reported
// is left out, never written as 0.
func cacheDiagnostics(usage []*realmv1.ModelUsage) map[string]any {
	var requests []any
	cacheSeen, read, created := false, int64(0), int64(0)
	for _, u := range usage {
		r := map[string]any{"request_index": u.GetRequestIndex()}
		if u.GetRequestStart() != "" {
			r["request_start"] = u.GetRequestStart()
		}
		put := func(key string, v *int64) {
			if v != nil {
				r[key] = *v
			}
		}
		put("prompt_tokens", u.PromptTokens)
		put("uncached_input_tokens", u.UncachedInputTokens)
		put("cache_read_input_tokens", u.CacheReadInputTokens)
		put("cache_creation_input_tokens", u.CacheCreationInputTokens)
		put("output_tokens", u.OutputTokens)
		if u.CacheReadInputTokens != nil || u.CacheCreationInputTokens != nil {
			cacheSeen = true
			read += u.GetCacheReadInputTokens()
			created += u.GetCacheCreationInputTokens()
		}
		requests = append(requests, r)
	}
	state, basis := "unobservable", "unobservable"
	if cacheSeen {
		basis = "provider_reported"
		switch {
		case read > 0:
			state = "engaged"
		case created > 0:
			state = "write_only"
		default:
			state = "never_engaged"
		}
	}
	return map[string]any{"state": state, "basis": basis, "requests": requests}
}

// costOf derives an attempt's cost from its diagnostics.cache (seed 001
// include_steps): each number is {value, reported, of} and, when one
// request alone reported it, only_request_index. A number no request
// reported is absent.
func costOf(diag map[string]any) map[string]any {
	cache, _ := diag["cache"].(map[string]any)
	reqs, _ := cache["requests"].([]any)
	if len(reqs) == 0 {
		return nil
	}
	cost := map[string]any{"requests": len(reqs), "basis": cache["basis"], "state": cache["state"]}
	for field, key := range map[string]string{
		"prompt": "prompt_tokens", "output": "output_tokens", "cache_read": "cache_read_input_tokens",
		"cache_write": "cache_creation_input_tokens", "uncached_input": "uncached_input_tokens",
	} {
		var sum float64
		reported, only := 0, -1
		for i, r := range reqs {
			m, _ := r.(map[string]any)
			if v, ok := m[key].(float64); ok {
				sum += v
				reported++
				only = i
			}
		}
		if reported == 0 {
			continue
		}
		n := map[string]any{"value": sum, "reported": reported, "of": len(reqs)}
		if reported == 1 {
			n["only_request_index"] = only
		}
		cost[field] = n
	}
	return cost
}

// evidence reads a run's evidence entries, oldest first. An entry that does
// not decode is left out (a reader shows what it can); a store that cannot
// be read is the caller's error to handle.
func (e *Engine) evidence(ctx context.Context, runID string) ([]*record.Entry, error) {
	raw, err := e.st.Evidence(ctx, runID, 0, -1)
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load run from store: "+err.Error())
	}
	out := make([]*record.Entry, 0, len(raw))
	for _, b := range raw {
		var en record.Entry
		if json.Unmarshal(b, &en) == nil {
			out = append(out, &en)
		}
	}
	return out, nil
}
