package command

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

// Codes of a schema refusal: the answer is asked for again.
const (
	codeInputSchema  = "VALIDATION_INPUT_SCHEMA"
	codeOutputSchema = "VALIDATION_OUTPUT_SCHEMA"
)

const agentLabel = "  Agent output JSON (Enter for {}): "

// agent asks for an agent step's answer until the engine takes one, the
// prompt closes, or the person leaves.
// While the prompt waits it holds the step's claim (cli.md §2.6), given
// back when the person leaves or a signal ends the command; an answer is
// given under it.
func (d *devRun) agent(step string) error {
	held, ok, err := d.claim(step)
	if err != nil || !ok {
		return err
	}
	defer func() { d.release(held) }()
	d.stepLine("agent", step)
	for {
		var closed string
		line, end, err := d.kb.ask(d.ctx, d.out, agentLabel, func() (bool, error) {
			var err error
			closed, err = d.agentClosed(step, held)
			return closed != "", err
		})
		if err != nil {
			return err
		}
		switch end {
		case promptLeft:
			// Given back first, so the map offers the step to drive.
			d.release(held)
			held = nil
			return d.leave(step)
		case promptClosed:
			fmt.Fprintf(d.out, "  %s\n\n", closed)
			return nil
		}
		answer, why := parseAnswer(line)
		if why != "" {
			fmt.Fprintln(d.errw, "  ✗ "+why)
			continue
		}
		req := &realmv1.ExecuteStepRequest{RunId: d.runID, Command: step, Params: answer, Caller: d.caller}
		if held != nil {
			req.ClaimToken = &held.token
		}
		if d.nonce {
			req.WriterNonce = newNonce()
		}
		resp, err := devCall(d, func(ctx context.Context) (*realmv1.ExecuteStepResponse, error) {
			return d.eng.ExecuteStep(ctx, req)
		})
		if err != nil {
			return err
		}
		r := resp.GetReply()
		switch {
		case succeeded(r):
			d.accepted(step, r)
			return nil
		case r.GetErrorCode() == codeInputSchema || r.GetErrorCode() == codeOutputSchema:
			// Refused by the schema: said, then asked again.
			fmt.Fprintf(d.errw, "  ✗ %s: %s\n", reply.StatusWord(r.GetStatus()), replyMessage(r))
			for _, l := range schemaLines(r) {
				fmt.Fprintln(d.errw, "    "+l)
			}
			continue
		}
		// Another refusal: another program may have done the step
		// meanwhile; the record says.
		st, err := d.state(true)
		if err != nil {
			return err
		}
		if slices.Contains(st.GetCompletedSteps(), step) {
			fmt.Fprintf(d.out, "  Not run here: step '%s' was taken by %s, and completed; the answer typed here was not recorded.\n\n", step, lastDriver(st, step))
			return nil
		}
		if held != nil && !slices.Contains(st.GetInProgressSteps(), step) && !st.GetTerminalState() {
			fmt.Fprintf(d.out, "  %s\n\n", claimRemovedLine(step))
			return nil
		}
		fmt.Fprintf(d.out, "  ✗ %s: %s\n\n", reply.StatusWord(r.GetStatus()), replyMessage(r))
		return nil
	}
}

// accepted prints what an answer the engine took led to.
func (d *devRun) accepted(step string, r *realmv1.Reply) {
	d.warnIndented(r.GetWarnings())
	phase := r.GetRunPhase()
	if len(r.GetChainedAutoSteps()) > 0 || r.GetGate() != nil {
		phase = realmv1.RunPhase_RUN_PHASE_RUNNING
	}
	fmt.Fprintf(d.out, "  ✓ → %s\n\n", reply.PhaseWord(phase))
	d.last = step
	d.chained(r)
}

func (d *devRun) warnIndented(lines []string) {
	for _, w := range lines {
		fmt.Fprintln(d.out, "  ⚠ "+w)
	}
}

// stepLine introduces a step's prompt: `→ [agent] draft: Draft the reply.`
func (d *devRun) stepLine(kind, step string) {
	line := fmt.Sprintf("→ [%s] %s", kind, step)
	if desc := d.steps[step].description; desc != "" {
		line += ": " + oneLine(desc)
	}
	fmt.Fprintln(d.out, line)
}

// parseAnswer reads a typed answer: empty is {}; anything else must be one
// JSON object. why says what is wrong with it.
func parseAnswer(line string) (*structpb.Struct, string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return &structpb.Struct{}, ""
	}
	var v any
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		return nil, "Not valid JSON: " + err.Error() + " — type one JSON object, or press Enter for {}."
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, "Not a JSON object — type one JSON object, or press Enter for {}."
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil, "Not a JSON object: " + err.Error()
	}
	return s, ""
}

// schemaLines are a schema refusal's errors as trace messages show them:
// `<instancePath> <message>`, or the bare message at the root.
func schemaLines(r *realmv1.Reply) []string {
	var out []string
	for _, e := range r.GetErrorDetails().GetFields()["errors"].GetListValue().GetValues() {
		f := e.GetStructValue().GetFields()
		msg := f["message"].GetStringValue()
		if msg == "" {
			continue
		}
		if p := f["instancePath"].GetStringValue(); p != "" {
			msg = p + " " + msg
		}
		out = append(out, msg)
	}
	return out
}

func claimRemovedLine(step string) string {
	return fmt.Sprintf("This prompt is closed: the claim it held on step '%s' was removed by another process, and the step has not run.", step)
}

// agentClosed says why an agent step's prompt no longer stands, or "".
// held is the claim the prompt holds on the step, if any.
func (d *devRun) agentClosed(step string, held *heldClaim) (string, error) {
	st, err := d.state(false)
	if err != nil {
		return "", err
	}
	switch {
	case st.GetTerminalState():
		return fmt.Sprintf("This prompt is closed: the run has ended (phase '%s'); '%s' was not run here.", reply.PhaseWord(st.GetRunPhase()), step), nil
	case slices.Contains(st.GetCompletedSteps(), step):
		full, err := d.state(true)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("This prompt is closed: step '%s' was taken by %s, and completed; not run here.", step, lastDriver(full, step)), nil
	case slices.Contains(st.GetInProgressSteps(), step):
		if held != nil && held.ours(st) {
			return "", nil
		}
		holder, _ := claimOf(st, step)
		return fmt.Sprintf("This prompt is closed: step '%s' was taken by %s; not run here.", step, holder), nil
	case held != nil && !slices.Contains(st.GetFailedSteps(), step) && !slices.Contains(st.GetSkippedSteps(), step):
		return claimRemovedLine(step), nil
	case st.GetPendingGate() != nil:
		return fmt.Sprintf("This prompt is closed: a question is open on '%s', and '%s' waits for its answer.", st.GetPendingGate().GetStepName(), step), nil
	case slices.Contains(st.GetFailedSteps(), step) || slices.Contains(st.GetSkippedSteps(), step):
		return fmt.Sprintf("This prompt is closed: step '%s' was settled by another process; not run here.", step), nil
	}
	return "", nil
}

// gate asks for the open question's choice until it is answered here or
// elsewhere, or the person leaves.
func (d *devRun) gate(st *realmv1.RunState) error {
	g := st.GetPendingGate()
	step := g.GetStepName()
	d.stepLine("gate", step)
	for _, l := range questionLines(g) {
		fmt.Fprintln(d.out, l)
	}
	label := fmt.Sprintf("  Choice [%s]: ", strings.Join(g.GetChoices(), "/"))
	enactTried := false // the expiry is carried out from here once at most
	for {
		var closed string
		var enacted *realmv1.Reply
		line, end, err := d.kb.ask(d.ctx, d.out, label, func() (bool, error) {
			var err error
			closed, enacted, err = d.gateClosed(g, !enactTried)
			enactTried = enactTried || enacted != nil
			return closed != "", err
		})
		if err != nil {
			return err
		}
		switch end {
		case promptLeft:
			return d.leave(step)
		case promptClosed:
			if enacted != nil {
				d.timerLines(g, enacted)
			}
			fmt.Fprintf(d.out, "  %s\n\n", closed)
			if enacted != nil {
				d.chained(enacted)
				if !succeeded(enacted) {
					d.failed(enacted)
				}
			}
			return nil
		}
		choice := strings.TrimSpace(line)
		if choice == "" {
			continue
		}
		resp, err := devCall(d, func(ctx context.Context) (*realmv1.SubmitHumanResponseResponse, error) {
			return d.eng.SubmitHumanResponse(ctx, &realmv1.SubmitHumanResponseRequest{RunId: d.runID, GateId: g.GetGateId(), Choice: choice, Caller: d.caller})
		})
		if err != nil {
			return err
		}
		r := resp.GetReply()
		if r.AnswerRecorded != nil && !r.GetAnswerRecorded() {
			// Too late: the question was settled before this answer.
			d.warnIndented(r.GetWarnings())
			fmt.Fprintf(d.out, "  Not recorded: %s\n\n", replyMessage(r))
			return nil
		}
		if !succeeded(r) {
			fmt.Fprintln(d.errw, "  ✗ "+replyMessage(r))
			// Asked again while the same question stays open.
			if now, err := d.state(false); err != nil || now.GetPendingGate().GetGateId() != g.GetGateId() {
				return err
			}
			continue
		}
		// Its warnings are respond's, unprinted there too (the claim_token
		// one is for MCP conversations).
		for _, l := range guardLines(r) {
			fmt.Fprintln(d.out, "  "+l)
		}
		fmt.Fprintf(d.out, "  ✓ → %s\n\n", reply.PhaseWord(r.GetRunPhase()))
		d.last = step
		return nil
	}
}

// gateClosed says why a question's prompt no longer stands, in the words
// of the record (cli.md §2.6), or "". A question whose time ran out with
// an on_expiry the engine owes is carried out here, through the attending
// process's timer door (advance_run with expiry_timer, so the record says
// enacted_via: timer); enacted is that call's reply.
func (d *devRun) gateClosed(g *realmv1.PendingGate, mayEnact bool) (closed string, enacted *realmv1.Reply, err error) {
	st, err := d.state(false)
	if err != nil {
		return "", nil, err
	}
	if st.GetPendingGate().GetGateId() == g.GetGateId() {
		if !mayEnact || !owesEngine(st.GetNextActions()) {
			return "", nil, nil
		}
		resp, err := devCall(d, func(ctx context.Context) (*realmv1.AdvanceRunResponse, error) {
			return d.eng.AdvanceRun(ctx, &realmv1.AdvanceRunRequest{RunId: d.runID, Caller: d.caller, ExpiryTimer: true})
		})
		if err != nil {
			return "", nil, err
		}
		enacted = resp.GetReply()
	}
	head := fmt.Sprintf("This prompt is closed: the question on '%s' is no longer open — ", g.GetStepName())
	full, err := d.state(true)
	if err != nil {
		return "", enacted, err
	}
	if full.GetPendingGate().GetGateId() == g.GetGateId() {
		// The engine was owed something else first; the prompt stands.
		return "", enacted, nil
	}
	if a := lastAnswer(full, g.GetStepName()); a != nil {
		return head + answerWords(a) + ".", enacted, nil
	}
	return head + fmt.Sprintf("no answer was recorded; the run is '%s'.", reply.PhaseWord(full.GetRunPhase())), enacted, nil
}

// timerLines print what this prompt's timer carried out: its own ⏰ line
// for the expiry it enacted (cli.md §2.6) in place of the engine's
// warning, and any other warning as it is.
func (d *devRun) timerLines(g *realmv1.PendingGate, enacted *realmv1.Reply) {
	timer := enacted.GetExpiryEnactedVia() == "timer"
	for _, w := range enacted.GetWarnings() {
		if timer && w == enacted.GetExpiryWarning() {
			continue // the ⏰ line below says it in the dev mode's words
		}
		fmt.Fprintln(d.out, "⚠ "+w)
	}
	if timer {
		fmt.Fprintf(d.out, "⏰ gate '%s' on run '%s' expired — enacted via the attending-process timer (enacted_via: timer).\n", g.GetGateId(), d.runID)
	}
}

// questionLines show a question (cli.md §2.6): `Question: <text>`, or
// `Question:` then indented lines; control characters escaped.
func questionLines(g *realmv1.PendingGate) []string {
	lines := strings.Split(reply.GateQuestion(g), "\n")
	for i, l := range lines {
		lines[i] = escapeControls(l)
	}
	if len(lines) == 1 {
		return []string{"Question: " + lines[0]}
	}
	out := []string{"Question:"}
	for _, l := range lines {
		out = append(out, "  "+l)
	}
	return out
}

// escapeControls writes control characters as JSON does: tab as \t, the
// rest as \u00XX.
func escapeControls(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
