// Package trigger reads a workflow's webhook `trigger:` block (listen spec
// §4, workflow-file spec §16) and answers the per-request questions it
// poses: is the request verified, does it pass the filter, what is its
// delivery id, what are the run's params. It holds no state and does no I/O.
package trigger

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Auth modes (spec §6).
const (
	ModeSharedSecret = "shared_secret"
	ModeGitHub       = "github"
	ModeStripe       = "stripe"
	ModeHMAC         = "hmac"
	ModeNone         = "none"
)

// Limits of the block (spec §4.1, §8).
const (
	MaxConditions     = 8
	MaxTTLMinutes     = 10080
	DefaultTTLMinutes = 60
	// MaxAgeSeconds bounds max_age_seconds (a day).
	MaxAgeSeconds = 86400
)

// Trigger is a checked trigger block.
type Trigger struct {
	// Path is the mount path; "" means "/<workflow id>" (see MountPath).
	Path   string
	Auth   Auth
	Filter []Condition
	// Dedup is nil when deliveries are not checked (no block, or false).
	Dedup *Dedup
	// Params maps run parameter names to request paths, sorted by name.
	ParamsMap []Param
	// RateLimit bounds the requests to this trigger's path; nil leaves it
	// to the listener's default (--rate-limit).
	RateLimit *RateLimit
}

// RateLimit is a token bucket: PerSecond requests a second on average,
// Burst at once. Off (`rate_limit: false`) is no limit, whatever the
// listener's default.
type RateLimit struct {
	PerSecond float64
	Burst     int
	Off       bool
}

// Auth is the verification scheme.
type Auth struct {
	Mode            string
	Header          string
	SecretFrom      string
	Algorithm       string // hmac: sha1, sha256 (default) or sha512
	Encoding        string // hmac: hex (default) or base64
	TimestampHeader string
	// MaxAge is max_age_seconds; 0 means not set.
	MaxAge time.Duration
}

// Condition is one filter condition: exactly one of Path and Header.
type Condition struct {
	Path   string
	Header string
	Values []string
}

// Dedup says where a delivery's own id is and how long it is remembered.
type Dedup struct {
	IDFrom        string
	TTL           time.Duration
	RejectMissing bool
}

// Param is one params_map entry.
type Param struct {
	Name string
	From string
}

// MountPath is the path the workflow is served on.
func (t *Trigger) MountPath(workflowID string) string {
	if t.Path != "" {
		return t.Path
	}
	return "/" + workflowID
}

// SecurityHeader is the header whose repetition refuses a request (spec
// §5 row 5b), or "" for mode none.
func (a Auth) SecurityHeader() string {
	switch a.Mode {
	case ModeSharedSecret, ModeHMAC:
		return a.Header
	case ModeGitHub:
		return "X-Hub-Signature-256"
	case ModeStripe:
		return "Stripe-Signature"
	}
	return ""
}

// Parse checks a trigger block (as JSON values: maps, lists, strings,
// float64 numbers) and returns it, or the first problem in the words of the
// original's schema validator (`trigger/auth: missing required property
// 'secret_from'`). It is fail-closed: any key it does not know is refused.
func Parse(block map[string]any) (*Trigger, error) {
	p := &parser{}
	t := p.trigger(block)
	if p.err != nil {
		return nil, p.err
	}
	return t, nil
}

type parser struct{ err error }

// Error is a trigger block refused: the message in listen §4.1's words,
// and Path, where in the block it points (from "trigger" down, object keys
// and list indexes), so the loader can give the field's line.
type Error struct {
	Msg  string
	Path []string
}

func (e *Error) Error() string { return e.Msg }

func (p *parser) fail(format string, args ...any) {
	if p.err == nil {
		msg := fmt.Sprintf(format, args...)
		p.err = &Error{Msg: msg, Path: pointerOf(msg)}
	}
}

// pointerOf reads where a message points. Every message the parser writes
// starts with the schema path of the value at fault ("trigger/auth/mode
// must …"), or of the object at fault followed by ':' ("trigger/dedup:
// missing required property 'id_from'"); an unknown property points at
// itself.
func pointerOf(msg string) []string {
	end := strings.IndexAny(msg, " :")
	if end < 0 {
		end = len(msg)
	}
	path := strings.Split(msg[:end], "/")
	const unknown = ": unknown property '"
	if rest, ok := strings.CutPrefix(msg[end:], unknown); ok {
		if name, _, ok := strings.Cut(rest, "'"); ok {
			path = append(path, name)
		}
	}
	return path
}

// keys refuses unknown keys and missing required ones of an object at where.
func (p *parser) keys(m map[string]any, where string, allowed, required []string) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range required {
		if _, ok := m[k]; !ok {
			p.fail("%s: missing required property '%s'", where, k)
		}
	}
	for _, k := range names {
		if !contains(allowed, k) {
			p.fail("%s: unknown property '%s'", where, k)
		}
	}
}

// str reads a required-non-empty string at where (when present).
func (p *parser) str(m map[string]any, key, where string) string {
	v, ok := m[key]
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		p.fail("%s/%s must be string", where, key)
		return ""
	}
	if s == "" {
		p.fail("%s/%s must NOT have fewer than 1 characters", where, key)
	}
	return s
}

func (p *parser) enum(m map[string]any, key, where string, allowed []string, def string) string {
	v, ok := m[key]
	if !ok {
		return def
	}
	s, _ := v.(string)
	if !contains(allowed, s) {
		p.fail("%s/%s must be equal to one of the allowed values", where, key)
		return def
	}
	return s
}

// integer reads an integer key; ok is false when absent or refused.
func (p *parser) integer(m map[string]any, key, where string) (int64, bool) {
	v, present := m[key]
	if !present {
		return 0, false
	}
	f, isNum := v.(float64)
	if !isNum || f != math.Trunc(f) || math.IsInf(f, 0) {
		p.fail("%s/%s must be integer", where, key)
		return 0, false
	}
	return int64(f), true
}

// integerIn is integer, refused (with the schema's words) below lo or
// above hi.
func (p *parser) integerIn(m map[string]any, key, where string, lo, hi int64) (int64, bool) {
	n, ok := p.integer(m, key, where)
	if !ok {
		return 0, false
	}
	switch {
	case n < lo:
		p.fail("%s/%s must be >= %d", where, key, lo)
	case n > hi:
		p.fail("%s/%s must be <= %d", where, key, hi)
	}
	return n, true
}

func (p *parser) trigger(b map[string]any) *Trigger {
	const where = "trigger"
	p.keys(b, where, []string{"type", "path", "auth", "filter", "dedup", "params_map", "rate_limit"}, []string{"type", "auth"})
	if ty, ok := b["type"]; ok && ty != "webhook" {
		p.fail("trigger/type must be equal to constant")
	}
	t := &Trigger{}
	t.Path = p.str(b, "path", where)
	if t.Path != "" && !strings.HasPrefix(t.Path, "/") {
		p.fail(`trigger/path must match pattern "^/"`)
	}
	if a, ok := b["auth"]; ok {
		am, isMap := a.(map[string]any)
		if !isMap {
			p.fail("trigger/auth must be object")
		} else {
			t.Auth = p.auth(am)
		}
	}
	if f, ok := b["filter"]; ok {
		t.Filter = p.filter(f)
	}
	if d, ok := b["dedup"]; ok {
		t.Dedup = p.dedup(d)
	}
	if pm, ok := b["params_map"]; ok {
		t.ParamsMap = p.params(pm)
	}
	if rl, ok := b["rate_limit"]; ok {
		t.RateLimit = p.rateLimit(rl)
	}
	return t
}

// MaxPerSecond bounds rate_limit.per_second (and burst): above it the
// limit limits nothing a listener can serve.
const MaxPerSecond = 100000

func (p *parser) rateLimit(v any) *RateLimit {
	const where = "trigger/rate_limit"
	if b, ok := v.(bool); ok && !b {
		return &RateLimit{Off: true}
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.fail("%s must be object or false", where)
		return nil
	}
	p.keys(m, where, []string{"per_second", "burst"}, []string{"per_second"})
	rl := &RateLimit{}
	if x, present := m["per_second"]; present {
		f, isNum := x.(float64)
		switch {
		case !isNum || math.IsNaN(f) || math.IsInf(f, 0):
			p.fail("%s/per_second must be number", where)
		case f <= 0:
			p.fail("%s/per_second must be > 0", where)
		case f > MaxPerSecond:
			p.fail("%s/per_second must be <= %d", where, MaxPerSecond)
		}
		rl.PerSecond = f
	}
	rl.Burst = int(math.Max(1, math.Ceil(rl.PerSecond)))
	if n, ok := p.integerIn(m, "burst", where, 1, MaxPerSecond); ok {
		rl.Burst = int(n)
	}
	return rl
}

func (p *parser) auth(m map[string]any) Auth {
	const where = "trigger/auth"
	modes := []string{ModeSharedSecret, ModeGitHub, ModeStripe, ModeHMAC, ModeNone}
	mode, _ := m["mode"].(string)
	if _, ok := m["mode"]; !ok {
		p.fail("%s: missing required property 'mode'", where)
		return Auth{}
	}
	if !contains(modes, mode) {
		p.fail("%s/mode must be equal to one of the allowed values", where)
		return Auth{}
	}
	a := Auth{Mode: mode, Algorithm: "sha256", Encoding: "hex"}
	switch mode {
	case ModeSharedSecret:
		p.keys(m, where, []string{"mode", "header", "secret_from"}, []string{"header", "secret_from"})
	case ModeGitHub:
		p.keys(m, where, []string{"mode", "secret_from"}, []string{"secret_from"})
	case ModeStripe:
		p.keys(m, where, []string{"mode", "secret_from", "max_age_seconds"}, []string{"secret_from"})
	case ModeHMAC:
		p.keys(m, where, []string{"mode", "secret_from", "header", "algorithm", "encoding", "timestamp_header", "max_age_seconds"}, []string{"secret_from", "header"})
		a.Algorithm = p.enum(m, "algorithm", where, []string{"sha1", "sha256", "sha512"}, "sha256")
		a.Encoding = p.enum(m, "encoding", where, []string{"hex", "base64"}, "hex")
		a.TimestampHeader = p.str(m, "timestamp_header", where)
	case ModeNone:
		p.keys(m, where, []string{"mode"}, nil)
	}
	a.Header = p.str(m, "header", where)
	a.SecretFrom = p.str(m, "secret_from", where)
	// Beyond MaxAgeSeconds the duration would overflow; a day already
	// accepts far more clock skew than any sender has.
	if n, ok := p.integerIn(m, "max_age_seconds", where, 1, MaxAgeSeconds); ok {
		a.MaxAge = time.Duration(n) * time.Second
	}
	return a
}

func (p *parser) filter(v any) []Condition {
	const where = "trigger/filter"
	m, ok := v.(map[string]any)
	if !ok {
		p.fail("%s must be object", where)
		return nil
	}
	all, hasAll := m["all"]
	if !hasAll {
		// A single condition written without `all` (spec §7).
		c := p.condition(m, where)
		return []Condition{c}
	}
	p.keys(m, where, []string{"all"}, nil)
	list, ok := all.([]any)
	if !ok {
		p.fail("%s/all must be array", where)
		return nil
	}
	if len(list) < 1 {
		p.fail("%s/all must NOT have fewer than 1 items", where)
	}
	if len(list) > MaxConditions {
		p.fail("%s/all must NOT have more than %d items", where, MaxConditions)
	}
	out := make([]Condition, 0, len(list))
	for i, item := range list {
		cw := fmt.Sprintf("%s/all/%d", where, i)
		cm, ok := item.(map[string]any)
		if !ok {
			p.fail("%s must be object", cw)
			continue
		}
		out = append(out, p.condition(cm, cw))
	}
	return out
}

func (p *parser) condition(m map[string]any, where string) Condition {
	_, hasPath := m["path"]
	_, hasHeader := m["header"]
	if hasPath == hasHeader {
		p.fail("%s: must have exactly one of 'header' or 'path'", where)
	}
	p.keys(m, where, []string{"path", "header", "value"}, []string{"value"})
	c := Condition{Path: p.str(m, "path", where), Header: p.str(m, "header", where)}
	switch v := m["value"].(type) {
	case string:
		if v == "" {
			p.fail("%s/value must NOT have fewer than 1 characters", where)
		}
		c.Values = []string{v}
	case []any:
		if len(v) == 0 {
			p.fail("%s/value must NOT have fewer than 1 items", where)
		}
		for i, x := range v {
			s, ok := x.(string)
			if !ok || s == "" {
				p.fail("%s/value/%d must be a non-empty string", where, i)
				continue
			}
			c.Values = append(c.Values, s)
		}
	case nil:
		if _, present := m["value"]; present {
			p.fail("%s/value must be string or array", where) // null: a condition that could never hold
		}
	default:
		p.fail("%s/value must be string or array", where)
	}
	return c
}

func (p *parser) dedup(v any) *Dedup {
	const where = "trigger/dedup"
	if b, ok := v.(bool); ok && !b {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.fail("%s must be object or false", where)
		return nil
	}
	p.keys(m, where, []string{"id_from", "ttl_minutes", "on_missing_id"}, []string{"id_from"})
	d := &Dedup{IDFrom: p.str(m, "id_from", where), TTL: DefaultTTLMinutes * time.Minute}
	if n, ok := p.integerIn(m, "ttl_minutes", where, 1, MaxTTLMinutes); ok {
		d.TTL = time.Duration(n) * time.Minute
	}
	d.RejectMissing = p.enum(m, "on_missing_id", where, []string{"skip", "reject"}, "skip") == "reject"
	return d
}

func (p *parser) params(v any) []Param {
	const where = "trigger/params_map"
	m, ok := v.(map[string]any)
	if !ok {
		p.fail("%s must be object", where)
		return nil
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]Param, 0, len(m))
	for _, name := range names {
		s, ok := m[name].(string)
		if !ok {
			p.fail("%s/%s must be string", where, name)
			continue
		}
		if s == "" {
			p.fail("%s/%s must NOT have fewer than 1 characters", where, name)
		}
		out = append(out, Param{Name: name, From: s})
	}
	return out
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
