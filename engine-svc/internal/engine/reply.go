package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/engine-svc/internal/record"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/jsonenc"
	"github.com/realm-go/realm/pkg/template"
	"github.com/realm-go/realm/pkg/workflow"
)

// view is what a run offers next, worked out from its record.
type view struct {
	agents []*workflow.Step // agent steps ready for the caller
	owed   []*workflow.Step // auto steps and guards the engine owes
	// refused are the ready steps refused before their claim, in the
	// workflow's order.
	refused []*cannotRun
}

// blockedOnCapability reports whether a ready step waits for a runner.
func (v view) blockedOnCapability() bool {
	for _, c := range v.refused {
		if c.check == checkCapability {
			return true
		}
	}
	return false
}

// view computes what comes next. It reads only; it never changes the run.
func (t *txn) view() view {
	var v view
	if t.def == nil || t.run.Terminal() || t.run.PendingGate != nil {
		return v
	}
	for _, s := range t.def.ordered {
		if s.Execution == workflow.KindFinalizer || t.run.StateOf(s.Name) != record.StatePending {
			continue
		}
		if r, _ := t.evaluate(s); r != ready {
			continue
		}
		switch s.Execution {
		case workflow.KindAgent:
			if c := t.refusedBeforeClaim(s); c != nil {
				v.refused = append(v.refused, c)
				continue
			}
			v.agents = append(v.agents, s)
		case workflow.KindGuard:
			v.owed = append(v.owed, s)
		case workflow.KindAuto:
			if c := t.runnableHere(s); c != nil {
				v.refused = append(v.refused, c)
				continue
			}
			v.owed = append(v.owed, s)
		}
	}
	return v
}

// names are the steps' names, quoted and separated by commas.
func names(steps []*workflow.Step) string {
	var b strings.Builder
	writeNames(&b, steps)
	return b.String()
}

func writeNames(b *strings.Builder, steps []*workflow.Step) {
	for i, s := range steps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('\'')
		b.WriteString(s.Name)
		b.WriteByte('\'')
	}
}

// whatNext is the part of a hint that says what comes next.
func (t *txn) whatNext(v view) string {
	var b strings.Builder
	t.writeWhatNext(&b, v)
	return b.String()
}

// writeWhatNext writes whatNext's sentences, separated by spaces, into b
// (after what b holds: the hot replies build their hint in one buffer).
func (t *txn) writeWhatNext(b *strings.Builder, v view) {
	n := 0
	part := func() {
		if n > 0 {
			b.WriteByte(' ')
		}
		n++
	}
	if len(v.agents) > 0 {
		part()
		b.WriteString("Ready for the agent: ")
		writeNames(b, v.agents)
		b.WriteByte('.')
	}
	if len(v.owed) > 0 {
		part()
		b.WriteString("Owed to the engine: ")
		writeNames(b, v.owed)
		b.WriteString(" — call advance_run.")
	}
	for _, c := range v.refused {
		part()
		b.WriteString(c.sentence())
	}
	if len(v.agents) == 0 && len(v.owed) == 0 {
		if way := wayOut(v.refused); way != "" {
			part()
			b.WriteString(way)
		}
	}
	if n == 0 && !t.run.Terminal() {
		if busy := t.inFlight(); len(busy) > 0 {
			fmt.Fprintf(b, "No step is ready: %s is in flight elsewhere — wait for it, then call get_run_state.", quoteNames(busy))
		} else {
			b.WriteString("No step is ready.")
		}
	}
}

// wayOut is the sentence that ends a reply when every owed step is refused
// before its claim (seed "advance_run"): the run's way when each is refused
// for its trust or a precondition; each step's own way first, then the
// run's, when one is refused for its input. Capability blocks have their
// own way (load the missing extension) and add none.
func wayOut(refused []*cannotRun) string {
	const run = "Correct the workflow and register it again, then call advance_run; or end the run with abandon_run."
	var ways []string
	input := false
	for _, r := range refused {
		if way := r.way(); way != "" {
			ways = append(ways, way)
			input = input || r.check == checkInputSchema
		}
	}
	switch {
	case len(ways) == 0:
		return ""
	case !input:
		return run
	}
	return "For " + strings.Join(ways, "; for ") + "; then, after a fix, call advance_run; or end the run with abandon_run."
}

// inFlight are steps in progress that this call does not hold: claimed by
// another process, not an open question.
func (t *txn) inFlight() []string {
	var out []string
	for _, s := range t.run.InProgressSteps {
		if t.run.PendingGate != nil && s == t.run.PendingGate.StepName {
			continue
		}
		held := false
		for _, c := range t.dispatch {
			if c.step == s {
				held = true
			}
		}
		if !held {
			out = append(out, s)
		}
	}
	return out
}

func quoteNames(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "'" + x + "'"
	}
	return strings.Join(q, ", ")
}

// nextActions lists the calls that can be made next; advance_run is last.
func (t *txn) nextActions(v view) []*realmv1.NextAction {
	if t.run.PendingGate != nil && !t.run.Terminal() {
		if g, _, due := t.expiredGate(); due {
			return []*realmv1.NextAction{t.expiredAction(g)}
		}
		return []*realmv1.NextAction{t.answerAction("")}
	}
	out := make([]*realmv1.NextAction, 0, len(v.agents)+1)
	for _, s := range v.agents {
		out = append(out, t.stepAction(s))
	}
	if len(v.owed) > 0 {
		verb, pronoun := "the step the engine owes", "it"
		if len(v.owed) > 1 {
			verb, pronoun = "the steps the engine owes", "them"
		}
		owed := make([]string, len(v.owed))
		for i, s := range v.owed {
			owed[i] = s.Name
		}
		out = append(out, &realmv1.NextAction{
			Instruction:   t.advanceInstruction(),
			HumanReadable: fmt.Sprintf("Call advance_run to run %s: %s. It runs %s with this server's extensions and environment.", verb, names(v.owed), pronoun),
			Orientation:   "Run is active. Engine work is owed: " + names(v.owed) + ".",
			OwedSteps:     owed,
		})
	}
	return out
}

// stepAction is the execute_step entry for an agent step.
func (t *txn) stepAction(s *workflow.Step) *realmv1.NextAction {
	w := t.def.words[s.Name]
	if w == nil { // a step the compiled definition does not name
		w = wordsOf(s)
	}
	// The action and its instruction are one allocation.
	both := new(struct {
		a realmv1.NextAction
		i realmv1.Instruction
	})
	a := &both.a
	t.executeInstruction(&both.i, s, w.command)
	a.Instruction = &both.i
	a.HumanReadable, a.Orientation = w.humanReadable, w.orientation
	a.InputSchemaJson = t.def.schemaJSON[s.Name]
	if a.InputSchemaJson == nil { // a step the compiled definition does not name
		if sch := firstSchema(s); sch != nil {
			a.InputSchemaJson = mustJSON(sch)
		}
	}
	if s.Prompt != "" {
		p := t.renderPrompt(s.Prompt)
		a.Prompt = &p
	}
	return a
}

// executeInstruction is execute_step's params and call_with for a step,
// written around the definition's encoded parts in one allocation (the
// reply's hottest part), set in in. Keys are in encoding/json's sorted
// order.
func (t *txn) executeInstruction(in *realmv1.Instruction, s *workflow.Step, command []byte) {
	answer, ok := t.def.answerJSON[s.Name]
	if !ok {
		answer = mustJSON(answerOf(s))
	}
	if command == nil {
		command = jsonenc.AppendString(nil, s.Name)
	}
	const open, mid, end, withParams = `{"command":`, `,"run_id":`, `}`, `,"params":`
	// The size when the run id needs no escapes (it is a UUID); more only
	// means append grows b.
	one := len(open) + len(command) + len(mid) + len(t.run.ID) + 2 + len(end)
	b := make([]byte, 0, 2*one+len(withParams)+len(answer))
	b = append(b, open...)
	b = append(b, command...)
	b = append(b, mid...)
	b = jsonenc.AppendString(b, t.run.ID)
	b = append(b, end...)
	params := b[:len(b):len(b)]
	b = append(b, open...)
	b = append(b, command...)
	b = append(b, withParams...)
	b = append(b, answer...)
	b = append(b, mid...)
	b = jsonenc.AppendString(b, t.run.ID)
	b = append(b, end...)
	in.Tool, in.ParamsJson, in.CallWithJson = "execute_step", params, b[len(params):]
}

// advanceInstruction is advance_run's params and call_with: the run alone.
func (t *txn) advanceInstruction() *realmv1.Instruction {
	b := mustJSON(map[string]any{"run_id": t.run.ID})
	return &realmv1.Instruction{Tool: "advance_run", ParamsJson: b, CallWithJson: b}
}

// answerOf is call_with's answer for a step: placeholders from its input
// schema, else its output schema, else empty.
func answerOf(s *workflow.Step) map[string]any {
	if m, ok := s.InputSchema.(map[string]any); ok {
		return placeholders(m)
	} else if m, ok := s.OutputSchema.(map[string]any); ok {
		return placeholders(m)
	}
	return map[string]any{}
}

func firstSchema(s *workflow.Step) any {
	if s.InputSchema != nil {
		return s.InputSchema
	}
	return s.OutputSchema
}

// renderPrompt fills a prompt's {{ }} expressions, leaving what it cannot
// resolve as written (spec §8.2).
func (t *txn) renderPrompt(text string) string {
	out, _, err := template.Render(text, t.templateScope(), template.ModePrompt)
	if err != nil {
		return text
	}
	return out
}

// placeholders builds call_with's answer from a schema: enums become
// "<a|b|c>", numbers 0, other types their zero value (mcp spec §3.3).
func placeholders(schema map[string]any) map[string]any {
	props, _ := schema["properties"].(map[string]any)
	out := make(map[string]any, len(props))
	for name, p := range props {
		out[name] = placeholder(p)
	}
	return out
}

func placeholder(p any) any {
	m, ok := p.(map[string]any)
	if !ok {
		return nil
	}
	if enum, ok := m["enum"].([]any); ok && len(enum) > 0 {
		parts := make([]string, len(enum))
		for i, e := range enum {
			parts[i] = fmt.Sprint(e)
		}
		return "<" + strings.Join(parts, "|") + ">"
	}
	switch m["type"] {
	case "number", "integer":
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		return placeholders(m)
	case "null":
		return nil
	}
	return ""
}

// envelope fills the fields every step-shaped reply has.
func (t *txn) envelope(command string) *realmv1.Reply {
	// The reply and its run_version are one allocation.
	w := new(struct {
		r realmv1.Reply
		v int64
	})
	w.v = t.run.Version
	r := &w.r
	*r = realmv1.Reply{
		Command:             command,
		RunId:               t.run.ID,
		RunVersion:          &w.v,
		Status:              realmv1.ReplyStatus_REPLY_STATUS_OK,
		RunPhase:            phaseEnum(t.run.Phase()),
		Warnings:            t.warnings,
		Guards:              t.guardsReply(),
		EndedBy:             t.endedByReply(),
		HasChainedAutoSteps: t.hasChained,
	}
	if t.expired != nil {
		r.ExpiryEnactedVia = &t.expired.via
		if t.expiryLine != "" {
			r.ExpiryWarning = ptr(t.expiryLine)
		}
	}
	if t.hasChained {
		r.ChainedAutoSteps = t.chainedReply(t.run)
	}
	if t.hasAdopted {
		r.AdoptedOwn, r.AdoptedAnonymous, r.PreservedForeign = &t.adopted[0], &t.adopted[1], &t.adopted[2]
	}
	return r
}

// terminalTail is the way back in for a run that has ended (seed "A run
// that has ended").
func (t *txn) terminalTail() string {
	return strings.TrimSpace(t.cleanupTail() + " " + t.resumeTail())
}

// resumeTail is the way back in for the run's kind of ending.
func (t *txn) resumeTail() string {
	r := t.run
	switch r.Phase() {
	case record.PhaseAbandoned:
		return fmt.Sprintf("An operator ended this run, with the reason %q; to run the work again, start a new run.", r.TerminalReason)
	case record.PhaseFailed:
		var steps []string
		for _, s := range r.FailedSteps {
			if st := t.stepOf(s); st != nil && st.Execution != workflow.KindFinalizer {
				steps = append(steps, s)
			}
		}
		if len(steps) > 0 {
			return fmt.Sprintf("To make the failed step runnable again: realm run resume %s --from %s", r.ID, steps[0])
		}
	}
	return ""
}

func phaseEnum(p string) realmv1.RunPhase {
	switch p {
	case record.PhaseRunning:
		return realmv1.RunPhase_RUN_PHASE_RUNNING
	case record.PhaseGateWaiting:
		return realmv1.RunPhase_RUN_PHASE_GATE_WAITING
	case record.PhaseCompleted:
		return realmv1.RunPhase_RUN_PHASE_COMPLETED
	case record.PhaseFailed:
		return realmv1.RunPhase_RUN_PHASE_FAILED
	case record.PhaseAborted:
		return realmv1.RunPhase_RUN_PHASE_ABORTED
	case record.PhaseAbandoned:
		return realmv1.RunPhase_RUN_PHASE_ABANDONED
	}
	return realmv1.RunPhase_RUN_PHASE_UNSPECIFIED
}

// jsonText writes a value as JSON for a sentence.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// mustJSON encodes a value the engine built (package jsonenc, as replies
// carry it); one that cannot be encoded is {}.
func mustJSON(v any) []byte {
	b, err := jsonenc.Marshal(v)
	if err != nil {
		return []byte("{}")
	}
	return b
}

// normalizeJSON turns Go values structpb does not take (ints, []string,
// typed maps) into their JSON forms.
func normalizeJSON(v any) any {
	switch x := v.(type) {
	case nil, bool, string, float64:
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeJSON(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeJSON(e)
		}
		return out
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func toValue(v any) *structpb.Value {
	pv, err := structpb.NewValue(normalizeJSON(v))
	if err != nil {
		return structpb.NewNullValue()
	}
	return pv
}

func toStruct(v any) *structpb.Struct {
	m, ok := normalizeJSON(v).(map[string]any)
	if !ok {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
