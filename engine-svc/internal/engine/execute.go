package engine

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/jsondec"
	"github.com/realm-go/realm/pkg/schema"
	"github.com/realm-go/realm/pkg/workflow"
)

// ExecuteStep does one step: for an agent step it checks the answer and
// records it; for an auto step called by name it runs it. Then it runs every
// auto and guard step that became ready, and replies.
func (e *Engine) ExecuteStep(ctx context.Context, req *realmv1.ExecuteStepRequest) (*realmv1.Reply, error) {
	command := req.GetCommand()
	params, err := answerParams(req)
	if err != nil {
		return nil, err
	}
	in := answerIn{
		params: params, claimToken: req.GetClaimToken(),
		trace: req.GetTrace(), nonce: req.GetWriterNonce(), usage: req.GetUsage(),
		toolCalls: toolCallsOf(req.GetToolCalls()),
	}
	if so := req.GetStructuredOutput(); so != nil {
		in.strict = so.AsMap()
	}
	var out *executed
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		t.caller = req.GetCaller()
		if s := t.stepOf(command); s != nil && s.Execution == workflow.KindAgent {
			if total, ok := t.outputsFit(command, in.params); !ok {
				return runOutputsTooLarge(command, total)
			}
		}
		out = t.execute(command, in)
		return nil
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
	return t.finish(t.executeReply(command, out)), nil
}

// answerParams is the answer: params_json decoded, or params.
func answerParams(req *realmv1.ExecuteStepRequest) (map[string]any, error) {
	raw := req.GetParamsJson()
	if len(raw) == 0 {
		return req.GetParams().AsMap(), nil
	}
	if req.GetParams() != nil {
		return nil, status.Error(codes.InvalidArgument, "params and params_json are both set; send one")
	}
	// jsondec gives what encoding/json would, in a third of the
	// allocations (it runs on every answer).
	m, err := jsondec.Object(raw)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "params_json must be a JSON object")
	}
	return m, nil
}

// answerIn is what execute_step brings besides the step's name: the answer
// and what the driver reports about how it was reached.
type answerIn struct {
	params map[string]any
	// claimToken is the claim the caller says it holds on the step
	// (ClaimStep).
	claimToken string
	// trace and nonce are the call's trace entries and writer_nonce.
	trace []*realmv1.TraceEntry
	nonce string
	// usage is what the model requests behind the answer reported.
	usage []*realmv1.ModelUsage
	// strict is the driver's structured_output record of the answer.
	strict map[string]any
	// toolCalls are the model's tool calls behind the answer.
	toolCalls []record.ToolCall
}

// toolCallsOf is the driver's tool calls as the evidence keeps them.
func toolCallsOf(calls []*realmv1.ToolCall) []record.ToolCall {
	var out []record.ToolCall
	for _, c := range calls {
		tc := record.ToolCall{ServerID: c.GetServerId(), Tool: c.GetTool(), DurationMS: c.GetDurationMs(), Error: c.GetError()}
		if c.GetArgs() != nil {
			tc.Args = c.GetArgs().AsInterface()
		}
		if c.GetResult() != nil {
			tc.Result = c.GetResult().AsInterface()
		}
		out = append(out, tc)
	}
	return out
}

// executedKind is what execute_step decided.
type executedKind int

const (
	execWorkflowMissing executedKind = iota // the run's workflow cannot be read
	execExpiryEnded                         // carrying out an expired question ended the run
	execRunEnded                            // the run had ended
	execNoSuchStep                          // the workflow has no such step
	execUncallable                          // the step cannot be called now
	execCannotRun                           // the step is refused before its claim
	execDone                                // the step ran (or was claimed to run)
	execGateOpened                          // the answer opened the step's question
	execGateFailed                          // the step's question could not be worded
	execAnswerRefused                       // the answer was refused and counted
	execTraceRefused                        // the trace does not fit trace_schema (enforce); nothing written
	execDefaulted                           // refusals ran out; the default output settled it
	execExhausted                           // refusals ran out; the step failed
)

// executed is execute_step's decision, with what its reply needs.
type executed struct {
	kind       executedKind
	step       string
	expired    *expiry
	uncallable *uncallable
	cannotRun  *cannotRun
	gateErr    error
	// A refused answer: its code and errors, the refusals counted against
	// the step's threshold, and the run_version before the counting write.
	code                  errcode.Code
	errs                  []schema.Error
	rejections, threshold int
	before                int64
	// msg and terminated say how exhausted refusals failed the step.
	msg        string
	terminated bool
}

func (t *txn) execute(command string, in answerIn) *executed {
	if t.def == nil {
		return &executed{kind: execWorkflowMissing}
	}
	if x := t.enactExpiry("execute_step"); x != nil && t.run.Terminal() {
		return &executed{kind: execExpiryEnded, expired: x}
	}
	if t.run.Terminal() {
		return &executed{kind: execRunEnded}
	}
	s := t.stepOf(command)
	if s == nil {
		return &executed{kind: execNoSuchStep}
	}
	if u := t.notCallableBy(s, in.claimToken); u != nil {
		return &executed{kind: execUncallable, uncallable: u}
	}
	switch s.Execution {
	case workflow.KindAgent:
		return t.answer(s, in)
	case workflow.KindAuto:
		if c := t.runnableHere(s); c != nil {
			return &executed{kind: execCannotRun, cannotRun: c}
		}
		if s.Handler != "" || s.UsesService != "" {
			t.claimForDispatch(s)
		} else {
			t.runPassThrough(s)
			t.hasChained, t.chained = false, nil // the called step is not a chained one
			t.lastAuto = ""
		}
		t.advance(advanceOpts{decideGuards: true, chain: true})
		return &executed{kind: execDone, step: s.Name}
	}
	return nil
}

// notCallableBy is notCallable for this call: an agent step in flight
// under the claim whose token the caller presents is its to answer, and a
// token the step no longer carries answers nothing (the claim was freed,
// so what was typed under it is not recorded).
func (t *txn) notCallableBy(s *workflow.Step, claimToken string) *uncallable {
	if claimToken == "" {
		return t.notCallable(s)
	}
	if t.heldClaim(s, claimToken) {
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
		// A dependency that is ready but refused before its claim will
		// not settle by waiting: a reason of its own (seed 000).
		for _, d := range open {
			if c := t.depCannotRun(d); c != nil {
				return &uncallable{kind: callDepCannotRun, open: []*workflow.Step{d}, dep: c}
			}
		}
		return &uncallable{kind: callWaiting, open: open}
	}
	return nil
}

// depCannotRun is why d, pending and ready by what it depends on, is
// refused before its claim; nil when it is not.
func (t *txn) depCannotRun(d *workflow.Step) *cannotRun {
	if d == nil || t.run.StateOf(d.Name) != record.StatePending {
		return nil
	}
	if r, _ := t.evaluate(d); r != ready {
		return nil
	}
	if d.Execution == workflow.KindAuto {
		return t.runnableHere(d)
	}
	if d.Execution == workflow.KindAgent {
		return t.refusedBeforeClaim(d)
	}
	return nil
}

// noRejections is the diagnostics of most answers, shared: an entry is
// encoded once by its commit and its maps are never written after they
// are set (record.Run.Clone's rule).
var noRejections = map[string]any{"validation_rejections": 0}

// answer checks and records an agent step's answer.
func (t *txn) answer(s *workflow.Step, in answerIn) *executed {
	if c := t.refusedBeforeClaim(s); c != nil {
		return &executed{kind: execCannotRun, cannotRun: c}
	}
	answer := in.params
	code, errs := t.checkAnswer(s, answer)
	if len(errs) > 0 {
		return t.refuseAnswer(s, in, code, errs)
	}
	if errs := t.checkTrace(s, in); len(errs) > 0 {
		if s.TraceValidationMode == "enforce" {
			return &executed{kind: execTraceRefused, step: s.Name, code: errcode.ValidationTraceSchema, errs: errs}
		}
		t.warnings = append(t.warnings, fmt.Sprintf("Trace schema violation for step '%s': %s", s.Name, errs[0].Text()))
	}
	e := t.entry(s.Name, "success")
	e.InputSummary = answer
	e.OutputSummary = answer
	e.DrivenBy = holderOf(t.caller)
	switch n := t.run.ValidationRejections[s.Name]; {
	case n == 0 && len(in.usage) == 0 && in.strict == nil:
		e.Diagnostics = noRejections
	default:
		e.Diagnostics = map[string]any{"validation_rejections": n}
		if len(in.usage) > 0 {
			e.Diagnostics["cache"] = cacheDiagnostics(in.usage)
		}
		if in.strict != nil {
			e.Diagnostics["structured_output"] = in.strict
		}
	}
	e.ToolCalls = in.toolCalls
	trace, summary, own, anon, foreign := t.adoptTrace(s.Name, in.nonce, in.trace)
	e.Trace, e.TraceSummary = trace, summary
	t.adopted, t.hasAdopted = [3]int32{int32(own), int32(anon), int32(foreign)}, true
	if s.Gated() {
		// The answer is the preview: the step completes when a person
		// answers its question.
		if err := t.openGate(s, answer, t.caller); err != nil {
			return &executed{kind: execGateFailed, step: s.Name, gateErr: err}
		}
		t.appendEvidence(e)
		return &executed{kind: execGateOpened, step: s.Name}
	}
	t.setOutput(s.Name, answer)
	t.run.MarkCompleted(s.Name, record.Completed())
	t.appendEvidence(e)
	t.advance(advanceOpts{decideGuards: true, chain: true})
	return &executed{kind: execDone, step: s.Name}
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

// checkTrace validates the whole list of trace entries the step would
// record (the buffered entries it adopts, then the call's) against its
// trace_schema (spec §9.4); nil without one. Checking writes nothing.
func (t *txn) checkTrace(s *workflow.Step, in answerIn) []schema.Error {
	sch := t.def.trace[s.Name]
	if sch == nil {
		return nil
	}
	var list []any
	for _, e := range append(t.adoptable(s.Name, in.nonce), entriesFrom(in.trace, in.nonce)...) {
		m := map[string]any{"event": e.Event}
		if e.Timestamp != "" {
			m["timestamp"] = e.Timestamp
		}
		if e.Data != nil {
			m["data"] = e.Data
		}
		list = append(list, m)
	}
	if list == nil {
		list = []any{}
	}
	return sch.Validate(list)
}

// refuseAnswer counts a refused answer on the run (a write) and, at the
// step's limit, ends the step by its validation_exhaustion mode.
func (t *txn) refuseAnswer(s *workflow.Step, in answerIn, code errcode.Code, errs []schema.Error) *executed {
	before := t.run.Version
	if t.run.ValidationRejections == nil {
		t.run.ValidationRejections = map[string]int{}
	}
	t.run.ValidationRejections[s.Name]++
	n, limit := t.run.ValidationRejections[s.Name], s.Threshold()
	t.touch()
	t.recordAttempt(s, in.params, len(in.trace), code, errs) // in the same write as the count
	out := &executed{step: s.Name, code: code, errs: errs, rejections: n, threshold: limit, before: before}
	if n < limit {
		out.kind = execAnswerRefused
		return out
	}
	ve := s.ValidationExhaustion
	if ve != nil && ve.Mode == "default" {
		e := t.entry(s.Name, "success")
		e.InputSummary = in.params
		e.OutputSummary = ve.DefaultOutput
		e.Diagnostics = map[string]any{"validation_rejections": n, "settled_by_default": true}
		t.setOutput(s.Name, ve.DefaultOutput)
		t.run.MarkCompleted(s.Name, record.Completed())
		t.run.DefaultedSteps = append(t.run.DefaultedSteps, s.Name)
		t.appendEvidence(e)
		t.warnings = append(t.warnings, fmt.Sprintf("Step '%s' settled with its declared default_output after %d schema rejection(s) (validation_exhaustion.mode: 'default')", s.Name, limit))
		t.advance(advanceOpts{decideGuards: true, chain: true})
		out.kind = execDefaulted
		return out
	}
	msg := fmt.Sprintf("Step '%s' exhausted its validation-rejection budget (%d/%d)", s.Name, limit, limit)
	e := t.entry(s.Name, "error")
	e.InputSummary = in.params
	e.OutputSummary = map[string]any{}
	e.Error = "VALIDATION_EXHAUSTED: " + msg
	t.appendEvidence(e)
	terminated := t.failStep(s.Name, msg)
	if !terminated {
		t.advance(advanceOpts{decideGuards: true, chain: true})
	}
	out.kind, out.msg, out.terminated = execExhausted, msg, terminated
	return out
}

// executeReply composes execute_step's reply from its decision and the run
// as the call leaves it.
func (t *txn) executeReply(command string, o *executed) *realmv1.Reply {
	switch o.kind {
	case execWorkflowMissing:
		r := refusal(command, t.run.ID, errcode.StateWorkflowNotFound, t.defErr.Error(), nil)
		r.RunVersion = ptr(t.run.Version)
		r.RunPhase = phaseEnum(t.run.Phase())
		return r
	case execExpiryEnded:
		r := t.envelope(command)
		r.Status = realmv1.ReplyStatus_REPLY_STATUS_BLOCKED
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_STOP
		r.ContextHint = fmt.Sprintf("Step '%s' cannot be called now: this call first carried out the expired question on '%s', and the run ended (%s).", command, o.expired.step, t.run.Phase())
		if t.endedBy != nil {
			r.ContextHint += " " + t.guardSentence()
		}
		r.BlockedReason = &realmv1.BlockedReason{EligibleSteps: []string{}, Suggestion: "No other step can be called now."}
		return r
	case execRunEnded:
		r := t.envelope(command)
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_STOP
		r.ContextHint = fmt.Sprintf("Run '%s' is already terminal (%s); no steps executed.", t.run.ID, t.run.Phase())
		if tail := t.terminalTail(); tail != "" {
			r.ContextHint += " " + tail
		}
		return r
	case execNoSuchStep:
		msg := fmt.Sprintf("Step '%s' not found in workflow '%s'.", command, t.run.WorkflowID)
		r := t.envelope(command)
		t.refuse(r, errcode.StepNotFound, msg)
		return r
	case execUncallable:
		return t.blockedReply(command, o.uncallable)
	case execCannotRun:
		if o.cannotRun.mapped() {
			return t.mappedInputReply(command, o.cannotRun)
		}
		return t.cannotRunReply(command, o.cannotRun)
	case execGateOpened:
		return t.gateReply(o.step)
	case execGateFailed:
		return t.gateMessageReply(o.step, o.gateErr)
	case execAnswerRefused:
		r := t.envelope(o.step)
		r.RunVersion = ptr(o.before) // the number from before the counted write
		r.Status = realmv1.ReplyStatus_REPLY_STATUS_ERROR
		r.Errors = []string{fmt.Sprintf("Invalid input for step '%s'", o.step)}
		r.ErrorCode = string(o.code)
		r.ErrorDetails = toStruct(map[string]any{"errors": schemaErrors(o.errs), "rejections": o.rejections, "threshold": o.threshold})
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT
		r.ContextHint = fmt.Sprintf("Error during '%s'. Run phase: '%s'.", o.step, t.run.Phase())
		r.NextActions = t.nextActions(t.view())
		return r
	case execTraceRefused:
		r := t.envelope(o.step)
		r.Status = realmv1.ReplyStatus_REPLY_STATUS_ERROR
		r.Errors = []string{fmt.Sprintf("Trace schema validation failed for step '%s'", o.step), o.errs[0].Text()}
		r.ErrorCode = string(o.code)
		r.ErrorDetails = toStruct(map[string]any{"errors": schemaErrors(o.errs)})
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT
		r.ContextHint = fmt.Sprintf("Error during '%s'. Run phase: '%s'. The step stays open: send its answer again with a trace that fits its trace_schema.", o.step, t.run.Phase())
		r.NextActions = t.nextActions(t.view())
		return r
	case execDefaulted:
		r := t.stepReply(o.step, o.step)
		r.SettledByDefault = ptr(true)
		r.DefaultedSteps = []string{o.step}
		return r
	case execExhausted:
		r := t.envelope(o.step)
		r.Status = realmv1.ReplyStatus_REPLY_STATUS_ERROR
		r.Errors = []string{o.msg}
		r.ErrorCode = string(errcode.ValidationExhausted)
		r.ErrorDetails = toStruct(map[string]any{"errors": schemaErrors(o.errs), "rejections": o.rejections, "threshold": o.threshold})
		if o.terminated {
			r.AgentAction = realmv1.AgentAction_AGENT_ACTION_STOP
			r.ContextHint = fmt.Sprintf("Step '%s' failed. Run is terminated.", o.step)
			if tail := t.terminalTail(); tail != "" {
				r.ContextHint += " " + tail
			}
		} else {
			r.AgentAction = realmv1.AgentAction_AGENT_ACTION_RESOLVE_PRECONDITION
			r.ContextHint = fmt.Sprintf("Step '%s' failed. Recovery steps are available in next_actions.", o.step)
			r.NextActions = t.nextActions(t.view())
		}
		r.StoppedStep = o.step
		return r
	}
	return t.stepReply(command, o.step)
}
