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
	// api holds the 429 loop and the classification every adapter
	// shares; the http adapter's base URL and headers come per call.
	api *api
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
	opts = opts.withDefaults()
	shared := &api{name: name, opts: opts, client: client, rules: rules{actions: map[errcode.Code]errcode.AgentAction{
		errcode.ServiceHTTP4xx: errcode.ActionReportToUser,
	}}}
	return &HTTP{name: name, construction: construction, opts: opts, client: client, api: shared}, nil
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
	if _, err := readLimits(call.Config); err != nil {
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

	resp, err := a.api.exchange(ctx, call.Config, verb, target, func() (answer, error) { return a.send(ctx, verb, target, body, cfg, token) })
	if err != nil {
		return nil, err
	}
	return a.result(verb, target, resp)
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
		return answer{}, transportError(ctx, verb, u, err)
	}
	defer resp.Body.Close()
	return readAnswer(ctx, verb, u, resp, a.opts.MaxResponseBytes)
}

// readAnswer reads a reply's body, bounded by limit bytes.
func readAnswer(ctx context.Context, verb string, u *url.URL, resp *http.Response, limit int64) (answer, error) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return answer{}, transportError(ctx, verb, u, err)
	}
	if int64(len(raw)) > limit {
		return answer{}, fail(errcode.ServiceResponseInvalid, map[string]any{"status": resp.StatusCode, "method": verb, "url": redact(u)},
			"%s %s answered more than %d bytes", verb, redact(u), limit)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: raw}, nil
}

// transportError classifies a request that got no answer: the step's
// deadline, a refused redirect, or the network.
func transportError(ctx context.Context, verb string, u *url.URL, err error) error {
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
			"%s %s was refused: %v. The adapters reach only public addresses unless the deployment allows the host (manifest config.allow_hosts or base_url, or the runner's -allow-host)",
			verb, redact(u), refused)
	}
	if errors.Is(err, errCrossHostRedirect) {
		return fail(errcode.ServiceUnexpectedRedirect, details, "%s %s was %v; the adapter follows redirects on the same host only", verb, redact(u), cause)
	}
	e := fail(errcode.NetworkUnreachable, details, "%s %s failed: %v", verb, redact(u), cause)
	e.Err = err
	return e
}

// result is a 2xx answer as {status, data}.
func (a *HTTP) result(verb string, u *url.URL, r answer) (any, error) {
	var data any = map[string]any{} // an empty body (204) records {}
	if len(bytes.TrimSpace(r.body)) > 0 {
		if err := json.Unmarshal(r.body, &data); err != nil {
			return nil, fail(errcode.ServiceResponseInvalid, r.details(verb, u), "%s %s answered %d %s with a body that is not JSON: %v",
				verb, redact(u), r.status, http.StatusText(r.status), err)
		}
	}
	return map[string]any{"status": r.status, "data": data}, nil
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
