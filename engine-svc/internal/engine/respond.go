package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// validActor checks responded_by (seed: at most 200 characters, no
// control characters, not empty).
func validActor(by *string) string {
	if by == nil {
		return ""
	}
	word := ""
	switch {
	case strings.TrimSpace(*by) == "":
		word = "empty"
	case len([]rune(*by)) > 200:
		word = "longer than 200 characters"
	case strings.IndexFunc(*by, unicode.IsControl) >= 0:
		word = "contains a control character"
	default:
		return ""
	}
	return fmt.Sprintf("responded_by: %s; nothing was recorded. Give a name of at most 200 characters with no control characters, or leave it out.", word)
}

// unknownArgWarning names an argument submit_human_response does not take.
func unknownArgWarning(tool, arg string) string {
	w := fmt.Sprintf("%s: unknown argument '%s' was ignored.", tool, arg)
	switch strings.ToLower(arg) {
	case "claimtoken", "token", "claim-token":
		w = fmt.Sprintf("%s: unknown argument '%s' was ignored — did you mean 'claim_token'?", tool, arg)
	}
	return w
}

// SubmitHumanResponse records a person's choice at the open gate.
func (e *Engine) SubmitHumanResponse(ctx context.Context, req *realmv1.SubmitHumanResponseRequest) (*realmv1.Reply, error) {
	return e.SubmitVouchedResponse(ctx, req, "")
}

// SubmitVouchedResponse is SubmitHumanResponse whose responded_by the
// front door vouchedBy signed in (its caller checked who may vouch); ""
// records the name as stated.
func (e *Engine) SubmitVouchedResponse(ctx context.Context, req *realmv1.SubmitHumanResponseRequest, vouchedBy string) (*realmv1.Reply, error) {
	var warnings []string
	for _, a := range req.GetUnknownArguments() {
		warnings = append(warnings, unknownArgWarning("submit_human_response", a))
	}
	if msg := validActor(req.RespondedBy); msg != "" {
		r := refusal("submit_human_response", req.GetRunId(), errcode.ValidationActorInvalid, msg, nil)
		r.Warnings = warnings
		return r, nil
	}
	var out responded
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		t.warnings = append(t.warnings[:0], warnings...)
		out = t.respond(req, vouchedBy)
		return nil
	})
	if errors.Is(err, errRunNotFound) {
		return refusal("submit_human_response", req.GetRunId(), errcode.StateRunNotFound, "Run not found: "+req.GetRunId(), nil), nil
	}
	if reply, ok := readFailure("submit_human_response", req.GetRunId(), err); ok {
		return reply, nil
	}
	if err != nil {
		return nil, err
	}
	return t.respondReply(req, out), nil
}

// respondedKind is what submit_human_response decided.
type respondedKind int

const (
	respWorkflowMissing respondedKind = iota // the run's workflow cannot be read
	respLate                                 // the question's time was up: the answer is not recorded
	respRunEnded                             // the run has ended
	respRepeat                               // the question was already answered
	respNotOpen                              // the gate is not the open one
	respBadChoice                            // the choice is not one of the question's
	respResolved                             // the answer was recorded
)

// responded is submit_human_response's decision, with what its reply needs.
type responded struct {
	kind respondedKind
	// step is the question's step; gateID and choice what was answered.
	step, gateID, choice string
	// expired is the expiry that settled the question (respLate), and
	// enactedHere whether this call carried it out.
	expired     *expiry
	enactedHere bool
	// claim is the question's claim as the answer found it.
	claim *record.Claim
	// prior is the earlier resolution (respRepeat).
	prior *record.ResolvedGate
	// choices are the open question's (respBadChoice).
	choices []string
	// proof and cause say what the passed claim token showed (respResolved).
	proof, cause string
}

func (t *txn) respond(req *realmv1.SubmitHumanResponseRequest, vouchedBy string) responded {
	gateID, choice := req.GetGateId(), req.GetChoice()
	if t.def == nil {
		return responded{kind: respWorkflowMissing}
	}
	// A late answer is never recorded: the expiry is carried out first.
	var claimBefore *record.Claim
	if g := t.run.PendingGate; g != nil && g.GateID == gateID {
		claimBefore = t.run.Claims[g.StepName]
	}
	via := "submit_human_response"
	if req.GetCaller().GetChannel() == realmv1.Channel_CHANNEL_RUN {
		via = "respond" // the CLI's word for the act (cli spec §4.1)
	}
	// Only an answer to the expired question itself carries its expiry
	// out; a call naming another gate is refused and told to call
	// advance_run (seed 000's refusal table).
	if g := t.run.PendingGate; g != nil && g.GateID == gateID {
		if x := t.enactExpiry(via); x != nil && x.gateID == gateID {
			return responded{kind: respLate, expired: x, enactedHere: true, choice: choice, claim: claimBefore}
		}
	}
	if prior := t.run.ResolvedGates[gateID]; prior != nil {
		if prior.ResolvedBy == "timeout" {
			if prior.Choice == "" { // its abort ended the run: the ended-run refusal
				return responded{kind: respRunEnded}
			}
			at := record.ParseTime(prior.ExpiredAt)
			x := &expiry{gateID: gateID, step: prior.Step, onExpiry: "settle_default", choice: prior.Choice, expiredAt: at, overdue: t.now.Sub(at)}
			return responded{kind: respLate, expired: x, choice: choice}
		}
		return responded{kind: respRepeat, prior: prior, gateID: gateID, choice: choice}
	}
	g := t.run.PendingGate
	if g == nil || g.GateID != gateID {
		if t.run.Terminal() {
			return responded{kind: respRunEnded}
		}
		return responded{kind: respNotOpen, gateID: gateID}
	}
	if !contains(g.Choices, choice) {
		return responded{kind: respBadChoice, step: g.StepName, choice: choice, choices: g.Choices}
	}
	claim := t.run.Claims[g.StepName]
	proof, cause := claimProof(claim, req.ClaimToken)
	step := g.StepName
	out := map[string]any{}
	if m, ok := g.Preview.(map[string]any); ok {
		for k, v := range m {
			out[k] = v
		}
	}
	out["choice"] = choice
	e := t.entry(step, "success")
	e.Kind = "gate_response"
	e.InputSummary = map[string]any{"choice": choice}
	e.OutputSummary = out
	e.GateMessage = g.ResolvedMessage
	if req.RespondedBy != nil {
		e.RespondedBy = strings.TrimSpace(*req.RespondedBy)
		if e.RespondedBy != "" {
			e.RespondedByVouchedBy = vouchedBy
		}
	}
	e.ClaimProof = map[string]any{"proof": proof}
	if cause != "" {
		e.ClaimProof["cause"] = cause
	}
	var token *string
	if claim != nil {
		token = &claim.Token
	}
	if t.run.ResolvedGates == nil {
		t.run.ResolvedGates = map[string]*record.ResolvedGate{}
	}
	rg := &record.ResolvedGate{Step: step, Choice: choice}
	if claim != nil {
		rg.Token, rg.OpenedBy, rg.OpenedSince = claim.Token, claim.Holder, claim.Since
	}
	t.run.ResolvedGates[gateID] = rg
	t.run.PendingGate = nil
	if st := t.stepOf(step); st != nil && st.GatedBefore() {
		// The answer decides whether the work is called at all; the
		// step's output will be the work's.
		t.settleBefore(st, g, choice, rg)
	} else {
		t.setOutput(step, out)
		t.run.MarkCompleted(step, &record.Settled{Token: token, Outcome: "gate", Choice: choice})
	}
	t.appendEvidence(e)
	// Guards the answer makes ready are decided in this write; auto steps
	// are owed to the engine (advance_run), not run here.
	t.advance(advanceOpts{decideGuards: true, chain: false, arm: record.ArmGateResolutionComplete})
	return responded{kind: respResolved, step: step, choice: choice, claim: claim, proof: proof, cause: cause}
}

// respondReply composes submit_human_response's reply from its decision
// and the run as the call leaves it.
func (t *txn) respondReply(req *realmv1.SubmitHumanResponseRequest, o responded) *realmv1.Reply {
	switch o.kind {
	case respWorkflowMissing:
		msg := fmt.Sprintf("Workflow not found: %s", t.run.WorkflowID)
		r := refusal("submit_human_response", t.run.ID, errcode.StateWorkflowNotFound, msg, nil)
		r.Warnings = t.warnings
		return r
	case respLate:
		return t.lateAnswerReply(o.expired, o.choice, o.claim, req.ClaimToken, o.enactedHere)
	case respRunEnded:
		return t.terminalAnswerReply()
	case respRepeat:
		return t.repeatReply(o.prior, o.gateID, o.choice, req.ClaimToken)
	case respNotOpen:
		return t.notOpenReply(o.gateID)
	case respBadChoice:
		r := t.envelope(o.step)
		t.refuse(r, errcode.ValidationInputSchema, fmt.Sprintf("Choice '%s' is not valid. Expected one of: %s", o.choice, joinComma(o.choices)))
		r.NextActions = []*realmv1.NextAction{t.answerAction("")}
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT
		return r
	}
	r := t.envelope(o.step)
	r.GateClaim = &realmv1.GateClaim{Proof: o.proof, Cause: o.cause, OpenedBy: openedBy(o.claim)}
	if w := proofWarning(o.proof, o.cause, req.ClaimToken != nil); w != "" {
		r.Warnings = append(r.Warnings, w)
	}
	r.HasChainedAutoSteps, r.ChainedAutoSteps = false, nil
	v := t.view()
	r.NextActions = t.nextActions(v)
	hint := fmt.Sprintf("Gate '%s' resolved with choice '%s'.", o.step, o.choice)
	switch {
	case t.endedBy != nil:
		hint = t.guardSentence()
		if t.endedBy.arm == record.ArmGuardResolutionError {
			if tail := t.terminalTail(); tail != "" {
				hint += " " + tail
			}
		}
	default:
		hint += " " + t.afterHint(v)
	}
	r.ContextHint = strings.TrimSpace(hint)
	return r
}

// repeatReply answers a second answer to a gate that was already resolved.
func (t *txn) repeatReply(prior *record.ResolvedGate, gateID, choice string, token *string) *realmv1.Reply {
	r := t.envelope(prior.Step)
	v := t.view()
	r.NextActions = t.nextActions(v)
	if choice == prior.Choice {
		cause := "answered"
		if prior.ResolvedBy == "timeout" {
			cause = "expired"
		}
		opener := &realmv1.Holder{AbsentCause: "no_claim"}
		if prior.Token != "" {
			// The question's claim is gone, but its resolution keeps who
			// held it: the program that opened the question.
			opener = openedBy(&record.Claim{Token: prior.Token, Holder: prior.OpenedBy, Since: prior.OpenedSince})
		}
		r.GateClaim = &realmv1.GateClaim{Proof: "spent", Cause: cause, OpenedBy: opener}
		if w := proofWarning("spent", cause, token != nil); w != "" {
			r.Warnings = append(r.Warnings, w)
		}
		r.ContextHint = fmt.Sprintf("Gate '%s' was already resolved with choice '%s' — no action was taken.", gateID, choice)
		return r
	}
	msg := fmt.Sprintf("Gate '%s' was already resolved with choice '%s' — your choice '%s' was not recorded.", gateID, prior.Choice, choice)
	if prior.ResolvedBy == "timeout" {
		msg = fmt.Sprintf("Gate '%s' was settled by timeout with choice '%s' — your choice '%s' was not recorded.", gateID, prior.Choice, choice)
	}
	t.refuse(r, errcode.StateBlocked, msg)
	r.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
	// The choice recorded first; resolved_by only when the expiry chose it
	// (a person's answer has no resolved_by).
	details := map[string]any{"runId": t.run.ID, "gateId": gateID, "winning_choice": prior.Choice}
	if prior.ResolvedBy == "timeout" {
		details["resolved_by"] = "timeout"
	}
	r.ErrorDetails = toStruct(details)
	if !t.run.Terminal() {
		if next := t.whatNext(v); next != "" && next != "No step is ready." {
			r.ContextHint = msg + " " + next
		}
	}
	return r
}

// notOpenReply refuses an answer to a gate that is not the open one.
func (t *txn) notOpenReply(gateID string) *realmv1.Reply {
	msg := fmt.Sprintf("Gate '%s' is not the open gate and matches no committed resolution.", gateID)
	r := t.envelope("submit_gate")
	t.refuse(r, errcode.StateBlocked, msg)
	if g, _, due := t.expiredGate(); due {
		r.NextActions = []*realmv1.NextAction{t.expiredAction(g)}
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_RESOLVE_PRECONDITION
		r.ContextHint = fmt.Sprintf("%s The question on step '%s' (gate '%s') can no longer be answered: its time is up — call advance_run to carry out its declared %s.", msg, g.StepName, g.GateID, g.OnExpiry)
		return r
	}
	if g := t.run.PendingGate; g != nil {
		r.NextActions = []*realmv1.NextAction{t.answerAction("")}
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_RESOLVE_PRECONDITION
		r.ContextHint = fmt.Sprintf("%s The open question is on step '%s' (gate '%s') — answer it as next_actions says.", msg, g.StepName, g.GateID)
		return r
	}
	r.ContextHint = msg + " No question is open on this run."
	if len(r.NextActions) == 0 {
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
	} else {
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_RESOLVE_PRECONDITION
	}
	return r
}

// terminalAnswerReply refuses an answer on a run that has ended.
func (t *txn) terminalAnswerReply() *realmv1.Reply {
	phase := t.run.Phase()
	id := t.run.ID
	purge := fmt.Sprintf("'realm run purge %s' previews what it would remove", id)
	var way string
	switch phase {
	case record.PhaseCompleted:
		way = "it completed, and nothing is owed."
	case record.PhaseAborted:
		way = "an aborted run is never resumed; " + purge + "."
	case record.PhaseAbandoned:
		way = fmt.Sprintf("an operator ended this run, with the reason %q; to run the work again, start a new run; %s.", t.run.TerminalReason, purge)
	default:
		var steps []string
		for _, s := range t.run.FailedSteps {
			if st := t.stepOf(s); st != nil && st.Execution != workflow.KindFinalizer {
				steps = append(steps, s)
			}
		}
		switch len(steps) {
		case 0:
			way = "no step failed, so 'realm run resume' has nothing to run again; " + purge + "."
		case 1:
			way = fmt.Sprintf("%s; to make the failed step runnable again: realm run resume %s --from %s", purge, id, steps[0])
		default:
			way = fmt.Sprintf("%s; to make the failed step runnable again: realm run resume %s --from <one of: %s>", purge, id, joinComma(steps))
		}
	}
	msg := fmt.Sprintf("Run '%s' is terminal (%s); cannot submit a gate response — %s", id, phase, way)
	r := t.envelope("submit_gate")
	t.refuse(r, errcode.StateRunTerminal, msg)
	r.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
	return r
}

// claimProof decides what a passed claim token shows (seed "The claim token").
func claimProof(c *record.Claim, token *string) (proof, cause string) {
	switch {
	case token == nil:
		return "absent", ""
	case c == nil:
		return "unverifiable", "no_claim"
	case c.Token == "":
		return "unverifiable", "claim_has_no_token"
	case *token == c.Token:
		return "matched", ""
	}
	return "mismatch", ""
}

// proofWords are the warning a proof other than matched carries: the
// token's fact, and what the call did about the answer.
func proofWords(proof, cause string, passed bool) (fact, did string) {
	switch proof {
	case "absent":
		return "No claim_token was passed", "the answer was recorded. Only the conversation that opened the question has one to pass."
	case "mismatch":
		return "The claim_token passed is not the one handed out when this question opened", "the answer was recorded. Only the conversation that opened the question has the right one to pass."
	case "unverifiable":
		return fmt.Sprintf("The claim_token passed could not be checked (%s)", cause), "the answer was recorded."
	case "spent":
		if passed {
			return fmt.Sprintf("The claim_token passed belongs to a question already settled (%s)", cause), "this call recorded nothing."
		}
	}
	return "", ""
}

// proofWarning is the one sentence a proof other than matched carries.
func proofWarning(proof, cause string, passed bool) string {
	fact, did := proofWords(proof, cause, passed)
	if fact == "" {
		return ""
	}
	return fact + "; " + did
}

// proofFact is the token's fact alone, for a reply whose other lines
// already say the answer was not recorded.
func proofFact(proof, cause string, passed bool) string {
	fact, _ := proofWords(proof, cause, passed)
	if fact == "" {
		return ""
	}
	return fact + "."
}

// openedBy names the program through which the question was opened.
func openedBy(c *record.Claim) *realmv1.Holder {
	switch {
	case c == nil:
		return &realmv1.Holder{AbsentCause: "no_claim"}
	case c.Holder == nil || c.Holder.By == "":
		if c.Since == "" {
			return &realmv1.Holder{AbsentCause: "pre_lease_claim"}
		}
		return &realmv1.Holder{AbsentCause: "holder_not_recorded"}
	}
	return &realmv1.Holder{By: ptr(c.Holder.By), BySource: c.Holder.BySource, Channel: c.Holder.Channel}
}

// lateAnswerReply answers an answer that came after its question's time was
// up (seed: "An answer after the gate's time is up is not recorded").
// enactedHere says this call carried the expiry out; otherwise an earlier
// call did, and reported the guards it decided.
func (t *txn) lateAnswerReply(x *expiry, choice string, claim *record.Claim, token *string, enactedHere bool) *realmv1.Reply {
	r := t.envelope(x.step)
	// From an answer, guards are reported in guards only (seed: "It has no
	// chained_auto_steps").
	r.HasChainedAutoSteps, r.ChainedAutoSteps = false, nil
	r.AnswerRecorded = ptr(false)
	r.ErrorDetails = toStruct(x.details(t.run.ID))
	if !enactedHere {
		r.Guards, r.EndedBy = nil, nil
	}
	v := t.view()
	r.NextActions = t.nextActions(v)
	after := func() string {
		if enactedHere && t.endedBy != nil {
			return t.guardSentence()
		}
		if t.run.Terminal() {
			return ""
		}
		if next := t.whatNext(v); next != "No step is ready." {
			return next
		}
		return ""
	}
	join := func(a, b string) string {
		if b == "" {
			return a
		}
		return a + " " + b
	}
	switch {
	case x.onExpiry == "abort":
		msg := fmt.Sprintf("Gate '%s' on '%s' expired and the run aborted per the workflow's declared on_expiry — your choice was NOT recorded.", x.gateID, x.step)
		t.refuse(r, errcode.StateRunTerminal, msg)
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
		r.NextActions = []*realmv1.NextAction{}
	case choice == x.choice:
		proof, cause := "spent", "expired"
		if enactedHere {
			proof, cause = claimProof(claim, token)
		}
		r.GateClaim = &realmv1.GateClaim{Proof: proof, Cause: cause, OpenedBy: openedBy(claim)}
		if w := proofFact(proof, cause, token != nil); w != "" {
			// The expiry's line and answer_recorded already say the answer
			// was not recorded: the token fact alone.
			r.Warnings = append(r.Warnings, w)
		}
		r.ContextHint = join("the outcome matches your choice, but it was settled by timeout; your response was not recorded.", after())
	default:
		msg := fmt.Sprintf("Gate '%s' was settled by timeout with choice '%s' — your choice '%s' was not recorded.", x.gateID, x.choice, choice)
		t.refuse(r, errcode.StateBlocked, msg)
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
		r.ContextHint = join(msg, after())
	}
	return r
}
