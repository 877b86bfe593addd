package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// Replies several verbs compose: each reads the committed run and the
// call's effects, and changes neither.

// StoreRetryAdvice ends the message of every ENGINE_STORE_FAILED a caller
// sees: the failure is nearly always Redis restarting or failing over, which
// passes, so the caller should retry rather than give the run up.
const StoreRetryAdvice = " The store is unavailable for now (Redis restarting or failing over); retry the call in a few seconds."

// readFailure turns a run that cannot be found or read into its reply.
func readFailure(command, runID string, err error) (*realmv1.Reply, bool) {
	switch {
	case err == nil:
		return nil, false
	case errors.Is(err, errRunNotFound):
		return refusal(command, runID, errcode.StateRunNotFound, "Run not found: "+runID, nil), true
	}
	if ce, ok := errcode.As(err); ok && ce.Code == errcode.EngineStoreFailed {
		r := refusal(command, runID, errcode.EngineStoreFailed, ce.Message+StoreRetryAdvice, nil)
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_STOP
		return r, true
	}
	return nil, false
}

// overridingReply is the reply that stands in for a call's own when its
// write opened a gate, reached an outcome that has its own reply, or could
// not render a gate's message; nil otherwise.
func (t *txn) overridingReply(command string) *realmv1.Reply {
	if t.openedGate != "" {
		return t.gateReply(command)
	}
	if r := t.outcomeReply(command); r != nil {
		return r
	}
	if t.gateErr != nil {
		return t.gateMessageReply(command, t.gateErr)
	}
	return nil
}

// stepReply is the reply of a step that completed in this call.
func (t *txn) stepReply(command, step string) *realmv1.Reply {
	if r := t.overridingReply(command); r != nil {
		return r
	}
	r := t.envelope(command)
	v := t.view()
	r.NextActions = t.nextActions(v)
	if t.endedBy != nil {
		r.ContextHint = t.guardSentence()
		if t.endedBy.arm == record.ArmGuardResolutionError {
			if tail := t.terminalTail(); tail != "" {
				r.ContextHint += " " + tail
			}
		}
		return r
	}
	r.ContextHint = t.completedHint(step, v)
	return r
}

// blockedReply is the reply for a step that cannot be called now.
func (t *txn) blockedReply(command string, u *uncallable) *realmv1.Reply {
	r := t.envelope(command)
	v := t.view()
	r.Status = realmv1.ReplyStatus_REPLY_STATUS_BLOCKED
	r.NextActions = t.nextActions(v)
	r.ContextHint = fmt.Sprintf("Step '%s' cannot be called now: %s.", command, u.clause())
	if u.kind == callDepCannotRun {
		// Why the dependency cannot run, then what the run can still do,
		// or the way out (as cannot-run refusals give it).
		r.ContextHint += " " + u.dep.sentence()
		if len(v.agents) == 0 && len(v.owed) == 0 {
			// The same way out as every reply that says what comes next
			// (seed 000): the refused steps' own ways, then the run's.
			refused := v.refused
			if !slices.ContainsFunc(refused, func(c *cannotRun) bool { return c.step.Name == u.dep.step.Name }) {
				refused = append(slices.Clip(refused), u.dep)
			}
			if way := wayOut(refused); way != "" {
				r.ContextHint += " " + way
			}
		} else {
			r.ContextHint += " " + t.whatNext(v)
		}
		t.blockedFields(r, v)
		return r
	}
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

// mappedInputReply is the refusal of an auto step called by name whose
// input_map builds what its input_schema refuses (seed 000, execute_step):
// an error, as a refused input is, but one the caller cannot fix by
// sending another, so it is reported to the user with the rules broken
// and no rejections counted. The hint names the refusal, then what the
// run can still do, or — when nothing else can run — each refused step's
// own way and the run's, as advance_run gives them.
func (t *txn) mappedInputReply(command string, c *cannotRun) *realmv1.Reply {
	r := t.envelope(command)
	v := t.view()
	r.Status = realmv1.ReplyStatus_REPLY_STATUS_ERROR
	r.Errors = []string{fmt.Sprintf("Invalid input for step '%s'", c.step.Name)}
	r.ErrorCode = string(errcode.ValidationInputSchema)
	r.ErrorDetails = toStruct(map[string]any{"errors": schemaErrors(c.errs)})
	r.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
	// The refused step is never offered in place of what can run.
	r.NextActions = t.nextActions(v)
	parts := []string{c.sentence()}
	others := v
	others.refused = slices.DeleteFunc(slices.Clone(v.refused), func(o *cannotRun) bool { return o.step.Name == c.step.Name })
	if len(v.agents) == 0 && len(v.owed) == 0 {
		for _, o := range others.refused {
			parts = append(parts, o.sentence())
		}
		if way := wayOut(v.refused); way != "" {
			parts = append(parts, way)
		}
	} else {
		parts = append(parts, t.whatNext(others))
	}
	r.ContextHint = strings.Join(parts, " ")
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
