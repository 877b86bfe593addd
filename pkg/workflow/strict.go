package workflow

import (
	"fmt"
	"sort"
	"strings"
)

// StrictVerdict is whether a step's schema can be enforced by a provider's
// constrained decoding (`structured_output: strict`, workflow-file spec
// §11.2), under the rules the loader uses (Anthropic's): Refusals make it
// ineligible; Caveats are features the provider accepts but does not
// enforce (Realm still validates every answer).
type StrictVerdict struct {
	Refusals []string // e.g. "unsupported_keyword 'minimum' at properties/amount"
	Caveats  []string // e.g. "unenforced_keyword 'minLength' at properties/reason"
}

// Eligible is true when nothing refuses the schema.
func (v StrictVerdict) Eligible() bool { return len(v.Refusals) == 0 }

// strictLimits are Anthropic's published limits on optional properties.
const (
	maxOptionals      = 24
	maxUnionOptionals = 16
)

// strictKeywords are enforced by constrained decoding; refusedKeywords make
// the schema ineligible; every other keyword is accepted but not enforced.
var (
	strictKeywords = map[string]bool{
		"type": true, "properties": true, "required": true, "additionalProperties": true,
		"items": true, "enum": true, "const": true, "anyOf": true, "allOf": true,
		"$ref": true, "$defs": true, "definitions": true, "description": true, "title": true,
		"default": true, "examples": true, "$schema": true, "$id": true, "$comment": true,
	}
	refusedKeywords = map[string]bool{
		"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	}
)

// StrictSchema is the schema constrained decoding would enforce for the
// step: output_schema, else input_schema (nil for none).
func (s *Step) StrictSchema() any {
	if s.OutputSchema != nil {
		return s.OutputSchema
	}
	return s.InputSchema
}

// CheckStrict judges schema for `structured_output: strict`.
func CheckStrict(schema any) StrictVerdict {
	var v StrictVerdict
	root, ok := schema.(map[string]any)
	if !ok || root["type"] != "object" {
		v.Refusals = append(v.Refusals, "no_schema (the schema root is not 'type: object')")
		return v
	}
	optionals, unions := 0, 0
	var walk func(s map[string]any, path []string, depth int)
	walk = func(s map[string]any, path []string, depth int) {
		if depth > 32 {
			return
		}
		at := "the schema root"
		if len(path) > 0 {
			at = strings.Join(path, "/")
		}
		for _, k := range sortedKeys(s) {
			switch {
			case strictKeywords[k]:
			case refusedKeywords[k]:
				v.Refusals = append(v.Refusals, fmt.Sprintf("unsupported_keyword '%s' at %s", k, at))
			case k == "pattern":
				v.Caveats = append(v.Caveats, "unenforced_pattern at "+at)
			case k == "format":
				v.Caveats = append(v.Caveats, "unenforced_format at "+at)
			default:
				v.Caveats = append(v.Caveats, fmt.Sprintf("unenforced_keyword '%s' at %s", k, at))
			}
		}
		if ref, ok := s["$ref"].(string); ok && (ref == "#" || !strings.HasPrefix(ref, "#/")) {
			v.Refusals = append(v.Refusals, fmt.Sprintf("unsupported_keyword '$ref' (%s) at %s", ref, at))
		}
		if enum, ok := s["enum"].([]any); ok {
			for _, e := range enum {
				switch e.(type) {
				case map[string]any, []any:
					v.Refusals = append(v.Refusals, "unsupported_keyword 'enum' with an object or array member at "+at)
				}
			}
		}
		props, hasProps := s["properties"].(map[string]any)
		if s["type"] == "object" || hasProps {
			if ap, ok := s["additionalProperties"].(bool); !ok || ap {
				v.Refusals = append(v.Refusals, "missing_additional_properties at "+at)
			}
		}
		required := map[string]bool{}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		for _, name := range sortedKeys(props) {
			sub, _ := props[name].(map[string]any)
			if !required[name] {
				optionals++
				v.Caveats = append(v.Caveats, "optional_emission at "+strings.Join(append(path, "properties", name), "/"))
				if _, union := sub["anyOf"]; union {
					unions++
				} else if ts, ok := sub["type"].([]any); ok && len(ts) > 1 {
					unions++
				}
			}
			if sub != nil {
				walk(sub, append(path, "properties", name), depth+1)
			}
		}
		if items, ok := s["items"].(map[string]any); ok {
			walk(items, append(path, "items"), depth+1)
		}
		for _, kw := range []string{"anyOf", "allOf"} {
			if list, ok := s[kw].([]any); ok {
				for i, e := range list {
					if sub, ok := e.(map[string]any); ok {
						walk(sub, append(path, kw, fmt.Sprint(i)), depth+1)
					}
				}
			}
		}
		for _, kw := range []string{"$defs", "definitions"} {
			if defs, ok := s[kw].(map[string]any); ok {
				for _, name := range sortedKeys(defs) {
					if sub, ok := defs[name].(map[string]any); ok {
						walk(sub, append(path, kw, name), depth+1)
					}
				}
			}
		}
	}
	walk(root, nil, 0)
	if optionals > maxOptionals {
		v.Refusals = append(v.Refusals, fmt.Sprintf("too_many_optionals (%d optional properties, at most %d)", optionals, maxOptionals))
	}
	if unions > maxUnionOptionals {
		v.Refusals = append(v.Refusals, fmt.Sprintf("too_many_unions (%d union-typed optional properties, at most %d)", unions, maxUnionOptionals))
	}
	sort.Strings(v.Caveats)
	return v
}
