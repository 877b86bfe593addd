package provider

import (
	"context"
	"encoding/json"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// anthropicWire is a tool-calling conversation in the Messages format:
// the step's tools (and the submit tool when the step has a schema) are
// offered; all results of a turn go back in one user message of
// tool_result blocks.
type anthropicWire struct {
	p        *anthropicProvider
	req      Request
	res      *Result
	system   string
	messages []anthropic.MessageParam
	last     *anthropic.Message
	strict   strictState
	// lastStrict says last was answered to a request with strict tools;
	// strictTurns are the indexes in messages of such answers, whose
	// thinking blocks go once strict is dropped (§8.7).
	lastStrict  bool
	strictTurns []int
}

func (p *anthropicProvider) toolWire(req Request, res *Result) *anthropicWire {
	hasSchema := len(req.Schema) > 0
	return &anthropicWire{p: p, req: req, res: res, system: SystemPrompt(req.Profile, req.Schema, hasSchema),
		messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(req.Prompt))}}
}

func (w *anthropicWire) send(ctx context.Context, final bool) (wireTurn, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(w.req.Model),
		MaxTokens: anthropicMaxTokens(w.req.Model),
		System:    []anthropic.TextBlockParam{{Text: w.system}},
		Messages:  w.messages,
	}
	if w.req.PromptCache {
		params.System[0].CacheControl = anthropic.NewCacheControlEphemeralParam()
	}
	specs := w.req.Tools.Specs()
	strict := !final && w.strict.wants(specs)
	msg, err := w.p.sendParams(ctx, w.req, w.params(params, specs, final, strict), w.res)
	if err != nil && strict && w.strict.refused(err, w.res, anthropicDowngrade) {
		strict = false
		w.dropStrictThinking()
		params.Messages = w.messages
		msg, err = w.p.sendParams(ctx, w.req, w.params(params, specs, final, false), w.res)
	}
	if err != nil {
		return wireTurn{}, err
	}
	if strict {
		w.strict.turns++
	}
	w.lastStrict = strict
	return w.turn(msg), nil
}

// dropStrictThinking removes the thinking blocks of the answers given
// while strict tools were on: the tool list they were signed against
// changed when strict went off, so the service would refuse them (§8.7).
func (w *anthropicWire) dropStrictThinking() {
	for _, i := range w.strictTurns {
		a := w.messages[i].OfAssistant
		if a == nil {
			continue
		}
		var kept []anthropic.ContentBlockParamUnion
		for _, b := range a.Content {
			if b.OfThinking == nil && b.OfRedactedThinking == nil {
				kept = append(kept, b)
			}
		}
		c := *a // the message may be shared with a request already sent
		c.Content = kept
		w.messages[i] = anthropic.MessageParam{OfAssistant: &c}
	}
	w.strictTurns = nil
}

// params are the request's tools on top of base.
func (w *anthropicWire) params(base anthropic.MessageNewParams, specs []ToolSpec, final, strict bool) anthropic.MessageNewParams {
	params := base
	var tools []anthropic.ToolUnionParam
	if !final {
		for _, s := range specs {
			tool := anthropic.ToolParam{Name: s.Name, InputSchema: toolSchemaOf(specSchema(s))}
			if s.Description != "" {
				tool.Description = anthropic.String(s.Description)
			}
			if strict && s.Strict {
				tool.Strict = anthropic.Bool(true)
			}
			tools = append(tools, anthropic.ToolUnionParam{OfTool: &tool})
		}
	}
	if len(w.req.Schema) > 0 {
		tools = append(tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        submitTool,
			Description: anthropic.String("Return your final result for this step as structured data."),
			InputSchema: toolSchema(w.req.Schema),
		}})
	}
	params.Tools = tools
	switch {
	case len(tools) == 0:
		params.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
	default:
		params.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}
	}
	return params
}

// turn reads the model's turn.
func (w *anthropicWire) turn(msg *anthropic.Message) wireTurn {
	w.last = msg
	var t wireTurn
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			if t.text == "" {
				t.text = b.Text
			}
		case "tool_use":
			var args map[string]any
			_ = json.Unmarshal(b.Input, &args)
			c := wireCall{id: b.ID, name: b.Name, args: args}
			if b.Name == submitTool {
				if t.submit == nil {
					t.submit = &c
				}
				continue
			}
			t.calls = append(t.calls, c)
		}
	}
	return t
}

func (w *anthropicWire) reply(t wireTurn, answers []toolAnswer, note string) {
	if w.last != nil {
		if w.lastStrict {
			w.strictTurns = append(w.strictTurns, len(w.messages))
		}
		w.messages = append(w.messages, w.last.ToParam())
	}
	var blocks []anthropic.ContentBlockParamUnion
	answered := map[string]bool{}
	for _, a := range answers {
		answered[a.id] = true
		blocks = append(blocks, anthropic.NewToolResultBlock(a.id, a.content, a.isError))
	}
	// Every tool_use must be answered, even one the loop did not name.
	for _, id := range t.ids() {
		if !answered[id] {
			blocks = append(blocks, anthropic.NewToolResultBlock(id, budgetCallError, true))
		}
	}
	if note != "" {
		blocks = append(blocks, anthropic.NewTextBlock(note))
	}
	if len(blocks) > 0 {
		w.messages = append(w.messages, anthropic.NewUserMessage(blocks...))
	}
}

// toolSchemaOf carries an MCP tool's input schema.
func toolSchemaOf(m map[string]any) anthropic.ToolInputSchemaParam {
	b, err := json.Marshal(m)
	if err != nil {
		return anthropic.ToolInputSchemaParam{}
	}
	return toolSchema(b)
}
