// Package template renders `{{ path | filter: arg }}` expressions in prompts,
// gate messages and display lines, and builds auto-step input from
// input_map (workflow-file spec §8).
package template

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/realm-go/realm/pkg/condition"
)

// Mode selects the rendering rules of the field being rendered.
type Mode int

const (
	// ModePrompt is lenient: an expression whose path finds nothing, that
	// names an unknown filter, or whose filter fails is left as written.
	ModePrompt Mode = iota
	// ModeGateMessage is strict: unresolvable paths and unknown filters are
	// errors that stop the step before the gate opens.
	ModeGateMessage
	// ModeDisplay reads only fields of the step's own output (Scope.Output),
	// without roots or filters; anything else prints nothing.
	ModeDisplay
)

// Error codes returned (inside *Error) by ModeGateMessage.
const (
	CodeGateMessageUnresolvable = "GATE_MESSAGE_UNRESOLVABLE"
	CodeFilterUnknown           = "FILTER_UNKNOWN"
)

// Error is a rendering failure with a catalogue code.
type Error struct {
	Code    string
	Message string
	// Paths lists the unresolvable references (GATE_MESSAGE_UNRESOLVABLE).
	Paths []string
	// Filter names the unknown filter (FILTER_UNKNOWN).
	Filter string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Scope is what expressions can read.
type Scope struct {
	Params map[string]any
	// Resources holds step outputs by step name, plus "$settlement" mapping
	// step -> settlement facts.
	Resources map[string]any
	// WorkflowContext holds the loaded workflow_context texts by entry name.
	// Entries that could not be read should be left out so their
	// expressions stay as written.
	WorkflowContext map[string]string
	// ContextWrapper is xml (default when empty), brackets or none.
	ContextWrapper string
	// Output is the step's own output, for ModeDisplay.
	Output map[string]any
	// Now is the clock for date-relative filters; nil means time.Now.
	Now func() time.Time
}

func (s Scope) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// expr is one parsed `{{ … }}`.
type expr struct {
	raw     string // the whole `{{ … }}` as written
	path    string
	filters []filterCall
}

type filterCall struct {
	name string
	args []string
}

// Render replaces every `{{ … }}` in text according to mode. unresolved
// lists the paths that found nothing (in order, without duplicates).
func Render(text string, s Scope, mode Mode) (out string, unresolved []string, err error) {
	segs := scan(text)
	if mode == ModeGateMessage {
		// An unknown filter stops the step whatever else the message holds.
		for _, sg := range segs {
			if sg.e == nil {
				continue
			}
			for _, fc := range sg.e.filters {
				if _, ok := filters[fc.name]; !ok {
					return "", nil, &Error{
						Code:    CodeFilterUnknown,
						Message: fmt.Sprintf("gate.message uses unknown filter '%s'", fc.name),
						Filter:  fc.name,
					}
				}
			}
		}
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, sg := range segs {
		if sg.e == nil {
			b.WriteString(sg.text)
			continue
		}
		if mode == ModeDisplay {
			b.WriteString(renderDisplay(sg.e, s))
			continue
		}
		txt, res := evalExpr(sg.e, s)
		switch res {
		case resOK:
			b.WriteString(txt)
		case resMissing:
			if !seen[sg.e.path] {
				seen[sg.e.path] = true
				unresolved = append(unresolved, sg.e.path)
			}
			b.WriteString(sg.e.raw)
		default:
			b.WriteString(sg.e.raw)
		}
	}
	if mode == ModeGateMessage && len(unresolved) > 0 {
		return "", unresolved, &Error{
			Code:    CodeGateMessageUnresolvable,
			Message: "gate.message has unresolvable references: " + strings.Join(unresolved, ", "),
			Paths:   unresolved,
		}
	}
	return b.String(), unresolved, nil
}

type segment struct {
	text string
	e    *expr
}

// scan splits text into literal runs and expressions. A `{{` without a
// closing `}}` is literal text.
func scan(text string) []segment {
	var out []segment
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(text[i+2:], "}}")
		if j < 0 {
			break
		}
		end := i + 2 + j + 2
		if i > 0 {
			out = append(out, segment{text: text[:i]})
		}
		raw := text[i:end]
		out = append(out, segment{e: parseExpr(raw, text[i+2:end-2])})
		text = text[end:]
	}
	if text != "" {
		out = append(out, segment{text: text})
	}
	return out
}

func parseExpr(raw, inner string) *expr {
	parts := splitOutside(inner, '|')
	e := &expr{raw: raw, path: strings.TrimSpace(parts[0])}
	for _, p := range parts[1:] {
		p = strings.TrimSpace(p)
		fc := filterCall{name: p}
		if k := indexOutside(p, ':'); k >= 0 {
			fc.name = strings.TrimSpace(p[:k])
			for _, a := range splitOutside(p[k+1:], ',') {
				fc.args = append(fc.args, unquote(strings.TrimSpace(a)))
			}
		}
		e.filters = append(e.filters, fc)
	}
	return e
}

// splitOutside splits s at sep where sep is not inside single or double
// quotes.
func splitOutside(s string, sep byte) []string {
	var parts []string
	var quote byte
	start := 0
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

func indexOutside(s string, sep byte) int {
	var quote byte
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == sep:
			return i
		}
	}
	return -1
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

type result int

const (
	resOK result = iota
	resMissing
	resFailed // unknown filter or a filter given the wrong kind
)

// missing marks a value the path did not find; only `default` accepts it.
type missingValue struct{}

var missing = missingValue{}

func evalExpr(e *expr, s Scope) (string, result) {
	v, ok := resolve(e.path, s, true)
	var cur any = missing
	if ok {
		cur = v
	}
	for _, fc := range e.filters {
		f, known := filters[fc.name]
		if !known {
			return "", resFailed
		}
		if cur == missing && fc.name != "default" {
			return "", resMissing
		}
		next, ok := f(cur, fc.args, s)
		if !ok {
			return "", resFailed
		}
		cur = next
	}
	if cur == missing {
		return "", resMissing
	}
	return ToText(cur), resOK
}

// resolve finds a path under one of the roots. workflow.context is only
// available to templates (withContext), not to input_map.
func resolve(path string, s Scope, withContext bool) (any, bool) {
	segs := strings.Split(path, ".")
	for _, sg := range segs {
		if sg == "" {
			return nil, false
		}
	}
	switch {
	case len(segs) >= 2 && segs[0] == "run" && segs[1] == "params":
		if s.Params == nil {
			return nil, false
		}
		return condition.Lookup(s.Params, segs[2:])
	case len(segs) >= 3 && segs[0] == "context" && segs[1] == "resources":
		return condition.Lookup(s.Resources, segs[2:])
	case withContext && len(segs) >= 3 && segs[0] == "workflow" && segs[1] == "context":
		name := strings.Join(segs[2:], ".")
		if raw, ok := strings.CutSuffix(name, ".raw"); ok {
			txt, found := s.WorkflowContext[raw]
			return txt, found
		}
		txt, found := s.WorkflowContext[name]
		if !found {
			return nil, false
		}
		return wrap(name, txt, s.ContextWrapper), true
	}
	return nil, false
}

// wrap renders a workflow_context entry per §3.8.
func wrap(name, text, wrapper string) string {
	switch wrapper {
	case "none":
		return text
	case "brackets":
		return "[" + name + "]\n" + text + "\n[/" + name + "]"
	default:
		return "<" + name + ">\n" + text + "\n</" + name + ">"
	}
}

func renderDisplay(e *expr, s Scope) string {
	if len(e.filters) > 0 || e.path == "" {
		return ""
	}
	for _, root := range []string{"run.params", "context.resources", "workflow.context"} {
		if e.path == root || strings.HasPrefix(e.path, root+".") {
			return ""
		}
	}
	segs := strings.Split(e.path, ".")
	for _, sg := range segs {
		if sg == "" {
			return ""
		}
	}
	if s.Output == nil {
		return ""
	}
	v, ok := condition.Lookup(s.Output, segs)
	if !ok {
		return ""
	}
	return ToText(v)
}

// ToText converts a value to template text: strings as-is, numbers and
// booleans as JSON (integers without ".0"), lists and maps as JSON indented
// two spaces.
func ToText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "null"
	}
	if f, ok := condition.ToFloat(v); ok {
		return jsonText(f, false)
	}
	return jsonText(v, true)
}

func jsonText(v any, indent bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
