package engine

import (
	"github.com/realm-go/realm/engine-svc/internal/record"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// effects are what a call's writes did beyond the record itself: the auto
// steps and guards a chain ran, how a guard ended the run, the gate a write
// opened, what it claimed to run next. A reply is composed from them and
// the run as the call leaves it. A call that drives handlers makes several
// writes; merge folds each later write's effects into the call's.
type effects struct {
	chained    []chainedStep
	hasChained bool
	guards     []guardOutcome
	endedBy    *ending
	warnings   []string
	lastAuto   string // the last auto step that completed in this call
	// completedArm is the arm a completion in this write seals with.
	completedArm record.Arm
	// openedGate is the step whose gate this write opened.
	openedGate string
	// gateErr is a gate message that could not be rendered.
	gateErr     error
	gateErrStep string
	// expiryLine is the warnings line of an expiry this write carried out.
	expiryLine string
	// expired is the expiry this write carried out, if any.
	expired *expiry
	// adopted counts the trace entries an agent step's record took (own,
	// anonymous, foreign), when hasAdopted; the reply points into it.
	adopted    [3]int32
	hasAdopted bool
	// dispatch are the handler steps this write claimed, to run after it.
	dispatch []claimed
	// notes end the hint: outcomes another process kept from the record.
	notes []string
	// failed is a dispatched step that failed; abortedBy a handler abort.
	failed    *stepFailure
	abortedBy string
	// blocked are steps this write found it cannot run (capability).
	blocked []*workflow.Step
}

// chainedStep is an auto step or guard that finished inside this call.
type chainedStep struct {
	step     string
	warnings []string
}

// guardOutcome is a guard decided inside this call: pass, abort or
// resolution_error.
type guardOutcome struct {
	step, outcome string
}

// ending is how a guard ended the run in this call.
type ending struct {
	arm    record.Arm
	step   string
	reason *string
}

// merge folds a later write's effects into the call's. What the reply
// reports of the chain (chained steps, guards, warnings, notes) adds up;
// the last ending, auto step, gate, failure and abort win; the claims to
// run are the later write's. A capability block, a gate message that
// could not be rendered and a carried-out expiry are reported from the
// call's first write only (the later write's warnings still say them).
func (e *effects) merge(later *effects) {
	e.chained = append(e.chained, later.chained...)
	e.hasChained = e.hasChained || later.hasChained
	e.guards = append(e.guards, later.guards...)
	e.warnings = append(e.warnings, later.warnings...)
	e.notes = append(e.notes, later.notes...)
	if later.endedBy != nil {
		e.endedBy = later.endedBy
	}
	if later.lastAuto != "" {
		e.lastAuto = later.lastAuto
	}
	if later.openedGate != "" {
		e.openedGate = later.openedGate
	}
	if later.failed != nil {
		e.failed = later.failed
	}
	if later.abortedBy != "" {
		e.abortedBy = later.abortedBy
	}
	e.dispatch = later.dispatch
}

// chain notes a step that finished inside this call.
func (e *effects) chain(step string, warnings ...string) {
	e.hasChained = true
	e.chained = append(e.chained, chainedStep{step: step, warnings: warnings})
}

// chainedReply renders the chained steps, each with the phase after it. The
// phase only changes at the last entry (a seal or a gate), so entries
// before the last keep "running".
func (e *effects) chainedReply(run *record.Run) []*realmv1.ChainedStep {
	out := make([]*realmv1.ChainedStep, len(e.chained))
	for i, c := range e.chained {
		phase := realmv1.RunPhase_RUN_PHASE_RUNNING
		if i == len(e.chained)-1 && run.Terminal() {
			phase = phaseEnum(run.Phase())
		}
		out[i] = &realmv1.ChainedStep{Step: c.step, Warnings: c.warnings, RunPhase: phase}
	}
	return out
}

// guardsReply renders the guards decided in this call (nil when none).
func (e *effects) guardsReply() []*realmv1.GuardOutcome {
	if e.guards == nil {
		return nil
	}
	out := make([]*realmv1.GuardOutcome, len(e.guards))
	for i, g := range e.guards {
		out[i] = &realmv1.GuardOutcome{Step: g.step, Outcome: g.outcome}
	}
	return out
}

// endedByReply renders how a guard ended the run (nil when none did).
func (e *effects) endedByReply() *realmv1.EndedBy {
	if e.endedBy == nil {
		return nil
	}
	return &realmv1.EndedBy{Arm: string(e.endedBy.arm), Step: e.endedBy.step, Reason: e.endedBy.reason}
}
