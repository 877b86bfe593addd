package drive

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/identity"
)

// The driver's sentences of agent driver §9 and §15, word for word.

// repairBudgetLine warns (once per step, stderr) that the repair budget
// outlasts the step's validation-exhaustion threshold (§9); "" when it
// does not.
func repairBudgetLine(step string, retries, threshold int) string {
	if retries+1 <= threshold {
		return ""
	}
	return fmt.Sprintf("  ⚠ --schema-retries %d (repair budget %d attempts) exceeds step '%s''s validation-exhaustion threshold (%d) — the engine will terminalize this step before the repair loop's own budget is exhausted.",
		retries, retries+1, step, threshold)
}

// takenLine is a step another process took first (§15).
func takenLine(step, program, at string) string {
	return fmt.Sprintf("• Step '%s' was taken by %s at %s; not run here.", step, program, at)
}

// inFlightLine is a step in flight elsewhere whose record has not changed
// for the whole wait (§15).
func inFlightLine(runID, step, program, since string, stale bool, wait time.Duration) string {
	line := fmt.Sprintf("• Step '%s' has been in flight since %s, taken by %s; the record has not changed for %ss.", step, since, program, strconv.FormatFloat(wait.Seconds(), 'f', -1, 64))
	if stale {
		line += " Its claim is past its deadline (its runner likely died)."
	}
	return line + fmt.Sprintf(" If the program that took it is gone: realm run reclaim %s --step %s --force", runID, step)
}

// claimOf reads get_run_state's step_claims and stuck_claims: the program
// holding a step's claim, since when, and whether the claim is past its
// deadline.
func claimOf(st *realmv1.RunState, step string) (program, since string, stale bool) {
	program, since = identity.UnprintableName, "an unknown time"
	x := st.GetExtra().AsMap()
	claims, _ := x["step_claims"].([]any)
	for _, c := range claims {
		m, _ := c.(map[string]any)
		if s, _ := m["step"].(string); s != step {
			continue
		}
		h, _ := m["holder"].(map[string]any)
		by, _ := h["by"].(string)
		src, _ := h["by_source"].(string)
		channel, _ := h["channel"].(string)
		program = identity.Words(by, src, channel)
		if s, _ := m["since"].(string); s != "" {
			since = s
		}
	}
	stuck, _ := x["stuck_claims"].([]any)
	for _, c := range stuck {
		m, _ := c.(map[string]any)
		if s, _ := m["step"].(string); s == step && m["state"] == "claim_stale" {
			stale = true
		}
	}
	return program, since, stale
}

// capabilityBlockedLine is a step no live runner can run (§15): the run is
// not failed, and the drive can be re-attached once the runner is there.
func capabilityBlockedLine(step, kind, name, reattach string) string {
	return fmt.Sprintf("⚠ Step '%s' is blocked: %s '%s' is not registered in this runner. The run is NOT failed — add %s '%s' and re-attach (`%s`).",
		step, kind, name, kind, name, reattach)
}

// blockedStep is the first step (by name) of get_run_state's
// capability_blocks, with the kind and name of what it needs.
func blockedStep(st *realmv1.RunState) (step, kind, name string) {
	blocks, _ := st.GetExtra().AsMap()["capability_blocks"].(map[string]any)
	for _, s := range slices.Sorted(maps.Keys(blocks)) {
		b, _ := blocks[s].(map[string]any)
		req, _ := b["requirement"].(map[string]any)
		k, _ := req["kind"].(string)
		n, _ := req["name"].(string)
		if k != "" && n != "" {
			return s, k, n
		}
	}
	return "", "", ""
}

// refusedStep is an owed auto step the engine refuses before its claim
// (get_run_state's engine_runnable with runnable_here false).
type refusedStep struct{ step, check, why string }

// refusedSteps lists them in the engine's order.
func refusedSteps(st *realmv1.RunState) []refusedStep {
	list, _ := st.GetExtra().AsMap()["engine_runnable"].([]any)
	var out []refusedStep
	for _, e := range list {
		m, _ := e.(map[string]any)
		if here, _ := m["runnable_here"].(bool); here {
			continue
		}
		r := refusedStep{}
		r.step, _ = m["step"].(string)
		r.check, _ = m["refused_by"].(string)
		r.why, _ = m["refusal"].(string)
		if r.step != "" && r.check != "" {
			out = append(out, r)
		}
	}
	return out
}

// cannotRunLine names a refused step once per drive (§15).
func cannotRunLine(r refusedStep) string {
	if r.check == "capability" {
		return fmt.Sprintf("• Step '%s' cannot run here (capability): %s", r.step, r.why)
	}
	return fmt.Sprintf("• Step '%s' cannot run (%s): %s", r.step, r.check, r.why)
}

// driveStopsLine ends a drive when nothing else can run and a step refused
// before its claim remains (§15).
func driveStopsLine(runID, phase string, r refusedStep) string {
	return fmt.Sprintf("✗ The drive stops: nothing else can run, and '%s' cannot run (%s). Run %s stays open (phase '%s'): correct the workflow, register it again, then realm run advance %s; or end it: realm run abandon %s.",
		r.step, r.check, runID, phase, runID, runID)
}
