// Package provider asks a model for one agent step's answer through the
// official Anthropic and OpenAI SDKs, and turns what went wrong into the
// drive-failure classes the run record keeps (agent-driver.md §11–§13).
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Names recorded as the provider of a request or a failure.
const (
	Anthropic       = "anthropic"
	OpenAI          = "openai"
	OpenAIReasoning = "openai-reasoning"
)

// Error classes of a drive failure (agent-driver.md §12.2).
const (
	ClassConnectionTimeout  = "connection_timeout"
	ClassConnectionError    = "connection_error"
	ClassAPIStatus          = "api_status"
	ClassSDKMissing         = "sdk_missing"
	ClassValidationRejected = "validation_rejected"
	ClassAbortedByBudget    = "aborted_by_budget"
	ClassOther              = "other"
)

// DefaultPerAttempt is the per-attempt limit when neither the step nor the
// flag sets one.
const DefaultPerAttempt = 600 * time.Second

// sdkMaxRetries gives the SDKs' own 3 attempts (2 retries).
const sdkMaxRetries = 2

// maxRetryAfter is the longest Retry-After on a 429 that is waited out for
// one more attempt after the SDK's attempts are spent.
const maxRetryAfter = 60 * time.Second

// Request is one agent step put to a model.
type Request struct {
	Model string
	// Profile is the step's agent profile text, "" when it has none.
	Profile string
	// Prompt is the user message: the step's prompt with its template
	// filled, plus the repair suffix on a repair attempt.
	Prompt string
	// Schema is the effective schema as authored JSON; nil when none.
	Schema json.RawMessage
	// Strict asks for strict structured output where the provider has it.
	Strict bool
	// PerAttempt limits one HTTP attempt; 0 means DefaultPerAttempt.
	PerAttempt time.Duration
	// PerAttemptDeclared says the limit came from a flag or the step, so a
	// failure records it.
	PerAttemptDeclared bool
	// PerAttemptFromStep says the limit is the step's llm_timeout_seconds:
	// a ceiling failure then names that lever (agent driver §11).
	PerAttemptFromStep bool
	// PromptCache marks the system prompt as a cache breakpoint (Anthropic).
	PromptCache bool
	// RequestIndex numbers the first wire request of this call within the
	// step (repairs continue the count).
	RequestIndex int

	// Tools, when set, makes this a tool-calling step (agent-driver §10):
	// the model is offered these tools and its calls are carried out.
	Tools Toolbox
	// MaxToolCalls (0: 20) and MaxFanOut (0: unlimited) bound the calls;
	// ToolTimeout (0: 30 s) bounds each.
	MaxToolCalls int
	MaxFanOut    int
	ToolTimeout  time.Duration
	// Check validates an answer of a tool-calling step against the step's
	// schemas: "" when it fits, else the summary the model is shown.
	Check func(map[string]any) string
	// Redact hides secrets in tool results, tool errors and recorded
	// arguments (§18); nil hides nothing.
	Redact func(string) string
	// Corrected is told each in-conversation correction (its number).
	Corrected func(n int)
}

// Usage is one wire request's counters; nil pointers were not reported.
type Usage struct {
	RequestIndex             int
	RequestStart             time.Time
	PromptTokens             *int64
	UncachedInputTokens      *int64
	CacheReadInputTokens     *int64
	CacheCreationInputTokens *int64
	OutputTokens             *int64
}

// Result is a model's answer to a step.
type Result struct {
	Output map[string]any
	Usage  []Usage
	// Attempts counts the HTTP attempts made (all requests of the call).
	Attempts   int
	StrictSent bool
	Elapsed    time.Duration
	// ToolCalls are the tool calls made, in order.
	ToolCalls []ToolCall
	// StrictDrop is set when the service refused strict tool arguments.
	StrictDrop *StrictDrop
	// Downgrade says why a strict request went out again without strict
	// (§8.4); nil when it did not.
	Downgrade *Downgrade
	// Channel is how the answer came: "tool" (Anthropic's submit tool) or
	// "text"; "" for providers without a submit tool.
	Channel string
}

// Downgrade reasons of a live strict failure (agent-driver §8.3).
const (
	ReasonAPIRejectedSchema  = "api_rejected_schema"
	ReasonGrammarUnavailable = "grammar_unavailable"
	ReasonServiceUnavailable = "service_unavailable"
)

// grammarLabel is the part of Anthropic's 503 message that says its
// strict-grammar compiler, not the service, is out (§8.3).
const grammarLabel = "Grammar compilation is temporarily unavailable"

// Downgrade is why a strict request was sent again without strict, as the
// evidence keeps it (§8.3).
type Downgrade struct {
	Reason string
	// APIMessage is the service's own error message.
	APIMessage string
	// HasParamCode says APIParam and APICode were reported (OpenAI): they
	// are kept verbatim, nil standing for a JSON null.
	HasParamCode bool
	APIParam     any
	APICode      any
}

// Provider asks one model service for answers.
type Provider interface {
	// Name is anthropic, openai or openai-reasoning.
	Name() string
	Call(ctx context.Context, req Request) (*Result, error)
}

// CallError is a model call that failed, classified.
type CallError struct {
	Class   string
	Message string
	// Status is the last HTTP status seen (0 when none).
	Status       int
	Attempts     int
	RetryAfter   time.Duration
	HasRetry     bool
	Elapsed      time.Duration
	DeclaredMS   int64
	CeilingMS    int64
	Usage        []Usage
	ProviderName string
	// Code is the catalogue code of a failure that has one.
	Code string
	// Downgrade is set when the failure came after a strict request was
	// downgraded, so the downgrade is still disclosed (§8.4).
	Downgrade *Downgrade

	// api is the service's own error, when it answered with one.
	api *statusError
}

func (e *CallError) Error() string { return e.Message }

// Ceiling is the whole-request limit for a per-attempt limit: three
// attempts, the SDK's backoff and a download allowance (§11).
func Ceiling(perAttempt time.Duration) time.Duration {
	return perAttempt*3 + 1500*time.Millisecond + 60*time.Second
}

// observer counts the HTTP attempts of a call and what they showed, from
// a middleware both SDKs accept.
type observer struct {
	mu         sync.Mutex
	attempts   int
	status     int
	retryAfter time.Duration
	hasRetry   bool
}

func (o *observer) middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempts++
	if res != nil {
		o.status = res.StatusCode
		if d, ok := parseRetryAfter(res.Header); ok {
			o.retryAfter, o.hasRetry = d, true
		}
	}
	return res, err
}

func (o *observer) snapshot() (attempts, status int, retryAfter time.Duration, has bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.attempts, o.status, o.retryAfter, o.hasRetry
}

// parseRetryAfter reads retry-after-ms, or Retry-After as seconds or an
// HTTP date.
func parseRetryAfter(h http.Header) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t)), true
	}
	return 0, false
}

// statusError is what a provider knows of an SDK API error. param and
// code are OpenAI's (nil for a JSON null); hasParamCode says they exist.
type statusError struct {
	status       int
	message      string
	hasParamCode bool
	param, code  any
}

// classify turns an SDK error into a CallError. ceilingHit says the whole
// request's ceiling fired; apiErr reads the SDK's own error type.
func classify(err error, ceilingHit bool, ceiling time.Duration, lever string, apiErr func(error) (statusError, bool)) *CallError {
	var ce *CallError
	if errors.As(err, &ce) {
		return ce
	}
	e := &CallError{Class: ClassOther, Message: oneLine(err.Error())}
	var ne net.Error
	switch se, isAPI := apiErr(err); {
	case ceilingHit:
		e.Class = ClassAbortedByBudget
		e.Message = fmt.Sprintf("LLM create exceeded the per-create ceiling (%dms) — %s", ceiling.Milliseconds(), lever)
	case isAPI:
		e.Class, e.Status, e.api = ClassAPIStatus, se.status, &se
		e.Message = strings.TrimSpace(fmt.Sprintf("%d %s", se.status, oneLine(se.message)))
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		e.Class, e.Message = ClassConnectionTimeout, "Request timed out."
	case errors.Is(err, context.Canceled):
		e.Class, e.Message = ClassOther, "The drive was cancelled."
	case errors.As(err, &ne), isConnectionError(err):
		e.Class, e.Message = ClassConnectionError, "Connection error."
	}
	return e
}

func isConnectionError(err error) bool {
	msg := err.Error()
	for _, s := range []string{"connection refused", "connection reset", "EOF", "no such host", "broken pipe"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// firstN cuts s to n runes.
func firstN(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

// call runs one model request (do) under the per-attempt limit and the
// ceiling, observes its attempts, and on a 429 whose Retry-After is at
// most 60 s waits it out and tries once more. do receives the observer's
// middleware and how many retries the SDK may make.
func call(ctx context.Context, req Request, do func(ctx context.Context, mw func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error), retries int) error, apiErr func(error) (statusError, bool)) (attempts int, err error) {
	per := req.PerAttempt
	if per <= 0 {
		per = DefaultPerAttempt
	}
	ceiling := Ceiling(per)
	obs := &observer{}
	run := func(retries int) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, ceiling)
		defer cancel()
		err := do(cctx, obs.middleware, retries)
		return err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded), err
	}
	start := time.Now()
	hit, err := run(sdkMaxRetries)
	if err != nil && !hit {
		_, status, ra, has := obs.snapshot()
		if se, ok := apiErr(err); ok && se.status == http.StatusTooManyRequests && status == http.StatusTooManyRequests && has && ra <= maxRetryAfter {
			select {
			case <-ctx.Done():
			case <-time.After(ra):
				hit, err = run(0)
			}
		}
	}
	n, status, ra, has := obs.snapshot()
	if err == nil {
		return n, nil
	}
	lever := "pass a larger --llm-timeout"
	if req.PerAttemptFromStep {
		lever = "raise llm_timeout_seconds on the step"
	}
	ce := classify(err, hit, ceiling, lever, apiErr)
	ce.Attempts, ce.Elapsed, ce.CeilingMS = n, time.Since(start), ceiling.Milliseconds()
	if hit {
		// The attempt the ceiling cut short did not complete.
		ce.Attempts = max(0, n-1)
	}
	if ce.Status == 0 {
		ce.Status = status
	}
	ce.RetryAfter, ce.HasRetry = ra, has
	if req.PerAttemptDeclared {
		ce.DeclaredMS = per.Milliseconds()
	}
	return n, ce
}

// Fixed instructions of the first message (§5.1).
const (
	instructionsHead = "You are an AI agent executing a step in a structured workflow."
	instructionsJSON = "Your task is described below. Respond with a JSON object only — no markdown, no explanation."
	instructionsTool = "Your task is described below. Call the `__realm_submit__` tool with your result, or respond with a JSON object only — no markdown, no explanation."
	notJSONSuffix    = "Your previous response was not valid JSON. Respond with a JSON object only."
)

// SystemPrompt is the first message of a step (§5.1): the profile, the
// fixed instructions and the schema as compact JSON.
func SystemPrompt(profile string, schema json.RawMessage, submitTool bool) string {
	var b strings.Builder
	if profile != "" {
		b.WriteString(profile)
		b.WriteString("\n\n")
	}
	b.WriteString(instructionsHead)
	b.WriteString("\n")
	if submitTool && len(schema) > 0 {
		b.WriteString(instructionsTool)
	} else {
		b.WriteString(instructionsJSON)
	}
	if len(schema) > 0 {
		b.WriteString("\nThe JSON must conform to this schema: ")
		b.WriteString(compact(schema))
	}
	return b.String()
}

func compact(raw json.RawMessage) string {
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return string(raw)
	}
	return out.String()
}

// o1Family matches the OpenAI models that go to the reasoning provider.
var o1Family = regexp.MustCompile(`(?i)^o1(-|$)`)

// IsReasoningModel reports whether an OpenAI model is of the o1 family.
func IsReasoningModel(model string) bool { return o1Family.MatchString(strings.TrimSpace(model)) }

func i64(v int64) *int64 { return &v }
