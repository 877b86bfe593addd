package health

import (
	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/workflow"
)

// ready reports whether a step is ready by what it depends on: not
// started, not settled, and its trigger rule satisfied by settled
// dependencies (workflow spec §6.3, as the engine's ruleDecision applies
// it). A `when` is not evaluated here — that needs step outputs — but the
// engine skips a step whose `when` is false in the write that readies it,
// so a pending step whose rule holds has passed it. Finalizers are never
// ready in this sense: they run after the seal.
func ready(run *record.Run, s *workflow.Step) bool {
	if s == nil || s.Execution == workflow.KindFinalizer || run.StateOf(s.Name) != record.StatePending {
		return false
	}
	var completed, failed, skipped, unsettled int
	for _, dep := range s.DependsOn {
		switch run.StateOf(dep) {
		case record.StateCompleted:
			completed++
		case record.StateFailed:
			failed++
		case record.StateSkipped:
			skipped++
		default:
			unsettled++
		}
	}
	switch s.Rule() {
	case workflow.RuleAllSuccess:
		return unsettled == 0 && failed == 0 && skipped == 0
	case workflow.RuleAllFailed:
		return unsettled == 0 && completed == 0 && skipped == 0
	case workflow.RuleNoneFailed:
		return unsettled == 0 && failed == 0
	case workflow.RuleAllDone:
		return unsettled == 0
	case workflow.RuleOneFailed:
		return unsettled == 0 && failed > 0
	case workflow.RuleOneSuccess:
		return unsettled == 0 && completed > 0
	}
	return false // an unknown rule: the loader refuses it, so never guess
}

// readySteps are the definition's ready steps in file order.
func (c *classifier) readySteps() []*workflow.Step {
	if c.in.Def == nil {
		return nil
	}
	var out []*workflow.Step
	for _, s := range c.in.Def.Ordered() {
		if ready(c.run, s) {
			out = append(out, s)
		}
	}
	return out
}
