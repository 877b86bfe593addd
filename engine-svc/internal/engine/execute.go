package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/schema"
	"github.com/realm-go/realm/pkg/workflow"
)

// ExecuteStep does one step: for an agent step it checks the answer and
// records it; for an auto step called by name it runs it. Then it runs every
// auto and guard step that became ready, and replies.
func (e *Engine) ExecuteStep(ctx context.Context, req *realmv1.ExecuteStepRequest) (*realmv1.Reply, error) {
	command := req.GetCommand()
	answer := req.GetParams().AsMap()
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		t.compose = nil
		t.caller = req.GetCaller()
		t.claimToken = req.GetClaimToken()
		t.traceIn, t.nonce, t.usage = req.GetTrace(), req.GetWriterNonce(), req.GetUsage()
		if so := req.GetStructuredOutput(); so != nil {
			t.strictRecord = so.AsMap()
		}
		return t.execute(command, answer, req.GetCaller())
	})
	if reply, ok := readFailure(command, req.GetRunId(), err); ok {
		return reply, nil
	}
	if err != nil {
		return nil, err
	}
	if err := e.drive(ctx, t); err != nil {
		return nil, err
	}
	return t.finish(t.compose()), nil
}

// readFailure turns a run that cannot be found or read into its reply.
func readFailure(command, runID string, err error) (*realmv1.Reply, bool) {
	switch {
	case err == nil:
		return nil, false
	case errors.Is(err, errRunNotFound):
		return refusal(command, runID, errcode.StateRunNotFound, "Run not found: "+runID, nil), true
	}
	if ce, ok := errcode.As(err); ok && ce.Code == errcode.EngineStoreFailed {
		r := refusal(command, runID, errcode.EngineStoreFailed, ce.Message, nil)
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_STOP
		return r, true
	}
	return nil, false
}

func (t *txn) execute(command string, answer map[string]any, caller *realmv1.Caller) error {
	if t.def == nil {
		t.compose = func() *realmv1.Reply {
			r := refusal(command, t.run.ID, errcode.StateWorkflowNotFound, t.defErr.Error(), nil)
			r.RunVersion = ptr(t.run.Version)
			r.RunPhase = phaseEnum(t.run.Phase())
			return r
		}
		return nil
	}
	if x := t.enactExpiry("execute_step"); x != nil && t.run.Terminal() {
		t.compose = func() *realmv1.Reply {
			r := t.envelope(command)
			r.Status = realmv1.ReplyStatus_REPLY_STATUS_BLOCKED
			r.AgentAction = realmv1.AgentAction_AGENT_ACTION_STOP
			r.ContextHint = fmt.Sprintf("Step '%s' cannot be called now: this call first carried out the expired question on '%s', and the run ended (%s).", command, x.step, t.run.Phase())
			if t.endedBy != nil {
				r.ContextHint += " " + t.guardSentence()
			}
			r.BlockedReason = &realmv1.BlockedReason{EligibleSteps: []string{}, Suggestion: "No other step can be called now."}
			return r
		}
		return nil
	}
	if t.run.Terminal() {
		t.compose = func() *realmv1.Reply {
			r := t.envelope(command)
			r.AgentAction = realmv1.AgentAction_AGENT_ACTION_STOP
			r.ContextHint = fmt.Sprintf("Run '%s' is already terminal (%s); no steps executed.", t.run.ID, t.run.Phase())
			if tail := t.terminalTail(); tail != "" {
				r.ContextHint += " " + tail
			}
			return r
		}
		return nil
	}
	s := t.stepOf(command)
	if s == nil {
		t.compose = func() *realmv1.Reply {
			msg := fmt.Sprintf("Step '%s' not found in workflow '%s'.", command, t.run.WorkflowID)
			r := t.envelope(command)
			t.refuse(r, errcode.StepNotFound, msg)
			return r
		}
		return nil
	}
	if u := t.notCallableBy(s); u != nil {
		t.compose = func() *realmv1.Reply { return t.blockedReply(command, u) }
		return nil
	}
	switch s.Execution {
	case workflow.KindAgent:
		t.answer(s, answer, caller)
	case workflow.KindAuto:
		if c := t.runnableHere(s); c != nil {
			t.compose = func() *realmv1.Reply { return t.cannotRunReply(command, c) }
			return nil
		}
		if s.Handler != "" || s.UsesService != "" {
			t.claimForDispatch(s)
		} else {
			t.runPassThrough(s)
			t.hasChained, t.chained = false, nil // the called step is not a chained one
			t.lastAuto = ""
		}
		t.advance(advanceOpts{decideGuards: true, chain: true})
		t.compose = func() *realmv1.Reply { return t.stepReply(command, s.Name) }
	}
	return nil
}

// notCallableBy is notCallable for this call: an agent step in flight
// under the claim whose token the caller presents is its to answer, and a
// token the step no longer carries answers nothing (the claim was freed,
// so what was typed under it is not recorded).
func (t *txn) notCallableBy(s *workflow.Step) *uncallable {
	if t.claimToken == "" {
		return t.notCallable(s)
	}
	if t.heldClaim(s, t.claimToken) {
		return nil
	}
	if u := t.notCallable(s); u != nil {
		return u
	}
	return &uncallable{kind: callClaimGone}
}

// notCallable says why a step cannot be called now, or nil.
func (t *txn) notCallable(s *workflow.Step) *uncallable {
	switch t.run.StateOf(s.Name) {
	case record.StateCompleted:
		return &uncallable{kind: callCompleted}
	case record.StateFailed:
		return &uncallable{kind: callFailed}
	case record.StateSkipped:
		return &uncallable{kind: callSkipped}
	case record.StateInProgress:
		if g := t.run.PendingGate; g != nil && g.StepName == s.Name {
			return &uncallable{kind: callQuestionOpen, choices: g.Choices}
		}
		return &uncallable{kind: callInFlight}
	}
	switch s.Execution {
	case workflow.KindGuard:
		return &uncallable{kind: callGuard}
	case workflow.KindFinalizer:
		return &uncallable{kind: callFinalizer}
	}
	if g := t.run.PendingGate; g != nil {
		return &uncallable{kind: callWaitsQuestion, gateStep: g.StepName, choices: g.Choices}
	}
	if r, _ := t.evaluate(s); r == waiting {
		var open []*workflow.Step
		for _, d := range s.DependsOn {
			if !t.run.IsSettled(d) {
				open = append(open, t.stepOf(d))
			}
		}
		return &uncallable{kind: callWaiting, open: open}
	}
	return nil
}

// answer checks and records an agent step's answer.
func (t *txn) answer(s *workflow.Step, answer map[string]any, caller *realmv1.Caller) {
	if c := t.refusedBeforeClaim(s); c != nil {
		t.compose = func() *realmv1.Reply { return t.cannotRunReply(s.Name, c) }
		return
	}
	code, errs := t.checkAnswer(s, answer)
	if len(errs) > 0 {
		t.refuseAnswer(s, answer, code, errs)
		return
	}
	e := t.entry(s.Name, "success")
	e.InputSummary = answer
	e.OutputSummary = answer
	e.DrivenBy = holderOf(caller)
	e.Diagnostics = map[string]any{"validation_rejections": t.run.ValidationRejections[s.Name]}
	if len(t.usage) > 0 {
		e.Diagnostics["cache"] = cacheDiagnostics(t.usage)
	}
	if t.strictRecord != nil {
		e.Diagnostics["structured_output"] = t.strictRecord
	}
	trace, summary, own, anon, foreign := t.adoptTrace(s.Name, t.nonce, t.traceIn)
	e.Trace, e.TraceSummary = trace, summary
	t.adopted = &[3]int{own, anon, foreign}
	if s.Gated() {
		// The answer is the preview: the step completes when a person
		// answers its question.
		if err := t.openGate(s, answer, caller); err != nil {
			t.compose = func() *realmv1.Reply { return t.gateMessageReply(s.Name, err) }
			return
		}
		t.appendEvidence(e)
		t.compose = func() *realmv1.Reply { return t.gateReply(s.Name) }
		return
	}
	t.setOutput(s.Name, answer)
	t.run.MarkCompleted(s.Name, &record.Settled{Outcome: "complete"})
	t.appendEvidence(e)
	t.advance(advanceOpts{decideGuards: true, chain: true})
	t.compose = func() *realmv1.Reply { return t.stepReply(s.Name, s.Name) }
}

// checkAnswer validates an answer against the step's input and output
// schemas; the first block that refuses names the code.
func (t *txn) checkAnswer(s *workflow.Step, answer map[string]any) (errcode.Code, []schema.Error) {
	if sch := t.def.input[s.Name]; sch != nil {
		if errs := sch.Validate(answer); len(errs) > 0 {
			return errcode.ValidationInputSchema, errs
		}
	}
	if sch := t.def.output[s.Name]; sch != nil {
		if errs := sch.Validate(answer); len(errs) > 0 {
			return errcode.ValidationOutputSchema, errs
		}
	}
	return "", nil
}

// refuseAnswer counts a refused answer on the run (a write) and, at the
// step's limit, ends the step by its validation_exhaustion mode.
func (t *txn) refuseAnswer(s *workflow.Step, answer map[string]any, code errcode.Code, errs []schema.Error) {
	before := t.run.Version
	if t.run.ValidationRejections == nil {
		t.run.ValidationRejections = map[string]int{}
	}
	t.run.ValidationRejections[s.Name]++
	n, limit := t.run.ValidationRejections[s.Name], s.Threshold()
	t.touch()
	t.recordAttempt(s, answer, code, errs) // in the same write as the count
	if n < limit {
		t.compose = func() *realmv1.Reply {
			r := t.envelope(s.Name)
			r.RunVersion = ptr(before) // the number from before the counted write
			r.Status = realmv1.ReplyStatus_REPLY_STATUS_ERROR
			r.Errors = []string{fmt.Sprintf("Invalid input for step '%s'", s.Name)}
			r.ErrorCode = string(code)
			r.ErrorDetails = toStruct(map[string]any{"errors": schemaErrors(errs), "rejections": n, "threshold": limit})
			r.AgentAction = realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT
			r.ContextHint = fmt.Sprintf("Error during '%s'. Run phase: '%s'.", s.Name, t.run.Phase())
			r.NextActions = t.nextActions(t.view())
			return r
		}
		return
	}
	ve := s.ValidationExhaustion
	if ve != nil && ve.Mode == "default" {
		out := ve.DefaultOutput
		e := t.entry(s.Name, "success")
		e.InputSummary = answer
		e.OutputSummary = out
		e.Diagnostics = map[string]any{"validation_rejections": n, "settled_by_default": true}
		t.setOutput(s.Name, out)
		t.run.MarkCompleted(s.Name, &record.Settled{Outcome: "complete"})
		t.run.DefaultedSteps = append(t.run.DefaultedSteps, s.Name)
		t.appendEvidence(e)
		t.warnings = append(t.warnings, fmt.Sprintf("Step '%s' settled with its declared default_output after %d schema rejection(s) (validation_exhaustion.mode: 'default')", s.Name, limit))
		t.advance(advanceOpts{decideGuards: true, chain: true})
		t.compose = func() *realmv1.Reply {
			r := t.stepReply(s.Name, s.Name)
			r.SettledByDefault = ptr(true)
			r.DefaultedSteps = []string{s.Name}
			return r
		}
		return
	}
	msg := fmt.Sprintf("Step '%s' exhausted its validation-rejection budget (%d/%d)", s.Name, limit, limit)
	e := t.entry(s.Name, "error")
	e.InputSummary = answer
	e.OutputSummary = map[string]any{}
	e.Error = "VALIDATION_EXHAUSTED: " + msg
	t.appendEvidence(e)
	terminated := t.failStep(s.Name, msg)
	if !terminated {
		t.advance(advanceOpts{decideGuards: true, chain: true})
	}
	t.compose = func() *realmv1.Reply {
		r := t.envelope(s.Name)
		r.Status = realmv1.ReplyStatus_REPLY_STATUS_ERROR
		r.Errors = []string{msg}
		r.ErrorCode = string(errcode.ValidationExhausted)
		r.ErrorDetails = toStruct(map[string]any{"errors": schemaErrors(errs), "rejections": n, "threshold": limit})
		if terminated {
			r.AgentAction = realmv1.AgentAction_AGENT_ACTION_STOP
			r.ContextHint = fmt.Sprintf("Step '%s' failed. Run is terminated.", s.Name)
			if tail := t.terminalTail(); tail != "" {
				r.ContextHint += " " + tail
			}
		} else {
			r.AgentAction = realmv1.AgentAction_AGENT_ACTION_RESOLVE_PRECONDITION
			r.ContextHint = fmt.Sprintf("Step '%s' failed. Recovery steps are available in next_actions.", s.Name)
			r.NextActions = t.nextActions(t.view())
		}
		r.StoppedStep = s.Name
		return r
	}
}

// stepReply is the reply of a step that completed in this call.
func (t *txn) stepReply(command, step string) *realmv1.Reply {
	if t.openedGate != "" {
		return t.gateReply(command)
	}
	if r := t.outcomeReply(command); r != nil {
		return r
	}
	if t.gateErr != nil {
		return t.gateMessageReply(command, t.gateErr)
	}
	r := t.envelope(command)
	v := t.view()
	r.NextActions = t.nextActions(v)
	if t.endedBy != nil {
		r.ContextHint = t.guardSentence()
		if record.Arm(t.endedBy.Arm) == record.ArmGuardResolutionError {
			if tail := t.terminalTail(); tail != "" {
				r.ContextHint += " " + tail
			}
		}
		return r
	}
	r.ContextHint = fmt.Sprintf("Step '%s' completed. %s", step, t.afterHint(v))
	return r
}

// blockedReply is the reply for a step that cannot be called now.
func (t *txn) blockedReply(command string, u *uncallable) *realmv1.Reply {
	r := t.envelope(command)
	v := t.view()
	r.Status = realmv1.ReplyStatus_REPLY_STATUS_BLOCKED
	r.NextActions = t.nextActions(v)
	r.ContextHint = fmt.Sprintf("Step '%s' cannot be called now: %s.", command, u.clause())
	if next := t.whatNext(v); next != "" && next != "No step is ready." {
		r.ContextHint += " " + next
	}
	t.blockedFields(r, v)
	return r
}

// cannotRunReply is the refusal of a step the engine refuses before its
// claim (a failed precondition, an input its schema refuses, a capability
// this engine lacks).
func (t *txn) cannotRunReply(command string, c *cannotRun) *realmv1.Reply {
	r := t.envelope(command)
	v := t.view()
	r.Status = realmv1.ReplyStatus_REPLY_STATUS_BLOCKED
	// The refused step is never offered in place of what can run.
	r.NextActions = t.nextActions(v)
	r.ContextHint = c.sentence()
	if len(v.agents) == 0 && len(v.owed) == 0 {
		r.ContextHint += " Correct the workflow and register it again, then call advance_run; or end the run with abandon_run."
	} else {
		r.ContextHint += " " + t.whatNext(v)
	}
	t.blockedFields(r, v)
	return r
}

// blockedFields fills blocked_reason and agent_action from next_actions.
func (t *txn) blockedFields(r *realmv1.Reply, v view) {
	eligible := make([]string, 0, len(v.agents)+len(v.owed))
	for _, s := range v.agents {
		eligible = append(eligible, s.Name)
	}
	for _, s := range v.owed {
		if s.Execution == workflow.KindAuto {
			eligible = append(eligible, s.Name)
		}
	}
	var suggestion string
	switch {
	case t.run.PendingGate != nil:
		suggestion = "Answer the open question first, as next_actions says."
		eligible = []string{}
	case len(v.agents) > 0 && len(v.owed) > 0:
		suggestion = "Call one of the steps indicated in next_actions, or advance_run, instead."
	case len(v.agents) > 0:
		suggestion = "Call one of the steps indicated in next_actions instead."
	case len(v.owed) > 0:
		suggestion = "Call advance_run, as next_actions says."
	default:
		suggestion = "No other step can be called now."
	}
	r.BlockedReason = &realmv1.BlockedReason{EligibleSteps: eligible, Suggestion: suggestion}
	r.AgentAction = realmv1.AgentAction_AGENT_ACTION_RESOLVE_PRECONDITION
	if len(r.NextActions) == 0 {
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
	}
}

// refuse marks a reply as an error with a catalogue code.
func (t *txn) refuse(r *realmv1.Reply, code errcode.Code, msg string) {
	r.Status = realmv1.ReplyStatus_REPLY_STATUS_ERROR
	r.Errors = []string{msg}
	r.ErrorCode = string(code)
	r.AgentAction = agentAction(code)
	r.ContextHint = msg
	r.NextActions = t.nextActions(t.view())
}

func holderOf(c *realmv1.Caller) *record.Holder {
	if c == nil || c.GetBy() == "" {
		return nil
	}
	return &record.Holder{By: c.GetBy(), BySource: c.GetBySource(), Channel: channelName(c.GetChannel())}
}

func channelName(c realmv1.Channel) string {
	switch c {
	case realmv1.Channel_CHANNEL_MCP_STDIO:
		return "mcp-stdio"
	case realmv1.Channel_CHANNEL_MCP_HTTP:
		return "mcp-http"
	case realmv1.Channel_CHANNEL_AGENT:
		return "agent"
	case realmv1.Channel_CHANNEL_RUN:
		return "run"
	}
	return ""
}

func joinComma(xs []string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

// outcomeReply is the reply of a call whose dispatched step failed or
// aborted the run; nil when neither happened.
func (t *txn) outcomeReply(command string) *realmv1.Reply {
	switch {
	case t.failed != nil:
		f := t.failed
		r := t.envelope(command)
		r.Status = realmv1.ReplyStatus_REPLY_STATUS_ERROR
		r.Errors = []string{f.msg}
		r.ErrorCode = string(f.code)
		if len(f.details) > 0 {
			r.ErrorDetails = toStruct(f.details)
		}
		r.StoppedStep = f.step
		if f.terminated || t.run.Terminal() {
			r.AgentAction = realmv1.AgentAction_AGENT_ACTION_STOP
			r.ContextHint = fmt.Sprintf("Step '%s' failed. Run is terminated.", f.step)
			if tail := t.terminalTail(); tail != "" {
				r.ContextHint += " " + tail
			}
			return r
		}
		r.AgentAction = agentAction(f.code)
		r.NextActions = t.nextActions(t.view())
		r.ContextHint = fmt.Sprintf("Step '%s' failed. Recovery steps are available in next_actions.", f.step)
		return r
	case t.abortedBy != "":
		r := t.envelope(command)
		r.ContextHint = t.run.TerminalReason
		return r
	}
	return nil
}

// finish ends a reply's hint with what other processes kept from the
// record, and stops the caller when the run ended that way.
func (t *txn) finish(r *realmv1.Reply) *realmv1.Reply {
	if r == nil || len(t.notes) == 0 {
		return r
	}
	r.ContextHint = strings.TrimSpace(r.ContextHint + " " + strings.Join(t.notes, " "))
	if t.run.Terminal() && r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_OK {
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_STOP
	}
	return r
}
