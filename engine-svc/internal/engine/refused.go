package engine

import (
	"fmt"

	"github.com/realm-go/realm/pkg/schema"
	"github.com/realm-go/realm/pkg/workflow"
)

// check names what refused a ready step before its claim (spec §5.1/§6.5).
type check string

const (
	checkCapability   check = "capability"
	checkTrust        check = "trust"
	checkPrecondition check = "precondition"
	checkInputSchema  check = "input_schema"
)

// cannotRun is a ready step refused before its claim. The engine branches
// on its fields; sentence renders the seed's words once.
type cannotRun struct {
	step  *workflow.Step
	check check
	// why is the reason as get_run_state's refusal and inspect show it:
	// the sentence's tail without its final full stop.
	why string
	// For an input its schema refuses: every rule broken (why is the
	// first) and where the value checked came from, which picks the
	// step's own way out.
	errs  []schema.Error
	input inputSource
}

// inputSource is where the value an auto step's input_schema checks comes
// from (seed 000, advance_run): each gives the step its own way out.
type inputSource int

const (
	inputParams       inputSource = iota // no depends_on: the run's params
	inputNone                            // depends_on: the engine gives it no input ({})
	inputMapped                          // its input_map; the refused key not from run.params
	inputMappedParams                    // its input_map; the refused key from run.params
)

// mapped reports whether the input refused is what the step's input_map
// built: the engine's own work, not the caller's input.
func (c *cannotRun) mapped() bool {
	return c.check == checkInputSchema && (c.input == inputMapped || c.input == inputMappedParams)
}

// way is the step's own way out, after "For ", for a refusal its workflow
// or its run's params can fix; "" for a capability block, whose way is
// loading the extension.
func (c *cannotRun) way() string {
	name := c.step.Name
	switch c.check {
	case checkInputSchema:
		switch c.input {
		case inputParams:
			return fmt.Sprintf("'%s', start a run with params that fit, or correct its input_schema and register the workflow again", name)
		case inputNone:
			return fmt.Sprintf("'%s', the engine gives it no input, so correct its input_schema and register the workflow again", name)
		case inputMapped:
			return fmt.Sprintf("'%s', correct its input_map or its input_schema and register the workflow again", name)
		case inputMappedParams:
			return fmt.Sprintf("'%s', start a run with params that fit, or correct its input_map or its input_schema and register the workflow again", name)
		}
	case checkTrust, checkPrecondition:
		return fmt.Sprintf("'%s', correct the workflow and register it again", name)
	}
	return ""
}

// basis is what a refusal was judged on: a capability by this engine's
// registry; the other checks by the record, which needs no basis.
func (c *cannotRun) basis() string {
	if c.check == checkCapability {
		return "registry"
	}
	return ""
}

// sentence is the refusal as replies and hints write it.
func (c *cannotRun) sentence() string {
	if c.check == checkCapability {
		return fmt.Sprintf("'%s' cannot run here (capability): %s — load the missing extension, or run the step on a runner that has it.", c.step.Name, c.why)
	}
	return fmt.Sprintf("'%s' cannot run (%s): %s.", c.step.Name, c.check, c.why)
}

// uncallableKind is why a step cannot be called now.
type uncallableKind int

const (
	callCompleted     uncallableKind = iota // it has already completed
	callFailed                              // it has already failed
	callSkipped                             // it has already been skipped
	callQuestionOpen                        // its own question is open
	callInFlight                            // another call holds its claim
	callGuard                               // a guard is never called
	callFinalizer                           // a finalizer is never called
	callWaitsQuestion                       // another step's question is open
	callWaiting                             // its dependencies have not settled
	callDepCannotRun                        // a dependency is refused before its claim
	callClaimGone                           // the claim_token given is no longer its claim
	callRunEnded                            // the run has ended (claim_step)
	callNotInWorkflow                       // no such step (claim_step)
	callNotAgent                            // only an agent step is claimed (claim_step)
)

// uncallable says why a step cannot be called now, with what its clause
// names.
type uncallable struct {
	kind uncallableKind
	// choices and gateStep are the open question's (callQuestionOpen,
	// callWaitsQuestion).
	choices  []string
	gateStep string
	// open are the unsettled dependencies (callWaiting), or the one that
	// cannot run (callDepCannotRun, with dep its refusal).
	open []*workflow.Step
	dep  *cannotRun
	// runID, phase, step and workflowID name what claim_step's refusals
	// are about.
	runID, phase, step, workflowID string
}

// predicate is the clause without its subject, for the kinds whose clause
// is "it <predicate>"; ok is false for the others.
func (u *uncallable) predicate() (string, bool) {
	switch u.kind {
	case callCompleted:
		return "has already completed", true
	case callFailed:
		return "has already failed", true
	case callSkipped:
		return "has already been skipped", true
	case callInFlight:
		return "is in flight (claimed by another call)", true
	case callGuard:
		return "is a guard step, which the engine decides inside the write that makes it ready; it is never called", true
	case callFinalizer:
		return "is a cleanup step, which the engine runs after the run ends; it is never called", true
	case callWaitsQuestion:
		return fmt.Sprintf("waits on the question on step '%s' (choices: %s) — answer it with submit_human_response", u.gateStep, joinComma(u.choices)), true
	}
	return "", false
}

// clause is the reason as blocked replies write it, after "Step '<s>'
// cannot be called now: ".
func (u *uncallable) clause() string {
	if p, ok := u.predicate(); ok {
		return "it " + p
	}
	switch u.kind {
	case callQuestionOpen:
		return fmt.Sprintf("its question is open (choices: %s) — answer it with submit_human_response", joinComma(u.choices))
	case callWaiting:
		return "its dependencies are not settled: " + names(u.open)
	case callDepCannotRun:
		return fmt.Sprintf("a step it depends on cannot run ('%s')", u.open[0].Name)
	case callClaimGone:
		return "the claim this call held on it was removed by another process (its claim_token is no longer the step's claim)"
	case callRunEnded:
		return fmt.Sprintf("run '%s' is already terminal (%s)", u.runID, u.phase)
	case callNotInWorkflow:
		return fmt.Sprintf("step '%s' is not in workflow '%s'", u.step, u.workflowID)
	case callNotAgent:
		return "only an agent step is claimed without being done; the engine runs this one"
	}
	return ""
}

// afterStep is the reason as append_trace writes it, after "Step '<s>' ":
// the predicate where the clause has the subject "it", else the clause.
func (u *uncallable) afterStep() string {
	if p, ok := u.predicate(); ok {
		return p
	}
	return u.clause()
}
