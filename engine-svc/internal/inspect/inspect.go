// Package inspect renders `realm run inspect <run-id> [--verbose]` (cli spec
// §3.2): the header lines, the middle blocks (drive failures, run health,
// trace summary) and one evidence entry per step, from a run's record.
//
// It is pure: it reads what it is given and returns text. Whatever needs the
// engine's judgement of what can run now (owed steps, ready agent steps,
// refusals before a claim) comes in as Input fields the caller fills from
// the same view get_run_state uses; left empty, those lines are left out.
//
// Where the spec gives a line, it is copied byte for byte. Where it is
// silent, the line keeps to its voice and a comment says so.
package inspect

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/health"
	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/workflow"
)

// Input is everything a report reads. It is read, never changed.
type Input struct {
	Run *record.Run
	// Outputs are the steps' stored outputs. An evidence entry carries its
	// own output; these stand in only where an entry has none.
	Outputs map[string]any
	// Entries is the run's evidence, oldest first.
	Entries []*record.Entry
	// Def is the run's registered workflow; nil when it cannot be read. It
	// tells agent steps (profile, cost line, tools) and gates apart, and
	// first steps for the input_schema way out.
	Def      *workflow.Definition
	Findings []health.Finding
	// Now is when ages ("opened 0m ago") are measured to.
	Now time.Time
	// Verbose adds each tool call's args and result.
	Verbose bool

	// The engine's view of an open run (get_run_state's engine_runnable,
	// agent_refused, pending_guards, waiting_on_answer), in file order.
	// Owed are the guards and auto steps the engine owes and can run.
	Owed []string
	// AgentsReady are agent steps ready to be driven (no question open).
	AgentsReady []string
	// WaitingOnAnswer are steps ready by their dependencies but held by
	// the open question.
	WaitingOnAnswer []string
	// CannotRun are owed or agent steps refused before their claim.
	CannotRun []Refusal

	// ToolCalls are each attempt's model tool calls, by index into
	// Entries; an attempt not here shows its entry's own tool_calls.
	ToolCalls map[int][]ToolCall
}

// Refusal is a step refused before its claim: `Cannot run '<step>'
// (<check>): <why>`. Check is trust, precondition, input_schema or
// capability.
type Refusal struct {
	Step  string
	Check string
	Why   string
}

// ToolCall is one model tool call of an attempt (run-record spec §3).
type ToolCall struct {
	ServerID   string
	Tool       string
	Args       any
	Result     any
	DurationMS int64
	Error      string
}

// Render writes the report. Every line ends in a newline; sections are
// separated by one blank line (the spec shows the blocks but not what
// lies between them; a blank line keeps them apart to the eye). A nil run
// renders nothing.
func Render(in Input) string {
	if in.Run == nil {
		return ""
	}
	r := &renderer{in: in, run: in.Run}
	sections := []string{r.header()}
	sections = append(sections, r.driveFailures(), health.InspectBlock(in.Findings), r.traceSummary(), r.evidence())
	var out []string
	for _, s := range sections {
		if s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, "\n")
}

// renderer holds one rendering's input.
type renderer struct {
	in  Input
	run *record.Run
}

// line writes one formatted line.
func line(b *strings.Builder, format string, args ...any) {
	fmt.Fprintf(b, format, args...)
	b.WriteByte('\n')
}

// step is the definition's step, or nil.
func (r *renderer) step(name string) *workflow.Step {
	if r.in.Def == nil {
		return nil
	}
	return r.in.Def.Steps[name]
}

// header writes the lines above the middle blocks, in the spec's order.
func (r *renderer) header() string {
	run := r.run
	var b strings.Builder
	phase := run.Phase()
	line(&b, "Run: %s", clean(run.ID))
	line(&b, "Workflow: %s v%s", clean(run.WorkflowID), version(run.WorkflowVersion))
	r.definitions(&b)
	if phase == record.PhaseCompleted {
		line(&b, "Phase: completed  ✓")
	} else {
		line(&b, "Phase: %s", phase)
	}
	if run.RerunOf != "" {
		line(&b, "Rerun of: %s", clean(run.RerunOf))
	}
	ended := run.Terminal()
	if s := run.SealedBy; ended && s != nil {
		text := clean(string(s.Arm))
		if s.Step != "" && s.Arm.NamesStep() {
			text += " (" + clean(s.Step) + ")"
		}
		if s.Classified {
			text += " (recovered by classifier)"
		}
		line(&b, "Sealed by: %s", text)
	}
	// The Ruled: line needs sealed_by.adjudicated, which record.Seal does
	// not carry yet (no command writes a ruling; run-record spec §5.3).
	if ended {
		if c := r.cause(); c != "" {
			line(&b, "Cause: %s", c)
		}
		r.abortContext(&b)
		r.resumable(&b)
		r.cleanupPending(&b)
	}
	line(&b, "Completed: %s", list(run.CompletedSteps))
	line(&b, "In Progress: %s", list(run.InProgressSteps))
	for _, s := range run.InProgressSteps {
		line(&b, "  %s: %s", clean(s), r.claimText(s))
	}
	line(&b, "Failed: %s", list(run.FailedSteps))
	line(&b, "Skipped: %s", list(run.SkippedSteps))
	for _, s := range run.SkippedSteps {
		line(&b, "  %s: %s", clean(s), skipText(run.SkipDetails[s]))
	}
	if len(run.DefaultedSteps) > 0 {
		line(&b, "Defaulted (settled by default): %s", list(run.DefaultedSteps))
	}
	line(&b, "Created: %s", isoTime(run.CreatedAt))
	line(&b, "Updated: %s", isoTime(run.UpdatedAt))
	if !ended {
		r.gate(&b)
		r.next(&b)
	}
	return b.String()
}

// definitions writes where the run's definition comes from when it is not
// the registered copy, and one line per change of the definition that
// decided its steps, read from the evidence entries' definition_version
// and definition_hash (beyond the original, which keeps no such record:
// docs/workflows.md, "Running a file without registering"). Entries
// without a hash (older records, or written while the definition could
// not be read) are passed over.
func (r *renderer) definitions(b *strings.Builder) {
	if r.run.DefinitionSource == record.DefinitionCarried {
		line(b, "Definition: carried by the run (started from a file without --register); registering '%s' does not change it", clean(r.run.WorkflowID))
	}
	var prev *record.Entry
	for _, e := range r.in.Entries {
		if e.DefinitionHash == "" {
			continue
		}
		if prev != nil && e.DefinitionHash != prev.DefinitionHash {
			line(b, "Definition: %s → %s at step '%s'", definitionLabel(prev, e), definitionLabel(e, prev), clean(e.StepID))
		}
		prev = e
	}
}

// definitionLabel names e's definition as v<version>, with the start of
// its hash when other (the definition it is compared with) has the same
// version label: a changed file registered under an unchanged version.
func definitionLabel(e, other *record.Entry) string {
	var v float64
	if e.DefinitionVersion != nil {
		v = *e.DefinitionVersion
	}
	label := "v" + version(v)
	if other.DefinitionVersion != nil && *other.DefinitionVersion == v {
		label += " (" + clean(shortHash(e.DefinitionHash)) + ")"
	}
	return label
}

// shortHash is the first 12 characters of a hash.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// version writes a workflow version as JavaScript would: 1, not 1.0.
func version(v float64) string { return fmt.Sprint(v) }

// cause is the Cause line's text. A guard abort stores no sentence (the
// message lives in aborted_at); inspect says which guard ended the run
// (run-record spec §5.2).
func (r *renderer) cause() string {
	run := r.run
	if run.TerminalReason != "" {
		return clean(run.TerminalReason)
	}
	if run.SealedBy != nil && run.SealedBy.Arm == "guard_abort" {
		g := run.SealedBy.Step
		if g == "" && run.AbortedAt != nil {
			g = run.AbortedAt.StepID
		}
		return fmt.Sprintf("Guard '%s' aborted the run.", clean(g))
	}
	return ""
}

// abortContext writes what a guard abort was decided on: get_run_state's
// abort_context. The spec gives inspect no line for it; this one is named
// after the record's aborted_at and writes each condition the way the
// Diagnostics line writes a precondition (`<expr> → <true|false> (<value>)`).
// A handler abort needs none: its Cause carries the message.
func (r *renderer) abortContext(b *strings.Builder) {
	a := r.run.AbortedAt
	if a == nil || r.run.SealedBy == nil || r.run.SealedBy.Arm != "guard_abort" {
		return
	}
	text := "'" + clean(a.StepID) + "'"
	if a.AbortMessage != "" {
		text += " — " + clean(a.AbortMessage)
	}
	line(b, "Aborted at: %s", text)
	for _, c := range a.Conditions {
		line(b, "  %s → %t (%s)", clean(c.Condition), c.Passed, jsonText(c.ResolvedValue))
	}
}

// finalizer reports whether a step is a cleanup step: by the workflow, or
// failing that by the ledger the seal wrote.
func (r *renderer) finalizer(name string) bool {
	if s := r.step(name); s != nil {
		return s.Execution == workflow.KindFinalizer
	}
	_, ok := r.run.FinalizerLedger[name]
	return ok
}

// resumable writes the Resumable line: an ended run with a failed step
// resume accepts (never a cleanup step; never an aborted or completed run,
// which are final — run-record spec §5.4).
func (r *renderer) resumable(b *strings.Builder) {
	phase := r.run.Phase()
	if phase != record.PhaseFailed && phase != record.PhaseAbandoned {
		return
	}
	var steps []string
	for _, s := range r.run.FailedSteps {
		if !r.finalizer(s) {
			steps = append(steps, s)
		}
	}
	if len(steps) == 0 {
		return
	}
	from := clean(steps[0])
	if len(steps) > 1 {
		// The spec shows one step; with several, the detach map's form
		// (`--from <one of: …>`, cli spec §2.6) names them all.
		from = "<one of: " + list(steps) + ">"
	}
	text := fmt.Sprintf("Resumable: %s — realm run resume %s --from %s", quoted(steps), clean(r.run.ID), from)
	if phase == record.PhaseAbandoned {
		text += " — resuming erases the operator's ending and its reason, and records no one and no reason for the undo"
	}
	line(b, "%s", text)
}

// cleanupPending writes the Cleanup step(s) left pending line, in the order
// the engine runs them (rank).
func (r *renderer) cleanupPending(b *strings.Builder) {
	var pending []string
	for n, f := range r.run.FinalizerLedger {
		if f != nil && f.Status == "pending" {
			pending = append(pending, n)
		}
	}
	if len(pending) == 0 {
		return
	}
	slices.SortFunc(pending, func(a, c string) int {
		if d := r.run.FinalizerLedger[a].Rank - r.run.FinalizerLedger[c].Rank; d != 0 {
			return d
		}
		return strings.Compare(a, c)
	})
	if len(pending) == 1 {
		line(b, "Cleanup step left pending: %s — to run it with code that has its handler: realm run drain %s --force", quoted(pending), clean(r.run.ID))
		return
	}
	// The plural's pronouns are not in the spec; they follow its singular.
	line(b, "Cleanup steps left pending: %s — to run them with code that has their handlers: realm run drain %s --force", quoted(pending), clean(r.run.ID))
}

// claimText is the rest of an In Progress step's line (cli spec §3.2).
func (r *renderer) claimText(step string) string {
	c, ok := r.run.Claims[step]
	if !ok || c == nil {
		return "no claim is recorded for this step"
	}
	if c.Holder == nil || c.Holder.By == "" {
		if c.Since == "" {
			return "claimed before program names were recorded"
		}
		// The spec gives the sentence alone; the claim's age is kept
		// beside it as the named form keeps it.
		return fmt.Sprintf("no program name was recorded on this claim, %s ago", ago(record.ParseTime(c.Since), r.in.Now))
	}
	verb := "taken by"
	if g := r.run.PendingGate; g != nil && g.StepName == step {
		verb = "question opened through"
	}
	text := verb + " " + program(c.Holder)
	if since := record.ParseTime(c.Since); !since.IsZero() {
		text += ", " + ago(since, r.in.Now) + " ago"
	}
	return text
}

// skipText is a Skipped step's `<kind>[: <detail>]` (cli spec §3.2,
// workflow-file spec §6.4, run-record spec §4.5).
func skipText(d *record.SkipDetail) string {
	if d == nil {
		// Old records skipped without saying why; the spec has no words for
		// it, so these say just that.
		return "(no reason recorded)"
	}
	kind := clean(d.Kind)
	switch d.Kind {
	case "when_false":
		text := kind + ": " + clean(d.Expression)
		if l, ok := failingLeaf(d.Leaves); ok {
			if l.LHSPresent {
				text += " [lhs → " + jsonText(l.ResolvedValue) + "]"
			} else {
				// The spec shows only a present value; an absent one says
				// so in the record's own word.
				text += " [lhs absent]"
			}
		}
		return text
	case "trigger_rule_unsatisfiable":
		parts := []string{clean(d.Rule)}
		for _, dep := range d.BlockingDeps {
			// `dep fetch failed`; several deps repeat the form.
			parts = append(parts, "dep "+clean(dep.Step)+" "+clean(dep.State))
		}
		return kind + ": " + strings.Join(parts, ", ")
	case "gate_expired", "gate_cancelled_by_abort":
		if d.GateID != "" {
			return kind + ": gate " + clean(d.GateID)
		}
	}
	return kind
}

// failingLeaf is the leaf that made a when false: the first that did not
// pass, else the first.
func failingLeaf(leaves []record.Leaf) (record.Leaf, bool) {
	for _, l := range leaves {
		if !l.Passed {
			return l, true
		}
	}
	if len(leaves) > 0 {
		return leaves[0], true
	}
	return record.Leaf{}, false
}

// gate writes the open question (mcp-and-gates spec §9.3). The expiry line
// is not in the spec's inspect block; `run list` marks an expired gate
// `EXPIRED <age> ago`, and this line carries the same fact with the
// declared disposition.
func (r *renderer) gate(b *strings.Builder) {
	g := r.run.PendingGate
	if g == nil {
		return
	}
	line(b, "Gate: %s (gate %s, opened %s ago)", clean(g.StepName), clean(g.GateID), ago(record.ParseTime(g.OpenedAt), r.in.Now))
	line(b, "  Choices: %s", list(g.Choices))
	exp := record.ParseTime(g.ExpiresAt)
	if exp.IsZero() {
		return
	}
	var when string
	if r.in.Now.Before(exp) {
		when = fmt.Sprintf("Expires: %s (in %s)", record.FormatTime(exp), health.Age(exp.Sub(r.in.Now)))
	} else {
		when = fmt.Sprintf("EXPIRED %s ago (%s)", ago(exp, r.in.Now), record.FormatTime(exp))
	}
	switch g.OnExpiry {
	case "settle_default":
		when += fmt.Sprintf(", on_expiry: settle_default ('%s')", clean(g.DefaultChoice))
	case "abort":
		when += ", on_expiry: abort"
	default:
		when += ", no on_expiry: reported as expired, and an answer is still taken"
	}
	line(b, "  %s", when)
}

// expiredQuestion reports whether the open question's time is up and it
// declares something for the engine to carry out.
func (r *renderer) expiredQuestion() bool {
	g := r.run.PendingGate
	if g == nil || (g.OnExpiry != "settle_default" && g.OnExpiry != "abort") {
		return false
	}
	exp := record.ParseTime(g.ExpiresAt)
	return !exp.IsZero() && !r.in.Now.Before(exp)
}

// next writes what an open run waits on: the question, owed work, ready
// agent steps, refusals, and the way out when nothing else can run.
func (r *renderer) next(b *strings.Builder) {
	id := clean(r.run.ID)
	if g := r.run.PendingGate; g != nil && len(r.in.WaitingOnAnswer) > 0 {
		// `'<a>' waits`; several take the plural verb.
		line(b, "Question open on '%s': %s %s for its answer.", clean(g.StepName), quoted(r.in.WaitingOnAnswer), plural(len(r.in.WaitingOnAnswer), "waits", "wait"))
	}
	switch {
	case r.expiredQuestion():
		g := r.run.PendingGate
		line(b, "Owed to the engine: the expired question on '%s' (its declared %s) — realm run advance %s carries it out, then runs what that leaves owed until a step opens a question, fails or ends the run", clean(g.StepName), g.OnExpiry, id)
	case len(r.in.Owed) == 1:
		line(b, "Owed to the engine: %s — realm run advance %s", quoted(r.in.Owed), id)
	case len(r.in.Owed) > 1:
		line(b, "Owed to the engine: %s — realm run advance %s runs them until a step opens a question, fails or ends the run", quoted(r.in.Owed), id)
	}
	// The provider and model are the caller's to choose; inspect knows
	// neither, so it prints the placeholders (as the detach map does).
	switch n := len(r.in.AgentsReady); {
	case n == 1:
		line(b, "An agent step is ready: %s — drive it with realm agent --run-id %s --provider <provider> --model <model>", quoted(r.in.AgentsReady), id)
	case n > 1:
		line(b, "Agent steps are ready: %s — drive them with realm agent --run-id %s --provider <provider> --model <model>", quoted(r.in.AgentsReady), id)
	}
	refused := map[string]bool{}
	for _, c := range r.in.CannotRun {
		refused[c.Step] = true
		line(b, "Cannot run '%s' (%s): %s", clean(c.Step), clean(c.Check), clean(strings.TrimSuffix(c.Why, ".")))
	}
	for _, s := range r.blockedByRecord(refused) {
		kind, name := requirement(r.run.CapabilityBlocks[s])
		line(b, "Could not run '%s' (capability): %s '%s' was not registered in the runner that last attempted it — from a program that has it: realm run advance %s", clean(s), kind, clean(name), id)
	}
	r.wayOut(b)
}

// blockedByRecord are the pending steps the record marks as blocked on a
// capability, that the caller's refusals do not already name: judged from
// the record (`Could not`), in file order when the workflow is known.
func (r *renderer) blockedByRecord(refused map[string]bool) []string {
	var out []string
	for s := range r.run.CapabilityBlocks {
		if !refused[s] && r.run.StateOf(s) == record.StatePending {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	if r.in.Def != nil {
		pos := map[string]int{}
		for i, n := range r.in.Def.StepOrder {
			pos[n] = i + 1
		}
		slices.SortStableFunc(out, func(a, c string) int { return rank(pos, a) - rank(pos, c) })
	}
	return out
}

func rank(pos map[string]int, n string) int {
	if p, ok := pos[n]; ok {
		return p
	}
	return len(pos) + 1
}

// requirement reads a capability block's `requirement {kind, name}`.
func requirement(b *record.CapabilityBlock) (kind, name string) {
	kind = record.RequireHandler
	if b == nil {
		return kind, ""
	}
	if b.Requirement.Kind != "" {
		kind = b.Requirement.Kind
	}
	return kind, b.Requirement.Name
}

// wayOut writes `Run <id> stays open (phase 'running'): …` when nothing
// else can run: refusals other than a capability's (which has its own way
// out), and nothing owed, ready or in flight (cli spec §1.8, inspect's
// ` — or end it:` punctuation without the final full stop).
func (r *renderer) wayOut(b *strings.Builder) {
	run := r.run
	if run.PendingGate != nil || len(r.in.Owed) > 0 || len(r.in.AgentsReady) > 0 || len(run.InProgressSteps) > 0 {
		return
	}
	var fixable, firstInput []string
	for _, c := range r.in.CannotRun {
		if c.Check == "capability" {
			continue
		}
		fixable = append(fixable, c.Step)
		// A step that builds its input with an input_map is checked on
		// what the map builds, which new params may not change: it takes
		// the general way.
		if s := r.step(c.Step); c.Check == "input_schema" && s != nil && len(s.DependsOn) == 0 && !s.BuildsInput() {
			firstInput = append(firstInput, c.Step)
		}
	}
	if len(fixable) == 0 {
		return
	}
	id := clean(run.ID)
	if len(firstInput) == len(fixable) {
		line(b, "Run %s stays open (phase 'running'): for %s, start a run with params that fit, or correct its input_schema and register the workflow again; then, after a fix, realm run advance %s — or end it: realm run abandon %s", id, quoted(firstInput), id, id)
		return
	}
	line(b, "Run %s stays open (phase 'running'): correct the workflow, register it again, then realm run advance %s — or end it: realm run abandon %s", id, id, id)
}
