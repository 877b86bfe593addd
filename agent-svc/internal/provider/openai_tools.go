package provider

import (
	"context"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// openaiWire is a tool-calling conversation in the Chat Completions
// format: the step's tools are offered as functions; each call id is
// answered by its own tool message.
type openaiWire struct {
	p        *openaiProvider
	req      Request
	res      *Result
	messages []openai.ChatCompletionMessageParamUnion
	last     *openai.ChatCompletionMessage
	strict   strictState
}

func (p *openaiProvider) toolWire(req Request, res *Result) *openaiWire {
	system := SystemPrompt(req.Profile, req.Schema, false)
	w := &openaiWire{p: p, req: req, res: res}
	if p.reasoning {
		w.messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(system + "\n\n" + req.Prompt)}
	} else {
		w.messages = []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(req.Prompt)}
	}
	return w
}

func (w *openaiWire) send(ctx context.Context, final bool) (wireTurn, error) {
	specs := w.req.Tools.Specs()
	strict := !final && w.strict.wants(specs)
	c, err := w.p.sendParams(ctx, w.req, w.params(specs, final, strict), w.res)
	if err != nil && strict && w.strict.refused(err, w.res, openaiDowngrade) {
		strict = false
		c, err = w.p.sendParams(ctx, w.req, w.params(specs, final, false), w.res)
	}
	if err != nil {
		return wireTurn{}, err
	}
	if strict {
		w.strict.turns++
	}
	if len(c.Choices) == 0 {
		return wireTurn{}, &CallError{Class: ClassOther, Message: "OpenAI returned no choices."}
	}
	m := c.Choices[0].Message
	if strings.TrimSpace(m.Refusal) != "" {
		return wireTurn{}, &CallError{Class: ClassOther, Message: "OpenAI refused the request: " + firstN(m.Refusal, 200)}
	}
	w.last = &m
	t := wireTurn{text: m.Content}
	for _, tc := range m.ToolCalls {
		t.calls = append(t.calls, wireCall{id: tc.ID, name: tc.Function.Name, args: argsOf(tc.Function.Arguments)})
	}
	return t, nil
}

// params are one request: the history and, unless final, the tools.
func (w *openaiWire) params(specs []ToolSpec, final, strict bool) openai.ChatCompletionNewParams {
	params := openai.ChatCompletionNewParams{Model: w.req.Model, Messages: w.messages}
	if !final {
		for _, s := range specs {
			fn := shared.FunctionDefinitionParam{Name: s.Name, Parameters: shared.FunctionParameters(specSchema(s))}
			if s.Description != "" {
				fn.Description = openai.String(s.Description)
			}
			if strict && s.Strict {
				fn.Strict = openai.Bool(true)
			}
			params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
		}
	}
	return params
}

func (w *openaiWire) reply(t wireTurn, answers []toolAnswer, note string) {
	if w.last != nil {
		w.messages = append(w.messages, w.last.ToParam())
	}
	answered := map[string]bool{}
	for _, a := range answers {
		answered[a.id] = true
		w.messages = append(w.messages, openai.ToolMessage(a.content, a.id))
	}
	// Every call id is answered, even one the loop did not name.
	for _, id := range t.ids() {
		if !answered[id] {
			w.messages = append(w.messages, openai.ToolMessage(budgetCallError, id))
		}
	}
	if note != "" {
		w.messages = append(w.messages, openai.UserMessage(note))
	}
}
