package template

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/realm-go/realm/pkg/condition"
)

// MaxInputMapDepth is the deepest allowed nesting of input_map objects.
const MaxInputMapDepth = 10

// InputMapError is a refused input_map. Its message is what follows
// "Invalid workflow: Step '<step>': " in the loader's output.
type InputMapError struct {
	Key string // dotted input_map key the problem sits under; may be empty
	msg string
}

func (e *InputMapError) Error() string { return e.msg }

// ValidateInputMap checks an input_map's shape without reading any values
// (for the loader; BuildInputMap checks the same rules again at run time).
func ValidateInputMap(m map[string]any) error {
	_, err := build(m, Scope{}, "", 1, false)
	return err
}

// BuildInputMap builds an auto step's input from its input_map (§8.1):
// strings are paths (run.params.…, context.resources.…), whose value is
// copied (a path that finds nothing omits its key); maps are built
// recursively; {$literal: v} is v verbatim.
func BuildInputMap(m map[string]any, s Scope) (map[string]any, error) {
	if m == nil {
		return map[string]any{}, nil
	}
	return build(m, s, "", 1, true)
}

func build(m map[string]any, s Scope, prefix string, depth int, resolveValues bool) (map[string]any, error) {
	if depth > MaxInputMapDepth {
		return nil, &InputMapError{Key: prefix, msg: fmt.Sprintf("input_map path %q: exceeded maximum nesting depth of %d", prefix, MaxInputMapDepth)}
	}
	out := make(map[string]any, len(m))
	// Sorted so the first error reported does not depend on map order.
	for _, key := range slices.Sorted(maps.Keys(m)) {
		val := m[key]
		name := key
		if prefix != "" {
			name = prefix + "." + key
		}
		if strings.HasPrefix(key, "$") {
			// Nested maps are checked for directives by buildValue, so only
			// the top level reaches here.
			if key == "$literal" {
				return nil, &InputMapError{Key: key, msg: `input_map path "$literal": $literal must be the value of an input_map key, not the whole input_map`}
			}
			return nil, unknownDirective(key, key)
		}
		v, present, err := buildValue(val, s, name, depth, resolveValues)
		if err != nil {
			return nil, err
		}
		if present {
			out[key] = v
		}
	}
	return out, nil
}

func buildValue(val any, s Scope, name string, depth int, resolveValues bool) (any, bool, error) {
	switch x := val.(type) {
	case string:
		if !resolveValues {
			return nil, false, nil
		}
		v, ok := resolve(x, s, false)
		return v, ok, nil
	case map[string]any:
		if lit, ok := x["$literal"]; ok {
			if len(x) != 1 {
				return nil, false, &InputMapError{Key: name, msg: fmt.Sprintf("input_map path %q: $literal node must have exactly one key ($literal); found sibling keys", name)}
			}
			return lit, true, nil
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if strings.HasPrefix(k, "$") {
				return nil, false, unknownDirective(name, k)
			}
		}
		sub, err := build(x, s, name, depth+1, resolveValues)
		return sub, err == nil, err
	case map[any]any:
		conv := make(map[string]any, len(x))
		for k, v := range x {
			conv[fmt.Sprint(k)] = v
		}
		return buildValue(conv, s, name, depth, resolveValues)
	default:
		return nil, false, &InputMapError{Key: name, msg: fmt.Sprintf("input_map path %q: expected a string or object, got %s", name, kindName(val))}
	}
}

func unknownDirective(key, directive string) error {
	return &InputMapError{Key: key, msg: fmt.Sprintf("input_map path %q: unknown directive '%s' — supported directives: $literal. Did you mean '$literal'? To pass literal data containing $-keys, wrap the subtree in $literal. input_map values are context paths, nested maps, or $literal — templated strings are not supported.", key, directive)}
}

func kindName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case []any:
		return "array"
	}
	if _, ok := asList(v); ok {
		return "array"
	}
	if _, ok := condition.ToFloat(v); ok {
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// BuiltFromParams reports whether the input_map entry that builds key — a
// path of property names into what the map builds — copies it, or a value
// that holds it, from run.params. A key the map does not build, or builds
// from a step's output or a $literal, is not: only a run with other params
// changes what a run.params path finds.
func BuiltFromParams(m map[string]any, key []string) bool {
	var node any = m
	for _, k := range key {
		switch x := node.(type) {
		case string:
			return isParamsPath(x)
		case map[string]any:
			if _, lit := x["$literal"]; lit {
				return false
			}
			node = x[k]
		case map[any]any:
			if _, lit := x["$literal"]; lit {
				return false
			}
			node = x[k]
		default:
			return false
		}
	}
	p, ok := node.(string)
	return ok && isParamsPath(p)
}

// isParamsPath reports whether an input_map path reads run.params, as
// resolve reads it.
func isParamsPath(p string) bool {
	segs := strings.Split(p, ".")
	return len(segs) >= 2 && segs[0] == "run" && segs[1] == "params"
}
