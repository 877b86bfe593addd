package provider

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// Official are the providers' own endpoints: a drive may always name them.
var Official = []string{"https://api.openai.com", "https://api.anthropic.com"}

// Allowlist is the set of base URLs a drive may name (DriveOptions
// base_url). agent-svc sends its own API keys to whatever base URL a drive
// uses, so a caller must not be able to point it anywhere else: the key
// would go to the caller's server.
type Allowlist struct {
	prefixes []endpoint
}

// endpoint is a base URL reduced to what decides where a request goes.
type endpoint struct {
	scheme, host, port, path string
}

// NewAllowlist checks each base URL. Blank entries are skipped.
func NewAllowlist(urls ...string) (Allowlist, error) {
	var a Allowlist
	for _, u := range urls {
		if strings.TrimSpace(u) == "" {
			continue
		}
		e, err := parseEndpoint(u)
		if err != nil {
			return Allowlist{}, fmt.Errorf("--allow-base-url %q: %w", u, err)
		}
		a.prefixes = append(a.prefixes, e)
	}
	return a, nil
}

// With is a plus the base URLs of others (entries that do not parse are
// skipped: they cannot match anything a drive names).
func (a Allowlist) With(others ...string) Allowlist {
	out := Allowlist{prefixes: append([]endpoint(nil), a.prefixes...)}
	for _, u := range others {
		if e, err := parseEndpoint(u); err == nil {
			out.prefixes = append(out.prefixes, e)
		}
	}
	return out
}

// Allows reports whether raw is one of the allowed base URLs or lies under
// one: same scheme, host and port, and a path equal to an allowed path or
// below it at a "/" boundary. Hosts are compared whole, so
// https://api.openai.com.evil.com is not https://api.openai.com, and
// /v1evil is not under /v1.
func (a Allowlist) Allows(raw string) bool {
	e, err := parseEndpoint(raw)
	if err != nil {
		return false
	}
	for _, p := range a.prefixes {
		if e.scheme != p.scheme || e.host != p.host || e.port != p.port {
			continue
		}
		if p.path == "/" || e.path == p.path || strings.HasPrefix(e.path, p.path+"/") {
			return true
		}
	}
	return false
}

// parseEndpoint normalises a base URL: scheme and host lower case, the
// port made explicit, the path cleaned (dot segments resolved as a server
// would) without a trailing slash. User info, a query or a fragment are
// refused: none belongs in a base URL, and user info is a classic way to
// make a URL read as another host.
func parseEndpoint(raw string) (endpoint, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return endpoint{}, errors.New("not a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return endpoint{}, errors.New("the scheme must be http or https")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return endpoint{}, errors.New("a base URL has no user info, query or fragment")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return endpoint{}, errors.New("no host")
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if scheme == "http" {
			port = "80"
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return endpoint{}, errors.New("bad port")
	}
	port = strconv.Itoa(n) // 0443 is 443
	p := path.Clean("/" + u.Path)
	return endpoint{scheme: scheme, host: host, port: port, path: p}, nil
}

// RefuseBaseURL is the one-line refusal of a drive naming a base URL that
// is not allowed.
func RefuseBaseURL(raw string) string {
	return fmt.Sprintf("Error: base URL '%s' is not allowed: agent-svc sends its API keys only to the providers' official endpoints, its own OPENAI_BASE_URL/ANTHROPIC_BASE_URL and the URLs it was started with --allow-base-url; start agent-svc with --allow-base-url %s to allow it. Nothing was sent.", raw, raw)
}
