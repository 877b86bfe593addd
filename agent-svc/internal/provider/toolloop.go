package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/realm-go/realm/agent-svc/internal/redact"
	"github.com/realm-go/realm/pkg/errcode"
)

// Defaults of a tool-calling step (workflow-file §11.5).
const (
	DefaultMaxToolCalls = 20
	DefaultToolTimeout  = 30 * time.Second
)

// Sentences the model is shown in a tool-calling step (agent-driver §10.3).
const (
	budgetSentence   = "You have reached the maximum number of tool calls. Produce your final JSON answer now using only what you have already gathered. No further tool calls will be executed."
	budgetCallError  = "Error: tool call budget exhausted"
	correctionFormat = "Your response did not match the required JSON schema: %s. Try again."
	// noJSONSummary is the correction's summary for an answer with no
	// JSON object in it.
	noJSONSummary = "no JSON object was found in the response"
	// recordCut is the most characters of a tool result the evidence
	// keeps; the model is shown all of it.
	recordCut = 16000
)

// Toolbox is a step's tools: what the model is offered and how a call is
// carried out.
type Toolbox interface {
	// Specs are the tools the model is offered, by bare name.
	Specs() []ToolSpec
	// Server is the server a bare name belongs to; ok is false for a tool
	// the step was not given.
	Server(name string) (server string, ok bool)
	// Call runs a tool; the result is its content as one string.
	Call(ctx context.Context, name string, args map[string]any) (string, error)
}

// ToolSpec is one tool as the model is offered it. Strict asks for
// strict tool-call arguments (agent-driver §8.7).
type ToolSpec struct {
	Name, Description string
	Schema            map[string]any
	Strict            bool
}

// StrictDrop is a live refusal of strict tool arguments: the request was
// sent again without strict, which stayed off for the rest of the step.
type StrictDrop struct {
	// Reason is api_rejected_schema (a 400: strict stays off for the rest
	// of the step), or grammar_unavailable / service_unavailable (an
	// Anthropic 503: only that request went without strict).
	Reason     string
	APIMessage string
	// TurnsBefore counts the requests answered with strict on.
	TurnsBefore int
}

// Sticky says strict stayed off after the drop.
func (d *StrictDrop) Sticky() bool { return d.Reason == ReasonAPIRejectedSchema }

// strictState is a conversation's strict tool arguments: on while any
// spec asks for it, until the service refuses it once.
type strictState struct {
	off   bool
	turns int
}

// wants reports whether this request carries strict tools.
func (s *strictState) wants(specs []ToolSpec) bool {
	if s.off {
		return false
	}
	for _, t := range specs {
		if t.Strict {
			return true
		}
	}
	return false
}

// refused decides what a failed strict request earns, by the provider's
// ladder (downgrade: anthropicDowngrade or openaiDowngrade), and reports
// whether to send it again without strict. Only a 400 turns strict off
// for the rest of the step; an Anthropic 503 drops it for that request
// alone. The first drop is noted.
func (s *strictState) refused(err error, res *Result, downgrade func(error) *Downgrade) bool {
	dg := downgrade(err)
	if dg == nil {
		return false
	}
	if dg.Reason == ReasonAPIRejectedSchema {
		s.off = true
	}
	if res.StrictDrop == nil || (!res.StrictDrop.Sticky() && dg.Reason == ReasonAPIRejectedSchema) {
		res.StrictDrop = &StrictDrop{Reason: dg.Reason, APIMessage: firstN(dg.APIMessage, 300), TurnsBefore: s.turns}
	}
	return true
}

// ToolCall is one call a model made, as the evidence keeps it
// (agent-driver §10.4): Result is nil when the call failed, and Error
// says why.
type ToolCall struct {
	ServerID string
	Tool     string
	Args     any
	Result   any
	Duration time.Duration
	Error    string
}

// wireCall is one tool call a model asked for.
type wireCall struct {
	id, name string
	args     map[string]any
}

// wireTurn is a model's turn: the calls it asked for, the answer it
// submitted through the submit tool (Anthropic), and its text.
type wireTurn struct {
	calls  []wireCall
	submit *wireCall
	text   string
}

// answer is the turn's JSON answer: the submitted one, else one read out
// of its text (§7).
func (t wireTurn) answer() (map[string]any, bool) {
	if t.submit != nil && t.submit.args != nil {
		return t.submit.args, true
	}
	return ExtractJSON(t.text)
}

// ids are every call id of the turn, the submit call's included.
func (t wireTurn) ids() []string {
	var out []string
	for _, c := range t.calls {
		out = append(out, c.id)
	}
	if t.submit != nil {
		out = append(out, t.submit.id)
	}
	return out
}

// toolAnswer is the reply to one call id.
type toolAnswer struct {
	id, content string
	isError     bool
}

// toolWire is one conversation in a provider's wire format.
type toolWire interface {
	// send asks the model with the history. final offers no tool (on
	// Anthropic only the submit tool when the step has a schema).
	send(ctx context.Context, final bool) (wireTurn, error)
	// reply appends the model's turn t, the answers to its calls, and
	// note (when not "") as the user's text after them.
	reply(t wireTurn, answers []toolAnswer, note string)
}

// toolLoop is the loop of a tool-calling step (agent-driver §10.3): tool
// calls are carried out one by one, each within the tool timeout; an
// answer that does not fit the schema is corrected in the conversation at
// the cost of one call; when the budget is spent the model is asked for
// its final answer with no tool, which is returned even if it does not fit
// the schema.
// callWithTools is a provider's Call for a step with tools: the loop over
// the provider's wire format, with what it spent on the result.
func callWithTools(ctx context.Context, req Request, wire func(*Result) toolWire) (*Result, error) {
	start := time.Now()
	res := &Result{}
	out, err := toolLoop(ctx, req, wire(res), res)
	if err != nil {
		return nil, withUsage(err, res, start)
	}
	res.Output, res.Elapsed = out, time.Since(start)
	return res, nil
}

func toolLoop(ctx context.Context, req Request, w toolWire, res *Result) (map[string]any, error) {
	limit := req.MaxToolCalls
	if limit <= 0 {
		limit = DefaultMaxToolCalls
	}
	used, fanOut, corrections := 0, 0, 0
	for {
		t, err := w.send(ctx, false)
		if err != nil {
			return nil, err
		}
		if len(t.calls) == 0 || t.submit != nil {
			out, ok := t.answer()
			summary := noJSONSummary
			if ok {
				summary = ""
				if req.Check != nil {
					summary = req.Check(out)
				}
			}
			if summary == "" {
				return out, nil
			}
			corrections++
			used++
			if req.Corrected != nil {
				req.Corrected(corrections)
			}
			note := fmt.Sprintf(correctionFormat, summary)
			var answers []toolAnswer
			for _, id := range t.ids() {
				answers = append(answers, toolAnswer{id: id, content: note, isError: true})
			}
			if len(answers) > 0 {
				note = ""
			}
			if used >= limit {
				w.reply(t, answers, joinNote(note, budgetSentence))
				return finalAnswer(ctx, w)
			}
			w.reply(t, answers, note)
			continue
		}
		var answers []toolAnswer
		exhausted := false
		for _, c := range t.calls {
			fan := c.name == "start_run" || c.name == "start_run_batch"
			if exhausted || used >= limit || (fan && req.MaxFanOut > 0 && fanOut >= req.MaxFanOut) {
				// Not carried out: every id is still answered.
				exhausted = true
				answers = append(answers, toolAnswer{id: c.id, content: budgetCallError, isError: true})
				continue
			}
			content, isErr, err := runCall(ctx, req, c, res)
			if err != nil {
				return nil, err
			}
			used++
			if fan {
				fanOut++
			}
			answers = append(answers, toolAnswer{id: c.id, content: content, isError: isErr})
		}
		if exhausted || used >= limit || (req.MaxFanOut > 0 && fanOut >= req.MaxFanOut) {
			w.reply(t, answers, budgetSentence)
			return finalAnswer(ctx, w)
		}
		w.reply(t, answers, "")
	}
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n\n" + b
}

// finalAnswer is the final extraction: any JSON object the model gives,
// fitting the schema or not (the engine then judges it).
func finalAnswer(ctx context.Context, w toolWire) (map[string]any, error) {
	t, err := w.send(ctx, true)
	if err != nil {
		return nil, err
	}
	out, ok := t.answer()
	if !ok {
		return nil, &CallError{Class: ClassOther, Code: string(errcode.EngineStepFailed), Message: "max_tool_calls reached; final extraction failed: the model's final answer holds no JSON object"}
	}
	return out, nil
}

// runCall carries out one call within the tool timeout and records it.
// content is what the model is shown; err is only the drive's own end.
func runCall(ctx context.Context, req Request, c wireCall, res *Result) (content string, isErr bool, err error) {
	hide := req.Redact
	if hide == nil {
		hide = func(s string) string { return s }
	}
	timeout := req.ToolTimeout
	if timeout <= 0 {
		timeout = DefaultToolTimeout
	}
	rec := ToolCall{Tool: c.name, Args: redactValue(c.args, hide)}
	if c.args == nil {
		rec.Args = map[string]any{}
	}
	server, ok := req.Tools.Server(c.name)
	if !ok {
		// Not a crash, as in the original: the model is told.
		msg := hide(fmt.Sprintf("tool '%s' is not one of this step's tools", c.name))
		rec.Error = msg
		res.ToolCalls = append(res.ToolCalls, rec)
		return "Error: " + msg, true, nil
	}
	rec.ServerID = server
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	text, callErr := req.Tools.Call(cctx, c.name, c.args)
	timedOut := callErr != nil && errors.Is(cctx.Err(), context.DeadlineExceeded)
	cancel()
	rec.Duration = time.Since(start)
	if ctx.Err() != nil {
		return "", false, ctx.Err()
	}
	switch {
	case timedOut:
		rec.Error = fmt.Sprintf("tool call timed out after %dms", timeout.Milliseconds())
		content, isErr = "Error: "+rec.Error, true
	case callErr != nil:
		msg := hide(oneLine(callErr.Error()))
		rec.Error = msg
		if strings.TrimSpace(strings.ReplaceAll(msg, redact.Redacted, "")) == "" {
			msg = "(redacted)"
		}
		content, isErr = "Error: "+msg, true
	default:
		content = hide(text)
		rec.Result = recordedResult(content)
	}
	res.ToolCalls = append(res.ToolCalls, rec)
	return content, isErr, nil
}

// recordedResult is a result as the evidence keeps it: its JSON value
// when it is JSON, else the text, cut to recordCut characters.
func recordedResult(text string) any {
	if r := []rune(text); len(r) > recordCut {
		return string(r[:recordCut]) + "…"
	}
	var v any
	if json.Unmarshal([]byte(text), &v) == nil && v != nil {
		return v
	}
	return text
}

// redactValue redacts every string in a JSON value.
func redactValue(v any, redact func(string) string) any {
	switch x := v.(type) {
	case string:
		return redact(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = redactValue(e, redact)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(e, redact)
		}
		return out
	}
	return v
}

// specSchema is a tool's input schema, an object schema at least.
func specSchema(s ToolSpec) map[string]any {
	if s.Schema == nil {
		return map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return s.Schema
}

// argsOf reads a call's JSON arguments; unreadable ones are none.
func argsOf(raw string) map[string]any {
	var m map[string]any
	if json.Unmarshal([]byte(raw), &m) != nil {
		return nil
	}
	return m
}
