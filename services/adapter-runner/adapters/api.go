package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/tracing"
)

// api is what every catalog adapter speaking an HTTP/JSON API shares: one
// client, the service's rate-limit bucket and its 429 waits, and the error
// classification of spec §13.4. Each catalog adapter is a small file that
// builds requests and shapes results on top of it; the http adapter uses
// the same loop with its per-call settings.
type api struct {
	name string // the adapter's registration name
	// base is the service's base URL without a trailing slash.
	base string
	// header is sent with every request: the credential, API versions.
	header http.Header
	opts   Options
	client *http.Client
	// writes sends everything but GET and HEAD: it follows no redirect,
	// since Go's client would resend a redirected POST, PUT or PATCH as
	// a GET without its body, and the write would look done.
	writes *http.Client
	rules  rules
}

// rules are where an adapter classifies answers differently from the
// catalogue's defaults (spec §13.4's exceptions).
type rules struct {
	// defaultRetryAfter is the wait after a 429 that names none
	// (defaultRetryAfterSeconds; Airtable 30 s); zero: none.
	defaultRetryAfter time.Duration
	// notFound replaces SERVICE_NOT_FOUND for a 404 (github and gorgias:
	// SERVICE_HTTP_4XX with stop).
	notFound       errcode.Code
	notFoundAction errcode.AgentAction
	// actions replace the catalogue's agent_action of a code (http's 4xx
	// report_to_user, notion's 429 wait_for_human).
	actions map[errcode.Code]errcode.AgentAction
}

// request is one request of an operation.
type request struct {
	method string
	// path is below the base URL, each segment already escaped
	// (url.PathEscape on values that come from params).
	path  string
	query url.Values
	// body is sent as JSON when not nil.
	body   any
	header http.Header
	// once: a network failure is not retryable because the request may
	// have been applied (a create without an idempotency key).
	once bool
}

// newAPI returns the plumbing of the catalog adapter registered as name,
// speaking to base. The host of base may be on a private network: the
// deployment named it in the manifest; any other private address is
// refused, redirects included.
func newAPI(name, base string, header http.Header, opts Options, r rules) (*api, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, invalid("config.base_url '%s' must be an http:// or https:// URL", base)
	}
	allowed := append(hostList{strings.ToLower(u.Host)}, opts.AllowHosts...)
	client := &http.Client{CheckRedirect: allowed.checkRedirect, Transport: tracing.Transport(guardedTransport(allowed))}
	if header == nil {
		header = http.Header{}
	}
	// The catalog's adapters report a 5xx to the user (spec §13.4); the
	// catalogue's default, wait_for_human, is the http adapter's.
	if _, set := r.actions[errcode.ServiceHTTP5xx]; !set {
		r.actions = maps.Clone(r.actions)
		if r.actions == nil {
			r.actions = map[errcode.Code]errcode.AgentAction{}
		}
		r.actions[errcode.ServiceHTTP5xx] = errcode.ActionReportToUser
	}
	writes := *client
	writes.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &api{name: name, base: strings.TrimRight(base, "/"), header: header, opts: opts.withDefaults(), client: client, writes: &writes, rules: r}, nil
}

// url is the request's full URL.
func (a *api) url(r request) (*url.URL, error) {
	u, err := url.Parse(a.base + "/" + strings.TrimLeft(r.path, "/"))
	if err != nil {
		return nil, invalid("'%s/%s' is not a valid URL", a.base, r.path)
	}
	if len(r.query) > 0 {
		u.RawQuery = r.query.Encode()
	}
	return u, nil
}

// call sends r and decodes a 2xx JSON answer into out (nil: discard);
// any other answer is the error of spec §13.4.
func (a *api) call(ctx context.Context, config map[string]any, r request, out any) (answer, error) {
	u, err := a.url(r)
	if err != nil {
		return answer{}, err
	}
	var body []byte
	if r.body != nil {
		if body, err = json.Marshal(r.body); err != nil {
			return answer{}, invalid("params cannot be sent as JSON: %v", err)
		}
	}
	h := a.header.Clone()
	for k, v := range r.header {
		h[k] = v
	}
	resp, err := a.exchange(ctx, config, r.method, u, func() (answer, error) { return a.send(ctx, r.method, u, body, h) })
	if err != nil {
		if we := asWorkflowError(err); we != nil && r.once && we.Code == errcode.NetworkUnreachable {
			we.Retryable = false
			we.Message += " (not retried: the request may have been applied)"
		}
		return answer{}, err
	}
	if out != nil && len(bytes.TrimSpace(resp.body)) > 0 {
		if err := json.Unmarshal(resp.body, out); err != nil {
			return answer{}, fail(errcode.ServiceResponseInvalid, resp.details(r.method, u),
				"%s %s answered %d with a body that is not the JSON expected: %v", r.method, redact(u), resp.status, err)
		}
	}
	return resp, nil
}

// exchange sends (after the service's bucket lets it through) until an
// answer other than 429 comes, and classifies it: a 2xx answer is
// returned, anything else is the error of spec §13.4. A 429 is waited out
// and sent again (up to MaxRateLimitWaits times) when the wait is known,
// within max_retry_seconds, and ends before the step's deadline.
func (a *api) exchange(ctx context.Context, config map[string]any, verb string, u *url.URL, send func() (answer, error)) (answer, error) {
	lim, err := readLimits(config)
	if err != nil {
		return answer{}, err
	}
	key := limiterKey(a.name, config)
	clock := a.opts.Limiters.Clock()
	for waits := 0; ; waits++ {
		// A service that asked everyone to wait (an earlier 429) is waited
		// out under the same bounds as this call's own 429.
		if paused := a.opts.Limiters.PausedFor(key); paused > 0 {
			if err := bounded(ctx, lim, paused, map[string]any{"method": verb, "url": redact(u), "paused": true},
				"%s %s was not sent: the service asked to wait (an earlier 429)", verb, redact(u)); err != nil {
				return answer{}, err
			}
		}
		if err := a.opts.Limiters.Wait(ctx, key, lim.bucket); err != nil {
			return answer{}, aborted("The call waiting for the service's rate limit", err)
		}
		resp, err := send()
		if err != nil {
			return answer{}, err
		}
		if resp.status != http.StatusTooManyRequests {
			return resp, a.classify(verb, u, resp)
		}
		named, hasNamed := retryAfter(resp.header.Get("Retry-After"), clock.Now())
		wait, known := lim.retryWait(named, hasNamed, a.rules.defaultRetryAfter)
		details := resp.details(verb, u)
		format, args := "%s %s answered 429 Too Many Requests", []any{verb, redact(u)}
		if !known {
			return answer{}, a.rateLimited(details, format, args...)
		}
		a.opts.Limiters.Pause(key, clock.Now().Add(wait))
		if waits >= MaxRateLimitWaits {
			details["retry_after"] = wait.Seconds()
			return answer{}, a.rateLimited(details, format+" %d times", append(args, waits+1)...)
		}
		if err := bounded(ctx, lim, wait, details, format, args...); err != nil {
			return answer{}, a.act(err)
		}
		if err := clock.Sleep(ctx, wait); err != nil {
			return answer{}, aborted("The call waiting out the service's 429", err)
		}
	}
}

// rateLimited is SERVICE_RATE_LIMITED with the adapter's agent_action.
func (a *api) rateLimited(details map[string]any, format string, args ...any) error {
	return a.act(fail(errcode.ServiceRateLimited, details, format, args...))
}

// act applies the adapter's agent_action for the error's code.
func (a *api) act(err error) error {
	if we := asWorkflowError(err); we != nil {
		if action, ok := a.rules.actions[we.Code]; ok {
			we.AgentAction = action
		}
	}
	return err
}

// classify maps a non-429 answer: nil for 2xx; otherwise the error of
// spec §13.4 under the adapter's rules.
func (a *api) classify(verb string, u *url.URL, r answer) error {
	where := verb + " " + redact(u)
	statusText := http.StatusText(r.status)
	var err error
	switch {
	case r.status >= 200 && r.status < 300:
		return nil
	case r.status >= 300 && r.status < 400 && verb != http.MethodGet && verb != http.MethodHead:
		err = fail(errcode.ServiceUnexpectedRedirect, r.details(verb, u),
			"%s answered %d %s: a redirected write is not followed (it would be resent as a GET without its body)", where, r.status, statusText)
	case r.status == http.StatusUnauthorized:
		err = fail(errcode.ServiceAuthFailed, r.details(verb, u), "%s answered %d %s: the service refused the configured credentials", where, r.status, statusText)
	case r.status == http.StatusNotFound && a.rules.notFound != "":
		err = withAction(fail(a.rules.notFound, r.details(verb, u), "%s answered %d %s", where, r.status, statusText), a.rules.notFoundAction)
	case r.status == http.StatusNotFound:
		err = fail(errcode.ServiceNotFound, r.details(verb, u), "%s answered %d %s", where, r.status, statusText)
	case r.status >= 400 && r.status < 500:
		err = fail(errcode.ServiceHTTP4xx, r.details(verb, u), "%s answered %d %s", where, r.status, statusText)
	case r.status >= 500 && r.status < 600:
		err = fail(errcode.ServiceHTTP5xx, r.details(verb, u), "%s answered %d %s", where, r.status, statusText)
	default:
		err = fail(errcode.ServiceResponseInvalid, r.details(verb, u), "%s answered an unexpected %d %s", where, r.status, statusText)
	}
	return a.act(err)
}

// send makes one request and reads its answer (bounded by
// MaxResponseBytes).
func (a *api) send(ctx context.Context, verb string, u *url.URL, body []byte, header http.Header) (answer, error) {
	var rd *bytes.Reader
	req, err := http.NewRequestWithContext(ctx, verb, u.String(), nil)
	if body != nil {
		rd = bytes.NewReader(body)
		req, err = http.NewRequestWithContext(ctx, verb, u.String(), rd)
	}
	if err != nil {
		return answer{}, fail(errcode.EngineAdapterFailed, nil, "Adapter '%s': building the request failed: %v", a.name, err)
	}
	req.Header = header
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	client := a.client
	if verb != http.MethodGet && verb != http.MethodHead && a.writes != nil {
		client = a.writes
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, transportError(ctx, verb, u, err)
	}
	defer resp.Body.Close()
	return readAnswer(ctx, verb, u, resp, a.opts.MaxResponseBytes)
}

// bounded decides whether a rate-limit wait may be waited: longer than
// max_retry_seconds fails at once and is not to be retried (spec §3.4); a
// wait past the step's deadline fails at once, retryable; otherwise nil.
func bounded(ctx context.Context, lim limits, wait time.Duration, details map[string]any, format string, args ...any) error {
	details["retry_after"] = wait.Seconds()
	if lim.tooLong(wait) {
		e := fail(errcode.ServiceRateLimited, details, format+"; it asks to wait %gs, longer than the service's max_retry_seconds (%gs)",
			append(args, wait.Seconds(), lim.ceiling)...)
		e.Retryable = false
		e.Details["max_retry_seconds"] = lim.ceiling
		return e
	}
	// ctx's deadline is wall time, whatever clock the limiter runs on.
	if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
		return fail(errcode.ServiceRateLimited, details, format+"; the wait it asks for (%gs) passes the step's time limit",
			append(args, wait.Seconds())...)
	}
	return nil
}
