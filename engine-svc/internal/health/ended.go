package health

import (
	"fmt"
	"slices"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
)

// Finalizer lease states (run-record spec §4.6), the reason of
// terminal_pending_finalizer.
const (
	leaseNever   = "never_leased"
	leaseExpired = "lease_expired"
	leaseHeld    = "lease_held"
)

// pendingFinalizers: each cleanup step the ended run still owes, in rank
// order, with whether a drainer holds it. A lease whose deadline cannot be
// read is taken as expired: nothing proves it live.
func (c *classifier) pendingFinalizers() []Finding {
	names := sortedKeys(c, c.run.FinalizerLedger)
	slices.SortStableFunc(names, func(a, b string) int {
		return c.run.FinalizerLedger[a].Rank - c.run.FinalizerLedger[b].Rank
	})
	var out []Finding
	for _, name := range names {
		fs := c.run.FinalizerLedger[name]
		if fs == nil || fs.Status != "pending" {
			continue
		}
		state := leaseNever
		if fs.LeaseToken != "" || fs.LeaseDeadline != "" {
			state = leaseExpired
			if d := record.ParseTime(fs.LeaseDeadline); !d.IsZero() && c.now.Before(d) {
				state = leaseHeld
			}
		}
		ev := map[string]any{"status": fs.Status, "rank": fs.Rank, "lease": state}
		if fs.LeaseDeadline != "" {
			ev["lease_deadline"] = fs.LeaseDeadline
		}
		out = append(out, Finding{Kind: KindTerminalPendingFinalizer, Step: name, Reason: state, Evidence: ev})
	}
	return out
}

// completedWithFailed: the run completed although a step failed (a
// trigger_rule carried it on). Seed wording, verbatim.
func (c *classifier) completedWithFailed() []Finding {
	if c.run.Phase() != record.PhaseCompleted || len(c.run.FailedSteps) == 0 {
		return nil
	}
	failed := slices.Clone(c.run.FailedSteps)
	reason := fmt.Sprintf("completed with %d failed step(s): %s — fail-triggered finalizers do not run on a completed seal unless the workflow opts into the 'completed_with_failed_steps' trigger",
		len(failed), strings.Join(failed, ", "))
	return []Finding{{Kind: KindCompletedWithFailedSteps, Reason: reason, Evidence: map[string]any{"failed_steps": failed}}}
}

// staleGate: an ended record that still holds an open gate (only old
// versions wrote such records).
func (c *classifier) staleGate() []Finding {
	g := c.run.PendingGate
	if g == nil {
		return nil
	}
	// Our wording: the seed does not reproduce this finding.
	reason := fmt.Sprintf("the run has ended but its record still holds open gate '%s' on '%s' — written by an older version; realm run purge removes it", g.GateID, g.StepName)
	return []Finding{{Kind: KindTerminalWithStaleGate, Step: g.StepName, Reason: reason,
		Evidence: map[string]any{"gate_id": g.GateID, "opened_at": g.OpenedAt}}}
}

// Downgrade reasons that are not a downgrade worth a finding: an outside
// agent over MCP never could be grammar-constrained (agent-driver §8.3).
const externalAgent = "external_agent"

// structuredOutputDowngraded: steps that asked for strict structured
// output and ran without it, judged from each step's latest evidence entry
// that says (diagnostics.structured_output). A step whose step-level
// strict held but whose tool arguments lost strict to an API rejection
// reports `tool_args:api_rejected_schema`.
func (c *classifier) structuredOutputDowngraded() []Finding {
	latest := map[string]string{} // step -> reason ("" = not downgraded)
	var order []string
	for _, e := range c.in.Entries {
		if e == nil {
			continue
		}
		so, ok := e.Diagnostics["structured_output"].(map[string]any)
		if !ok {
			continue
		}
		if _, seen := latest[e.StepID]; !seen {
			order = append(order, e.StepID)
		}
		latest[e.StepID] = downgradeOf(so)
	}
	var steps []any
	var parts []string
	for _, step := range order {
		if r := latest[step]; r != "" {
			steps = append(steps, map[string]any{"step": step, "downgrade_reason": r})
			parts = append(parts, step+": "+r)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	reason := fmt.Sprintf("%d step(s) requested strict structured output but ran without it (%s) — outputs were validated post-hoc (L1), not grammar-constrained",
		len(parts), strings.Join(parts, ", "))
	return []Finding{{Kind: KindStructuredOutputDowngraded, Reason: reason, Evidence: map[string]any{"steps": steps}}}
}

// downgradeOf is an entry's downgrade reason, or "" when strict was not
// requested, was sent, or the downgrade does not count.
func downgradeOf(so map[string]any) string {
	if req, _ := so["requested"].(bool); !req {
		return ""
	}
	if sent, _ := so["sent"].(bool); !sent {
		r, _ := so["downgrade_reason"].(string)
		if r == externalAgent {
			return ""
		}
		if r == "" {
			r = "unknown"
		}
		return r
	}
	ta, _ := so["tool_args"].(map[string]any)
	tools, _ := ta["tools"].([]any)
	for _, t := range tools {
		tm, _ := t.(map[string]any)
		drop, _ := tm["dropped_mid_attempt"].(map[string]any)
		if r, _ := drop["reason"].(string); r == "api_rejected_schema" {
			return "tool_args:api_rejected_schema"
		}
	}
	return ""
}
