package command

import (
	"fmt"
	"strings"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/identity"
	"github.com/realm-go/realm/pkg/reply"
)

// leave ends the command at a prompt the person left (Ctrl+D, Ctrl+C): the
// run stays, and the detach map says how to carry on (cli.md §2.6).
func (d *devRun) leave(step string) error {
	st, err := d.state(false)
	if err != nil {
		// The record may be gone (purged from another terminal): say so in
		// one line rather than print a map of a run that cannot be read.
		why := err.Error()
		fmt.Fprintf(d.errw, "Prompt cancelled — detached from run '%s'. Its record could not be re-read: %s. Inspect: realm run inspect %s\n", d.runID, strings.TrimSuffix(why, "."), d.runID)
		return &exitError{code: ExitRefused}
	}
	fmt.Fprintf(d.errw, "Prompt cancelled — detached from run '%s' at step '%s' (phase: %s). The run is saved.\n", d.runID, step, reply.PhaseWord(st.GetRunPhase()))
	printLines(d.errw, d.detachMap(st))
	return &exitError{code: ExitRefused}
}

// detachMap is the "how to carry on" lines under a detach (cli.md §2.6):
// Advance when the engine owes work, Drive it when an agent step is ready,
// Respond for an open question, Go on for a step in flight elsewhere,
// Resume for an ended run with a resumable step; Inspect always, Discard
// for an open run without a question (abandon refuses one).
func (d *devRun) detachMap(st *realmv1.RunState) []string {
	id := d.runID
	var out []string
	if st.GetTerminalState() {
		if res, ok := st.GetExtra().AsMap()["resumable"].(map[string]any); ok {
			if steps, _ := res["steps"].([]any); len(steps) == 1 {
				out = append(out, fmt.Sprintf("  Resume:    realm run resume %s --from %v", id, steps[0]))
			} else if len(steps) > 1 {
				names := make([]string, len(steps))
				for i, s := range steps {
					names[i] = fmt.Sprint(s)
				}
				out = append(out, fmt.Sprintf("  Resume:    realm run resume %s --from <one of: %s>", id, strings.Join(names, ", ")))
			}
		}
		return append(out, "  Inspect:   realm run inspect "+id)
	}
	owed := owedSteps(st.GetNextActions())
	if len(owed) > 0 {
		line := fmt.Sprintf("  Advance:   realm run advance %s — for what the engine owes (%s), with no model", id, quoted(owed))
		if len(owed) > 1 {
			line += "; it runs them until a step opens a question, fails or ends the run"
		}
		out = append(out, line)
	}
	if d.agentStep(st) != "" {
		out = append(out, "  Drive it:  "+d.driveCommand())
		above := "the line above is"
		if len(owed) > 0 {
			above = "the lines above are"
		}
		out = append(out, "             If a realm workflow run or realm agent is still waiting on this run, it goes on by itself; "+above+" for when none is.")
	}
	g := st.GetPendingGate()
	if g != nil {
		choice := "<one of: " + strings.Join(g.GetChoices(), ", ") + ">"
		if len(g.GetChoices()) == 1 {
			choice = g.GetChoices()[0]
		}
		out = append(out, fmt.Sprintf("  Respond:   realm run respond %s --gate %s --choice %s", id, g.GetGateId(), choice))
	}
	for _, s := range st.GetInProgressSteps() {
		if g != nil && s == g.GetStepName() {
			continue
		}
		holder, _ := claimOf(st, s)
		out = append(out, fmt.Sprintf("  Go on:     '%s' is in flight, taken by %s; the run goes on when it finishes — if that program is gone: realm run reclaim %s --step %s --force", s, holder, id, s))
	}
	out = append(out, "  Inspect:   realm run inspect "+id)
	if g == nil {
		out = append(out, "  Discard:   realm run abandon "+id)
	}
	return out
}

// driveCommand is the realm agent command that drives this run, repeating
// the flags this command was given.
func (d *devRun) driveCommand() string {
	parts := []string{"realm agent --run-id", d.runID, "--provider <provider> --model <model>"}
	if d.flags.extensionsModule != "" {
		parts = append(parts, "--extensions-module", shellQuote(d.flags.extensionsModule))
	}
	if d.flags.project != "" {
		parts = append(parts, "--project", shellQuote(d.flags.project))
	}
	if d.flags.mintWriterNonce {
		parts = append(parts, "--mint-writer-nonce")
	}
	return strings.Join(parts, " ")
}

// programWords renders a recorded holder ({by, by_source, channel}) as
// every human output names a program (cli.md §1.5).
func programWords(h map[string]any) string {
	by, _ := h["by"].(string)
	src, _ := h["by_source"].(string)
	channel, _ := h["channel"].(string)
	return identity.Words(by, src, channel)
}

// stepView is include_steps' entry for one step.
func stepView(st *realmv1.RunState, step string) map[string]any {
	steps, _ := st.GetExtra().AsMap()["steps"].(map[string]any)
	v, _ := steps[step].(map[string]any)
	return v
}

// lastDriver names the program behind a step's last recorded attempt.
func lastDriver(st *realmv1.RunState, step string) string {
	attempts, _ := stepView(st, step)["attempts"].([]any)
	if len(attempts) == 0 {
		return identity.UnprintableName
	}
	a, _ := attempts[len(attempts)-1].(map[string]any)
	h, _ := a["driven_by"].(map[string]any)
	return programWords(h)
}

// lastAnswer is the last answer recorded on a gate step, or nil.
func lastAnswer(st *realmv1.RunState, step string) map[string]any {
	answers, _ := stepView(st, step)["answers"].([]any)
	if len(answers) == 0 {
		return nil
	}
	a, _ := answers[len(answers)-1].(map[string]any)
	return a
}

// answerWords writes an answer as `realm run inspect` does:
// `Answer: <choice> · settled by the gate's expiry (no answer in time)`, or
// `Answer: <choice> · answered by <who> · proof: <words>`.
func answerWords(a map[string]any) string {
	choice, _ := a["choice"].(string)
	choice = escapeControls(choice)
	by, _ := a["answered_by"].(map[string]any)
	if cause, _ := by["absent_cause"].(string); cause == "settled_by_expiry" {
		return fmt.Sprintf("Answer: %s · settled by the gate's expiry (no answer in time)", choice)
	}
	who := "answered by (not stated)"
	if name, _ := by["by"].(string); name != "" {
		who = "answered by " + escapeControls(name) + " (as stated, not verified)"
	}
	proof, _ := a["claim_proof"].(map[string]any)
	return fmt.Sprintf("Answer: %s · %s · proof: %s", choice, who, reply.ProofWords(proof))
}
