package health

import (
	"fmt"
	"strings"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/workflow"
)

// Claim states (run-record spec §6).
const (
	claimHealthy    = "healthy"
	claimStale      = "claim_stale"
	claimUnknownAge = "claim_unknown_age"
)

// neverClaimedIdle: running, nothing in progress, unchanged for the idle
// threshold or longer. since is the last change; eligible_steps the steps
// ready to be taken (empty without a definition).
func (c *classifier) neverClaimedIdle() []Finding {
	if c.run.Phase() != record.PhaseRunning || len(c.run.InProgressSteps) > 0 {
		return nil
	}
	last := record.ParseTime(c.run.UpdatedAt)
	if last.IsZero() {
		last = record.ParseTime(c.run.CreatedAt)
	}
	if last.IsZero() {
		return nil
	}
	idle, threshold := c.now.Sub(last), c.idleThreshold()
	if idle < threshold {
		return nil
	}
	eligible := []string{}
	for _, s := range c.readySteps() {
		eligible = append(eligible, s.Name)
	}
	return []Finding{{
		Kind:   KindNeverClaimedIdle,
		Reason: "parked with no claimed step, idle",
		Since:  &last,
		IdleMS: ptr(idle.Milliseconds()),
		Evidence: map[string]any{
			"idle_threshold_ms": threshold.Milliseconds(),
			"eligible_steps":    eligible,
		},
	}}
}

// driveFailing: the newest drive failure is the last thing that happened
// to the run — nothing the record or the evidence times is later.
func (c *classifier) driveFailing() []Finding {
	df := c.in.DriveFailures
	if df == nil {
		df = c.run.DriveFailures
	}
	if df == nil || len(df.Entries) == 0 {
		return nil
	}
	last := df.Entries[len(df.Entries)-1]
	at := record.ParseTime(last.At)
	if at.IsZero() || c.laterEventThan(at) {
		return nil
	}
	ev := map[string]any{
		"error_class":     last.ErrorClass,
		"at":              last.At,
		"total":           df.Total,
		"first_failed_at": df.FirstFailedAt,
	}
	if last.Step != "" {
		ev["step"] = last.Step
	}
	if last.DerivedCeilingMS != nil {
		ev["derived_ceiling_ms"] = *last.DerivedCeilingMS
	}
	// The message is kept verbatim (already redacted and cut when recorded).
	reason := fmt.Sprintf("the last drive attempt failed %s ago (%s)", Age(c.now.Sub(at)), last.ErrorClass)
	if last.Message != "" {
		reason += ": " + last.Message
	} else {
		reason += "." // our wording: the seed shows only a failure with a message
	}
	return []Finding{{Kind: KindDriveFailing, Step: last.Step, Reason: reason, Evidence: ev}}
}

// laterEventThan reports whether anything recorded happened after t: a
// claim taken, a gate opened or settled by expiry, a capability block
// recorded, or an evidence entry written.
func (c *classifier) laterEventThan(t time.Time) bool {
	after := func(s string) bool { x := record.ParseTime(s); return !x.IsZero() && x.After(t) }
	for _, cl := range c.run.Claims {
		if cl != nil && after(cl.Since) {
			return true
		}
	}
	if g := c.run.PendingGate; g != nil && after(g.OpenedAt) {
		return true
	}
	for _, g := range c.run.ResolvedGates {
		if g != nil && after(g.ExpiredAt) {
			return true
		}
	}
	for _, b := range c.run.CapabilityBlocks {
		if b != nil && after(b.At) {
			return true
		}
	}
	for _, e := range c.in.Entries {
		if e != nil && (after(e.CompletedAt) || after(e.StartedAt)) {
			return true
		}
	}
	return false
}

// claimStateOf judges a claim against the clock: a missing claim or deadline
// is an unknown age (a store that keeps no claims gives no time either).
func claimStateOf(cl *record.Claim, now time.Time) (state string, deadline any) {
	if cl == nil || cl.Deadline == nil {
		return claimUnknownAge, nil
	}
	d := record.ParseTime(*cl.Deadline)
	if d.IsZero() {
		return claimUnknownAge, nil
	}
	if now.After(d) {
		return claimStale, *cl.Deadline
	}
	return claimHealthy, *cl.Deadline
}

// claimFindings are the stale or unknown-age claims other than skip's.
func (c *classifier) claimFindings(kind, skip string) []Finding {
	var out []Finding
	for _, step := range c.ordered(c.run.InProgressSteps) {
		if step == skip {
			continue
		}
		state, deadline := claimStateOf(c.run.Claims[step], c.now)
		if state == claimHealthy {
			continue
		}
		out = append(out, Finding{Kind: kind, Step: step, Reason: state,
			Evidence: map[string]any{"state": state, "deadline": deadline}})
	}
	return out
}

func (c *classifier) staleClaims() []Finding {
	if c.run.Phase() != record.PhaseRunning {
		return nil
	}
	return c.claimFindings(KindStaleClaim, "")
}

// wedgedSiblings: the gate's own step stays claimed while its question is
// open (with no deadline by design), so only the other steps count.
func (c *classifier) wedgedSiblings() []Finding {
	if c.run.Phase() != record.PhaseGateWaiting || c.run.PendingGate == nil {
		return nil
	}
	return c.claimFindings(KindWedgedGateSibling, c.run.PendingGate.StepName)
}

// capabilityBlocks: a recorded block on a step that has not run since (it
// is still pending), left out when this server has the handler. Adapters
// are never run by the engine itself, so an adapter block always stands.
func (c *classifier) capabilityBlocks() []Finding {
	var out []Finding
	for _, step := range sortedKeys(c, c.run.CapabilityBlocks) {
		b := c.run.CapabilityBlocks[step]
		if b == nil || c.run.StateOf(step) != record.StatePending {
			continue
		}
		kind, name := b.Requirement.Kind, b.Requirement.Name
		if kind == record.RequireHandler && c.capable(name) {
			continue
		}
		code := b.Code
		if code == "" {
			code = string(errcode.EngineHandlerNotRegistered)
			if kind == record.RequireAdapter {
				code = string(errcode.EngineAdapterNotRegistered)
			}
		}
		f := Finding{Kind: KindCapabilityBlock, Step: step, Reason: code, Evidence: map[string]any{
			"requirement": map[string]any{"kind": kind, "name": name},
			"code":        code,
		}}
		if b.At != "" {
			if t := record.ParseTime(b.At); !t.IsZero() {
				f.Since = &t
			}
		}
		out = append(out, f)
	}
	return out
}

// Gate expiry dispositions; finding_only is a timeout with no on_expiry.
const (
	dispSettleDefault = "settle_default"
	dispAbort         = "abort"
	dispFindingOnly   = "finding_only"
)

// gateExpired: the open gate's expires_at has come (at or after it, as
// the engine's expiry check counts it) and nothing has enacted it yet.
func (c *classifier) gateExpired() []Finding {
	g := c.run.PendingGate
	if g == nil || g.ExpiresAt == "" {
		return nil
	}
	at := record.ParseTime(g.ExpiresAt)
	if at.IsZero() || c.now.Before(at) {
		return nil
	}
	disp := g.OnExpiry
	if disp == "" {
		disp = dispFindingOnly
	}
	var reason string
	switch disp {
	case dispAbort:
		reason = "gate expired — awaiting enactment of the declared abort" // seed, verbatim
	case dispSettleDefault:
		// The seed gives the abort form; workflow spec §10.5 says "(or default)".
		reason = "gate expired — awaiting enactment of the declared default"
	case dispFindingOnly:
		// Our wording: no on_expiry is declared, so only an answer moves it.
		reason = "gate expired — no on_expiry is declared; it still accepts an answer"
	default:
		reason = fmt.Sprintf("gate expired — awaiting enactment of the declared %s", disp)
	}
	return []Finding{{Kind: KindGateExpiredAwaitingDrive, Step: g.StepName, Reason: reason, Evidence: map[string]any{
		"gate_id":     g.GateID,
		"expires_at":  g.ExpiresAt,
		"overdue_ms":  c.now.Sub(at).Milliseconds(),
		"disposition": disp,
	}}}
}

// guardsAwaiting: a ready guard no write has decided (it became ready at
// creation by a batch or a program, after resume, or on a store without
// atomic settlement).
func (c *classifier) guardsAwaiting() []Finding {
	var out []Finding
	for _, s := range c.readySteps() {
		if s.Execution != workflow.KindGuard {
			continue
		}
		out = append(out, Finding{Kind: KindGuardAwaitingSettlement, Step: s.Name,
			Reason: fmt.Sprintf("guard '%s' is eligible and has not been settled", s.Name)})
	}
	return out
}

// trustInvalid: a ready step whose trust the engine will refuse (a copy
// registered by an older version).
func (c *classifier) trustInvalid() []Finding {
	var out []Finding
	for _, s := range c.readySteps() {
		if s.Trust == "" || isTrustValue(s.Trust) {
			continue
		}
		out = append(out, Finding{Kind: KindTrustValueInvalid, Step: s.Name, Reason: trustReason(s.Trust),
			Evidence: map[string]any{"trust": s.Trust}})
	}
	return out
}

func isTrustValue(v string) bool {
	for _, k := range trustValues {
		if v == k {
			return true
		}
	}
	return false
}

// trustReason is the error catalogue's VALIDATION_TRUST_VALUE text. "<path>"
// is literal: the record does not know the workflow file's path.
func trustReason(v string) string {
	hint := " — correct the value" // our wording when there is no close value
	if s := suggestTrust(v); s != "" {
		hint = fmt.Sprintf("; did you mean '%s'? — correct the value", s)
	}
	return fmt.Sprintf(`'trust: "%s"' is not a recognized value — the engine will refuse this step at dispatch (%s). Accepts %s%s and 'realm workflow register <path>'.`,
		v, errcode.ValidationTrustValue, strings.Join(trustValues, ", "), hint)
}

// definitionUnresolvable: the run's workflow cannot be read. Not found and
// unreadable are told apart by DefErr's code.
func (c *classifier) definitionUnresolvable() []Finding {
	if c.in.Def != nil {
		return nil
	}
	code, found := defCode(c.in.DefErr)
	id, runID := c.run.WorkflowID, c.run.ID
	var reason string
	switch {
	case !found && strings.HasPrefix(id, "dynamic-"):
		reason = fmt.Sprintf("Workflow '%s' not found — this run's workflow was created by an agent (create_workflow) and its stored copy is gone; there is no source file to register. To end the run: realm run abandon %s.", id, runID)
	case !found:
		// Our wording for a file-registered workflow, in the seed's voice.
		reason = fmt.Sprintf("Workflow '%s' not found — its registered copy is gone. Register it again: realm workflow register <path>. To end the run: realm run abandon %s.", id, runID)
	default:
		// Our wording for a copy that exists but cannot be read.
		reason = fmt.Sprintf("Workflow '%s' cannot be read (%s) — register it again: realm workflow register <path>. To end the run: realm run abandon %s.", id, errText(c.in.DefErr), runID)
	}
	return []Finding{{Kind: KindDefinitionUnresolvable, Reason: reason,
		Evidence: map[string]any{"workflow_id": id, "code": string(code)}}}
}

// defCode is the code of a definition failure and whether the copy exists.
// No error, or one without a code, is taken as not found: that is what the
// engine's loader returns for a missing copy.
func defCode(err error) (errcode.Code, bool) {
	code := errcode.CodeOf(err)
	if code == "" || code == errcode.StateWorkflowNotFound {
		return errcode.StateWorkflowNotFound, false
	}
	return code, true
}

func errText(err error) string {
	if err == nil {
		return "unknown cause"
	}
	return err.Error()
}

// gateCorruption: the open gate is also recorded as answered — its id is
// among the resolved gates, or its step is settled by an answer.
func (c *classifier) gateCorruption() []Finding {
	g := c.run.PendingGate
	if g == nil {
		return nil
	}
	ev := map[string]any{"gate_id": g.GateID}
	corrupt := false
	if rg := c.run.ResolvedGates[g.GateID]; rg != nil {
		corrupt = true
		ev["resolved"] = map[string]any{"step": rg.Step, "choice": rg.Choice, "resolved_by": rg.ResolvedBy}
	}
	if st := c.run.Settled[g.StepName]; st != nil && st.Outcome == "gate" {
		corrupt = true
		ev["settled"] = map[string]any{"outcome": st.Outcome, "choice": st.Choice}
	}
	if !corrupt {
		return nil
	}
	// Our wording: the seed does not reproduce this finding.
	reason := fmt.Sprintf("gate '%s' on '%s' is recorded as both answered and open — the record is inconsistent; inspect it before acting on the run", g.GateID, g.StepName)
	return []Finding{{Kind: KindGateCorruption, Step: g.StepName, Reason: reason, Evidence: ev}}
}
