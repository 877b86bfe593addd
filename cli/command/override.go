package command

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// override is one `--with <step>.<field>=<value>` of `realm run replay`
// (cli.md §3.5): a replacement for one field of one step's output.
type override struct {
	Step string `json:"step"`
	// Field is the path inside the step's output, dotted as typed
	// (`result.score`).
	Field string `json:"field"`
	// Raw is the value as typed; Value is what it was read as.
	Raw   string `json:"raw"`
	Value any    `json:"value"`
}

// parseOverride reads `<step>.<field>=<value>`. The '=' is looked for
// first, so `classify` is "missing '='" and `confidence=1` is "missing
// '.'" (the documented refusals); an empty step or field counts as a
// missing '.' too.
func parseOverride(arg string) (override, error) {
	lhs, raw, ok := strings.Cut(arg, "=")
	if !ok {
		return override{}, refuse("Invalid override '%s': missing '='", arg)
	}
	step, field, ok := strings.Cut(lhs, ".")
	if !ok || step == "" || field == "" {
		return override{}, refuse("Invalid override '%s': missing '.'", arg)
	}
	return override{Step: step, Field: field, Raw: raw, Value: overrideValue(raw)}, nil
}

// numberText is a number as a person types it (no hex, no Inf or NaN).
var numberText = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)

// overrideValue reads a typed value: true/false as booleans, a number as a
// number, a quoted text ('…' or "…") as the text inside the quotes (the
// older page's rule, kept so `"0.5"` can still mean the text), anything
// else as text.
func overrideValue(raw string) any {
	switch raw {
	case "true":
		return true
	case "false":
		return false
	}
	if numberText.MatchString(raw) {
		if f, err := strconv.ParseFloat(raw, 64); err == nil {
			return f
		}
	}
	if len(raw) >= 2 && (raw[0] == '"' || raw[0] == '\'') && raw[len(raw)-1] == raw[0] {
		return raw[1 : len(raw)-1]
	}
	return raw
}

// applyOverrides returns outputs with every override set, leaving the
// recorded outputs untouched: each changed step's output is copied first.
// A missing step output, or a path through something that is not an
// object, becomes an object holding the new field.
func applyOverrides(outputs map[string]any, overrides []override) map[string]any {
	out := make(map[string]any, len(outputs))
	for k, v := range outputs {
		out[k] = v
	}
	copied := map[string]bool{}
	for _, o := range overrides {
		if !copied[o.Step] {
			out[o.Step] = deepCopy(out[o.Step])
			copied[o.Step] = true
		}
		root, ok := out[o.Step].(map[string]any)
		if !ok {
			root = map[string]any{}
			out[o.Step] = root
		}
		path := strings.Split(o.Field, ".")
		cur := root
		for _, seg := range path[:len(path)-1] {
			next, ok := cur[seg].(map[string]any)
			if !ok {
				next = map[string]any{}
				cur[seg] = next
			}
			cur = next
		}
		cur[path[len(path)-1]] = o.Value
	}
	return out
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var c any
	_ = json.Unmarshal(b, &c)
	return c
}
