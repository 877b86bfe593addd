package trigger

import (
	"net/http"
	"strconv"
	"strings"
)

// Request is what the trigger reads of one delivery: its headers by
// lower-case name (a header sent more than once is absent, spec §5.1) and
// its parsed JSON body.
type Request struct {
	Headers map[string]string
	// Repeated holds the lower-case names of headers sent more than once.
	Repeated map[string]bool
	Body     any
}

// NewRequest indexes h. Repeated headers are never joined.
func NewRequest(h http.Header, body any) *Request {
	r := &Request{Headers: map[string]string{}, Repeated: map[string]bool{}, Body: body}
	for name, vals := range h {
		k := strings.ToLower(name)
		if len(vals) != 1 || r.Repeated[k] {
			r.Repeated[k] = true
			delete(r.Headers, k)
			continue
		}
		if _, dup := r.Headers[k]; dup {
			r.Repeated[k] = true
			delete(r.Headers, k)
			continue
		}
		r.Headers[k] = vals[0]
	}
	return r
}

// Header is the single value of the named header (any case).
func (r *Request) Header(name string) (string, bool) {
	v, ok := r.Headers[strings.ToLower(name)]
	return v, ok
}

// Resolve reads a dot path rooted at `body.` or `headers.` (spec §4). Any
// other root, a missing key or a walk through a non-object resolves to
// nothing (ok false). A JSON null also counts as nothing.
func (r *Request) Resolve(path string) (any, bool) {
	root, rest, _ := strings.Cut(path, ".")
	switch root {
	case "headers":
		v, ok := r.Headers[strings.ToLower(rest)]
		return v, ok
	case "body":
		if rest == "" {
			return r.Body, r.Body != nil
		}
		cur := r.Body
		for _, part := range strings.Split(rest, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[part]; !ok {
				return nil, false
			}
		}
		return cur, cur != nil
	}
	return nil, false
}

// Text converts a scalar JSON value to text as the original does (String()
// in JavaScript): numbers without a trailing ".0", booleans as true/false.
// Objects, arrays and null have no text.
func Text(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}

// Matches reports whether every filter condition holds (spec §7).
func (t *Trigger) Matches(r *Request) bool {
	for _, c := range t.Filter {
		var v any
		var ok bool
		if c.Header != "" {
			v, ok = r.Header(c.Header)
		} else {
			v, ok = r.Resolve(c.Path)
		}
		if !ok {
			return false
		}
		s, ok := Text(v)
		if !ok || !contains(c.Values, s) {
			return false
		}
	}
	return true
}

// DeliveryID is the delivery's own id as text, when dedup is on and the id
// resolves to a scalar.
func (t *Trigger) DeliveryID(r *Request) (string, bool) {
	if t.Dedup == nil {
		return "", false
	}
	v, ok := r.Resolve(t.Dedup.IDFrom)
	if !ok {
		return "", false
	}
	return Text(v)
}

// Params builds the run's params from params_map. Entries that resolve to
// nothing are left out (not null) and named in missing, for the log.
func (t *Trigger) Params(r *Request) (params map[string]any, missing []string) {
	params = map[string]any{}
	for _, p := range t.ParamsMap {
		v, ok := r.Resolve(p.From)
		if !ok {
			missing = append(missing, p.From)
			continue
		}
		params[p.Name] = v
	}
	return params, missing
}
