// Package redact hides secrets in what tools give back before a model or
// the run record sees it (agent-driver §18): every environment value
// longer than 4 characters and every secret the drive resolved (the
// values '${NAME}' expanded to in mcp_servers) becomes [REDACTED],
// longest first in one pass; then `Bearer <token>` and `token=<value>`.
// Values of 4 characters or fewer are left alone (they are noise, not
// secrets); nothing here is a guarantee.
package redact

import (
	"regexp"
	"sort"
	"strings"
)

// Redacted replaces a hidden value.
const Redacted = "[REDACTED]"

// minLen is the shortest value that is redacted.
const minLen = 5

var (
	bearer = regexp.MustCompile(`(?i)\bBearer\s+[A-Za-z0-9._~+/=-]+`)
	token  = regexp.MustCompile(`(?i)\btoken=[^\s&"']+`)
)

// Redactor hides a fixed set of values.
type Redactor struct {
	r *strings.Replacer
}

// New hides the values of environ (NAME=value entries) and secrets.
func New(environ []string, secrets ...string) *Redactor {
	seen := map[string]bool{}
	var values []string
	add := func(v string) {
		if len(v) >= minLen && !seen[v] {
			seen[v] = true
			values = append(values, v)
		}
	}
	for _, kv := range environ {
		if _, v, ok := strings.Cut(kv, "="); ok {
			add(v)
		}
	}
	for _, s := range secrets {
		add(s)
	}
	// strings.Replacer tries its pairs in order at each position: longest
	// first makes the longest match win.
	sort.SliceStable(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	pairs := make([]string, 0, 2*len(values))
	for _, v := range values {
		pairs = append(pairs, v, Redacted)
	}
	return &Redactor{r: strings.NewReplacer(pairs...)}
}

// String hides what s holds of the values, bearer tokens and token=
// parameters.
func (x *Redactor) String(s string) string {
	if x != nil && x.r != nil {
		s = x.r.Replace(s)
	}
	s = bearer.ReplaceAllStringFunc(s, func(m string) string {
		return m[:len("Bearer")] + " " + Redacted
	})
	return token.ReplaceAllStringFunc(s, func(m string) string {
		return m[:len("token=")] + Redacted
	})
}
