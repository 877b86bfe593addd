package workflow

import (
	"fmt"
	"strings"
)

// maxOpenAINesting is how many levels of object nesting OpenAI's strict
// mode takes (the root object is level 1).
const maxOpenAINesting = 10

// CheckStrictOpenAI judges schema for `structured_output: strict` under
// OpenAI's rules (agent-driver §8.2), which differ from the loader's
// Anthropic rules: every property must be required (an optional one is
// refused `not_all_required`, so the optional-count and union limits never
// come into play), objects may nest at most 10 levels
// (`exceeds_provider_limit`), numeric bounds and off-allowlist keywords
// are used as written, and an optional written as a null-union (required,
// typed `[T, "null"]`) is used with the note `null_union_emission`.
// An external `$ref` is refused `unsupported_keyword` as under Anthropic's
// rules; an internal one, recursive included, is used.
func CheckStrictOpenAI(schema any) StrictVerdict {
	var v StrictVerdict
	root, ok := schema.(map[string]any)
	if !ok || root["type"] != "object" {
		v.Refusals = append(v.Refusals, "no_schema (the schema root is not 'type: object')")
		return v
	}
	tooDeep := false
	var walk func(s map[string]any, path []string, level, depth int)
	walk = func(s map[string]any, path []string, level, depth int) {
		if depth > 32 {
			return
		}
		at := "the schema root"
		if len(path) > 0 {
			at = strings.Join(path, "/")
		}
		if ref, ok := s["$ref"].(string); ok && !strings.HasPrefix(ref, "#") {
			v.Refusals = append(v.Refusals, fmt.Sprintf("unsupported_keyword '$ref' (%s) at %s", ref, at))
		}
		props, hasProps := s["properties"].(map[string]any)
		if s["type"] == "object" || hasProps {
			level++
			if ap, ok := s["additionalProperties"].(bool); !ok || ap {
				v.Refusals = append(v.Refusals, "missing_additional_properties at "+at)
			}
			if level > maxOpenAINesting && !tooDeep {
				tooDeep = true // said once, at the first object too deep
				v.Refusals = append(v.Refusals, fmt.Sprintf("exceeds_provider_limit (objects nested deeper than %d levels) at %s", maxOpenAINesting, at))
			}
		}
		required := requiredSet(s)
		for _, name := range sortedKeys(props) {
			sub, _ := props[name].(map[string]any)
			where := strings.Join(append(append([]string{}, path...), "properties", name), "/")
			switch {
			case !required[name]:
				v.Refusals = append(v.Refusals, "not_all_required at "+where)
			case nullUnion(sub):
				v.Caveats = append(v.Caveats, "null_union_emission at "+where)
			}
			if sub != nil {
				walk(sub, append(append([]string{}, path...), "properties", name), level, depth+1)
			}
		}
		for _, child := range subschemas(s, path) {
			walk(child.schema, child.path, level, depth+1)
		}
	}
	walk(root, nil, 0, 0)
	return v
}

// requiredSet is an object schema's `required` names.
func requiredSet(s map[string]any) map[string]bool {
	out := map[string]bool{}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				out[name] = true
			}
		}
	}
	return out
}

// nullUnion says a property admits null beside another type: the way an
// optional is written when every property must be required.
func nullUnion(s map[string]any) bool {
	if ts, ok := s["type"].([]any); ok && len(ts) > 1 {
		for _, t := range ts {
			if t == "null" {
				return true
			}
		}
	}
	if list, ok := s["anyOf"].([]any); ok && len(list) > 1 {
		for _, e := range list {
			if m, ok := e.(map[string]any); ok && m["type"] == "null" {
				return true
			}
		}
	}
	return false
}

type located struct {
	schema map[string]any
	path   []string
}

// subschemas are the schemas below s other than its properties: items,
// the members of anyOf/allOf and the definitions.
func subschemas(s map[string]any, path []string) []located {
	at := func(more ...string) []string { return append(append([]string{}, path...), more...) }
	var out []located
	if items, ok := s["items"].(map[string]any); ok {
		out = append(out, located{items, at("items")})
	}
	for _, kw := range []string{"anyOf", "allOf"} {
		if list, ok := s[kw].([]any); ok {
			for i, e := range list {
				if sub, ok := e.(map[string]any); ok {
					out = append(out, located{sub, at(kw, fmt.Sprint(i))})
				}
			}
		}
	}
	for _, kw := range []string{"$defs", "definitions"} {
		if defs, ok := s[kw].(map[string]any); ok {
			for _, name := range sortedKeys(defs) {
				if sub, ok := defs[name].(map[string]any); ok {
					out = append(out, located{sub, at(kw, name)})
				}
			}
		}
	}
	return out
}
