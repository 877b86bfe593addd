package engine

import (
	"fmt"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/condition"
	"github.com/realm-go/realm/pkg/schema"
	"github.com/realm-go/realm/pkg/template"
	"github.com/realm-go/realm/pkg/workflow"
)

// readiness is where a pending step stands.
type readiness int

const (
	waiting readiness = iota // its dependencies have not settled
	ready                    // it may run now
	skipNow                  // it must be skipped (SkipDetail says why)
)

// depCounts classifies a step's dependencies.
type depCounts struct {
	c, f, s, u int
	last       record.Dep
}

func (t *txn) deps(s *workflow.Step) depCounts {
	var d depCounts
	for _, dep := range s.DependsOn {
		st := t.run.StateOf(dep)
		d.last = record.Dep{Step: dep, State: st}
		switch st {
		case record.StateCompleted:
			d.c++
		case record.StateFailed:
			d.f++
		case record.StateSkipped:
			d.s++
		default:
			d.u++
		}
	}
	return d
}

// ruleDecision applies a trigger rule (spec §6.3): satisfied, unsatisfiable
// (with the dependency that made it so), or waiting.
func (t *txn) ruleDecision(s *workflow.Step) (readiness, *record.Dep) {
	d := t.deps(s)
	bad := func(states ...string) *record.Dep {
		for _, dep := range s.DependsOn {
			st := t.run.StateOf(dep)
			for _, want := range states {
				if st == want {
					return &record.Dep{Step: dep, State: st}
				}
			}
		}
		return nil
	}
	switch s.Rule() {
	case workflow.RuleAllSuccess:
		if b := bad(record.StateFailed, record.StateSkipped); b != nil {
			return skipNow, b
		}
	case workflow.RuleAllFailed:
		if b := bad(record.StateCompleted, record.StateSkipped); b != nil {
			return skipNow, b
		}
	case workflow.RuleNoneFailed:
		if b := bad(record.StateFailed); b != nil {
			return skipNow, b
		}
	}
	if d.u > 0 {
		return waiting, nil
	}
	switch s.Rule() {
	case workflow.RuleOneFailed:
		if d.f == 0 {
			last := d.last // a copy: d stays on the stack
			return skipNow, &last
		}
	case workflow.RuleOneSuccess:
		if d.c == 0 {
			last := d.last
			return skipNow, &last
		}
	}
	return ready, nil
}

// scope is what conditions read.
func (t *txn) scope() condition.Scope {
	if t.scopeCache == nil {
		t.scopeCache = &condition.Scope{Outputs: t.outputs, Params: t.run.Params, Settlement: t.settlement()}
	}
	return *t.scopeCache
}

// evaluate decides whether a pending step is ready, waits, or must be
// skipped, and returns the skip record for the last case.
func (t *txn) evaluate(s *workflow.Step) (readiness, *record.SkipDetail) {
	r, dep := t.ruleDecision(s)
	switch r {
	case waiting:
		return waiting, nil
	case skipNow:
		return skipNow, &record.SkipDetail{
			Kind:         "trigger_rule_unsatisfiable",
			Rule:         s.Rule(),
			BlockingDeps: []record.Dep{*dep},
		}
	}
	conds := t.def.when[s.Name]
	if len(conds) == 0 {
		return ready, nil
	}
	passed, results := condition.EvalAll(condition.FieldWhen, conds, t.scope())
	if passed {
		return ready, nil
	}
	d := &record.SkipDetail{Kind: "when_false", Expression: strings.Join(s.When, " && ")}
	for _, r := range results {
		d.Leaves = append(d.Leaves, record.Leaf{Leaf: r.Leaf, LHSPresent: r.LHSPresent, ResolvedValue: r.ResolvedValue, Passed: r.Passed})
		if !r.Passed && d.Expression == strings.Join(s.When, " && ") && len(s.When) > 1 {
			d.Expression = r.Leaf
		}
	}
	return skipNow, d
}

// advanceOpts say what a write may do beyond its own change.
type advanceOpts struct {
	// decideGuards decides guards made ready by this write. Creating or
	// resuming a run never decides one (spec §5.3).
	decideGuards bool
	// chain runs auto steps that became ready.
	chain bool
	// arm seals a run this write completes.
	arm record.Arm
}

// advance re-evaluates every pending step after a write: it settles skips,
// decides ready guards, runs ready auto steps the engine can run here, and
// seals the run when nothing is left. It loops until nothing changes.
func (t *txn) advance(o advanceOpts) {
	for changed := true; changed && !t.run.Terminal(); {
		changed = false
		for _, s := range t.def.ordered {
			if t.run.Terminal() || t.run.PendingGate != nil && s.Execution != workflow.KindGuard {
				break
			}
			if s.Execution == workflow.KindFinalizer || t.run.StateOf(s.Name) != record.StatePending {
				continue
			}
			r, skip := t.evaluate(s)
			switch r {
			case skipNow:
				t.run.MarkSkipped(s.Name, skip)
				t.touch()
				changed = true
				continue
			case waiting:
				continue
			}
			switch s.Execution {
			case workflow.KindGuard:
				if o.decideGuards {
					t.decideGuard(s)
					changed = true
				}
			case workflow.KindAuto:
				if o.chain && (s.Handler != "" && !t.capable(s.Handler) || s.UsesService != "" && !t.capableAdapter(t.adapterOf(s))) {
					t.markCapabilityBlock(s)
				}
				if o.chain && t.runnableHere(s) == nil {
					switch {
					case s.GatedBefore() && !t.approvedBefore(s):
						// gate.before: the person approves the work before
						// it is called; the preview is what it would be
						// called with.
						if err := t.openGate(s, t.handlerInput(s), t.caller); err != nil {
							t.gateErr, t.gateErrStep = err, s.Name
							continue
						}
					case s.Handler != "" || s.UsesService != "":
						// Handler steps run after this write, on a runner;
						// a gate on one opens once its work is done.
						t.claimForDispatch(s)
					case s.Gated():
						// The gate comes before a bare step (spec §10.3): the
						// person decides on what the step would record.
						if err := t.openGate(s, t.passThroughOutput(s), t.caller); err != nil {
							t.gateErr, t.gateErrStep = err, s.Name
							continue
						}
					default:
						t.runPassThrough(s)
					}
					changed = true
				}
			}
		}
	}
	arm := o.arm
	if t.completedArm != "" {
		arm = t.completedArm
	}
	t.maybeComplete(arm)
}

// maybeComplete seals the run completed when no step is left to settle.
func (t *txn) maybeComplete(arm record.Arm) {
	if t.run.Terminal() || t.run.PendingGate != nil {
		return
	}
	for _, s := range t.def.Def.Steps {
		if s.Execution != workflow.KindFinalizer && !t.run.IsSettled(s.Name) {
			return
		}
	}
	if arm == "" {
		arm = record.ArmComplete
	}
	reason := "Workflow completed."
	if arm == record.ArmGuardPassComplete || arm == record.ArmGateExpiryDefault {
		reason = ""
	}
	t.run.Seal(arm, "", reason)
	if arm == record.ArmGuardPassComplete && len(t.guards) > 0 {
		last := t.guards[len(t.guards)-1]
		t.run.SealedBy.Step = last.step
		t.endedBy = &ending{arm: arm, step: last.step}
	}
	t.touch()
}

// runnableHere says why an auto step cannot run in this engine, or nil when
// it can. Handlers and adapters are served by runners (capability registry);
// without one the step waits, blocked on capability, and the run is not
// failed.
func (t *txn) runnableHere(s *workflow.Step) *cannotRun {
	if s.Handler != "" && !t.capable(s.Handler) {
		return &cannotRun{step: s, check: checkCapability, why: fmt.Sprintf("handler '%s' is not registered here", s.Handler)}
	}
	if s.UsesService != "" && !t.capableAdapter(t.adapterOf(s)) {
		return &cannotRun{step: s, check: checkCapability, why: fmt.Sprintf("adapter '%s' is not registered here", t.adapterOf(s))}
	}
	return t.refusedBeforeClaim(s)
}

// refusedBeforeClaim checks a step's preconditions before it is claimed
// (spec §5.1/§6.5): the refusal, or nil.
func (t *txn) refusedBeforeClaim(s *workflow.Step) *cannotRun {
	switch s.Trust {
	case "", workflow.TrustAuto, workflow.TrustHumanConfirmed, workflow.TrustHumanReviewed:
	default:
		// Only a copy registered by an older version can carry one: the
		// loader refuses it today.
		return &cannotRun{step: s, check: checkTrust, why: fmt.Sprintf("'trust: \"%s\"' is not a recognized value — the engine will refuse this step at dispatch (VALIDATION_TRUST_VALUE)", s.Trust)}
	}
	if conds := t.def.pre[s.Name]; len(conds) > 0 {
		_, results := condition.EvalAll(condition.FieldPrecondition, conds, t.scope())
		for _, r := range results {
			if !r.Passed {
				return &cannotRun{step: s, check: checkPrecondition, why: fmt.Sprintf("Precondition failed: '%s'. Resolved value: %s", r.Leaf, jsonText(r.ResolvedValue))}
			}
		}
	}
	if s.Execution == workflow.KindAuto {
		return t.inputRefused(s)
	}
	return nil
}

// inputRefused checks an auto step's input_schema against stepInput, the
// value its call is given, so that what get_run_state and the replies say
// can run and what the call runs cannot disagree; nil when it fits.
func (t *txn) inputRefused(s *workflow.Step) *cannotRun {
	sch := t.def.input[s.Name]
	if sch == nil {
		return nil
	}
	in, src := t.stepInput(s)
	errs := sch.Validate(in)
	if len(errs) == 0 {
		return nil
	}
	// Only the params of a new run change what a run.params path finds.
	if src == inputMapped && template.BuiltFromParams(s.InputMap, refusedKey(errs[0])) {
		src = inputMappedParams
	}
	return &cannotRun{step: s, check: checkInputSchema, why: inputRefusal(errs[0]), errs: errs, input: src}
}

// stepInput is what the engine gives an auto step, and where it comes
// from: for one that builds its input with an input_map (a handler or a
// uses_service step), what the map builds — handlerInput, the very value
// its handler or adapter receives as params (seed 000) — else engineInput.
func (t *txn) stepInput(s *workflow.Step) (any, inputSource) {
	if s.BuildsInput() {
		return t.handlerInput(s), inputMapped
	}
	if len(s.DependsOn) == 0 {
		return t.engineInput(s), inputParams
	}
	return t.engineInput(s), inputNone
}

// refusedKey is the property a schema error refuses, as a path of names
// into the value checked: the error's instancePath, then the property it
// names (one required but missing, or one not allowed).
func refusedKey(e schema.Error) []string {
	var key []string
	if p := strings.TrimPrefix(e.InstancePath, "/"); p != "" {
		for _, seg := range strings.Split(p, "/") {
			key = append(key, strings.NewReplacer("~1", "/", "~0", "~").Replace(seg))
		}
	}
	for _, param := range []string{"missingProperty", "additionalProperty"} {
		if name, ok := e.Params[param].(string); ok {
			key = append(key, name)
		}
	}
	return key
}

// engineInput is what the engine gives an auto step: the run's params when
// it has no depends_on, else {} (spec §9.1).
func (t *txn) engineInput(s *workflow.Step) any {
	if len(s.DependsOn) == 0 {
		return t.run.Params
	}
	return map[string]any{}
}

// runPassThrough runs an auto step with neither handler nor service: it
// records an output it did not compute (spec §5.1).
func (t *txn) runPassThrough(s *workflow.Step) {
	out, source := t.passThrough(s)
	e := t.entry(s.Name, "success")
	e.InputSummary = t.engineInput(s)
	e.OutputSummary = out
	e.OutputSource = source
	t.setOutput(s.Name, out)
	t.run.MarkCompleted(s.Name, record.Completed())
	t.appendEvidence(e)
	t.chain(s.Name)
	t.lastAuto = s.Name
	t.completedArm = ""
}

// passThrough is the output a bare auto step records and where it came from.
func (t *txn) passThrough(s *workflow.Step) (any, string) {
	switch len(s.DependsOn) {
	case 0:
		return t.run.Params, "run_params"
	case 1:
		if v, ok := t.outputs[s.DependsOn[0]]; ok {
			return v, "dependency"
		}
	}
	return map[string]any{}, "none"
}

func (t *txn) passThroughOutput(s *workflow.Step) any {
	out, _ := t.passThrough(s)
	return out
}

// decideGuard decides a guard inside the write that made it ready.
func (t *txn) decideGuard(s *workflow.Step) {
	scope := t.scope()
	_, results := condition.EvalAll(condition.FieldAbortUnless, t.def.abort[s.Name], scope)
	conds := make([]record.ConditionEval, 0, len(results))
	var resolution []string
	passed := true
	for _, r := range results {
		conds = append(conds, record.ConditionEval{Condition: r.Leaf, ResolvedValue: r.ResolvedValue, Passed: r.Passed})
		if r.ResolutionError {
			resolution = append(resolution, r.Leaf)
		}
		if !r.Passed {
			passed = false
		}
	}
	e := t.entry(s.Name, "success")
	e.InputSummary = map[string]any{}
	t.chain(s.Name)
	switch {
	case len(resolution) > 0:
		msg := fmt.Sprintf("Guard '%s' could not resolve %s: the value it reads is not in the run.", s.Name, quoteList(resolution))
		e.Status = "error"
		e.Error = msg
		e.OutputSummary = map[string]any{}
		t.run.MarkFailed(s.Name, msg, &record.Settled{Outcome: "fail"})
		t.appendEvidence(e)
		t.guards = append(t.guards, guardOutcome{step: s.Name, outcome: "resolution_error"})
		t.run.Seal(record.ArmGuardResolutionError, s.Name, fmt.Sprintf("Guard step '%s' failed with a resolution error: %s", s.Name, msg))
		t.endedBy = &ending{arm: record.ArmGuardResolutionError, step: s.Name, reason: &msg}
	case passed:
		out := map[string]any{"conditions": condList(conds), "aborted": false}
		e.OutputSummary = out
		t.setOutput(s.Name, out)
		t.run.MarkCompleted(s.Name, record.Completed())
		t.appendEvidence(e)
		t.guards = append(t.guards, guardOutcome{step: s.Name, outcome: "pass"})
		t.completedArm = record.ArmGuardPassComplete
	default:
		out := map[string]any{"conditions": condList(conds), "aborted": true}
		if s.AbortMessage != "" {
			out["abort_message"] = s.AbortMessage
		}
		e.Status = "skipped"
		e.OutputSummary = out
		t.run.MarkSkipped(s.Name, &record.SkipDetail{Kind: "guard_abort"})
		t.appendEvidence(e)
		t.guards = append(t.guards, guardOutcome{step: s.Name, outcome: "abort"})
		t.run.AbortedAt = &record.AbortedAt{StepID: s.Name, Conditions: conds, AbortMessage: s.AbortMessage}
		t.abortRest("guard_abort")
		t.run.Seal(record.ArmGuardAbort, s.Name, "")
		t.endedBy = &ending{arm: record.ArmGuardAbort, step: s.Name}
		if s.AbortMessage != "" {
			msg := s.AbortMessage
			t.endedBy.reason = &msg
		}
	}
}

// abortRest skips every unsettled step when a run is aborted: through the
// trigger rule where a dependency is skipped, otherwise with the abort's
// own reason (spec §6.6's recommendation).
func (t *txn) abortRest(kind string) {
	for changed := true; changed; {
		changed = false
		for _, s := range t.def.ordered {
			if s.Execution == workflow.KindFinalizer || t.run.StateOf(s.Name) != record.StatePending {
				continue
			}
			if r, skip := t.ruleDecision(s); r == skipNow {
				t.run.MarkSkipped(s.Name, &record.SkipDetail{Kind: "trigger_rule_unsatisfiable", Rule: s.Rule(), BlockingDeps: []record.Dep{*skip}})
				changed = true
			}
		}
	}
	for _, s := range t.def.ordered {
		if s.Execution != workflow.KindFinalizer && t.run.StateOf(s.Name) == record.StatePending {
			t.run.MarkSkipped(s.Name, &record.SkipDetail{Kind: kind})
		}
	}
	t.touch()
}

// recoverable reports whether a failed step leaves a step whose trigger
// rule this failure can satisfy (spec §6.7 item 4).
func (t *txn) recoverable(failed string) bool {
	for _, child := range t.def.parents[failed] {
		s := t.def.Def.Steps[child]
		if s == nil || s.Execution == workflow.KindFinalizer || t.run.StateOf(child) != record.StatePending {
			continue
		}
		switch s.Rule() {
		case workflow.RuleOneFailed, workflow.RuleAllFailed, workflow.RuleAllDone:
			return true
		}
	}
	return false
}

// failStep fails a step and, when nothing can recover from it, the run.
func (t *txn) failStep(step, msg string) (terminated bool) {
	t.run.MarkFailed(step, msg, &record.Settled{Outcome: "fail"})
	t.touch()
	if t.recoverable(step) {
		return false
	}
	t.run.Seal(record.ArmStepFailure, step, fmt.Sprintf("Step '%s' failed: %s", step, msg))
	return true
}

func condList(cs []record.ConditionEval) []any {
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		out = append(out, map[string]any{"condition": c.Condition, "resolved_value": c.ResolvedValue, "passed": c.Passed})
	}
	return out
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "'" + x + "'"
	}
	return strings.Join(q, ", ")
}

// inputRefusal names the field an input refusal is about and what it must
// be, or the property the schema does not allow (spec §5.1).
func inputRefusal(e schema.Error) string {
	if e.Keyword == "additionalProperties" {
		if p, ok := e.Params["additionalProperty"].(string); ok {
			return fmt.Sprintf("'%s' is not allowed", p)
		}
	}
	return e.Text()
}
