package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// submitTool is the tool the Anthropic provider offers for the answer.
const submitTool = "__realm_submit__"

// Config is how a provider reaches its service.
type Config struct {
	APIKey string
	// BaseURL overrides the provider's own address; "" keeps it.
	BaseURL string
	// HTTPClient is used for every request; nil is the SDK's default.
	HTTPClient *http.Client
}

type anthropicProvider struct {
	client anthropic.Client
}

// NewAnthropic is the Anthropic Messages provider.
func NewAnthropic(c Config) Provider {
	opts := []option.RequestOption{option.WithAPIKey(c.APIKey)}
	if c.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(c.BaseURL))
	}
	if c.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(c.HTTPClient))
	}
	return &anthropicProvider{client: anthropic.NewClient(opts...)}
}

func (p *anthropicProvider) Name() string { return Anthropic }

var (
	claude35 = regexp.MustCompile(`claude-3[-.]5`)
	claude3  = regexp.MustCompile(`claude-3-(opus|sonnet|haiku)`)
)

// anthropicMaxTokens follows §6.1: older families have smaller limits.
func anthropicMaxTokens(model string) int64 {
	switch {
	case claude35.MatchString(model):
		return 8192
	case claude3.MatchString(model):
		return 4096
	}
	return 16384
}

func anthropicAPIError(err error) (statusError, bool) {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return statusError{status: ae.StatusCode, message: ae.Message}, true
	}
	return statusError{}, false
}

func (p *anthropicProvider) Call(ctx context.Context, req Request) (*Result, error) {
	if req.Tools != nil {
		return callWithTools(ctx, req, func(res *Result) toolWire { return p.toolWire(req, res) })
	}
	start := time.Now()
	res := &Result{}
	hasSchema := len(req.Schema) > 0
	strict := req.Strict && hasSchema
	system := SystemPrompt(req.Profile, req.Schema, hasSchema)
	user := req.Prompt
	var last *anthropic.Message
	for try := 0; try < 2; try++ {
		msg, err := p.send(ctx, req, system, user, strict, res)
		if err != nil {
			// A strict request the service refused (400) or could not
			// serve (503) is sent again once without strict (§8.4).
			if dg := anthropicDowngrade(err); strict && dg != nil {
				res.Downgrade, strict = dg, false
				msg, err = p.send(ctx, req, system, user, false, res)
			}
			if err != nil {
				return nil, withDowngrade(withUsage(err, res, start), res.Downgrade)
			}
		}
		last = msg
		if out, channel, ok := anthropicAnswer(msg); ok {
			res.Output, res.StrictSent, res.Elapsed, res.Channel = out, strict, time.Since(start), channel
			return res, nil
		}
		user = req.Prompt + "\n\n" + notJSONSuffix
	}
	text := ""
	for _, b := range last.Content {
		if b.Type == "text" {
			text = b.Text
			break
		}
	}
	msg := "Anthropic returned non-JSON content after retry: " + firstN(text, 200)
	if last.StopReason == anthropic.StopReasonMaxTokens {
		msg = "Anthropic response was truncated (max_tokens) before a usable JSON object was produced."
	}
	return nil, withUsage(&CallError{Class: ClassOther, Message: msg, Attempts: res.Attempts}, res, start)
}

// anthropicAnswer is the submit tool's input, else JSON read from the
// first text block.
// channel is "tool" or "text" accordingly.
func anthropicAnswer(msg *anthropic.Message) (out map[string]any, channel string, ok bool) {
	for _, b := range msg.Content {
		if b.Type == "tool_use" && b.Name == submitTool {
			if err := json.Unmarshal(b.Input, &out); err == nil && out != nil {
				return out, "tool", true
			}
		}
	}
	for _, b := range msg.Content {
		if b.Type == "text" {
			out, ok = ExtractJSON(b.Text)
			return out, "text", ok
		}
	}
	return nil, "", false
}

// send makes one request (with the SDK's retries) and records its usage.
func (p *anthropicProvider) send(ctx context.Context, req Request, system, user string, strict bool, res *Result) (*anthropic.Message, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: anthropicMaxTokens(req.Model),
		System:    []anthropic.TextBlockParam{{Text: system}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(user))},
	}
	if req.PromptCache {
		params.System[0].CacheControl = anthropic.NewCacheControlEphemeralParam()
	}
	if len(req.Schema) > 0 {
		tool := anthropic.ToolParam{
			Name:        submitTool,
			Description: anthropic.String("Return your final result for this step as structured data."),
			InputSchema: toolSchema(req.Schema),
		}
		if strict {
			tool.Strict = anthropic.Bool(true)
		}
		params.Tools = []anthropic.ToolUnionParam{{OfTool: &tool}}
		params.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}
	}
	return p.sendParams(ctx, req, params, res)
}

// sendParams makes one request (with the SDK's retries) and records its
// usage.
func (p *anthropicProvider) sendParams(ctx context.Context, req Request, params anthropic.MessageNewParams, res *Result) (*anthropic.Message, error) {
	per := req.PerAttempt
	if per <= 0 {
		per = DefaultPerAttempt
	}
	requestStart := time.Now()
	var msg *anthropic.Message
	attempts, err := call(ctx, req, func(ctx context.Context, mw func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error), retries int) error {
		m, err := p.client.Messages.New(ctx, params,
			option.WithMaxRetries(retries), option.WithRequestTimeout(per), option.WithMiddleware(mw))
		msg = m
		return err
	}, anthropicAPIError)
	res.Attempts += attempts
	if err != nil {
		return nil, err
	}
	res.Usage = append(res.Usage, anthropicUsage(msg.Usage, req.RequestIndex+len(res.Usage), requestStart))
	return msg, nil
}

// anthropicUsage maps Anthropic's counters (§13.1): input_tokens is the
// uncached part; prompt_tokens sums the three input counters.
func anthropicUsage(u anthropic.Usage, index int, start time.Time) Usage {
	out := Usage{RequestIndex: index, RequestStart: start}
	var prompt int64
	reported := false
	if u.JSON.InputTokens.Valid() {
		out.UncachedInputTokens, prompt, reported = i64(u.InputTokens), prompt+u.InputTokens, true
	}
	if u.JSON.CacheReadInputTokens.Valid() {
		out.CacheReadInputTokens, prompt, reported = i64(u.CacheReadInputTokens), prompt+u.CacheReadInputTokens, true
	}
	if u.JSON.CacheCreationInputTokens.Valid() {
		out.CacheCreationInputTokens, prompt, reported = i64(u.CacheCreationInputTokens), prompt+u.CacheCreationInputTokens, true
	}
	if reported {
		out.PromptTokens = i64(prompt)
	}
	if u.JSON.OutputTokens.Valid() {
		out.OutputTokens = i64(u.OutputTokens)
	}
	return out
}

// toolSchema carries the effective schema as the tool's input schema.
func toolSchema(raw json.RawMessage) anthropic.ToolInputSchemaParam {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return anthropic.ToolInputSchemaParam{}
	}
	s := anthropic.ToolInputSchemaParam{Properties: m["properties"], ExtraFields: map[string]any{}}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	for k, v := range m {
		if k != "type" && k != "properties" && k != "required" {
			s.ExtraFields[k] = v
		}
	}
	return s
}

// withUsage attaches what was billed before a failure to its CallError.
func withUsage(err error, res *Result, start time.Time) error {
	var ce *CallError
	if !errors.As(err, &ce) {
		ce = &CallError{Class: ClassOther, Message: oneLine(err.Error())}
	}
	ce.Usage = append(append([]Usage{}, res.Usage...), ce.Usage...)
	if ce.Attempts < res.Attempts {
		ce.Attempts = res.Attempts
	}
	if ce.Elapsed == 0 {
		ce.Elapsed = time.Since(start)
	}
	return ce
}
