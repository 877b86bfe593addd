package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
	"github.com/realm-go/realm/pkg/template"
	"github.com/realm-go/realm/pkg/workflow"
)

// openGate parks the run at a step's human gate: the step keeps a claim
// (with a fresh token) and the gate's settings are frozen into the run.
// preview is what the person decides about.
// approvedBefore reports whether a question before s's work was answered
// with the choice that lets the work run.
func (t *txn) approvedBefore(s *workflow.Step) bool {
	for _, rg := range t.run.ResolvedGates {
		if rg.Step == s.Name && rg.ApprovesWork {
			return true
		}
	}
	return false
}

// settleBefore applies choice to the question before s's work
// (gate.before): the first effective choice returns the step to pending,
// its work to be called by the next advance; any other skips it, and the
// work is never called. It reports whether the work may run.
func (t *txn) settleBefore(s *workflow.Step, g *record.PendingGate, choice string, rg *record.ResolvedGate) bool {
	if len(g.Choices) > 0 && choice == g.Choices[0] {
		rg.ApprovesWork = true
		t.run.Release(s.Name)
		return true
	}
	t.run.MarkSkipped(s.Name, &record.SkipDetail{Kind: "gate_declined", GateID: g.GateID})
	return false
}

func (t *txn) openGate(s *workflow.Step, preview any, caller *realmv1.Caller) error {
	msg := ""
	if s.Gate != nil && s.Gate.Message != "" {
		sc := t.templateScope()
		if _, ok := sc.Resources[s.Name]; !ok && preview != nil {
			// The message may name the gate step's own output (mcp spec
			// §9.2), which is recorded only once the gate is answered.
			sc.Resources[s.Name] = preview
		}
		out, _, err := template.Render(s.Gate.Message, sc, template.ModeGateMessage)
		if err != nil {
			return err
		}
		msg = out
	}
	token := uuid.NewString()
	since := t.stamp()
	t.run.MarkInProgress(s.Name, &record.Claim{Token: token, Holder: holderOf(caller), Since: since})
	g := &record.PendingGate{
		GateID:          uuid.NewString(),
		StepName:        s.Name,
		Preview:         preview,
		Choices:         s.EffectiveChoices(),
		OpenedAt:        since,
		ResolvedMessage: msg,
	}
	if gc := s.Gate; gc != nil {
		g.Owner = gc.Owner
		g.ResolutionMessages = gc.ResolutionMessages
		if gc.TimeoutSeconds > 0 {
			g.ExpiresAt = record.FormatTime(t.now.Add(time.Duration(gc.TimeoutSeconds) * time.Second))
			g.OnExpiry = gc.OnExpiry
			if gc.OnExpiry == "settle_default" {
				g.DefaultChoice = gc.DefaultChoice
			}
		}
		g.ReminderSeconds = gc.ReminderSeconds
		if gc.ReminderSeconds > 0 {
			g.ReminderMax = gc.ReminderMax
			if g.ReminderMax == 0 {
				g.ReminderMax = 3
			}
		}
	}
	t.run.PendingGate = g
	t.openedGate = s.Name
	t.touch()
	return nil
}

// templateScope is what prompts and gate messages read.
func (t *txn) templateScope() template.Scope {
	resources := make(map[string]any, len(t.outputs)+1)
	for k, v := range t.outputs {
		resources[k] = v
	}
	settle := map[string]any{}
	for k, v := range t.settlement() {
		settle[k] = v
	}
	resources["$settlement"] = settle
	sc := template.Scope{Params: t.run.Params, Resources: resources, Now: func() time.Time { return t.now },
		WorkflowContext: t.contextTexts()}
	if t.def != nil {
		sc.ContextWrapper = t.def.Def.ContextWrapper
	}
	return sc
}

// contextTexts are the run's workflow_context texts by entry name. An
// entry whose file could not be read is left out, so its expressions stay
// as written (spec §3.8).
func (t *txn) contextTexts() map[string]string {
	if len(t.run.WorkflowContextSnapshots) == 0 {
		return nil
	}
	out := make(map[string]string, len(t.run.WorkflowContextSnapshots))
	for name, s := range t.run.WorkflowContextSnapshots {
		if s != nil && s.Error == "" {
			out[name] = s.Content
		}
	}
	return out
}

// gateReply is the confirm_required reply of the call that opened a gate:
// the only reply that carries the claim token.
func (t *txn) gateReply(command string) *realmv1.Reply {
	r := t.envelope(command)
	g := t.run.PendingGate
	s := t.stepOf(g.StepName)
	token := ""
	if c := t.run.Claims[g.StepName]; c != nil {
		token = c.Token
	}
	r.Status = realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED
	r.ContextHint = fmt.Sprintf("Run is paused at gate '%s'. Available choices: %s.", g.GateID, joinComma(g.Choices))
	r.NextActions = []*realmv1.NextAction{t.answerAction(token)}
	gate := &realmv1.Gate{
		GateId:       g.GateID,
		StepName:     g.StepName,
		Preview:      toValue(g.Preview),
		Choices:      g.Choices,
		ResponseSpec: toStruct(map[string]any{"choices": g.Choices}),
	}
	if d := t.gateDisplay(s, g); d != "" {
		gate.Display = &d
	}
	if s != nil && s.Instructions != "" {
		gate.AgentHint = ptr(s.Instructions)
	}
	if g.ExpiresAt != "" {
		gate.ExpiresAt = timestamp(g.ExpiresAt)
	}
	if token != "" {
		gate.ClaimToken = &token
	}
	r.Gate = gate
	if command != g.StepName {
		r.StoppedStep = g.StepName
	}
	return r
}

// gateDisplay is the question shown: the rendered message, else the
// step's display template over the preview, else the rendered prompt (mcp
// spec §9.2, taking the YAML reference's chain).
func (t *txn) gateDisplay(s *workflow.Step, g *record.PendingGate) string {
	if g.ResolvedMessage != "" {
		return g.ResolvedMessage
	}
	if s != nil && s.Display != "" {
		if d := reply.Display(s.Display, g.Preview); d != "" {
			return d
		}
	}
	if s != nil && s.Prompt != "" {
		return t.renderPrompt(s.Prompt)
	}
	return ""
}

// answerAction is the submit_human_response entry for the open question;
// a token is passed only by the reply that opened it.
func (t *txn) answerAction(token string) *realmv1.NextAction {
	g := t.run.PendingGate
	params := map[string]any{"run_id": t.run.ID, "gate_id": g.GateID}
	call := map[string]any{"run_id": t.run.ID, "gate_id": g.GateID, "choice": "<" + strings.Join(g.Choices, "|") + ">"}
	human := fmt.Sprintf("Human review required for step '%s'. Ask the user to choose one of: %s, then call submit_human_response with their choice.", g.StepName, joinComma(g.Choices))
	if token != "" {
		params["claim_token"], call["claim_token"] = token, token
		human += " Pass back the claim_token given here: it shows the answer comes from the conversation that opened the question."
	} else {
		human += " The question's text, when its gate declares a message, is get_run_state's pending_gate.resolved_message. The conversation that opened the question passes back the claim_token it was given then, when it was given one."
	}
	return &realmv1.NextAction{
		Instruction:   &realmv1.Instruction{Tool: "submit_human_response", ParamsJson: mustJSON(params), CallWithJson: mustJSON(call)},
		HumanReadable: human,
		Orientation:   fmt.Sprintf("Run is paused at gate '%s'. Available choices: %s.", g.GateID, joinComma(g.Choices)),
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// gateMessageReply is the refusal of a step whose gate message cannot be
// rendered: the gate does not open and the step is not done (spec §8.2).
func (t *txn) gateMessageReply(command string, err error) *realmv1.Reply {
	step := command
	if t.gateErrStep != "" {
		step = t.gateErrStep
	}
	code, msg := errcode.EngineGateOpenFailed, err.Error()
	var te *template.Error
	if errors.As(err, &te) {
		code, msg = errcode.Code(te.Code), te.Message
	}
	r := t.envelope(command)
	t.refuse(r, code, msg)
	r.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
	r.ContextHint = fmt.Sprintf("Step '%s' could not open its gate: %s The run stays open; correct the workflow's gate.message and register it again.", step, msg)
	r.StoppedStep = step
	return r
}
