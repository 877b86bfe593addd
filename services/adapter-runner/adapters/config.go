package adapters

import (
	"cmp"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/realm-go/realm/services/adapter-runner/ratelimit"
)

// Keys of a call's config that the engine sets last (the merge rule in the
// package doc): they key the service's bucket and bound its waits.
const (
	keyService   = "service"
	keyRateLimit = "rate_limit"
)

// limits is a service's rate_limit block, read.
type limits struct {
	bucket ratelimit.Bucket
	// fallback, floor and ceiling are fallback_retry_seconds,
	// min_retry_seconds and max_retry_seconds; negative when unset.
	fallback, floor, ceiling float64
}

// readLimits reads config.rate_limit. The loader does not check its inner
// keys (spec §3.4), so a wrong type is refused here, at the call.
func readLimits(config map[string]any) (limits, error) {
	l := limits{fallback: -1, floor: -1, ceiling: -1}
	raw, ok := config[keyRateLimit]
	if !ok || raw == nil {
		return l, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return l, invalid("config.rate_limit must be an object")
	}
	num := func(key string) (float64, error) {
		v, ok := m[key]
		if !ok || v == nil {
			return -1, nil
		}
		f, ok := number(v)
		if !ok || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return -1, invalid("config.rate_limit.%s must be a non-negative number", key)
		}
		return f, nil
	}
	var err error
	rps, err := num("requests_per_second")
	if err != nil {
		return l, err
	}
	burst, err := num("burst")
	if err != nil {
		return l, err
	}
	if rps > 0 {
		l.bucket = ratelimit.Bucket{RequestsPerSecond: rps, Burst: rps}
		if burst >= 0 {
			l.bucket.Burst = burst
		}
	}
	if l.fallback, err = num("fallback_retry_seconds"); err != nil {
		return l, err
	}
	if l.floor, err = num("min_retry_seconds"); err != nil {
		return l, err
	}
	if l.ceiling, err = num("max_retry_seconds"); err != nil {
		return l, err
	}
	return l, nil
}

// retryWait is how long to wait after a 429: what the service named
// (Retry-After), else fallback_retry_seconds, else the adapter's default,
// raised to min_retry_seconds. known is false when nothing names a wait.
func (l limits) retryWait(named time.Duration, hasNamed bool, adapterDefault time.Duration) (wait time.Duration, known bool) {
	switch {
	case hasNamed:
		wait, known = named, true
	case l.fallback >= 0:
		wait, known = seconds(l.fallback), true
	case adapterDefault > 0:
		wait, known = adapterDefault, true
	}
	if l.floor >= 0 && wait < seconds(l.floor) {
		wait, known = seconds(l.floor), true
	}
	return wait, known
}

// tooLong reports whether wait passes max_retry_seconds.
func (l limits) tooLong(wait time.Duration) bool {
	return l.ceiling >= 0 && wait > seconds(l.ceiling)
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// number reads a JSON number (float64 from protobuf, int from YAML).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

// limiterKey names the bucket of the service a call is for: the adapter
// it was registered under and the workflow's service name.
func limiterKey(adapter string, config map[string]any) string {
	svc, _ := config[keyService].(string)
	return adapter + "\x00" + svc
}

// httpConfig is the http adapter's settings for one call.
type httpConfig struct {
	baseURL string
	headers map[string]string
	auth    *authConfig
}

// authConfig is config.auth: how the credential is sent and where it comes
// from. token is set only from construction config (a deployment manifest,
// secrets resolved); a call's config names an environment variable.
type authConfig struct {
	kind  string // bearer, basic, header
	token string
	// fromConstruction: the manifest entry's auth, not the call's.
	fromConstruction bool
	tokenEnv         string
	headerName       string
}

var envName = regexp.MustCompile(`^[A-Z0-9_]+$`)

// readHTTPConfig merges the construction config (a manifest entry; nil for
// the catalog instance) with the call's: the construction's base_url, auth
// and headers win, so a workflow cannot send a deployment's credentials to
// another host or replace its headers.
func readHTTPConfig(construction, call map[string]any) (httpConfig, error) {
	var c httpConfig
	base := cmp.Or(str(construction["base_url"]), str(call["base_url"]))
	if base == "" {
		return c, invalid("config.base_url is required: the service's base URL, such as https://api.example.com/v1")
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return c, invalid("config.base_url '%s' must be an http:// or https:// URL", base)
	}
	c.baseURL = strings.TrimRight(base, "/")

	c.headers = map[string]string{}
	for _, src := range []struct {
		where string
		v     any
	}{{"config.headers", call["headers"]}, {"the adapter's headers", construction["headers"]}} {
		if src.v == nil {
			continue
		}
		m, ok := src.v.(map[string]any)
		if !ok {
			return c, invalid("%s must be an object of header names to strings", src.where)
		}
		for k, v := range m {
			s, ok := v.(string)
			if !ok {
				return c, invalid("%s.%s must be a string", src.where, k)
			}
			if src.where == "config.headers" && isCredentialHeader(k) {
				return c, invalid("config.headers.%s may not be written in the workflow file; use config.auth with token_env", k)
			}
			c.headers[k] = s
		}
	}

	var err error
	if construction["auth"] != nil {
		c.auth, err = readAuth(construction["auth"], true)
	} else if call["auth"] != nil {
		c.auth, err = readAuth(call["auth"], false)
	}
	return c, err
}

func isCredentialHeader(name string) bool {
	switch strings.ToLower(name) {
	case "authorization", "proxy-authorization", "cookie":
		return true
	}
	return false
}

func readAuth(v any, construction bool) (*authConfig, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("config.auth must be an object")
	}
	for _, k := range sortedKeys(m) {
		switch k {
		case "type", "token", "token_env", "header_name":
		default:
			return nil, invalid("config.auth: unknown key '%s' (known: type, token_env, header_name)", k)
		}
	}
	a := &authConfig{kind: cmp.Or(str(m["type"]), "bearer"), tokenEnv: str(m["token_env"]), headerName: cmp.Or(str(m["header_name"]), "X-Auth-Token"), fromConstruction: construction}
	switch a.kind {
	case "bearer", "basic", "header":
	default:
		return nil, invalid("config.auth.type '%s' must be 'bearer', 'basic' or 'header'", a.kind)
	}
	if tok, has := m["token"]; has {
		if !construction {
			// The workflow file is not a place for credentials (spec
			// §13.2): it names the variable that holds one.
			return nil, invalid("config.auth.token may not be written in the workflow file; set auth.token_env to the name of an environment variable of the adapter runner that holds the credential")
		}
		a.token = str(tok)
	}
	if a.tokenEnv != "" && !envName.MatchString(a.tokenEnv) {
		return nil, invalid("config.auth.token_env '%s' must be an environment variable name (A-Z, 0-9, _)", a.tokenEnv)
	}
	if a.token == "" && a.tokenEnv == "" {
		return nil, invalid("config.auth needs token_env: the name of the environment variable that holds the credential")
	}
	return a, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
