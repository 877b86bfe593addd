package workflow

import (
	"slices"
	"testing"
)

func TestCheckStrictFollowsTheProviderRules(t *testing.T) {
	t.Parallel()
	obj := func(props map[string]any, required ...any) map[string]any {
		return map[string]any{"type": "object", "additionalProperties": false, "properties": props, "required": required}
	}
	for _, tc := range []struct {
		name     string
		schema   any
		refusals []string
		caveats  []string
	}{
		{"plain and all required", obj(map[string]any{"a": map[string]any{"type": "string"}}, "a"), nil, nil},
		{"root not an object", map[string]any{"type": "string"}, []string{"no_schema (the schema root is not 'type: object')"}, nil},
		{"extra properties allowed", map[string]any{"type": "object", "properties": map[string]any{}}, []string{"missing_additional_properties at the schema root"}, nil},
		{"a minimum", obj(map[string]any{"n": map[string]any{"type": "number", "minimum": 0.0}}, "n"), []string{"unsupported_keyword 'minimum' at properties/n"}, nil},
		{"a length and a pattern", obj(map[string]any{"s": map[string]any{"type": "string", "minLength": 1.0, "pattern": "x"}}, "s"), nil,
			[]string{"unenforced_keyword 'minLength' at properties/s", "unenforced_pattern at properties/s"}},
		{"an optional property", obj(map[string]any{"o": map[string]any{"type": "string"}}), nil, []string{"optional_emission at properties/o"}},
		{"a recursive reference", obj(map[string]any{"self": map[string]any{"$ref": "#"}}, "self"), []string{"unsupported_keyword '$ref' (#) at properties/self"}, nil},
		{"an enum of objects", obj(map[string]any{"e": map[string]any{"enum": []any{map[string]any{}}}}, "e"), []string{"unsupported_keyword 'enum' with an object or array member at properties/e"}, nil},
		{"a nested open object", obj(map[string]any{"in": map[string]any{"type": "object"}}, "in"), []string{"missing_additional_properties at properties/in"}, nil},
	} {
		v := CheckStrict(tc.schema)
		if !slices.Equal(v.Refusals, tc.refusals) || !slices.Equal(v.Caveats, tc.caveats) {
			t.Errorf("%s:\n refusals %q, want %q\n caveats %q, want %q", tc.name, v.Refusals, tc.refusals, v.Caveats, tc.caveats)
		}
		if v.Eligible() != (len(tc.refusals) == 0) {
			t.Errorf("%s: Eligible() = %v", tc.name, v.Eligible())
		}
	}
	many := map[string]any{}
	for i := range 25 {
		many[string(rune('a'+i))] = map[string]any{"type": "string"}
	}
	if v := CheckStrict(obj(many)); !slices.Contains(v.Refusals, "too_many_optionals (25 optional properties, at most 24)") {
		t.Errorf("25 optionals: %q", v.Refusals)
	}
}
