package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// OpenAIOptions choose how the OpenAI provider talks.
type OpenAIOptions struct {
	// Compat says BaseURL is an OpenAI-compatible service, not OpenAI: it
	// gets no json_object mode and no strict unless StrictCompat.
	Compat       bool
	StrictCompat bool
}

type openaiProvider struct {
	client    openai.Client
	reasoning bool
	opts      OpenAIOptions
}

// NewOpenAI is the OpenAI Chat Completions provider.
func NewOpenAI(c Config, o OpenAIOptions) Provider {
	return &openaiProvider{client: openaiClient(c), opts: o}
}

// NewOpenAIReasoning is the provider of the o1 family: one user message,
// no response format, no strict (§6.3). It always talks to c's address,
// never a compat endpoint.
func NewOpenAIReasoning(c Config) Provider {
	return &openaiProvider{client: openaiClient(c), reasoning: true}
}

func openaiClient(c Config) openai.Client {
	opts := []option.RequestOption{option.WithAPIKey(c.APIKey)}
	if c.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(c.BaseURL))
	}
	if c.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(c.HTTPClient))
	}
	return openai.NewClient(opts...)
}

func (p *openaiProvider) Name() string {
	if p.reasoning {
		return OpenAIReasoning
	}
	return OpenAI
}

func openaiAPIError(err error) (statusError, bool) {
	var ae *openai.Error
	if errors.As(err, &ae) {
		return statusError{status: ae.StatusCode, message: ae.Message, hasParamCode: true,
			param: rawValue(ae.JSON.Param.Raw()), code: rawValue(ae.JSON.Code.Raw())}, true
	}
	return statusError{}, false
}

// format is the response format a request carries.
type format int

const (
	formatNone format = iota
	formatJSONObject
	formatStrict
)

func (p *openaiProvider) Call(ctx context.Context, req Request) (*Result, error) {
	if req.Tools != nil {
		return callWithTools(ctx, req, func(res *Result) toolWire { return p.toolWire(req, res) })
	}
	start := time.Now()
	res := &Result{}
	system := SystemPrompt(req.Profile, req.Schema, false)
	f := formatJSONObject
	switch {
	case p.reasoning:
		f = formatNone
	case req.Strict && len(req.Schema) > 0 && (!p.opts.Compat || p.opts.StrictCompat):
		f = formatStrict
	case p.opts.Compat:
		f = formatNone
	}
	var messages []openai.ChatCompletionMessageParamUnion
	if p.reasoning {
		messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(system + "\n\n" + req.Prompt)}
	} else {
		messages = []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(req.Prompt)}
	}
	var text string
	for try := 0; try < 2; try++ {
		c, err := p.send(ctx, req, messages, f, res)
		if err != nil {
			// A strict request refused with 400 goes again once without
			// strict (§8.4); 5xx and transport errors never downgrade.
			if dg := openaiDowngrade(err); f == formatStrict && dg != nil {
				res.Downgrade = dg
				f = formatJSONObject
				if p.opts.Compat {
					f = formatNone
				}
				c, err = p.send(ctx, req, messages, f, res)
			}
			if err != nil {
				return nil, withDowngrade(withUsage(err, res, start), res.Downgrade)
			}
		}
		if len(c.Choices) == 0 {
			return nil, withUsage(&CallError{Class: ClassOther, Message: "OpenAI returned no choices."}, res, start)
		}
		m := c.Choices[0].Message
		if strings.TrimSpace(m.Refusal) != "" {
			return nil, withUsage(&CallError{Class: ClassOther, Message: "OpenAI refused the request: " + firstN(m.Refusal, 200)}, res, start)
		}
		text = m.Content
		if out, ok := ExtractJSON(text); ok {
			res.Output, res.StrictSent, res.Elapsed = out, f == formatStrict, time.Since(start)
			return res, nil
		}
		if f == formatStrict {
			return nil, withUsage(&CallError{Class: ClassOther, Message: "OpenAI returned non-JSON content under strict decoding: " + firstN(text, 200)}, res, start)
		}
		messages = append(messages, openai.AssistantMessage(text), openai.UserMessage(notJSONSuffix))
	}
	return nil, withUsage(&CallError{Class: ClassOther, Message: "OpenAI returned non-JSON content after retry: " + firstN(text, 200)}, res, start)
}

func (p *openaiProvider) send(ctx context.Context, req Request, messages []openai.ChatCompletionMessageParamUnion, f format, res *Result) (*openai.ChatCompletion, error) {
	params := openai.ChatCompletionNewParams{Model: req.Model, Messages: messages}
	switch f {
	case formatJSONObject:
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	case formatStrict:
		var schema map[string]any
		_ = json.Unmarshal(req.Schema, &schema)
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "realm_step_output", Strict: openai.Bool(true), Schema: schema},
		}}
	}
	return p.sendParams(ctx, req, params, res)
}

// sendParams makes one request (with the SDK's retries) and records its
// usage.
func (p *openaiProvider) sendParams(ctx context.Context, req Request, params openai.ChatCompletionNewParams, res *Result) (*openai.ChatCompletion, error) {
	if p.reasoning {
		limit := int64(32768)
		if strings.HasPrefix(strings.ToLower(req.Model), "o1-mini") {
			limit = 65536
		}
		params.MaxCompletionTokens = openai.Int(limit)
	}
	per := req.PerAttempt
	if per <= 0 {
		per = DefaultPerAttempt
	}
	requestStart := time.Now()
	var out *openai.ChatCompletion
	attempts, err := call(ctx, req, func(ctx context.Context, mw func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error), retries int) error {
		c, err := p.client.Chat.Completions.New(ctx, params,
			option.WithMaxRetries(retries), option.WithRequestTimeout(per), option.WithMiddleware(mw))
		out = c
		return err
	}, openaiAPIError)
	res.Attempts += attempts
	if err != nil {
		return nil, err
	}
	res.Usage = append(res.Usage, openaiUsage(out.Usage, req.RequestIndex+len(res.Usage), requestStart))
	return out, nil
}

// openaiUsage maps OpenAI's counters (§13.1).
func openaiUsage(u openai.CompletionUsage, index int, start time.Time) Usage {
	out := Usage{RequestIndex: index, RequestStart: start}
	if u.JSON.PromptTokens.Valid() {
		out.PromptTokens = i64(u.PromptTokens)
	}
	if u.JSON.PromptTokensDetails.Valid() && u.PromptTokensDetails.JSON.CachedTokens.Valid() {
		out.CacheReadInputTokens = i64(u.PromptTokensDetails.CachedTokens)
	}
	if u.JSON.CompletionTokens.Valid() {
		out.OutputTokens = i64(u.CompletionTokens)
	}
	return out
}
