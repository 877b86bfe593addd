package adapters

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/pkg/tracing"
	"github.com/realm-go/realm/services/adapter-runner/ratelimit"
)

// Defaults of Options.
const (
	// DefaultMaxResponseBytes bounds a reply body: the step's output
	// travels back to the engine in one gRPC message (4 MiB by default).
	DefaultMaxResponseBytes = 3 << 20
	// DefaultEnvPrefix is the prefix an environment variable named by a
	// workflow's auth.token_env must have: a workflow may read only the
	// variables meant for it, never the runner's other secrets.
	DefaultEnvPrefix = "REALM_SECRET_"
	// MaxRateLimitWaits is how many times one call waits out a 429 and
	// sends again before it reports SERVICE_RATE_LIMITED.
	MaxRateLimitWaits = 3
)

// Options are what the adapters of one runner share.
type Options struct {
	// AllowHosts are the hosts ("name" or "name:port") every http adapter
	// of the runner may reach although they resolve to a loopback,
	// link-local, private, shared, unspecified or multicast address, which
	// are refused otherwise (the runner's -allow-host). A manifest entry
	// adds its own with config.allow_hosts.
	AllowHosts []string
	// SecretHosts binds each environment variable a workflow's
	// auth.token_env may name to the hosts its credential may be sent to
	// (the runner's -secret-host NAME=host,...): a call to another host,
	// or naming a variable bound to none, is refused before any request.
	SecretHosts map[string][]string
	// Limiters are the per-service buckets, shared by every adapter of the
	// process (default: new ones on the system clock).
	Limiters *ratelimit.Limiters
	// LookupEnv reads the environment (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// EnvPrefix is the prefix a call's auth.token_env must have
	// (DefaultEnvPrefix when empty; "*" allows any name).
	EnvPrefix string
	// MaxResponseBytes bounds a reply body (default DefaultMaxResponseBytes).
	MaxResponseBytes int64
}

func (o Options) withDefaults() Options {
	if o.Limiters == nil {
		o.Limiters = ratelimit.New(nil)
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.EnvPrefix == "" {
		o.EnvPrefix = DefaultEnvPrefix
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	return o
}

// errCrossHostRedirect is CheckRedirect's refusal.
var errCrossHostRedirect = errors.New("redirected to another host")

// HTTP is the catalog's `http` adapter (GenericHttpAdapter, spec §13.3):
// fetch → GET {base_url}/{operation}?{params as query}; create → POST and
// update → PATCH {base_url}/{operation} with params as the JSON body;
// delete → DELETE {base_url}/{operation}?{params as query}. It answers
// {"status": <HTTP status>, "data": <the JSON body>}; the engine records
// data when it is an object, the whole answer otherwise (spec §13.1).
type HTTP struct {
	name         string
	construction map[string]any
	opts         Options
	// client sends the requests: no timeout of its own (the step's
	// deadline bounds each call), every connection checked by the guard,
	// redirects followed on the same host only.
	client *http.Client
}

// constructionKeys are the keys a manifest entry's config may have.
var constructionKeys = []string{"allow_hosts", "auth", "base_url", "headers"}

// NewHTTP returns the http adapter registered as name. construction is its
// deployment config (a manifest entry's, secrets resolved; nil for the
// catalog instance, whose every setting comes with the call).
func NewHTTP(name string, construction map[string]any, opts Options) (*HTTP, error) {
	if construction == nil {
		construction = map[string]any{}
	}
	for _, k := range sortedKeys(construction) {
		if !slices.Contains(constructionKeys, k) {
			return nil, fmt.Errorf("adapter '%s': config: unknown key '%s' (known: %s)", name, k, strings.Join(constructionKeys, ", "))
		}
	}
	if construction["auth"] != nil {
		if _, err := readAuth(construction["auth"], true); err != nil {
			return nil, fmt.Errorf("adapter '%s': %w", name, err)
		}
		// Without its own base_url the entry would send its credential to
		// whatever base_url a workflow's step names.
		if str(construction["base_url"]) == "" {
			return nil, fmt.Errorf("adapter '%s': config.auth needs config.base_url next to it: the credential goes only to the entry's own base URL", name)
		}
	}
	allowed := hostList(slices.Clone(opts.AllowHosts))
	if v, has := construction["allow_hosts"]; has {
		own, err := readHostList("config.allow_hosts", v)
		if err != nil {
			return nil, fmt.Errorf("adapter '%s': %w", name, err)
		}
		allowed = append(allowed, own...)
	}
	// Each request continues the step's trace (a no-op until tracing.Setup
	// configures an exporter).
	client := &http.Client{CheckRedirect: allowed.checkRedirect, Transport: tracing.Transport(guardedTransport(allowed))}
	return &HTTP{name: name, construction: construction, opts: opts.withDefaults(), client: client}, nil
}

var httpMethods = map[string]string{
	"fetch":  http.MethodGet,
	"create": http.MethodPost,
	"update": http.MethodPatch,
	"delete": http.MethodDelete,
}

// Call sends one request (after the service's bucket lets it through) and
// classifies the answer per spec §13.4. A 429 is waited out and sent again
// (up to MaxRateLimitWaits times) when the wait is known, within
// max_retry_seconds, and ends before the step's deadline.
func (a *HTTP) Call(ctx context.Context, call runner.AdapterCall) (any, error) {
	verb, ok := httpMethods[call.Method]
	if !ok {
		return nil, unsupported("Adapter '%s' does not support service_method '%s'", a.name, call.Method)
	}
	cfg, err := readHTTPConfig(a.construction, call.Config)
	if err != nil {
		return nil, err
	}
	lim, err := readLimits(call.Config)
	if err != nil {
		return nil, err
	}
	target, err := a.target(cfg.baseURL, call.Operation)
	if err != nil {
		return nil, err
	}
	body, err := encodeParams(verb, target, call.Params)
	if err != nil {
		return nil, err
	}
	token, err := a.token(cfg.auth, target)
	if err != nil {
		return nil, err
	}

	key := limiterKey(a.name, call.Config)
	clock := a.opts.Limiters.Clock()
	for waits := 0; ; waits++ {
		// A service that asked everyone to wait (an earlier 429) is waited
		// out under the same bounds as this call's own 429.
		if paused := a.opts.Limiters.PausedFor(key); paused > 0 {
			if err := a.bounded(ctx, lim, paused, map[string]any{"method": verb, "url": redact(target), "paused": true},
				"%s %s was not sent: the service asked to wait (an earlier 429)", verb, redact(target)); err != nil {
				return nil, err
			}
		}
		if err := a.opts.Limiters.Wait(ctx, key, lim.bucket); err != nil {
			return nil, aborted("The call waiting for the service's rate limit", err)
		}
		resp, err := a.send(ctx, verb, target, body, cfg, token)
		if err != nil {
			return nil, err
		}
		if resp.status != http.StatusTooManyRequests {
			return a.result(verb, target, resp)
		}
		named, hasNamed := retryAfter(resp.header.Get("Retry-After"), clock.Now())
		wait, known := lim.retryWait(named, hasNamed, 0)
		details := resp.details(verb, target)
		format, args := "%s %s answered 429 Too Many Requests", []any{verb, redact(target)}
		if !known {
			return nil, fail(errcode.ServiceRateLimited, details, format, args...)
		}
		a.opts.Limiters.Pause(key, clock.Now().Add(wait))
		if waits >= MaxRateLimitWaits {
			details["retry_after"] = wait.Seconds()
			return nil, fail(errcode.ServiceRateLimited, details, format+" %d times", append(args, waits+1)...)
		}
		if err := a.bounded(ctx, lim, wait, details, format, args...); err != nil {
			return nil, err
		}
		if err := clock.Sleep(ctx, wait); err != nil {
			return nil, aborted("The call waiting out the service's 429", err)
		}
	}
}

// bounded decides whether a rate-limit wait may be waited: longer than
// max_retry_seconds fails at once and is not to be retried (spec §3.4); a
// wait past the step's deadline fails at once, retryable; otherwise nil.
func (a *HTTP) bounded(ctx context.Context, lim limits, wait time.Duration, details map[string]any, format string, args ...any) error {
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

// target is {base_url}/{operation}, with params added later for GET and
// DELETE. The operation is a path below base_url.
func (a *HTTP) target(base, op string) (*url.URL, error) {
	op = strings.TrimLeft(op, "/")
	if op == "" {
		return nil, invalid("the operation is empty: it is the path below base_url")
	}
	if strings.ContainsAny(op, "?#") || slices.Contains(strings.Split(op, "/"), "..") {
		return nil, invalid("operation '%s' must be a path below base_url, without '..', '?' or '#'", op)
	}
	u, err := url.Parse(base + "/" + op)
	if err != nil || u.Host == "" {
		return nil, invalid("'%s/%s' is not a valid URL", base, op)
	}
	return u, nil
}

// encodeParams puts params in the query (GET, DELETE) or returns them as
// the JSON body (POST, PATCH).
func encodeParams(verb string, u *url.URL, params map[string]any) ([]byte, error) {
	if verb == http.MethodPost || verb == http.MethodPatch {
		if params == nil {
			params = map[string]any{}
		}
		b, err := json.Marshal(params)
		if err != nil {
			return nil, invalid("params cannot be sent as JSON: %v", err)
		}
		return b, nil
	}
	q := u.Query()
	for _, k := range sortedKeys(params) {
		switch v := params[k].(type) {
		case nil:
		case []any:
			for _, e := range v {
				s, err := queryValue(e)
				if err != nil {
					return nil, invalid("param '%s': %v", k, err)
				}
				q.Add(k, s)
			}
		default:
			s, err := queryValue(v)
			if err != nil {
				return nil, invalid("param '%s': %v", k, err)
			}
			q.Set(k, s)
		}
	}
	u.RawQuery = q.Encode()
	return nil, nil
}

// queryValue writes a scalar as text, and an object as its JSON.
func queryValue(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case int:
		return strconv.Itoa(v), nil
	case nil:
		return "", nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// token reads the credential: the construction's own, or the environment
// variable the config names, which goes only to the hosts the runner binds
// it to (Options.SecretHosts): a workflow names both the variable and the
// base_url, so without the binding it could send any credential anywhere.
func (a *HTTP) token(auth *authConfig, target *url.URL) (string, error) {
	if auth == nil {
		return "", nil
	}
	if auth.token != "" {
		return auth.token, nil
	}
	if a.opts.EnvPrefix != "*" && !strings.HasPrefix(auth.tokenEnv, a.opts.EnvPrefix) {
		return "", invalid("config.auth.token_env '%s' is not readable by workflows: the adapter runner gives them only environment variables whose names start with '%s'", auth.tokenEnv, a.opts.EnvPrefix)
	}
	v, ok := a.opts.LookupEnv(auth.tokenEnv)
	if !ok || v == "" {
		return "", fail(errcode.EngineAdapterFailed, map[string]any{"token_env": auth.tokenEnv},
			"Adapter '%s': the environment variable '%s' named by config.auth.token_env is not set in the adapter runner", a.name, auth.tokenEnv)
	}
	if auth.fromConstruction {
		// The manifest's base_url wins over the call's: the credential
		// goes to the host the deployment named.
		return v, nil
	}
	bound := hostList(a.opts.SecretHosts[auth.tokenEnv])
	if !bound.has(hostPort(target)) {
		to := "is bound to no host"
		if len(bound) > 0 {
			to = "may be sent only to " + strings.Join(bound, ", ")
		}
		return "", fail(errcode.AdapterValidationFailed, map[string]any{"token_env": auth.tokenEnv, "host": target.Host},
			"Adapter '%s': the credential in '%s' %s, not to '%s'; the adapter runner binds a variable to its hosts with -secret-host %s=<host>[,<host>…]",
			a.name, auth.tokenEnv, to, target.Host, auth.tokenEnv)
	}
	return v, nil
}

// answer is one HTTP reply, read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (r answer) details(verb string, u *url.URL) map[string]any {
	d := map[string]any{"status": r.status, "method": verb, "url": redact(u)}
	if len(r.body) > 0 {
		d["body"] = excerpt(r.body, 500)
	}
	return d
}

func (a *HTTP) send(ctx context.Context, verb string, u *url.URL, body []byte, cfg httpConfig, token string) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, verb, u.String(), rd)
	if err != nil {
		return answer{}, fail(errcode.EngineAdapterFailed, nil, "Adapter '%s': building the request failed: %v", a.name, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range cfg.headers {
		req.Header.Set(k, v)
	}
	if cfg.auth != nil {
		switch cfg.auth.kind {
		case "bearer":
			req.Header.Set("Authorization", "Bearer "+token)
		case "basic":
			req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(token)))
		case "header":
			req.Header.Set(cfg.auth.headerName, token)
		}
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return answer{}, a.transportError(ctx, verb, u, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, a.opts.MaxResponseBytes+1))
	if err != nil {
		return answer{}, a.transportError(ctx, verb, u, err)
	}
	if int64(len(raw)) > a.opts.MaxResponseBytes {
		return answer{}, fail(errcode.ServiceResponseInvalid, map[string]any{"status": resp.StatusCode, "method": verb, "url": redact(u)},
			"%s %s answered more than %d bytes", verb, redact(u), a.opts.MaxResponseBytes)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: raw}, nil
}

// transportError classifies a request that got no answer: the step's
// deadline, a refused redirect, or the network.
func (a *HTTP) transportError(ctx context.Context, verb string, u *url.URL, err error) error {
	if ctx.Err() != nil {
		return aborted(fmt.Sprintf("%s %s", verb, redact(u)), ctx.Err())
	}
	cause := err
	var uerr *url.Error
	if errors.As(err, &uerr) {
		cause = uerr.Err // url.Error repeats the URL, query included
	}
	details := map[string]any{"method": verb, "url": redact(u)}
	var refused *refusedAddress
	if errors.As(err, &refused) {
		details["address"] = refused.addr.String()
		return fail(errcode.EngineAdapterFailed, details,
			"%s %s was refused: %v. The http adapter reaches only public addresses unless the deployment allows the host (manifest config.allow_hosts, or the runner's -allow-host)",
			verb, redact(u), refused)
	}
	if errors.Is(err, errCrossHostRedirect) {
		return fail(errcode.ServiceUnexpectedRedirect, details, "%s %s was %v; the adapter follows redirects on the same host only", verb, redact(u), cause)
	}
	e := fail(errcode.NetworkUnreachable, details, "%s %s failed: %v", verb, redact(u), cause)
	e.Err = err
	return e
}

// result maps a non-429 answer: 2xx → {status, data}; otherwise the error
// of spec §13.4.
func (a *HTTP) result(verb string, u *url.URL, r answer) (any, error) {
	where := fmt.Sprintf("%s %s", verb, redact(u))
	statusText := fmt.Sprintf("%d %s", r.status, http.StatusText(r.status))
	switch {
	case r.status >= 200 && r.status < 300:
		var data any = map[string]any{} // an empty body (204) records {}
		if len(bytes.TrimSpace(r.body)) > 0 {
			if err := json.Unmarshal(r.body, &data); err != nil {
				return nil, fail(errcode.ServiceResponseInvalid, r.details(verb, u), "%s answered %s with a body that is not JSON: %v", where, statusText, err)
			}
		}
		return map[string]any{"status": r.status, "data": data}, nil
	case r.status == http.StatusUnauthorized:
		return nil, fail(errcode.ServiceAuthFailed, r.details(verb, u), "%s answered %s: the service refused the configured credentials", where, statusText)
	case r.status == http.StatusNotFound:
		return nil, fail(errcode.ServiceNotFound, r.details(verb, u), "%s answered %s", where, statusText)
	case r.status >= 400 && r.status < 500:
		return nil, withAction(fail(errcode.ServiceHTTP4xx, r.details(verb, u), "%s answered %s", where, statusText), errcode.ActionReportToUser)
	case r.status >= 500 && r.status < 600:
		return nil, fail(errcode.ServiceHTTP5xx, r.details(verb, u), "%s answered %s", where, statusText)
	}
	return nil, fail(errcode.ServiceResponseInvalid, r.details(verb, u), "%s answered an unexpected %s", where, statusText)
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if n, err := strconv.ParseFloat(h, 64); err == nil && n >= 0 {
		return seconds(n), true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// redact is the URL without its query (params may be personal data) and
// without user info.
func redact(u *url.URL) string {
	c := *u
	c.RawQuery, c.User, c.Fragment = "", nil, ""
	return c.String()
}

// excerpt is the start of a body, cut on a rune boundary.
func excerpt(b []byte, n int) string {
	if len(b) <= n {
		return strings.ToValidUTF8(string(b), "�")
	}
	b = b[:n]
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	return string(b) + "…"
}
