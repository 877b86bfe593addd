package workflow

import (
	"slices"
	"testing"
)

func TestCheckStrictOpenAIFollowsOpenAIsRules(t *testing.T) {
	t.Parallel()
	obj := func(props map[string]any, required ...any) map[string]any {
		return map[string]any{"type": "object", "additionalProperties": false, "properties": props, "required": required}
	}
	// nested is an object whose property "in" nests objects n levels deep
	// below the root.
	nested := func(n int) map[string]any {
		leaf := obj(map[string]any{"v": map[string]any{"type": "string"}}, "v")
		for range n - 1 {
			leaf = obj(map[string]any{"in": leaf}, "in")
		}
		return leaf
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
		{"an optional property", obj(map[string]any{"o": map[string]any{"type": "string"}}), []string{"not_all_required at properties/o"}, nil},
		{"an optional written as a null-union", obj(map[string]any{"o": map[string]any{"type": []any{"string", "null"}}}, "o"), nil, []string{"null_union_emission at properties/o"}},
		{"a minimum and a length are used", obj(map[string]any{"n": map[string]any{"type": "number", "minimum": 0.0}, "s": map[string]any{"type": "string", "minLength": 1.0, "pattern": "x"}}, "n", "s"), nil, nil},
		{"a recursive reference is used", obj(map[string]any{"self": map[string]any{"$ref": "#"}}, "self"), nil, nil},
		{"ten levels of objects", nested(10), nil, nil},
		{"eleven levels of objects", nested(11), []string{"exceeds_provider_limit (objects nested deeper than 10 levels) at properties/in/properties/in/properties/in/properties/in/properties/in/properties/in/properties/in/properties/in/properties/in/properties/in"}, nil},
	} {
		v := CheckStrictOpenAI(tc.schema)
		if !slices.Equal(v.Refusals, tc.refusals) || !slices.Equal(v.Caveats, tc.caveats) {
			t.Errorf("%s:\n refusals %q, want %q\n caveats %q, want %q", tc.name, v.Refusals, tc.refusals, v.Caveats, tc.caveats)
		}
	}
}
