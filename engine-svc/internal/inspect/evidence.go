package inspect

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/reply"
	"github.com/realm-go/realm/pkg/workflow"
)

// gateResponse is the kind of an entry that records a gate's answer.
const gateResponse = "gate_response"

// costNotRecorded is the cost line of an agent step with no usage figures.
const costNotRecorded = "cost: not recorded — realm has no usage figures for this attempt (for example: an outside agent over MCP made it, a person typed its answer at a realm workflow run prompt, or realm 0.45.0 or earlier recorded it)"

// attempt is one execution entry and its index in Input.Entries.
type attempt struct {
	i int
	e *record.Entry
}

// stepEvidence is one step's entries: its attempts and its gate answers,
// which fold into the step's one entry (cli spec §3.2).
type stepEvidence struct {
	name     string
	attempts []attempt
	answers  []*record.Entry
}

// group gathers the entries by step in first-run order.
func (r *renderer) group() []*stepEvidence {
	var out []*stepEvidence
	by := map[string]*stepEvidence{}
	for i, e := range r.in.Entries {
		if e == nil {
			continue
		}
		s := by[e.StepID]
		if s == nil {
			s = &stepEvidence{name: e.StepID}
			by[e.StepID] = s
			out = append(out, s)
		}
		if e.Kind == gateResponse {
			s.answers = append(s.answers, e)
			continue
		}
		s.attempts = append(s.attempts, attempt{i: i, e: e})
	}
	return out
}

// evidence writes `Evidence (<N> steps):` and one numbered entry per step.
// N counts distinct steps, so retries count once and answers not at all.
func (r *renderer) evidence() string {
	steps := r.group()
	var b strings.Builder
	line(&b, "Evidence (%d steps):", len(steps))
	width := 0
	for _, s := range steps {
		width = max(width, utf8.RuneCountInString(clean(s.name)))
	}
	for n, s := range steps {
		r.stepEntry(&b, n+1, s, width)
	}
	return b.String()
}

// stepEntry writes one step's entry.
func (r *renderer) stepEntry(b *strings.Builder, n int, s *stepEvidence, width int) {
	name := clean(s.name)
	st := r.step(s.name)
	gated := len(s.answers) > 0 || (st != nil && st.Gated())
	if g := r.run.PendingGate; g != nil && g.StepName == s.name {
		gated = true
	}
	const ind = "     "
	switch len(s.attempts) {
	case 0:
		// A step with answers and no attempt (a record whose execution
		// entry is gone): its name, then its answers.
		line(b, "  %d. %s", n, name)
	case 1:
		e := s.attempts[0].e
		line(b, "  %d. %s  %s%s", n, pad(name, width), profile(st), status(e))
		r.takenBy(b, ind, e, gated)
	default:
		line(b, "  %d. %s", n, name)
		for k, a := range s.attempts {
			line(b, "%s(attempt %d/%d)  %s", ind, k+1, len(s.attempts), status(a.e))
			r.takenBy(b, ind+"  ", a.e, gated && k == len(s.attempts)-1)
		}
	}
	if len(s.attempts) > 0 {
		last := s.attempts[len(s.attempts)-1]
		r.attemptBody(b, ind, s, last, st)
	}
	for _, a := range s.answers {
		answer(b, ind, a)
	}
}

// pad right-pads a name to width characters.
func pad(s string, width int) string {
	if n := utf8.RuneCountInString(s); n < width {
		return s + strings.Repeat(" ", width-n)
	}
	return s
}

// profile is the `[profile: <name>] ` part. The entry's agent_profile is
// not in record.Entry yet, so the workflow's declared profile is shown.
func profile(st *workflow.Step) string {
	if st == nil || st.AgentProfile == "" {
		return ""
	}
	return "[profile: " + clean(st.AgentProfile) + "] "
}

// status is `<status>   <ms>ms   hash: <first 8 hex>`.
func status(e *record.Entry) string {
	h := e.EvidenceHash
	if len(h) > 8 {
		h = h[:8]
	}
	return fmt.Sprintf("%s   %dms   hash: %s", clean(e.Status), e.DurationMS, clean(h))
}

// takenBy writes who ran an attempt; an engine-made entry names no one and
// gets no line. The last attempt of a gate step names who opened the
// question instead.
func (r *renderer) takenBy(b *strings.Builder, ind string, e *record.Entry, question bool) {
	if e.DrivenBy == nil {
		return
	}
	if question {
		line(b, "%sQuestion opened through: %s", ind, program(e.DrivenBy))
		return
	}
	line(b, "%sTaken by: %s", ind, program(e.DrivenBy))
}

// attemptBody writes the lines of the last attempt, in the spec's order.
func (r *renderer) attemptBody(b *strings.Builder, ind string, s *stepEvidence, a attempt, st *workflow.Step) {
	e := a.e
	line(b, "%sInput:  %s", ind, cut(jsonText(e.InputSummary), cutAt))
	if e.ResolvedParams != nil {
		line(b, "%sResolved: %s", ind, jsonText(e.ResolvedParams))
	}
	out := e.OutputSummary
	if out == nil {
		out = r.in.Outputs[s.name]
	}
	line(b, "%sOutput: %s", ind, cut(jsonText(out), cutAt))
	// The spec has no line for these two record fields; they follow
	// Output in its voice: the failure message whole, like Warn, and where
	// a bare auto step's output came from (run-record spec §3).
	if e.OutputSource != "" {
		line(b, "%sOutput source: %s", ind, clean(e.OutputSource))
	}
	if e.Error != "" {
		line(b, "%sError: %s", ind, clean(e.Error))
	}
	if e.Warn != "" {
		line(b, "%sWarn: %s", ind, clean(e.Warn))
	}
	if len(e.Trace) > 0 {
		line(b, "%sTrace: %d", ind, len(e.Trace))
	}
	r.toolCalls(b, ind, a, st)
	if d := diagnostics(e.Diagnostics); d != "" {
		label := "Diagnostics"
		if n := len(s.attempts); n > 1 {
			label = fmt.Sprintf("Diagnostics (attempt %d/%d)", n, n)
		}
		line(b, "%s%s: %s", ind, label, d)
	}
	if c := costLine(e, st); c != "" {
		line(b, "%s%s", ind, c)
	}
}

// toolCalls writes an attempt's tool calls; args and results only with
// --verbose. A step that declares tools and called none says so.
func (r *renderer) toolCalls(b *strings.Builder, ind string, a attempt, st *workflow.Step) {
	calls := r.in.ToolCalls[a.i]
	if calls == nil && a.e != nil {
		for _, c := range a.e.ToolCalls {
			calls = append(calls, ToolCall{ServerID: c.ServerID, Tool: c.Tool, Args: c.Args, Result: c.Result, DurationMS: c.DurationMS, Error: c.Error})
		}
	}
	if len(calls) == 0 {
		if st != nil && st.Execution == workflow.KindAgent && len(st.Tools) > 0 {
			line(b, "%sTools declared, none called", ind)
		}
		return
	}
	line(b, "%sTool calls (%d):", ind, len(calls))
	for _, c := range calls {
		head := fmt.Sprintf("%s  [%s:%s]  %dms", ind, clean(c.ServerID), clean(c.Tool), c.DurationMS)
		if c.Error != "" {
			// A failed call's error is not in the spec's form; it follows
			// the duration as Warn follows an output.
			head += "  error: " + clean(c.Error)
		}
		line(b, "%s", head)
		if r.in.Verbose {
			line(b, "%s    args:   %s", ind, jsonText(c.Args))
			line(b, "%s    result: %s", ind, jsonText(c.Result))
		}
	}
}

// costLine is the cost line: only for an agent step whose attempt has no
// usage (or usage that cannot be read). A tool-calling step has no usage
// for another reason (get_run_state's tool_calling_step), which the
// sentence does not give, so it gets no line; without the workflow an
// agent step cannot be told from one that runs code, so none either.
func costLine(e *record.Entry, st *workflow.Step) string {
	if st == nil || st.Execution != workflow.KindAgent || len(st.Tools) > 0 {
		return ""
	}
	c, ok := e.Diagnostics["cache"]
	if !ok {
		return costNotRecorded
	}
	if m, ok := c.(map[string]any); ok {
		if _, ok := m["requests"].([]any); ok {
			return ""
		}
	}
	return "cost: unreadable — the recorded usage is not a list"
}

// answer writes a gate answer's Message and Answer lines.
func answer(b *strings.Builder, ind string, e *record.Entry) {
	if e.GateMessage != "" {
		line(b, "%sMessage:  %s", ind, jsonText(e.GateMessage))
	}
	choice := ""
	if m, ok := e.InputSummary.(map[string]any); ok {
		choice, _ = m["choice"].(string)
	}
	if e.RespondedBy == "timeout" || e.Resolution == "expired_default" {
		line(b, "%sAnswer: %s · settled by the gate's expiry (no answer in time)", ind, clean(choice))
		return
	}
	by := "answered by (not stated)"
	if e.RespondedBy != "" {
		by = "answered by " + clean(e.RespondedBy) + " (as stated, not verified)"
		if e.RespondedByVouchedBy != "" {
			by = "answered by " + clean(e.RespondedBy) + " (signed in to " + clean(e.RespondedByVouchedBy) + ")"
		}
	}
	line(b, "%sAnswer: %s · %s · proof: %s", ind, clean(choice), by, reply.ProofWords(e.ClaimProof))
}
